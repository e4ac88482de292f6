"""Triton matmul of activations (f32 or bf16) by GGUF-quantized weights, dequantized on the fly.

out[M, N] = x[M, K] @ W[N, K].T. One program owns a BLOCK_M x BN output tile and one fixed range of
K (split-K), walked in blocks of 32 (one Q*_0/Q*_1 block, one K-quant sub-block) in a fixed order,
UNROLL blocks per loop step, loaded as one [BN, UNROLL, 32] wave (scales once per row and block) so
their memory latencies overlap. Partial sums of the K ranges are
added in order by a second kernel (or by a fused consumer, engine.kernels.fused). The configuration
(BN, UNROLL, the K split) is a function of N and K only, never of M, and a row's accumulation reads
only that row of x, so each row's result is bit-identical whatever the other rows are and however
many there are (row-invariant by construction). Rows past M or N are clamped to the last valid one
and never stored. No atomics: every output element is written by exactly one program.

Weights are decoded in f32 (same formulas as engine.quant) and cast to x's dtype for tl.dot; f32
inputs use IEEE precision (no TF32). Importing this module imports triton: import it lazily.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as QT

BLOCK_M = 16
NUM_WARPS = int(os.environ.get("STRATA_MM_WARPS", "4"))
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
def _nib(wb, at, j):
    """Value j (0..31) of the 16-byte run of 4-bit values at `at`: low nibbles first, then high."""
    return (_byte(wb, at + j % 16) >> ((j // 16) * 4)) & 0xF


@triton.jit
def _fifth(wb, at, j):
    """Bit j of the little-endian u32 at `at`, moved to 0x10."""
    return ((_byte(wb, at + j // 8) >> (j % 8)) & 1) << 4


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
def _weight_tile(wb, w16, r, n, kb, j, K, QTYPE: tl.constexpr):
    """The f32 weights [BN, U, 32]: rows n (byte offsets r = n * row_bytes, both [BN, 1, 1]), K blocks
    kb [1, U, 1] of 32 values, values j [1, 1, 32] inside each block. Same formulas as engine.quant;
    scales are read once per (row, block) and broadcast over its 32 values."""
    if QTYPE == 0:
        kk = kb * 32 + j
        w = tl.load(wb + n.to(tl.int64) * K + kk, mask=kk < K, other=0.0).to(tl.float32)
    elif QTYPE == 1:
        blk = r + kb * 34
        q = tl.load(wb + blk + 2 + j).to(tl.int8, bitcast=True)
        w = q.to(tl.float32) * _f16(w16, blk)
    elif QTYPE == 2:
        blk = r + kb * 18
        w = _f16(w16, blk) * (_nib(wb, blk + 2, j) - 8).to(tl.float32)
    elif QTYPE == 3:
        blk = r + kb * 20
        w = _f16(w16, blk) * _nib(wb, blk + 4, j).to(tl.float32) + _f16(w16, blk + 2)
    elif QTYPE == 4:
        blk = r + kb * 22
        q = _nib(wb, blk + 6, j) | _fifth(wb, blk + 2, j)
        w = _f16(w16, blk) * (q - 16).to(tl.float32)
    elif QTYPE == 5:
        blk = r + kb * 24
        q = (_nib(wb, blk + 8, j) | _fifth(wb, blk + 4, j)).to(tl.float32)
        w = _f16(w16, blk) * q + _f16(w16, blk + 2)
    elif QTYPE == 6:
        blk = r + (kb // 8) * 144
        sb = kb % 8
        sc, mn = _scale_min_k4(wb, blk + 4, sb)
        q = (_byte(wb, blk + 16 + (sb // 2) * 32 + j) >> ((sb % 2) * 4)) & 0xF
        w = (_f16(w16, blk) * sc) * q.to(tl.float32) - _f16(w16, blk + 2) * mn
    elif QTYPE == 7:
        blk = r + (kb // 8) * 176
        sb = kb % 8
        sc, mn = _scale_min_k4(wb, blk + 4, sb)
        ql = (_byte(wb, blk + 48 + (sb // 2) * 32 + j) >> ((sb % 2) * 4)) & 0xF
        qh = ((_byte(wb, blk + 16 + j) >> sb) & 1) << 4
        w = (_f16(w16, blk) * sc) * (ql | qh).to(tl.float32) - _f16(w16, blk + 2) * mn
    else:
        blk = r + (kb // 8) * 210
        e0 = (kb % 8) * 32
        half = e0 // 128
        ql = (_byte(wb, blk + half * 64 + e0 % 64 + j) >> (((e0 // 64) % 2) * 4)) & 0xF
        qh = (_byte(wb, blk + 128 + half * 32 + j) >> (((e0 // 32) % 4) * 2)) & 3
        sc = tl.load(wb + blk + 192 + e0 // 16 + j // 16).to(tl.int8, bitcast=True)
        w = (_f16(w16, blk + 208) * sc.to(tl.float32)) * ((ql | (qh << 4)) - 32).to(tl.float32)
    return w


@triton.jit
def _matmul_kernel(x_ptr, wb, w16, part_ptr, M, K, n1, n2, n_end, d1, d2, row_bytes, stride_xm,
                   stride_ps, stride_pm, col0, KB,
                   QTYPE: tl.constexpr, IEEE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                   UNROLL: tl.constexpr):
    """Up to three weights with the same type and K side by side (columns [0,n1), [n1,n2), [n2,n_end)),
    their bytes at wb, wb + d1, wb + d2. Program (i, j, s): rows i*BM.., columns j*BN.., K blocks of 32
    [s*KB, s*KB + KB), in order, UNROLL blocks per step; the partial sums go to part[s]."""
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    c0 = tl.program_id(1) * BN
    pid_s = tl.program_id(2)
    in1 = c0 >= n1
    in2 = c0 >= n2
    base = tl.where(in2, n2, tl.where(in1, n1, 0))
    n_rows = tl.where(in2, n_end, tl.where(in1, n2, n1)) - base
    delta = tl.where(in2, d2, tl.where(in1, d1, 0)).to(tl.int64)
    wbt = wb + delta
    w16t = w16 + delta // 2
    local = c0 - base + tl.arange(0, BN)
    n = tl.minimum(local, n_rows - 1)
    n3 = n[:, None, None]
    r3 = n3.to(tl.int64) * row_bytes
    m = tl.minimum(offs_m, M - 1).to(tl.int64)
    u3 = tl.arange(0, UNROLL)[None, :, None]
    j3 = tl.arange(0, 32)[None, None, :]
    kw = tl.arange(0, UNROLL * 32)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    nkb = tl.cdiv(K, 32)
    kb_lo = pid_s * KB
    kb_hi = tl.minimum(kb_lo + KB, nkb)
    for c in range(kb_lo, kb_hi, UNROLL):
        # one wave of loads for UNROLL blocks; blocks past kb_hi read a valid block and meet x = 0
        kk = c * 32 + kw
        ok = (kk < K) & (kk < kb_hi * 32)
        x = tl.load(x_ptr + m[:, None] * stride_xm + kk[None, :], mask=ok[None, :], other=0.0)
        kb3 = tl.minimum(c + u3, kb_hi - 1)
        w = _weight_tile(wbt, w16t, r3, n3, kb3, j3, K, QTYPE)
        w = tl.reshape(w, (BN, UNROLL * 32)).to(x.dtype)
        if IEEE:
            acc = tl.dot(x, tl.trans(w), acc, input_precision="ieee")
        else:
            acc = tl.dot(x, tl.trans(w), acc)
    mask = (offs_m[:, None] < M) & (local[None, :] < n_rows)
    out = (part_ptr + pid_s * stride_ps + offs_m.to(tl.int64)[:, None] * stride_pm
           + (col0 + c0 + tl.arange(0, BN))[None, :])
    tl.store(out, acc.to(part_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _sum_kernel(part_ptr, out_ptr, total, S, stride_ps, BLOCK: tl.constexpr):
    """out = part[0] + part[1] + ... in that order (part rows contiguous like out)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < total
    acc = tl.load(part_ptr + offs, mask=ok, other=0.0)
    for s in range(1, S):
        acc += tl.load(part_ptr + s * stride_ps + offs, mask=ok, other=0.0)
    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=ok)


# Tuning (functions of N and K only; env overrides are for measuring, and must be the same everywhere)
TARGET_PROGRAMS = int(os.environ.get("STRATA_MM_TARGET", "2048"))  # split K until about this many programs
UNROLL = int(os.environ.get("STRATA_MM_UNROLL", "4"))               # K blocks of 32 per loop step (power of 2)


def plan(n_total: int, k: int, parts: tuple[int, ...] = ()) -> tuple[int, int, int, int]:
    """(BN, UNROLL, S, KB) for an N x K weight (or side-by-side weights of `parts` rows each).

    Depends on N and K alone, never on M: that keeps every row's arithmetic the same whatever the
    number of rows (row-invariance). Returns BN = 0 when the parts cannot share one launch."""
    bn = 64 if triton.cdiv(n_total, 64) >= 256 else 32
    if len(parts) > 1:
        while bn >= 16 and any(p % bn for p in parts[:-1]):
            bn //= 2
        if bn < 16:
            return 0, 0, 0, 0
    nkb = triton.cdiv(k, 32)
    # measured on an H200 (graph replay of a 16-row tile): 4 blocks per step for K <= 2048 (SmolLM2
    # shapes: 1.07 ms vs 1.26 ms with 2), 2 above (Llama-3-8B shapes: 11.6 ms vs 13.5 ms with 4)
    unroll = min(UNROLL if nkb <= 64 else max(1, UNROLL // 2), triton.next_power_of_2(nkb))
    chunks = triton.cdiv(nkb, unroll)
    tiles = triton.cdiv(n_total, bn)
    s = max(1, min(chunks, round(TARGET_PROGRAMS / tiles)))
    kb = unroll * triton.cdiv(chunks, s)
    return bn, unroll, triton.cdiv(nkb, kb), kb


def _weight_args(data: torch.Tensor, qtype) -> tuple[torch.Tensor, torch.Tensor, int, int, int]:
    """(bytes, f16 view, K, row_bytes, code) of a weight: GGUF bytes or a dense (N, K) matrix."""
    if qtype is None:
        return data, data, data.shape[1], 0, DENSE
    block, type_size = GGML_QUANT_SIZES[qtype]
    n, row_bytes = data.shape
    return data, data.view(torch.float16), row_bytes // type_size * block, row_bytes, QTYPE_CODES[qtype]


def matmul_parts(x: torch.Tensor, weights: list[tuple[torch.Tensor, object]]) -> tuple[torch.Tensor, int]:
    """Partial sums of x @ [W1; W2; ...].T: (part [S, M, N1+N2+...] float32, S).

    weights: (data, qtype) pairs, all with the same K; qtype None = dense (N, K) matrix in x's dtype.
    The row sums are part[0] + ... + part[S-1] in that order (the consumers of this add them)."""
    _check_x(x, None)
    m = x.shape[0]
    args = [_weight_args(d.contiguous() if d.dim() == 2 else d, q) for d, q in weights]
    k = args[0][2]
    if any(a[2] != k for a in args) or x.shape[1] != k:
        raise ValueError(f"weights and x disagree on K: {[a[2] for a in args]} vs {x.shape[1]}")
    sizes = [a[0].shape[0] for a in args]
    n_total = sum(sizes)
    bn, unroll, s, kb = plan(n_total, k, tuple(sizes))
    same = len(args) <= 3 and all(a[4] == args[0][4] and a[3] == args[0][3] and a[0].dtype == args[0][0].dtype
                                  for a in args)
    if not same or bn == 0 or any(_delta(a[0], args[0][0]) is None for a in args):
        bn, unroll, s, kb = plan(n_total, k)
        groups = [([a], [sz], off) for a, sz, off in zip(args, sizes, _offsets(sizes))]
    else:
        groups = [(args, sizes, 0)]
    part = torch.empty((s, m, n_total), dtype=torch.float32, device=x.device)
    if m == 0:
        return part, s
    for g_args, g_sizes, col0 in groups:
        _launch_group(x, g_args, g_sizes, col0, part, part.stride(0), part.stride(1), bn, unroll, s, kb)
    return part, s


def _delta(t: torch.Tensor, base: torch.Tensor) -> int | None:
    """t's start relative to base's, in base's elements (and even, for the f16 view of GGUF bytes)."""
    d = t.data_ptr() - base.data_ptr()
    size = base.element_size()
    if d % size or (size == 1 and d % 2):
        return None
    return d // size


def _offsets(sizes):
    out, acc = [], 0
    for v in sizes:
        out.append(acc)
        acc += v
    return out


def _launch_group(x, g_args, g_sizes, col0, part, stride_ps, stride_pm, bn, unroll, s, kb):
    b0 = g_args[0][0]
    ends = [sum(g_sizes[:i + 1]) for i in range(len(g_sizes))]
    ends += [ends[-1]] * (3 - len(ends))
    ds = [_delta(a[0], b0) for a in g_args] + [0] * (3 - len(g_args))
    grid = (triton.cdiv(x.shape[0], BLOCK_M), triton.cdiv(ends[2], bn), s)
    _matmul_kernel[grid](x, b0, g_args[0][1], part, x.shape[0], g_args[0][2], ends[0], ends[1], ends[2],
                         ds[1], ds[2], g_args[0][3], x.stride(0), stride_ps, stride_pm, col0, kb,
                         QTYPE=g_args[0][4], IEEE=x.dtype == torch.float32, BM=BLOCK_M, BN=bn,
                         UNROLL=unroll, num_warps=NUM_WARPS)


def _check_x(x: torch.Tensor, k: int | None) -> None:
    if x.dtype not in (torch.float32, torch.bfloat16):
        raise TypeError(f"activations must be float32 or bfloat16, got {x.dtype}")
    if x.dim() != 2 or (k is not None and x.shape[1] != k) or x.stride(1) != 1:
        raise ValueError(f"expected x of shape (M, {k}) with contiguous rows, got {tuple(x.shape)}")


def _linear(x: torch.Tensor, data: torch.Tensor, qtype) -> torch.Tensor:
    wb, w16, k, row_bytes, code = _weight_args(data, qtype)
    _check_x(x, k)
    m, n = x.shape[0], wb.shape[0]
    out = torch.empty(m, n, dtype=x.dtype, device=x.device)
    if m == 0:
        return out
    bn, unroll, s, kb = plan(n, k)
    args = [(wb, w16, k, row_bytes, code)]
    if s == 1:
        _launch_group(x, args, [n], 0, out, 0, out.stride(0), bn, unroll, 1, kb)
        return out
    part = torch.empty((s, m, n), dtype=torch.float32, device=x.device)
    _launch_group(x, args, [n], 0, part, part.stride(0), part.stride(1), bn, unroll, s, kb)
    total = m * n
    _sum_kernel[(triton.cdiv(total, 1024),)](part, out, total, s, part.stride(0), BLOCK=1024, num_warps=4)
    return out


def quant_linear(x: torch.Tensor, data: torch.Tensor, qtype) -> torch.Tensor:
    """x (M, K) f32/bf16 @ W.T, W given as GGUF bytes `data` (N, row_bytes) uint8 -> (M, N) in x.dtype."""
    if qtype not in QTYPE_CODES:
        raise ValueError(f"no quantized matmul kernel for {qtype!r} (kernels: {sorted(t.name for t in KERNEL_TYPES)})")
    return _linear(x, data.contiguous(), qtype)


def dense_linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x (M, K) f32/bf16 @ weight.T for a dense (N, K) weight, same fixed tiles -> (M, N) in x.dtype."""
    return _linear(x, weight.contiguous(), None)
