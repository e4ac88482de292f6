"""Triton matmul of activations (f32 or bf16) by GGUF-quantized weights, dequantized on the fly.

out[M, N] = x[M, K] @ W[N, K].T. One program owns a BLOCK_M x BLOCK_N output tile and walks K in
steps of BLOCK_K = 32 (one Q*_0/Q*_1 block, one K-quant sub-block) in a fixed order. The tile
configuration never depends on M, and a row's accumulation reads only that row of x, so each row's
result is bit-identical whatever the other rows are and however many there are (row-invariant by
construction). Rows past M or N are clamped to the last valid one and never stored.

Weights are decoded in f32 (same formulas as engine.quant) and cast to x's dtype for tl.dot; f32
inputs use IEEE precision (no TF32). Importing this module imports triton: import it lazily.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as QT

BLOCK_M, BLOCK_N, BLOCK_K = 16, 64, 32
NUM_WARPS = 4
DENSE = 0
QTYPE_CODES = {QT.Q8_0: 1, QT.Q4_0: 2, QT.Q4_1: 3, QT.Q5_0: 4, QT.Q5_1: 5, QT.Q4_K: 6, QT.Q5_K: 7, QT.Q6_K: 8}
KERNEL_TYPES = frozenset(QTYPE_CODES)


@triton.jit
def _f16(w16, byte_off):
    """The f16 at an even byte offset (a vector of offsets), as f32."""
    return tl.load(w16 + byte_off // 2).to(tl.float32)


@triton.jit
def _byte(wb, off):
    return tl.load(wb + off).to(tl.int32)


@triton.jit
def _nibble(wb, at, j):
    """Value j (0..31) of a 16-byte run of 4-bit values: low nibbles first, then high nibbles."""
    byte = _byte(wb, at[:, None] + (j % 16)[None, :])
    return (byte >> ((j // 16) * 4)[None, :]) & 0xF


@triton.jit
def _fifth_bit(wb, at, j):
    """Bit j of the little-endian u32 at `at`, moved to 0x10."""
    return ((_byte(wb, at[:, None] + (j // 8)[None, :]) >> (j % 8)[None, :]) & 1) << 4


@triton.jit
def _q8_0(wb, w16, row, k0, j):
    blk = row + (k0 // 32) * 34
    q = tl.load(wb + blk[:, None] + 2 + j[None, :]).to(tl.int8, bitcast=True)
    return q.to(tl.float32) * _f16(w16, blk)[:, None]


@triton.jit
def _q4_0(wb, w16, row, k0, j):
    blk = row + (k0 // 32) * 18
    return _f16(w16, blk)[:, None] * (_nibble(wb, blk + 2, j) - 8).to(tl.float32)


@triton.jit
def _q4_1(wb, w16, row, k0, j):
    blk = row + (k0 // 32) * 20
    q = _nibble(wb, blk + 4, j).to(tl.float32)
    return _f16(w16, blk)[:, None] * q + _f16(w16, blk + 2)[:, None]


@triton.jit
def _q5_0(wb, w16, row, k0, j):
    blk = row + (k0 // 32) * 22
    q = _nibble(wb, blk + 6, j) | _fifth_bit(wb, blk + 2, j)
    return _f16(w16, blk)[:, None] * (q - 16).to(tl.float32)


@triton.jit
def _q5_1(wb, w16, row, k0, j):
    blk = row + (k0 // 32) * 24
    q = (_nibble(wb, blk + 8, j) | _fifth_bit(wb, blk + 4, j)).to(tl.float32)
    return _f16(w16, blk)[:, None] * q + _f16(w16, blk + 2)[:, None]


@triton.jit
def _scale_min_k4(wb, at, s):
    """Six-bit scale and min of sub-block s (0..7) from the 12-byte field at `at`."""
    lo = s % 4
    b_d = _byte(wb, at + lo)
    b_m = _byte(wb, at + 4 + lo)
    b_md = _byte(wb, at + 8 + lo)
    sc = tl.where(s < 4, b_d & 63, (b_md & 0xF) | ((b_d >> 2) & 0x30))
    mn = tl.where(s < 4, b_m & 63, (b_md >> 4) | ((b_m >> 2) & 0x30))
    return sc.to(tl.float32), mn.to(tl.float32)


@triton.jit
def _q4_k(wb, w16, row, k0, j):
    blk = row + (k0 // 256) * 144
    s = (k0 % 256) // 32
    sc, mn = _scale_min_k4(wb, blk + 4, s)
    q = (_byte(wb, (blk + 16 + (s // 2) * 32)[:, None] + j[None, :]) >> ((s % 2) * 4)) & 0xF
    dl = _f16(w16, blk) * sc
    ml = _f16(w16, blk + 2) * mn
    return dl[:, None] * q.to(tl.float32) - ml[:, None]


@triton.jit
def _q5_k(wb, w16, row, k0, j):
    blk = row + (k0 // 256) * 176
    s = (k0 % 256) // 32
    sc, mn = _scale_min_k4(wb, blk + 4, s)
    ql = (_byte(wb, (blk + 48 + (s // 2) * 32)[:, None] + j[None, :]) >> ((s % 2) * 4)) & 0xF
    qh = ((_byte(wb, (blk + 16)[:, None] + j[None, :]) >> s) & 1) << 4
    dl = _f16(w16, blk) * sc
    ml = _f16(w16, blk + 2) * mn
    return dl[:, None] * (ql | qh).to(tl.float32) - ml[:, None]


@triton.jit
def _q6_k(wb, w16, row, k0, j):
    blk = row + (k0 // 256) * 210
    e0 = k0 % 256
    half = e0 // 128
    ql = (_byte(wb, (blk + half * 64 + e0 % 64)[:, None] + j[None, :]) >> (((e0 // 64) % 2) * 4)) & 0xF
    qh = (_byte(wb, (blk + 128 + half * 32)[:, None] + j[None, :]) >> (((e0 // 32) % 4) * 2)) & 3
    sc = tl.load(wb + (blk + 192 + e0 // 16)[:, None] + (j // 16)[None, :]).to(tl.int8, bitcast=True)
    dl = _f16(w16, blk + 208)[:, None] * sc.to(tl.float32)
    return dl * ((ql | (qh << 4)) - 32).to(tl.float32)


@triton.jit
def _weight_tile(wb, w16, wd, n, kk, k0, j, K, row_bytes, QTYPE: tl.constexpr):
    """The (BLOCK_N, BLOCK_K) f32 weight tile for rows n and columns k0 + j."""
    row = n.to(tl.int64) * row_bytes
    if QTYPE == 0:
        w = tl.load(wd + n.to(tl.int64)[:, None] * K + kk[None, :], mask=kk[None, :] < K, other=0.0).to(tl.float32)
    elif QTYPE == 1:
        w = _q8_0(wb, w16, row, k0, j)
    elif QTYPE == 2:
        w = _q4_0(wb, w16, row, k0, j)
    elif QTYPE == 3:
        w = _q4_1(wb, w16, row, k0, j)
    elif QTYPE == 4:
        w = _q5_0(wb, w16, row, k0, j)
    elif QTYPE == 5:
        w = _q5_1(wb, w16, row, k0, j)
    elif QTYPE == 6:
        w = _q4_k(wb, w16, row, k0, j)
    elif QTYPE == 7:
        w = _q5_k(wb, w16, row, k0, j)
    else:
        w = _q6_k(wb, w16, row, k0, j)
    return w


@triton.jit
def _matmul_kernel(x_ptr, wb, w16, wd, out_ptr, M, N, K, row_bytes, stride_xm, stride_om,
                   QTYPE: tl.constexpr, IEEE: tl.constexpr,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    m = tl.minimum(offs_m, M - 1).to(tl.int64)
    n = tl.minimum(offs_n, N - 1)
    j = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + j
        x = tl.load(x_ptr + m[:, None] * stride_xm + kk[None, :], mask=kk[None, :] < K, other=0.0)
        w = _weight_tile(wb, w16, wd, n, kk, k0, j, K, row_bytes, QTYPE).to(x.dtype)
        if IEEE:
            acc = tl.dot(x, tl.trans(w), acc, input_precision="ieee")
        else:
            acc = tl.dot(x, tl.trans(w), acc)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    out = out_ptr + offs_m.to(tl.int64)[:, None] * stride_om + offs_n[None, :]
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=mask)


def _launch(x: torch.Tensor, wb: torch.Tensor, w16: torch.Tensor, wd: torch.Tensor,
            n: int, k: int, row_bytes: int, code: int) -> torch.Tensor:
    if x.dtype not in (torch.float32, torch.bfloat16):
        raise TypeError(f"activations must be float32 or bfloat16, got {x.dtype}")
    if x.dim() != 2 or x.shape[1] != k or x.stride(1) != 1:
        raise ValueError(f"expected x of shape (M, {k}) with contiguous rows, got {tuple(x.shape)}")
    m = x.shape[0]
    out = torch.empty(m, n, dtype=x.dtype, device=x.device)
    if m == 0:
        return out
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    _matmul_kernel[grid](x, wb, w16, wd, out, m, n, k, row_bytes, x.stride(0), out.stride(0),
                         QTYPE=code, IEEE=x.dtype == torch.float32,
                         BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K, num_warps=NUM_WARPS)
    return out


def quant_linear(x: torch.Tensor, data: torch.Tensor, qtype) -> torch.Tensor:
    """x (M, K) f32/bf16 @ W.T, W given as GGUF bytes `data` (N, row_bytes) uint8 -> (M, N) in x.dtype."""
    if qtype not in QTYPE_CODES:
        raise ValueError(f"no quantized matmul kernel for {qtype!r} (kernels: {sorted(t.name for t in KERNEL_TYPES)})")
    block, type_size = GGML_QUANT_SIZES[qtype]
    data = data.contiguous()
    n, row_bytes = data.shape
    return _launch(x, data, data.view(torch.float16), data, n, row_bytes // type_size * block, row_bytes,
                   QTYPE_CODES[qtype])


def dense_linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x (M, K) f32/bf16 @ weight.T for a dense (N, K) weight, same fixed tiles -> (M, N) in x.dtype."""
    weight = weight.contiguous()
    return _launch(x, weight, weight, weight, weight.shape[0], weight.shape[1], 0, DENSE)
