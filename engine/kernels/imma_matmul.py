"""Decode and verify rows on int8 tensor cores: the streaming-layout weights (engine.kernels.packed)
times the int8 x rows of engine.kernels.dp4a_gemv.quantize, 16 rows per tile whatever the real count.

Why: the dp4a kernel runs the real rows one after another, so 8 rows cost 8 times one row
(bench_matmul, 2026-11-30). Here each program unpacks its weight codes once per 32-value block into an
int8 [BN, 32] tile and multiplies it with the block's x codes of all 16 rows in one int8 MMA
(`tl.dot`, int32 sums: exact, so the tensor core's order cannot matter). The block's integer sums are
then scaled in float32 by the weight's scales and the x block's d (and d * sum(q) for the types with a
minimum), with the dp4a kernel's formulas written as explicit FMAs and fp fusion off.

Row invariance by construction: an output element (weight row n, x row r) is built only from weight
row n and x row r, by integer sums and then float operations in the order of the blocks along K, the
same for every tile size and every other row; the split of K into S partials (`plan`) is a function
of the weight's shape and type, and the partials are added in order by the consumer. Rows past the real
count read zeros and give zeros. Importing this module imports triton.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from engine.kernels.dp4a_gemv import INTERPRET, NO_FUSION, quantize
from engine.kernels.packed import Packed

RT = 16                                            # x rows per tile: the MMA's N, fixed
TARGET = int(os.environ.get("STRATA_IMMA_TARGET", "528"))   # programs per launch to aim for
WARPS = int(os.environ.get("STRATA_IMMA_WARPS", "4"))
STAGES = int(os.environ.get("STRATA_IMMA_STAGES", "3"))
BN_FORCE = int(os.environ.get("STRATA_IMMA_BN", "0"))


@triton.jit
def _nibbles(c, HIGH: tl.constexpr, INTERP: tl.constexpr):
    """uint8 codes -> their low (or high) nibbles as int8, four bytes per 32-bit instruction."""
    if INTERP:
        if HIGH:
            return (c >> 4).to(tl.int8)
        return (c & 15).to(tl.int8)
    if HIGH:
        return tl.inline_asm_elementwise("{ .reg .b32 t; shr.u32 t, $1, 4; and.b32 $0, t, 0x0F0F0F0F; }",
                                         "=r,r", [c], dtype=tl.int8, is_pure=True, pack=4)
    return tl.inline_asm_elementwise("and.b32 $0, $1, 0x0F0F0F0F;", "=r,r", [c], dtype=tl.int8,
                                     is_pure=True, pack=4)


@triton.jit
def q4k_d_dmin(wd):
    """A Q4_K super-block's (d, dmin) in float32 from its scales word (d | dmin << 16, two float16)."""
    dd = (wd & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)
    return dd, ((wd >> 16) & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def byte_at(w, sh):
    """Byte sh / 8 of the int32 words w (a Q4_K sub-block scale or minimum) in float32."""
    return ((w >> sh) & 0xFF).to(tl.float32)


@triton.jit
def _x_block(xq, r, rok, k0, K):
    """The int8 x codes of values [k0, k0 + 32) of rows r, as the MMA's [32, RT] operand."""
    kk = tl.arange(0, 32)[:, None]
    return tl.load(xq + r[None, :] * K + k0 + kk, mask=rok[None, :], other=0)


@triton.jit
def _imma_kernel(xq, xds, nreal_ptr, T, codes, scales, sub, part, N, K, stride_ps, stride_pm, CPS,
                 KIND: tl.constexpr, BN: tl.constexpr, RT: tl.constexpr, INTERP: tl.constexpr, NS: tl.constexpr):
    """part[s, r, n] for weight rows n of program 0's tile over K chunks [s*CPS, s*CPS + CPS): a chunk is
    128 bytes of a weight row's codes (Q4_K: one 256-value super-block, four 64-value groups of two
    sub-blocks; Q4_0 / Q4_1: eight 32-value blocks; Q8_0: four 32-value blocks)."""
    n = tl.program_id(0) * BN + tl.arange(0, BN)
    nc = tl.minimum(n, N - 1).to(tl.int64)         # rows past N read row N-1 and are not stored
    r = tl.arange(0, RT)
    M = tl.minimum(tl.load(nreal_ptr), T)
    rok = r < M
    NB = K // 32
    if KIND == 1:
        C = tl.cdiv(NB, 4)
    else:
        C = tl.cdiv(NB, 8)                 # Q4_K: K is a multiple of 256; the others may end mid-chunk
    c0 = tl.program_id(1) * CPS
    c1 = tl.minimum(c0 + CPS, C)
    acc = tl.zeros((BN, RT), dtype=tl.float32)
    accm = tl.zeros((BN, RT), dtype=tl.float32)
    j32 = tl.arange(0, 32)[None, :]
    j16 = tl.arange(0, 16)[None, :]
    for c in tl.range(c0, c1, num_stages=NS):    # every load of the loop prefetched NS - 1 chunks ahead
        if KIND == 4:                         # scales and sub-block scales read as 32-bit words
            sb = nc * (K // 256) + c
            dd, dmin = q4k_d_dmin(tl.load(scales + sb))
            for g in tl.static_range(4):      # 32 bytes: low nibbles sub-block 2g, high ones 2g + 1
                cw = tl.load(codes + nc[:, None] * (K // 2) + c * 128 + g * 32 + j32)
                k0 = c * 256 + g * 64
                plo = tl.dot(_nibbles(cw, False, INTERP), _x_block(xq, r, rok, k0, K), out_dtype=tl.int32)
                phi = tl.dot(_nibbles(cw, True, INTERP), _x_block(xq, r, rok, k0 + 32, K), out_dtype=tl.int32)
                ws = tl.load(sub + sb * 4 + g // 2)            # sub-block scales 4 (g // 2) .. + 3
                wm = tl.load(sub + sb * 4 + 2 + g // 2)        # their minimums
                sh = 16 * (g % 2)
                dp = xds + (r * NB + k0 // 32) * 2
                dx_lo = tl.load(dp, mask=rok, other=0.0)[None, :]
                dx_hi = tl.load(dp + 2, mask=rok, other=0.0)[None, :]
                acc = tl.fma(plo.to(tl.float32), (dd * byte_at(ws, sh))[:, None] * dx_lo, acc)
                acc = tl.fma(phi.to(tl.float32), (dd * byte_at(ws, sh + 8))[:, None] * dx_hi,
                             acc)
                accm = tl.fma((dmin * byte_at(wm, sh))[:, None],
                              tl.load(dp + 1, mask=rok, other=0.0)[None, :], accm)
                accm = tl.fma((dmin * byte_at(wm, sh + 8))[:, None],
                              tl.load(dp + 3, mask=rok, other=0.0)[None, :], accm)
        elif KIND == 1:
            for g in tl.static_range(4):      # 32 int8 codes
                u = c * 4 + g
                ok = r * 0 + u < NB           # blocks past K read as zeros: they add exact zeros
                cw = tl.load(codes + nc[:, None] * K + u * 32 + j32, mask=j32 * 0 + u < NB, other=0)
                p = tl.dot(cw, _x_block(xq, r, rok & ok, u * 32, K), out_dtype=tl.int32).to(tl.float32)
                d = tl.load(scales + nc * NB + u, mask=nc * 0 + u < NB, other=0.0).to(tl.float32)[:, None]
                dx = tl.load(xds + (r * NB + u) * 2, mask=rok & ok, other=0.0)[None, :]
                acc = tl.fma(p, d * dx, acc)
        else:
            kk = tl.arange(0, 32)             # w's column k holds value k // 2 + 16 * (k % 2)
            kx = (kk // 2 + 16 * (kk % 2))[:, None]
            for g in tl.static_range(8):      # 16 bytes: values 0..15 low nibbles, 16..31 high ones
                u = c * 8 + g
                ok = r * 0 + u < NB           # blocks past K read as zeros: they add exact zeros
                okn = nc * 0 + u < NB
                cw = tl.load(codes + nc[:, None] * (K // 2) + u * 16 + j16, mask=j16 * 0 + u < NB, other=0)
                w = tl.reshape(tl.join(_nibbles(cw, False, INTERP), _nibbles(cw, True, INTERP)), (BN, 32))
                xv = tl.load(xq + r[None, :] * K + u * 32 + kx, mask=(rok & ok)[None, :], other=0)
                p = tl.dot(w, xv, out_dtype=tl.int32).to(tl.float32)
                dp = xds + (r * NB + u) * 2
                dx = tl.load(dp, mask=rok & ok, other=0.0)[None, :]
                xs = tl.load(dp + 1, mask=rok & ok, other=0.0)[None, :]
                if KIND == 2:
                    dd = tl.load(scales + nc * NB + u, mask=okn, other=0.0).to(tl.float32)[:, None]
                    acc = tl.fma(p, dd * dx, acc)
                    accm = tl.fma(dd * 8.0, xs, accm)
                else:
                    sp = scales + (nc * NB + u) * 2
                    acc = tl.fma(p, tl.load(sp, mask=okn, other=0.0).to(tl.float32)[:, None] * dx, acc)
                    accm = tl.fma(-tl.load(sp + 1, mask=okn, other=0.0).to(tl.float32)[:, None], xs, accm)
    ptr = part + tl.program_id(1) * stride_ps + r[None, :] * stride_pm + n[:, None]
    tl.store(ptr, acc - accm, mask=(n < N)[:, None] & (r < T)[None, :])


def scale_planes(w: Packed) -> tuple[torch.Tensor, torch.Tensor]:
    """(scales, sub) as the kernel reads them: Q4_K's as 32-bit words (d | dmin << 16; four sub-block
    scales or minimums a word), so each is one 4-byte load that the pipeline can prefetch."""
    if w.kind == 4:
        return w.scales.view(torch.int32), w.sub.view(torch.int32)
    return w.scales, w.sub if w.sub is not None else w.scales


def chunks(kind: int, k: int) -> int:
    """128 bytes of a weight row's codes (128 values of Q8_0, 256 of the 4-bit types), the last one
    maybe partial."""
    return triton.cdiv(k, 128 if kind == 1 else 256)


def plan(kind: int, n: int, k: int, target: int = TARGET, bn: int = BN_FORCE) -> tuple[int, int, int]:
    """(BN, S, chunks per split): a function of the weight's type and shape only."""
    bn = bn or 64
    c = chunks(kind, k)
    s = max(1, min(c, round(target / triton.cdiv(n, bn))))
    cps = triton.cdiv(c, s)
    return bn, triton.cdiv(c, cps), cps


def matmul_parts(x: torch.Tensor, w: Packed, n_real: torch.Tensor, xq=None, target: int = TARGET,
                 bn: int = BN_FORCE, warps: int = WARPS, stages: int = STAGES) -> tuple[torch.Tensor, int]:
    """x [T, K] (T <= 16) @ W.T for the first n_real rows (an int32 device scalar), zeros for the others:
    (part [S, T, N], S). xq: x already quantized (dp4a_gemv.buffers). target/bn/warps/stages: for
    measuring only (a run must use one setting everywhere)."""
    t = x.shape[0]
    if w.kind > 4:
        raise ValueError(f"the int8 tensor-core decode kernel takes Q4_0, Q4_1, Q4_K and Q8_0 in GGUF order, not "
                         f"{w.qtype.name}{' in the tensor-core order' if w.mma else ''}")
    if t > RT:
        raise ValueError(f"the int8 tensor-core decode kernel takes up to {RT} rows, got {t}")
    bn, s, cps = plan(w.kind, w.n, w.k, target, bn)
    part = torch.empty((s, t, w.n), dtype=torch.float32, device=x.device)
    if t == 0:
        return part, s
    xq, xds = xq if xq is not None else quantize(x)
    _imma_kernel[(triton.cdiv(w.n, bn), s)](
        xq, xds, n_real, t, w.codes, *scale_planes(w), part, w.n, w.k,
        part.stride(0), part.stride(1), cps, KIND=w.kind, BN=bn, RT=RT, INTERP=INTERPRET, NS=stages,
        num_warps=warps, num_stages=stages, **NO_FUSION)
    return part, s
