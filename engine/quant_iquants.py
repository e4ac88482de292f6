"""Torch decoders for the i-quants: IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M.

Each decoder maps uint8 blocks (n, type_size) to float32 values (n, block) with the same float
operations, in the same order, as `gguf.quants`, so the results are bit-identical to it. The grids
(iq2xxs_grid, iq3s_grid, iq1s_grid, ...), the ksigns table and the IQ4 non-linear values are taken
from `gguf.quants` itself (one source of truth for the format), as float32 lookup tables cached per
device; everything else is torch integer ops, so the decoders run on any device (the GPU dense
fallback dequantizes device-resident bytes through them).
Byte layouts follow ggml's block_iq* structs.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from gguf import quants as gq
from gguf.constants import GGMLQuantizationType as QT

from engine.quant_kquants import QK_K, constant, f16_field

IQ1_DELTA = 0.125   # gguf.quants.IQ1_S.delta: a set sign bit means -delta


@lru_cache(maxsize=None)
def table(name: str, device: torch.device) -> torch.Tensor:
    """A float32 lookup table on `device`: 'signs' (128, 8) = ksigns unpacked to +-1, 'kvalues'
    (16,) = IQ4_NL's values, or a gguf quant class name -> its grid (entries, values per entry)."""
    if name == "signs":
        ksigns = np.frombuffer(gq.IQ2_XXS.ksigns, dtype=np.uint8).reshape(128, 1)
        bits = (ksigns >> np.arange(8, dtype=np.uint8)) & 1
        values = np.where(bits == 0, np.float32(1), np.float32(-1))
    elif name == "kvalues":
        values = np.array(gq.IQ4_NL.kvalues, dtype=np.int8).astype(np.float32)
    else:
        cls = getattr(gq, name)
        cls.init_grid()
        values = cls.grid.reshape(cls.grid_shape)
    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).to(device)


def words(b: torch.Tensor, width: int) -> torch.Tensor:
    """(..., k * width) little-endian bytes -> (..., k) unsigned words as int64."""
    w = b.reshape(*b.shape[:-1], -1, width).long()
    out = w[..., 0]
    for i in range(1, width):
        out = out | (w[..., i] << (8 * i))
    return out


def shifted(x: torch.Tensor, *amounts: int) -> torch.Tensor:
    """(..., k) -> (..., k, len(amounts)): x >> each amount (no mask)."""
    return x.unsqueeze(-1) >> constant(amounts, x.dtype, x.device)


def nibbles_interleaved(b: torch.Tensor) -> torch.Tensor:
    """(n, k) bytes -> (n, 2k): low nibble of byte i at 2i, high nibble at 2i + 1 (the 4-bit scales)."""
    return (shifted(b, 0, 4) & 0x0F).reshape(b.shape[0], -1)


def bits8(b: torch.Tensor) -> torch.Tensor:
    """(n, k) bytes -> (n, k, 8): bit j of byte i."""
    return shifted(b, *range(8)) & 1


def signs_of(bits: torch.Tensor) -> torch.Tensor:
    """Sign bits -> float32 +1 (bit clear) / -1 (bit set), as gguf's np.where(bits == 0, 1, -1)."""
    return 1.0 - 2.0 * bits.float()


def ksigns(aux: torch.Tensor) -> torch.Tensor:
    """(n, g) u32 words holding four 7-bit ksigns indices at bits 0, 7, 14, 21 -> (n, g, 4, 8) signs."""
    return table("signs", aux.device)[shifted(aux, 0, 7, 14, 21) & 0x7F]


def half_from_bits(bits: torch.Tensor) -> torch.Tensor:
    """(n,) int64 f16 bit patterns -> (n, 1) float32."""
    pair = torch.stack([bits & 0xFF, bits >> 8], dim=-1).to(torch.uint8)
    return pair.view(torch.float16).float().reshape(-1, 1)


# ---- 4-bit non-linear ----

def decode_iq4_nl(blocks: torch.Tensor) -> torch.Tensor:
    d, qs = f16_field(blocks, 0), blocks[:, 2:18]
    q = torch.cat([qs & 0x0F, qs >> 4], dim=-1).long()
    return d * table("kvalues", blocks.device)[q]


def decode_iq4_xs(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    d = f16_field(blocks, 0)
    scales_h = words(blocks[:, 2:4], 2)                                   # (n, 1)
    scales_l = nibbles_interleaved(blocks[:, 4:8]).long()                 # (n, 8)
    scales_h = shifted(scales_h, *range(0, 16, 2)).reshape(n, 8) & 0x03
    dl = (d * ((scales_l | (scales_h << 4)) - 32).float()).reshape(n, 8, 1)
    qs = blocks[:, 8:136].reshape(n, 8, 16)
    q = torch.cat([qs & 0x0F, qs >> 4], dim=-1).long()                    # (n, 8, 32)
    return (dl * table("kvalues", blocks.device)[q]).reshape(n, QK_K)


# ---- 2-bit grids (values 8, 25, 43 per grid byte) ----

def _iq2_xxs_aux(blocks: torch.Tensor) -> torch.Tensor:
    return words(blocks[:, 2:66].reshape(-1, 8, 8)[:, :, 4:8], 4)[..., 0]   # (n, 8): each run's u32 aux


def _iq2_xxs_db(blocks: torch.Tensor) -> torch.Tensor:
    return f16_field(blocks, 0) * (0.5 + (_iq2_xxs_aux(blocks) >> 28).float()) * 0.25     # (n, 8)


def decode_iq2_xxs(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    qs = blocks[:, 2:66].reshape(n, 8, 8)                                 # per 32 values: u32 grid bytes, u32 aux
    aux = _iq2_xxs_aux(blocks)
    db = _iq2_xxs_db(blocks).reshape(n, 8, 1, 1)
    grid = table("IQ2_XXS", blocks.device)[qs[:, :, :4].long()]           # (n, 8, 4, 8)
    return (db * grid * ksigns(aux)).reshape(n, QK_K)


def _iq2_xs_db(blocks: torch.Tensor, at: int = 66) -> torch.Tensor:
    """IQ2_XS's (and IQ2_S's, its 4-bit scales at byte 74) scale of each 16 values, (n, 16)."""
    return f16_field(blocks, 0) * (0.5 + nibbles_interleaved(blocks[:, at:at + 8]).float()) * 0.25


def decode_iq2_xs(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    qs = words(blocks[:, 2:66], 2)                                        # (n, 32): 9-bit grid, 7-bit ksigns
    db = _iq2_xs_db(blocks).reshape(n, 16, 1, 1)
    signs = table("signs", blocks.device)[qs >> 9].reshape(n, 16, 2, 8)
    grid = table("IQ2_XS", blocks.device)[qs & 511].reshape(n, 16, 2, 8)
    return (db * grid * signs).reshape(n, QK_K)


def decode_iq2_s(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    qs, sg, qh = blocks[:, 2:34], blocks[:, 34:66], blocks[:, 66:74]
    db = _iq2_xs_db(blocks, 74).reshape(n, 16, 1, 1)
    signs = signs_of(bits8(sg)).reshape(n, 16, 2, 8)
    high = (shifted(qh, 0, 2, 4, 6) & 0x03).reshape(n, 32).long()
    grid = table("IQ2_S", blocks.device)[qs.long() | (high << 8)].reshape(n, 16, 2, 8)
    return (db * grid * signs).reshape(n, QK_K)


# ---- 3-bit grids ----

def _iq3_xxs_db(blocks: torch.Tensor) -> torch.Tensor:
    return f16_field(blocks, 0) * (0.5 + (words(blocks[:, 66:98], 4) >> 28).float()) * 0.5      # (n, 8)


def decode_iq3_xxs(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    qs, aux = blocks[:, 2:66], words(blocks[:, 66:98], 4)                 # aux (n, 8)
    db = _iq3_xxs_db(blocks).reshape(n, 8, 1, 1)
    grid = table("IQ3_XXS", blocks.device)[qs.long()].reshape(n, 8, 4, 8)
    return (db * grid * ksigns(aux)).reshape(n, QK_K)


def _iq3_s_db(blocks: torch.Tensor) -> torch.Tensor:
    return f16_field(blocks, 0) * (1 + 2 * nibbles_interleaved(blocks[:, 106:110]).long()).float()   # (n, 8)


def decode_iq3_s(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    qs, qh, sg = blocks[:, 2:66], blocks[:, 66:74], blocks[:, 74:106]
    db = _iq3_s_db(blocks).reshape(n, 8, 1, 1)
    signs = signs_of(bits8(sg)).reshape(n, 8, 4, 8)
    high = bits8(qh).reshape(n, 64).long()
    grid = table("IQ3_S", blocks.device)[qs.long() | (high << 8)].reshape(n, 8, 4, 8)
    return (db * grid * signs).reshape(n, QK_K)


# ---- 1-bit grids (values -1, 0, 1) plus a +-delta ----

def _iq1_s_dl(blocks: torch.Tensor) -> torch.Tensor:
    return f16_field(blocks, 0) * (2 * ((words(blocks[:, 34:50], 2) >> 12) & 7) + 1).float()     # (n, 8)


def decode_iq1_s(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    qs, qh = blocks[:, 2:34], words(blocks[:, 34:50], 2)                  # qh (n, 8)
    dl = _iq1_s_dl(blocks).reshape(n, 8, 1, 1)
    delta = (IQ1_DELTA - 2 * IQ1_DELTA * ((qh >> 15) & 1).float()).reshape(n, 8, 1, 1)
    high = (shifted(qh, 0, 3, 6, 9) & 7).reshape(n, 32)
    grid = table("IQ1_S", blocks.device)[qs.long() | (high << 8)].reshape(n, 8, 4, 8)
    return (dl * (grid + delta)).reshape(n, QK_K)


def _iq1_m_dl(blocks: torch.Tensor) -> torch.Tensor:
    """IQ1_M's scale of each 16 values, (n, 16): d (4 bits in the top of each of its four sub-scale words)
    times 2 s + 1."""
    n = blocks.shape[0]
    sc = words(blocks[:, 48:56], 2)                                       # (n, 4)
    top = sc & 0xF000                                                     # the f16 scale, 4 bits per word
    d = half_from_bits((top[:, 0] >> 12) | (top[:, 1] >> 8) | (top[:, 2] >> 4) | top[:, 3])
    return d * (2 * (shifted(sc, 0, 3, 6, 9) & 7).reshape(n, 16) + 1).float()


def decode_iq1_m(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    qs, qh = blocks[:, :32], blocks[:, 32:48]
    dl = _iq1_m_dl(blocks).reshape(n, 8, 2, 1, 1)
    q2 = (shifted(qh, 0, 4) & 0x0F).reshape(n, 32).long()                 # nibble k of byte i at 2i + k
    delta = (IQ1_DELTA - 2 * IQ1_DELTA * ((q2 >> 3) & 1).float()).reshape(n, 8, 2, 2, 1)
    grid = table("IQ1_M", blocks.device)[qs.long() | ((q2 & 7) << 8)].reshape(n, 8, 2, 2, 8)
    return (dl * (grid + delta)).reshape(n, QK_K)


DECODERS = {
    "IQ4_NL": decode_iq4_nl, "IQ4_XS": decode_iq4_xs, "IQ3_XXS": decode_iq3_xxs, "IQ3_S": decode_iq3_s,
    "IQ2_XXS": decode_iq2_xxs, "IQ2_XS": decode_iq2_xs, "IQ2_S": decode_iq2_s,
    "IQ1_S": decode_iq1_s, "IQ1_M": decode_iq1_m,
}


# Types whose every value is an integer multiple of a float32 factor per 32-value run, the products
# exact in float32 (an f16 d times a small odd number times a grid value of at most 6 bits): the run's
# scale (IQ3_S, IQ3_XXS, IQ2_XXS), or its scale / 8 (IQ1_S: grid +- 1/8 = (8 grid +- 1) / 8).
RUN_FACTORS = {
    QT.IQ3_S: _iq3_s_db,
    QT.IQ3_XXS: _iq3_xxs_db,
    QT.IQ2_XXS: _iq2_xxs_db,
    QT.IQ1_S: lambda blocks: _iq1_s_dl(blocks) * IQ1_DELTA,
}


# ... and those whose factor is per 16 values (IQ2_XS, IQ2_S: the scale; IQ1_M: its scale / 8, as IQ1_S's)
RUN16_FACTORS = {
    QT.IQ2_XS: _iq2_xs_db,
    QT.IQ2_S: lambda blocks: _iq2_xs_db(blocks, 74),
    QT.IQ1_M: lambda blocks: _iq1_m_dl(blocks) * IQ1_DELTA,
}


def run_factors(blocks: torch.Tensor, qtype) -> torch.Tensor:
    """(n blocks, 8) float32: each 32-value run's factor (RUN_FACTORS), as the decoders compute it; (n
    blocks, 16) for the RUN16_FACTORS types, each 16 values' factor."""
    qt = QT(qtype)
    return RUN16_FACTORS[qt](blocks) if qt in RUN16_FACTORS else RUN_FACTORS[qt](blocks)
