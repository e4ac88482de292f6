"""Decode and verify rows on bfloat16 tensor cores: each program dequantizes its Q4_K weight tile to
bfloat16 in registers and multiplies it with the tile's bfloat16 x rows, 16 rows per tile whatever the
real count (STRATA_DECODE_KERNEL=bf16).

Why: the int8 kernels pay per x row. dp4a re-reads x through L1 for every weight row, and the int8 MMA
(engine.kernels.imma_matmul) must scale every 32-value block's integer sum per (weight row, x row) in
float32: about three instructions per block and row, 1.5 per weight at 16 rows (H200, 2026-12-02: the
llama-3-8b gate|up matrix at 16 rows 156 us dp4a, 79 us imma at best, against 25 us for one dp4a row).
Here the scales are applied once per weight, before the MMA: a 4-bit code becomes bfloat16 by a byte
permute, a mask with the exponent of 128 and one subtraction (exact), then one bfloat16 FMA with the
sub-block's scale and minimum (rounded to bfloat16 from engine.quant's float32 d * sc and dmin * m), two
weights per instruction; the MMA sums in float32. So x keeps its bfloat16 values (no int8 rounding) and
a weight is within about two bfloat16 roundings of its float32 value (the prompt tiles' dequantized copy
rounds it once): on random Q4_K matrices 4.4e-3 relative error against float64, dp4a 5.6e-3.

Row invariance by construction: an output (weight row n, x row r) is the MMA's float32 sums of weight
row n and x row r over 32-value blocks in the order of K; the split of K into S partials (`plan`) is a
function of the weight's shape only, and the partials are added in order. Rows past the real count read
zeros. Importing this module imports triton. Under the Triton interpreter the conversion is written in
float32 arithmetic with the same roundings.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from engine.kernels import imma_matmul
from engine.kernels.dp4a_gemv import INTERPRET
from engine.kernels.imma_matmul import byte_at, q4k_d_dmin, scale_planes
from engine.kernels.packed import Packed

RT = 16                                            # x rows per tile: the MMA's N, fixed
KINDS = (4,)                                       # Q4_K; the other types' decode rows run dp4a
TARGET = int(os.environ.get("STRATA_BF16_TARGET", "528"))     # programs per launch to aim for
WARPS = int(os.environ.get("STRATA_BF16_WARPS", "4"))
STAGES = int(os.environ.get("STRATA_BF16_STAGES", "2"))
BN = int(os.environ.get("STRATA_BF16_BN", "128"))
# codes per asm call; 2 is bit-identical and on an H200 ~5% faster alone (gate|up one row 53.3 -> 50.6 us at
# 528 programs); end to end it ran only with 1,056 programs (eight 8B streams 1,557 tok/s against 1,544 at
# the defaults), so it is not the default yet
PACK = int(os.environ.get("STRATA_BF16_PACK", "4"))


@triton.jit
def _dequant(cw, s_lo, m_lo, s_hi, m_hi, INTERP: tl.constexpr, PACK: tl.constexpr):
    """uint8 codes [BN, 32] -> (low nibbles q * s_lo + m_lo, high nibbles q * s_hi + m_hi) in bfloat16.
    The scales come as int32 [BN, 32] holding the bfloat16 value twice (`_pair`). q is exact in bfloat16
    (128 + q by the exponent bits of 128, minus 128), then one fused multiply-add rounds once. Of the four
    elements one asm call gets, 0 and 1 share a weight row (the MMA operand holds K pairs) and so do 2 and
    3, but the two pairs may be in different rows: each pair takes its own element's scale word."""
    if INTERP:
        lo = (cw & 15).to(tl.float32) * _unpair(s_lo) + _unpair(m_lo)
        hi = (cw >> 4).to(tl.float32) * _unpair(s_hi) + _unpair(m_hi)
        return lo.to(tl.bfloat16), hi.to(tl.bfloat16)
    if PACK == 2:                 # one K pair a call: the two bytes arrive as loaded, no packing
        return tl.inline_asm_elementwise(
            """{ .reg .b32 t0, u0, k;
            mov.b32 k, 0x43004300;
            prmt.b32 t0, $2, 0, 0x4140;
            shr.u32 u0, t0, 4;
            lop3.b32 u0, u0, 0x000F000F, k, 0xEA; lop3.b32 t0, t0, 0x000F000F, k, 0xEA;
            sub.rn.bf16x2 t0, t0, k; sub.rn.bf16x2 u0, u0, k;
            fma.rn.bf16x2 $0, t0, $3, $5; fma.rn.bf16x2 $1, u0, $7, $9; }""",
            "=r,=r,r,r,r,r,r,r,r,r,r",
            [cw, s_lo, m_lo, s_hi, m_hi], dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=2)
    return tl.inline_asm_elementwise(
        """{ .reg .b32 t0, t1, u0, u1, k;
        mov.b32 k, 0x43004300;
        prmt.b32 t0, $4, 0, 0x4140; prmt.b32 t1, $4, 0, 0x4342;
        shr.u32 u0, t0, 4; shr.u32 u1, t1, 4;
        lop3.b32 u0, u0, 0x000F000F, k, 0xEA; lop3.b32 u1, u1, 0x000F000F, k, 0xEA;
        lop3.b32 t0, t0, 0x000F000F, k, 0xEA; lop3.b32 t1, t1, 0x000F000F, k, 0xEA;
        sub.rn.bf16x2 t0, t0, k; sub.rn.bf16x2 t1, t1, k; sub.rn.bf16x2 u0, u0, k; sub.rn.bf16x2 u1, u1, k;
        fma.rn.bf16x2 $0, t0, $5, $9; fma.rn.bf16x2 $1, t1, $7, $11;
        fma.rn.bf16x2 $2, u0, $13, $17; fma.rn.bf16x2 $3, u1, $15, $19; }""",
        "=r,=r,=r,=r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r",
        [cw, s_lo, m_lo, s_hi, m_hi], dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4)


@triton.jit
def _pair(v, BN: tl.constexpr):
    """float32 [BN] -> int32 [BN, 32]: v rounded to bfloat16, twice in one word (a bfloat16x2 operand)."""
    b = v.to(tl.bfloat16).to(tl.uint16, bitcast=True).to(tl.int32)
    return tl.broadcast_to((b | (b << 16))[:, None], (BN, 32))


@triton.jit
def _unpair(p):
    return (p & 0xFFFF).to(tl.uint16).to(tl.bfloat16, bitcast=True).to(tl.float32)


@triton.jit
def _bf16_kernel(x, nreal_ptr, T, stride_xm, codes, scales, sub, part, N, K, stride_ps, stride_pm, CPS,
                 BN: tl.constexpr, RT: tl.constexpr, INTERP: tl.constexpr, NS: tl.constexpr, PACK: tl.constexpr):
    """part[s, r, n] for weight rows n of program 0's tile over super-blocks [s*CPS, s*CPS + CPS): per
    super-block four 32-byte groups, each two 32-value sub-blocks (low nibbles, then high ones)."""
    n = tl.program_id(0) * BN + tl.arange(0, BN)
    nc = tl.minimum(n, N - 1).to(tl.int64)         # rows past N read row N-1 and are not stored
    r = tl.arange(0, RT)
    M = tl.minimum(tl.load(nreal_ptr), T)
    rok = (r < M)[None, :]
    C = K // 256
    c0 = tl.program_id(1) * CPS
    c1 = tl.minimum(c0 + CPS, C)
    acc = tl.zeros((BN, RT), dtype=tl.float32)
    j32 = tl.arange(0, 32)[None, :]
    kk = tl.arange(0, 32)[:, None]
    xr = x + r[None, :].to(tl.int64) * stride_xm + kk
    for c in tl.range(c0, c1, num_stages=NS):      # every load of the loop prefetched NS - 1 super-blocks ahead
        sb = nc * C + c
        dd, dmin = q4k_d_dmin(tl.load(scales + sb))
        for g in tl.static_range(4):
            cw = tl.load(codes + nc[:, None] * (K // 2) + c * 128 + g * 32 + j32)
            ws = tl.load(sub + sb * 4 + g // 2)        # sub-block scales 4 (g // 2) .. + 3
            wm = tl.load(sub + sb * 4 + 2 + g // 2)    # their minimums
            sh = 16 * (g % 2)
            w_lo, w_hi = _dequant(cw, _pair(dd * byte_at(ws, sh), BN), _pair(-(dmin * byte_at(wm, sh)), BN),
                                  _pair(dd * byte_at(ws, sh + 8), BN), _pair(-(dmin * byte_at(wm, sh + 8)), BN),
                                  INTERP, PACK)
            k0 = c * 256 + g * 64
            x_lo = tl.load(xr + k0, mask=rok, other=0.0)
            x_hi = tl.load(xr + k0 + 32, mask=rok, other=0.0)
            if INTERP:                             # its tl.dot would multiply bfloat16 bit patterns
                acc = tl.dot(w_lo.to(tl.float32), x_lo.to(tl.float32), acc, input_precision="ieee")
                acc = tl.dot(w_hi.to(tl.float32), x_hi.to(tl.float32), acc, input_precision="ieee")
            else:
                acc = tl.dot(w_lo, x_lo, acc)
                acc = tl.dot(w_hi, x_hi, acc)
    ptr = part + tl.program_id(1) * stride_ps + r[None, :] * stride_pm + n[:, None]
    tl.store(ptr, acc, mask=(n < N)[:, None] & (r < T)[None, :])


def plan(n: int, k: int, target: int = TARGET, bn: int = BN) -> tuple[int, int, int]:
    """(BN, S, super-blocks per split): a function of the weight's shape only (the int8 MMA kernel's
    split rule, whose Q4_K chunk is a super-block)."""
    return imma_matmul.plan(4, n, k, target, bn)


def matmul_parts(x: torch.Tensor, w: Packed, n_real: torch.Tensor, target: int = TARGET, bn: int = BN,
                 warps: int = WARPS, stages: int = STAGES, pack: int = PACK) -> tuple[torch.Tensor, int]:
    """x [T, K] bfloat16 (T <= 16) @ W.T for the first n_real rows (an int32 device scalar), zeros for
    the others: (part [S, T, N] float32, S). target/bn/warps/stages/pack: for measuring only (a run must
    use one setting everywhere)."""
    t = x.shape[0]
    if w.kind not in KINDS:
        raise ValueError(f"the bfloat16 tensor-core decode kernel takes Q4_K, not {w.qtype.name}")
    if t > RT:
        raise ValueError(f"the bfloat16 tensor-core decode kernel takes up to {RT} rows, got {t}")
    bn, s, cps = plan(w.n, w.k, target, bn)
    part = torch.empty((s, t, w.n), dtype=torch.float32, device=x.device)
    if t == 0:
        return part, s
    x = x.to(torch.bfloat16)
    _bf16_kernel[(triton.cdiv(w.n, bn), s)](
        x, n_real, t, x.stride(0), w.codes, *scale_planes(w), part, w.n, w.k,
        part.stride(0), part.stride(1), cps, BN=bn, RT=RT, INTERP=INTERPRET, NS=stages, PACK=pack, num_warps=warps)
    return part, s
