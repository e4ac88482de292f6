"""CPU fast mode: 4-bit GGUF matrices kept as int4 with a scale and a zero per 32 values, multiplied by
torch's packed int4 CPU kernel (`_weight_int4pack_mm_for_cpu`) on bfloat16 activations.

Why: a dense float copy of every matrix takes 5.8x the file and decode reads all of it per token. The
codes are GGUF's own 4-bit codes, unchanged; only each 32-value group's float scale and offset are
rounded to bfloat16 (value = (q - 8) * scale + zero):
    Q4_0  scale d,         zero 0                  ((q - 8) * d)
    Q4_1  scale d,         zero m + 8 d            (d q + m)
    Q4_K  scale d sc_j,    zero 8 d sc_j - dmin m_j  (d sc_j q - dmin m_j, sub-block j)
    Q8_0  two int4 parts: the code's low 4 bits (scale d, zero 8 d) and its high 4 bits, signed
          (code + 8, scale 16 d, zero 0)
    Q5_0, Q5_1  two parts: the low 4 bits (scale d, zero 0) and the fifth bit (bit + 8, scale 16 d,
          zero -8 d for Q5_0, 8 d + m for Q5_1)
Two parts lie side by side along K (a 2K-wide matrix) and x goes in twice, so one kernel call sums
both in its float32 accumulator: at one row 20-35% faster than a call per part (2 threads here: the
262144 x 640 Q8_0 head of Gemma 3 270M 6.9 -> 5.6 ms), the same at 32 rows.
The kernel computes every row the same way at any row count (checked in the tests), so a row's result
does not depend on the other rows of its tile. `--dtype float32` keeps the dense reference numerics.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from gguf.constants import GGMLQuantizationType as QT

from engine import cpu_gemm
from engine.kernels.packed import _nibbles, pack
from engine.model_info import int4_parts
from engine.quant import fifth_bits, nibbles
from engine.quant_kquants import f16_field

GROUP = 32


@dataclass
class Int4Weight:
    n: int
    k: int
    packed: torch.Tensor        # torch's int4 CPU layout of [N, K] codes, or of [N, 2K] for two parts
    sz: torch.Tensor            # [K/32 or 2K/32, N, 2] bfloat16 scale and zero
    gemm: bool = True           # prompt tiles on engine.cpu_gemm (False: the head, routers, experts, whose
                                # tiles are a few real rows of a large matrix: the decode-row kernel at any tile)

    @property
    def twice(self) -> bool:
        """Two parts side by side: x goes in twice."""
        return self.sz.shape[0] * GROUP == 2 * self.k

    @property
    def nbytes(self) -> int:
        return self.packed.numel() * self.packed.element_size() + self.sz.numel() * self.sz.element_size()


def supports(qtype, shape: tuple[int, ...]) -> bool:
    """A 2-D matrix this module keeps as int4 (an expert stack converts expert by expert: QuantTensor.to_int4)."""
    return len(shape) == 2 and int4_parts(QT(qtype).name, shape) > 0


@dataclass
class Int4Stack:
    """Matrices with the same K stacked along N (q|k|v, gate|up): one kernel call for all of them, each
    matrix's columns bit-identical to its own call (the kernel computes every column the same way)."""
    weight: Int4Weight
    sizes: list[int]

    def split_linear(self, x: torch.Tensor, tile: int, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        return linear(x, self.weight, tile).to(dtype).split(self.sizes, -1)


def stack(weights: list[Int4Weight]) -> Int4Weight | None:
    """One Int4Weight of the given ones stacked along N; None where they differ in K or parts, or a row
    count is not whole blocks of the kernel's 64-row packing. The given ones then hold views of it."""
    if len({(w.k, w.twice) for w in weights}) > 1 or any(w.n % 64 for w in weights):
        return None
    both = Int4Weight(sum(w.n for w in weights), weights[0].k, torch.cat([w.packed for w in weights]),
                      torch.cat([w.sz for w in weights], 1), all(w.gemm for w in weights))
    a = 0
    for w in weights:
        w.packed, w.sz = both.packed[a:a + w.n], both.sz[:, a:a + w.n].contiguous()
        a += w.n
    return both


ROWS = 1024                     # rows converted at a time: bounded temporaries (torch packs rows in 64s)


def from_gguf(data: torch.Tensor, qtype, n: int, k: int) -> Int4Weight:
    """GGUF bytes [N, row bytes] (CPU) -> the int4 layout; codes kept, group scales in bfloat16."""
    packed = sz = None              # filled a chunk of rows at a time (no concatenation of the whole matrix)
    for a in range(0, n, ROWS):
        q, scale, zero = (torch.cat(t, 1) for t in zip(*_codes_scales_zeros(data[a:a + ROWS], qtype, k)))
        part = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
        if packed is None:
            packed = torch.empty((n, *part.shape[1:]), dtype=part.dtype)
            sz = torch.empty((scale.shape[1], n, 2), dtype=torch.bfloat16)
        packed[a:a + part.shape[0]] = part
        sz[:, a:a + scale.shape[0], 0] = scale.T
        sz[:, a:a + scale.shape[0], 1] = zero.T
    return Int4Weight(n, k, packed, sz)


def _codes_scales_zeros(data: torch.Tensor, qtype, k: int) -> list[tuple[torch.Tensor, ...]]:
    """Per part: codes 0..15 [n, K] int32, float32 scale and zero [n, K/32]."""
    n = data.shape[0]
    if QT(qtype) in (QT.Q5_0, QT.Q5_1):
        b = data.reshape(n * (k // GROUP), -1)
        at = 2 if QT(qtype) == QT.Q5_0 else 4               # the fifth bits follow d (and m)
        q = (nibbles(b[:, at + 4:at + 20]) | fifth_bits(b[:, at:at + 4])).to(torch.int32).reshape(n, k)
        d = f16_field(b, 0).reshape(n, k // GROUP)
        # the first part gives (lo - 8) d, the second 16 bit d - 8 d (Q5_0) or 16 bit d + 8 d + m (Q5_1)
        top = -8 * d if QT(qtype) == QT.Q5_0 else 8 * d + f16_field(b, 2).reshape(n, k // GROUP)
        return [(q & 15, d, torch.zeros_like(d)), ((q >> 4) + 8, 16 * d, top)]
    p = pack(data, qtype, k)
    if p.qtype == QT.Q8_0:
        q = p.codes.to(torch.int32)
        d = p.scales.float()
        lo = q & 15
        return [(lo, d, 8 * d), (((q - lo) >> 4) + 8, 16 * d, torch.zeros_like(d))]
    if p.qtype == QT.Q4_K:
        q = _nibbles(p.codes, 32).to(torch.int32)
        d, dmin = p.scales.float().unbind(-1)                          # [n, K/256]
        scale = (d[..., None] * p.sub[..., :8].float()).reshape(n, k // GROUP)
        zero = 8 * scale - (dmin[..., None] * p.sub[..., 8:].float()).reshape(n, k // GROUP)
        return [(q, scale, zero)]
    q = _nibbles(p.codes, 16).to(torch.int32)
    if p.qtype == QT.Q4_0:
        scale = p.scales.float()
        return [(q, scale, torch.zeros_like(scale))]
    scale, m = p.scales.float().unbind(-1)
    return [(q, scale, m + 8 * scale)]


def _mm(x: torch.Tensor, w: Int4Weight) -> torch.Tensor:
    """bfloat16 x [M, K] (a fresh buffer) @ W.T, in bfloat16."""
    return torch.ops.aten._weight_int4pack_mm_for_cpu(torch.cat((x, x), 1) if w.twice else x, w.packed, GROUP, w.sz)


def values(w: Int4Weight) -> torch.Tensor:
    """float32 [N, K] as the kernel dequantizes it (the identity times W.T)."""
    return _mm(torch.eye(w.k, dtype=torch.bfloat16), w).T


def linear(x: torch.Tensor, w: Int4Weight, tile: int) -> torch.Tensor:
    """x [..., K] @ W.T -> [..., N] in bfloat16, `tile` rows per call. The kernel
    gives a row the same bits at any row count, so a call's last rows need no zero padding (a tile's
    rows come out as in a full tile); each call gets a buffer laid out as a fresh one (contiguous, from
    the start of its storage)."""
    lead, k = x.shape[:-1], x.shape[-1]
    rows = x.reshape(-1, k)
    fresh = rows.to(torch.bfloat16)               # a converted copy is usually fresh already
    if not (fresh.is_contiguous() and fresh.storage_offset() == 0):
        fresh = fresh.clone(memory_format=torch.contiguous_format)
    if fresh.shape[0] == 0:
        return fresh.new_zeros(*lead, w.n)
    if w.gemm and cpu_gemm.usable(w.n, tile):    # a prompt tile: every row alike at any row count too
        return cpu_gemm.matmul(fresh, w.packed, w.sz, w.n, 2 if w.twice else 1).reshape(*lead, w.n)
    if (tile < cpu_gemm.MIN_TILE or not w.gemm) and cpu_gemm.rows_usable(w.n, w.k):
        # decode tiles, and the head, routers and experts at any tile: a row's bits alone too, at any row count
        return cpu_gemm.rows_matmul(fresh, w.packed, w.sz, w.n, 2 if w.twice else 1).reshape(*lead, w.n)
    if fresh.shape[0] <= tile:
        return _mm(fresh, w).reshape(*lead, w.n)
    return torch.cat([_mm(t.clone(), w) for t in fresh.split(tile)]).reshape(*lead, w.n)
