"""Torch decoders for the 256-element K-quant blocks (Q2_K..Q6_K).

Each decoder maps uint8 blocks (n, type_size) to float32 values (n, 256) with the same float
operations, in the same order, as `gguf.quants`, so the results are bit-identical to it.
Byte layouts follow ggml's block_q*_K structs.
"""
from __future__ import annotations

from functools import lru_cache

import torch

QK_K = 256


@lru_cache(maxsize=None)
def constant(values: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A small tensor of the decoders' own values, made once per device: decoding inside a CUDA graph
    capture (the drafter's embedding rows, after the warm-up pass) then copies nothing from the host."""
    return torch.tensor(values, dtype=dtype, device=device)


def shifts(*values: int, device: torch.device) -> torch.Tensor:
    """A uint8 shift vector shaped (1, 1, len, 1), to broadcast over (n, groups, 1, bytes)."""
    return constant(values, torch.uint8, torch.device(device)).reshape(1, 1, -1, 1)


def f16_field(blocks: torch.Tensor, start: int) -> torch.Tensor:
    """The little-endian f16 at byte `start` of every block, as float32 (n, 1)."""
    return blocks[:, start:start + 2].contiguous().view(torch.float16).float()


def bit_planes(bytes_: torch.Tensor, n_planes: int) -> torch.Tensor:
    """(n, b) bytes -> (n, n_planes, b): plane p holds bit p of every byte."""
    n, b = bytes_.shape
    return (bytes_.reshape(n, 1, 1, b) >> shifts(*range(n_planes), device=bytes_.device)).reshape(n, n_planes, b) & 1


def scale_min_k4(scales: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Unpack the 12-byte field of Q4_K/Q5_K into 8 six-bit scales and 8 six-bit mins."""
    d, m, md = scales.reshape(-1, 3, 4).unbind(1)
    sc = torch.cat([d & 0x3F, (md & 0x0F) | ((d >> 2) & 0x30)], dim=-1)
    mn = torch.cat([m & 0x3F, (md >> 4) | ((m >> 2) & 0x30)], dim=-1)
    return sc, mn


def decode_q2_k(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    scales, qs = blocks[:, :16], blocks[:, 16:80]
    d, dmin = f16_field(blocks, 80), f16_field(blocks, 82)
    dl = (d * (scales & 0x0F).float()).reshape(n, 16, 1)
    ml = (dmin * (scales >> 4).float()).reshape(n, 16, 1)
    q = (qs.reshape(n, 2, 1, 32) >> shifts(0, 2, 4, 6, device=blocks.device)) & 3
    return (dl * q.reshape(n, 16, 16).float() - ml).reshape(n, QK_K)


def q3_k_scales(blocks: torch.Tensor) -> torch.Tensor:
    """Q3_K blocks -> their 16 sub-block scales sc - 32 (n, 16) int8, in -32..31."""
    n = blocks.shape[0]
    scales = blocks[:, 96:108]
    lo = (scales[:, :8].reshape(n, 1, 1, 8) >> shifts(0, 4, device=blocks.device)).reshape(n, 16)
    hi = (scales[:, 8:].reshape(n, 1, 1, 4) >> shifts(0, 2, 4, 6, device=blocks.device)).reshape(n, 16)
    return (((lo & 0x0F) | ((hi & 0x03) << 4)).view(torch.int8) - 32)


def q3_k_parts(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q3_K blocks -> (dl float32 (n, 16): d * sc per 16 values, exact; q int8 (n, 16, 16) in -4..3)."""
    n = blocks.shape[0]
    hmask, qs = blocks[:, :32], blocks[:, 32:96]
    d = f16_field(blocks, 108)
    sc = q3_k_scales(blocks).float()
    ql = ((qs.reshape(n, 2, 1, 32) >> shifts(0, 2, 4, 6, device=blocks.device)) & 3).reshape(n, 16, 16)
    qh = (bit_planes(hmask, 8) ^ 1).reshape(n, 16, 16)  # a set mask bit means "no -4 offset"
    return d * sc, (ql - (qh << 2)).view(torch.int8)


def decode_q3_k(blocks: torch.Tensor) -> torch.Tensor:
    dl, q = q3_k_parts(blocks)
    return (dl[..., None] * q.float()).reshape(-1, QK_K)


def low_nibbles_k(qs: torch.Tensor) -> torch.Tensor:
    """Q4_K/Q5_K 128-byte quant field -> (n, 8, 32) 4-bit values (low nibbles first per 32 bytes)."""
    n = qs.shape[0]
    return ((qs.reshape(n, 4, 1, 32) >> shifts(0, 4, device=qs.device)) & 0x0F).reshape(n, 8, 32)


def decode_q4_k(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    d, dmin = f16_field(blocks, 0), f16_field(blocks, 2)
    sc, mn = scale_min_k4(blocks[:, 4:16])
    dl = (d * sc.float()).reshape(n, 8, 1)
    ml = (dmin * mn.float()).reshape(n, 8, 1)
    q = low_nibbles_k(blocks[:, 16:144]).float()
    return (dl * q - ml).reshape(n, QK_K)


def q5_k_parts(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q5_K blocks -> (dl, ml float32 (n, 8): d * sc and dmin * m per 32 values, exact; q uint8 (n, 8, 32))."""
    d, dmin = f16_field(blocks, 0), f16_field(blocks, 2)
    sc, mn = scale_min_k4(blocks[:, 4:16])
    q = low_nibbles_k(blocks[:, 48:176]) | (bit_planes(blocks[:, 16:48], 8) << 4)
    return d * sc.float(), dmin * mn.float(), q


def decode_q5_k(blocks: torch.Tensor) -> torch.Tensor:
    dl, ml, q = q5_k_parts(blocks)
    return (dl[..., None] * q.float() - ml[..., None]).reshape(-1, QK_K)


def q6_k_parts(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q6_K blocks -> (dl float32 (n, 16): d * sc per 16 values, exact; q - 32 int8 (n, 16, 16))."""
    n = blocks.shape[0]
    ql, qh, scales = blocks[:, :128], blocks[:, 128:192], blocks[:, 192:208]
    d = f16_field(blocks, 208)
    lo = ((ql.reshape(n, 2, 1, 64) >> shifts(0, 4, device=blocks.device)) & 0x0F).reshape(n, 8, 32)
    hi = ((qh.reshape(n, 2, 1, 32) >> shifts(0, 2, 4, 6, device=blocks.device)) & 0x03).reshape(n, 8, 32)
    return d * scales.view(torch.int8).float(), ((lo | (hi << 4)).view(torch.int8) - 32).reshape(n, 16, 16)


def decode_q6_k(blocks: torch.Tensor) -> torch.Tensor:
    dl, q = q6_k_parts(blocks)
    return (dl[..., None] * q.float()).reshape(-1, QK_K)
