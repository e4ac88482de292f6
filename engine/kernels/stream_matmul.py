"""Triton matmul of activations by weights in the streaming layout (engine.kernels.packed).

part[s, M, N] = x[M, K-range s] @ W[N, K-range s].T. One program owns 16 rows x BN weight rows and
one fixed range of K (split-K in S parts), walked in chunks of 256 values in a fixed order: for each
chunk it loads the BN rows' codes as one aligned run per row (128 bytes of nibbles, or 256 of int8),
their compact scales, dequantizes in float32 with engine.quant's formulas, rounds to the activation
dtype and multiplies on the tensor cores with float32 accumulation. 4-bit codes keep GGUF's order
(the low nibbles of a run of G bytes are values 0..G-1, the high ones G..2G-1), so instead of
interleaving the nibbles the kernel loads x in that order.

Row invariance by construction: the configuration (BN, S, warps, pipelining depth) is a function of
N, K and the type only (`plan`), the row tile is always 16, a row's sums read only that row of x, and
the K order is fixed; so a row's result is bit-identical whatever the other rows are and however
many there are. No atomics. Partial sums are added in order by the consumer (engine.kernels.fused).
Importing this module imports triton: import it lazily.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from engine.kernels.packed import Packed

BM = 16
CHUNK = 256


@triton.jit
def _chunk_dot(acc, x_ptr, stride_xm, m, m_ok, codes, scales, sub, n, n_ok, c, K,
               KIND: tl.constexpr, BN: tl.constexpr, IEEE: tl.constexpr):
    """acc += x[m, chunk c] @ W[n, chunk c].T for one 256-value chunk c."""
    nn = n.to(tl.int64)[:, None, None]
    okn = n_ok[:, None, None]
    if KIND == 1:                                    # Q8_0: int8 codes, f16 d per 32
        g = tl.arange(0, 8)[None, :, None]
        j = tl.arange(0, 32)[None, None, :]
        kk = c * 256 + g * 32 + j
        ok = okn & (kk < K)
        q = tl.load(codes + nn * K + kk, mask=ok, other=0).to(tl.float32)
        d = tl.load(scales + nn * (K // 32) + c * 8 + g, mask=okn & (c * 8 + g < K // 32), other=0.0)
        w = tl.reshape(q * d.to(tl.float32), (BN, 256))
        kx = c * 256 + tl.arange(0, 256)
        xt = tl.load(x_ptr + m[:, None] * stride_xm + kx[None, :], mask=m_ok[:, None] & (kx < K)[None, :],
                     other=0.0)
        wt = tl.trans(w.to(xt.dtype))
        if IEEE:
            acc = tl.dot(xt, wt, acc, input_precision="ieee")
        else:
            acc = tl.dot(xt, wt, acc)
    else:
        if KIND == 4:
            G: tl.constexpr = 32                      # Q4_K: 64-value groups, 32 bytes each
        else:
            G: tl.constexpr = 16                      # Q4_0 / Q4_1: 32-value blocks, 16 bytes each
        NG: tl.constexpr = 128 // G
        g = tl.arange(0, NG)[None, :, None]
        j = tl.arange(0, G)[None, None, :]
        kb = c * 128 + g * G + j                      # byte index in the row
        ok = okn & (kb < K // 2)
        b = tl.load(codes + nn * (K // 2) + kb, mask=ok, other=0).to(tl.int32)
        lo = (b & 0xF).to(tl.float32)
        hi = (b >> 4).to(tl.float32)
        if KIND == 4:
            sb = nn * (K // 256) + c
            d = tl.load(scales + sb * 2, mask=okn, other=0.0).to(tl.float32)
            dmin = tl.load(scales + sb * 2 + 1, mask=okn, other=0.0).to(tl.float32)
            sc_lo = tl.load(sub + sb * 16 + 2 * g, mask=okn, other=0).to(tl.float32)
            sc_hi = tl.load(sub + sb * 16 + 2 * g + 1, mask=okn, other=0).to(tl.float32)
            mn_lo = tl.load(sub + sb * 16 + 8 + 2 * g, mask=okn, other=0).to(tl.float32)
            mn_hi = tl.load(sub + sb * 16 + 9 + 2 * g, mask=okn, other=0).to(tl.float32)
            w_lo = (d * sc_lo) * lo - dmin * mn_lo
            w_hi = (d * sc_hi) * hi - dmin * mn_hi
        else:
            blk = nn * (K // 32) + c * 8 + g
            bok = okn & (c * 8 + g < K // 32)
            if KIND == 2:
                d = tl.load(scales + blk, mask=bok, other=0.0).to(tl.float32)
                w_lo = d * (lo - 8.0)
                w_hi = d * (hi - 8.0)
            else:
                d = tl.load(scales + blk * 2, mask=bok, other=0.0).to(tl.float32)
                mm = tl.load(scales + blk * 2 + 1, mask=bok, other=0.0).to(tl.float32)
                w_lo = d * lo + mm
                w_hi = d * hi + mm
        i = tl.arange(0, 128)
        kx = c * 256 + (i // G) * (2 * G) + i % G     # the value of byte i's low nibble
        xm = x_ptr + m[:, None] * stride_xm
        okx = m_ok[:, None] & (kx < K)[None, :]
        x_lo = tl.load(xm + kx[None, :], mask=okx, other=0.0)
        x_hi = tl.load(xm + (kx + G)[None, :], mask=okx, other=0.0)
        wl = tl.trans(tl.reshape(w_lo, (BN, 128)).to(x_lo.dtype))
        wh = tl.trans(tl.reshape(w_hi, (BN, 128)).to(x_lo.dtype))
        if IEEE:
            acc = tl.dot(x_lo, wl, acc, input_precision="ieee")
            acc = tl.dot(x_hi, wh, acc, input_precision="ieee")
        else:
            acc = tl.dot(x_lo, wl, acc)
            acc = tl.dot(x_hi, wh, acc)
    return acc


@triton.jit
def _mm_kernel(x_ptr, codes, scales, sub, part_ptr, M, N, K, stride_xm, stride_ps, stride_pm, col0, CPS,
               KIND: tl.constexpr, BN: tl.constexpr, IEEE: tl.constexpr):
    """Program (i, j, s): rows i*16.., weight rows j*BN.., chunks [s*CPS, s*CPS + CPS) in order."""
    m = tl.program_id(0) * BM + tl.arange(0, BM)
    n = tl.program_id(1) * BN + tl.arange(0, BN)
    s = tl.program_id(2)
    m_ok = m < M
    n_ok = n < N
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    c_hi = tl.minimum(s * CPS + CPS, tl.cdiv(K, 256))
    for c in range(s * CPS, c_hi):
        acc = _chunk_dot(acc, x_ptr, stride_xm, m.to(tl.int64), m_ok, codes, scales, sub, n, n_ok, c, K,
                         KIND, BN, IEEE)
    out = part_ptr + s * stride_ps + m.to(tl.int64)[:, None] * stride_pm + (col0 + n)[None, :]
    tl.store(out, acc, mask=m_ok[:, None] & n_ok[None, :])


# Tuning: functions of (N, K, type) only. Env overrides exist for measuring and must be set the same
# everywhere a run compares results.
TARGET_PROGRAMS = int(os.environ.get("STRATA_SMM_TARGET", "528"))     # 4 per SM on an H200
WARPS = int(os.environ.get("STRATA_SMM_WARPS", "4"))
STAGES = int(os.environ.get("STRATA_SMM_STAGES", "3"))
BN_FORCE = int(os.environ.get("STRATA_SMM_BN", "0"))


def plan(n: int, k: int, kind: int) -> tuple[int, int, int]:
    """(BN, S, chunks per split) for an N x K weight of the given kind; never depends on M."""
    bn = BN_FORCE or (64 if n >= 8192 else 32)
    chunks = triton.cdiv(k, CHUNK)
    tiles = triton.cdiv(n, bn)
    s = max(1, min(chunks, round(TARGET_PROGRAMS / tiles)))
    cps = triton.cdiv(chunks, s)
    return bn, triton.cdiv(chunks, cps), cps


def _check_x(x: torch.Tensor, k: int) -> None:
    if x.dtype not in (torch.float32, torch.bfloat16):
        raise TypeError(f"activations must be float32 or bfloat16, got {x.dtype}")
    if x.dim() != 2 or x.shape[1] != k or x.stride(1) != 1:
        raise ValueError(f"expected x of shape (M, {k}) with contiguous rows, got {tuple(x.shape)}")


def matmul_parts(x: torch.Tensor, w: Packed) -> tuple[torch.Tensor, int]:
    """Partial sums of x @ W.T: (part [S, M, N] float32, S); rows sum as part[0] + ... + part[S-1]."""
    _check_x(x, w.k)
    bn, s, cps = plan(w.n, w.k, w.kind)
    part = torch.empty((s, x.shape[0], w.n), dtype=torch.float32, device=x.device)
    if x.shape[0]:
        launch(x, w, part, bn, s, cps)
    return part, s


def launch(x: torch.Tensor, w: Packed, part: torch.Tensor, bn: int, s: int, cps: int, warps: int = WARPS,
           stages: int = STAGES) -> None:
    grid = (triton.cdiv(x.shape[0], BM), triton.cdiv(w.n, bn), s)
    _mm_kernel[grid](x, w.codes, w.scales, w.sub if w.sub is not None else w.scales, part, x.shape[0], w.n, w.k,
                     x.stride(0), part.stride(0), part.stride(1), 0, cps, KIND=w.kind, BN=bn,
                     IEEE=x.dtype == torch.float32, num_warps=warps, num_stages=stages)


def linear(x: torch.Tensor, w: Packed) -> torch.Tensor:
    """x (M, K) f32/bf16 @ W.T -> (M, N) in x.dtype, the partials added in order."""
    part, s = matmul_parts(x, w)
    acc = part[0]
    for i in range(1, s):
        acc = acc + part[i]
    return acc.to(x.dtype)


def unpack_values(w: Packed) -> torch.Tensor:
    """float32 [N, K] as the kernel dequantizes it: the identity times W.T (exact in float32), so the
    interpreter can check that the kernel reads the layout like engine.quant."""
    eye = torch.eye(w.k, dtype=torch.float32, device=w.codes.device)
    return linear(eye, w).T
