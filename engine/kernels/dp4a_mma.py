"""Decode tiles of several rows on int8 tensor cores, giving the int8 decode kernel's bits.

Why: engine.kernels.dp4a_gemv computes the real rows of a tile one after another, so eight rows cost
several times one (H200, llama-3-8b shape: a decode tile's replay 2.1 ms at one row, 5.4 ms at eight),
and `--decode-kernel bf16` / `imma`, which multiply 16 rows for about the price of one, give other bits,
so they cannot serve many-row tiles while the int8 kernel serves a lone row's 1-row tile (a request's
tokens would then depend on what runs beside it).

So this kernel does the int8 kernel's arithmetic on tensor cores: a unit's integer dot products (a 32-
value block, Q4_K's 64-value group as two) are exact int32 sums whatever their order, so an int8 MMA
([BN weight rows, 32] x [32, 16 rows]) gives the very integers the int8 kernel's dp4a instructions give;
each is then scaled into its lane's float32 accumulator (lane = unit mod L, the int8 kernel's lanes) by
the int8 kernel's FMAs in the same order (fp fusion off), and the lanes are added in the order of the int8
kernel's `tl.sum` (engine.kernels.lane_tree). The program goes lane by lane, in an order that makes that
tree a plain pairwise sum, so only a few [BN, 16] tiles are live. A (weight row, x row) result is the
int8 kernel's, bit for bit: tests/engine/test_dp4a_mma.py under the interpreter and on a GPU.

Types: Q8_0 (and the IQ types stored as it), Q4_0, Q4_1, Q4_K; the IQ4 types stay on the int8 kernel.
Importing this module imports triton.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from engine.kernels import dp4a_gemv, lane_tree, pdl
from engine.kernels.dp4a_gemv import INTERPRET, NO_FUSION
from engine.kernels.packed import Packed

RT = 16                                             # x rows a tile: the MMA's N
KINDS = frozenset({1, 2, 3, 4})
# weight rows and warps a program (sm_90 SASS, triton 3.6: 64 rows on 4 warps spill 312 bytes a thread at
# 255 registers; on 8 warps 213 registers, none; its MMAs are Hopper wgmma, IGMMA 64x8x32 with x through
# shared memory and a barrier each, and the Q4_K sub-block bytes single-byte loads: where to look first)
BN = int(os.environ.get("STRATA_DMMA_BN", "64"))
WARPS = int(os.environ.get("STRATA_DMMA_WARPS", "8"))
# decode tiles of two or more rows run here (STRATA_DP4A_MMA=1), a 1-row tile on the int8 kernel. Off
# until measured. Its first build (commit "The int8 decode kernel's tensor-core twin": a lane step's L
# units in one batched MMA into [L, BN, 16] accumulators, 255 registers at 8 warps) gave the int8 kernel's
# bits on the H200 (the tests and a sampled batch-test IDENTICAL with it on, 2026-12-02, QUICK=1
# tests/gpu/run_dmma.sh) but was slow: llama-3-8b gate|up 28672x4096 at 16 rows 113 us (int8 kernel 136,
# bf16 kernel 55), down 4096x14336 46 (58, 29); eight 8B streams 1,003 tok/s against 1,333. This one goes
# lane by lane (a few [BN, 16] tiles live); not yet run on a GPU.
ROWS = os.environ.get("STRATA_DP4A_MMA", "0") == "1"


@triton.jit
def _unit(acc, u, U, K, NB, codes, scales, sub, xq, xds, nw, rx, xrow_ok, KIND: tl.constexpr, BN: tl.constexpr):
    """acc [BN, RT] + unit u's share (zeros past U): the int8 kernel's integer sums by int8 MMA, then its
    scaling (dp4a_gemv.scale_unit) elementwise, on the scales it loads for the unit."""
    u = u + tl.zeros((1, 1), dtype=tl.int32)           # [1, 1]: the unit as a tensor (masks, offsets)
    uok = u < U
    xok = xrow_ok & uok                                # [1, RT]
    j32 = tl.arange(0, 32)
    jw = j32[None, :]                                  # [1, 32]
    jx = j32[:, None]                                  # [32, 1]
    dmin = tl.zeros((BN, 1), dtype=tl.float32)         # the scales a type lacks (scale_unit ignores them)
    sc_lo = tl.zeros((BN, 1), dtype=tl.int32)
    sc_hi, mn_lo, mn_hi = sc_lo, dmin, dmin
    if KIND == 4:                                      # 32 bytes: low nibbles values 0..31, high 32..63
        cw = tl.load(codes + nw * (K // 2) + u * 32 + jw, mask=uok, other=0)
        xb = xq + rx * K + u * 64 + jx
        plo = tl.dot((cw & 15).to(tl.int8), tl.load(xb, mask=xok, other=0), out_dtype=tl.int32)
        phi = tl.dot((cw >> 4).to(tl.int8), tl.load(xb + 32, mask=xok, other=0), out_dtype=tl.int32)
        sb = nw * (K // 256) + u // 4
        dd = tl.load(scales + sb * 2, mask=uok, other=0.0).to(tl.float32)
        dmin = tl.load(scales + sb * 2 + 1, mask=uok, other=0.0).to(tl.float32)
        gp = sub + sb * 16 + 2 * (u % 4)
        sc_lo = tl.load(gp, mask=uok, other=0).to(tl.int32)
        sc_hi = tl.load(gp + 1, mask=uok, other=0).to(tl.int32)
        mn_lo = tl.load(gp + 8, mask=uok, other=0).to(tl.float32)
        mn_hi = tl.load(gp + 9, mask=uok, other=0).to(tl.float32)
        dp = xds + (rx * NB + 2 * u) * 2
        d1 = tl.load(dp + 2, mask=xok, other=0.0)
        s1 = tl.load(dp + 3, mask=xok, other=0.0)
    else:
        if KIND == 1:                                  # 32 int8 codes, values in order
            w = tl.load(codes + nw * K + u * 32 + jw, mask=uok, other=0)
            xv = tl.load(xq + rx * K + u * 32 + jx, mask=xok, other=0)
        else:                                          # 16 bytes: values 0..15 low nibbles, 16..31 high
            cw = tl.load(codes + nw * (K // 2) + u * 16 + tl.arange(0, 16)[None, :], mask=uok, other=0)
            w = tl.reshape(tl.join((cw & 15).to(tl.int8), (cw >> 4).to(tl.int8)), (BN, 32))
            # the joined tile's column k holds value k // 2 + 16 * (k % 2)
            xv = tl.load(xq + rx * K + u * 32 + (jx // 2 + 16 * (jx % 2)), mask=xok, other=0)
        plo = tl.dot(w, xv, out_dtype=tl.int32)
        phi = plo
        dp = xds + (rx * NB + u) * 2
        if KIND == 3:
            sp = scales + (nw * NB + u) * 2
            dd = tl.load(sp, mask=uok, other=0.0).to(tl.float32)
            dmin = tl.load(sp + 1, mask=uok, other=0.0).to(tl.float32)
        else:
            dd = tl.load(scales + nw * NB + u, mask=uok, other=0.0).to(tl.float32)
        d1 = tl.zeros((1, 1), dtype=tl.float32)
        s1 = d1
    d0 = tl.load(dp, mask=xok, other=0.0)
    s0 = tl.load(dp + 1, mask=xok, other=0.0)
    return dp4a_gemv.scale_unit(acc, plo, phi, d0, s0, d1, s1, dd, dmin, sc_lo, sc_hi, mn_lo, mn_hi, KIND)


@triton.jit
def _lane(lane, U, L: tl.constexpr, K, NB, codes, scales, sub, xq, xds, nw, rx, xrow_ok, KIND: tl.constexpr,
          BN: tl.constexpr, RT: tl.constexpr):
    """Lane `lane`'s accumulator [BN, RT]: its units lane, lane + L, ... in order, as many steps as the
    int8 kernel's lanes take (a step past U adds the int8 kernel's zeros)."""
    acc = tl.zeros((BN, RT), dtype=tl.float32)
    for u0 in range(0, U, L):
        acc = _unit(acc, u0 + lane, U, K, NB, codes, scales, sub, xq, xds, nw, rx, xrow_ok, KIND, BN)
    return acc


@triton.jit
def _lanes_kernel(xq, xds, nreal_ptr, T, codes, scales, sub, part, N, K, stride_pm,
                  KIND: tl.constexpr, BN: tl.constexpr, L: tl.constexpr, RT: tl.constexpr, PERM: tl.constexpr,
                  PDL: tl.constexpr):
    """part[0, r, n] for weight rows n = program * BN ... and all RT rows (zeros from the real count on),
    lane by lane: the lanes visited so that the int8 kernel's tree is a plain pairwise sum of them in
    visiting order (visit t's bit i is lane bit PERM[i], the i-th combined: lane_tree.perm), each lane's
    [BN, RT] accumulator added into a stack of at most five partial sums as it completes."""
    n = tl.program_id(0) * BN + tl.arange(0, BN)
    nw = tl.minimum(n, N - 1).to(tl.int64)[:, None]    # [BN, 1]; rows past N read row N - 1, not stored
    pdl.enter(PDL)
    M = tl.minimum(tl.load(nreal_ptr), T)
    r = tl.arange(0, RT)
    rx = r[None, :]                                    # [1, RT]
    xrow_ok = rx < M
    if KIND == 4:
        U = K // 64
    else:
        U = K // 32
    NB = K // 32
    s0 = tl.zeros((BN, RT), dtype=tl.float32)
    s1 = s0
    s2 = s0
    s3 = s0
    s4 = s0
    v = s0
    for t in tl.static_range(L):
        lane = ((t & 1) << (PERM & 7)) | (((t >> 1) & 1) << ((PERM >> 3) & 7)) \
            | (((t >> 2) & 1) << ((PERM >> 6) & 7)) | (((t >> 3) & 1) << ((PERM >> 9) & 7)) \
            | (((t >> 4) & 1) << ((PERM >> 12) & 7))
        v = _lane(lane, U, L, K, NB, codes, scales, sub, xq, xds, nw, rx, xrow_ok, KIND, BN, RT)
        if t & 1:
            v = s0 + v
            if t & 2:
                v = s1 + v
                if t & 4:
                    v = s2 + v
                    if t & 8:
                        v = s3 + v
                        if t & 16:
                            v = s4 + v
                        else:
                            s4 = v
                    else:
                        s3 = v
                else:
                    s2 = v
            else:
                s1 = v
        else:
            s0 = v
    y = tl.where(rx < M, v, 0.0)
    tl.store(part + rx * stride_pm + n[:, None], y, mask=(n < N)[:, None] & (rx < T))


def supports(w: Packed) -> bool:
    """Whether w's decode rows can run here (the int8 kernel's own layout: one weight row a thread)."""
    return w.kind in KINDS and (INTERPRET or dp4a_gemv.ROWS_PER_THREAD == 1)


def matmul_parts(x: torch.Tensor, w: Packed, n_real: torch.Tensor, xq=None, bn: int = 0,
                 warps: int = 0) -> tuple[torch.Tensor, int]:
    """x [T, K] (T <= 16) @ W.T for the first n_real rows (an int32 device scalar), zeros for the other
    rows: (part [1, T, N], 1), each element the int8 kernel's bits. xq: x already quantized (by the
    kernel that made x), else quantized here. bn, warps: for measuring only."""
    t = x.shape[0]
    if t > RT:
        raise ValueError(f"the tensor-core int8 decode kernel takes up to {RT} rows, got {t}")
    part = torch.empty((1, t, w.n), dtype=torch.float32, device=x.device)
    if t == 0:
        return part, 1
    xq, xds = xq if xq is not None else dp4a_gemv.quantize(x)
    bn, warps = bn or BN, warps or WARPS
    bn_int8, lanes = dp4a_gemv.plan(w.kind, w.n, w.k, dp4a_gemv.WARPS, 1)   # the int8 kernel's lanes, order
    bits = lane_tree.order(bn_int8, lanes, dp4a_gemv.WARPS)
    _lanes_kernel[(triton.cdiv(w.n, bn),)](
        xq, xds, n_real, t, w.codes, w.scales, w.sub if w.sub is not None else w.scales, part, w.n, w.k,
        part.stride(1), KIND=w.kind, BN=bn, L=lanes, RT=RT, PERM=lane_tree.perm(bits),
        num_warps=warps, **NO_FUSION, **pdl.launch(x.device))
    return part, 1
