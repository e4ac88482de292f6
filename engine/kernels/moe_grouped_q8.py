"""A prompt tile's routed experts on int8 tensor cores: engine.kernels.moe_grouped's blocks of pairs of one
expert, with x rounded to int8 per 32 values (as the decode rows' int8 kernel rounds it, and as llama.cpp's
MMQ does) and the weights' codes fed to the MMA as small integers, not dequantized to floats.

Why: GLM-4.5-Air's 512-row prompt tile spent 180.7 of 213.3 ms in moe_grouped's kernel (one H100,
2026-12-07): about 32 pairs an expert, so each expert's weights are dequantized in float (IQ4 codes each
through a select tree) for few rows. Here a 32-value block of a weight row is its int8 codes (Q8_0-style
types as they are, Q4_K nibbles by a mask and a shift, IQ4 codes by byte permutes, four a word), one int8
MMA gives the block's exact int32 dot products with the pairs' x blocks, and each (pair, weight row) adds
them up scaled in float32, block after block in K order:

    acc += (dx * dw) * p  (- mw * sx for Q4_K's minimums, + for Q5_K / Q5_1's; Q6_K / Q3_K: a scale a half)

with dx, sx = d and d * sum(q) of the pair's x block. The integers are exact whatever the MMA's tiling, and
the float arithmetic is elementwise in a fixed order, so a pair's result depends only on its x row and its
expert: prompt rows stay row-invariant. Not bit-equal to moe_grouped (x rounded to int8 here). Types:
kinds 1 (Q8_0, Q5_0, the run-int8 IQ types), 4 (Q4_K), 5 and 6 (IQ4_NL, IQ4_XS), 8 (Q6_K, Q3_K), 9 (Q5_K,
Q5_1); other stacks run moe_grouped. Off (STRATA_MOE_PROMPT_Q8=1 turns it on): slower than moe_grouped
with IQ4 values by permutes (H200, 2026-12-07, tests/gpu/run_iq4_prmt.sh: GLM-4.5-Air's 512-row prompt tile
4,857 against 3,025 us; one stream's 512-token prompt 1,980 against 2,802 tok/s). Q6_K's 6-bit planes (kind
10, the default) run moe_grouped.
Importing this module imports triton.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from engine.kernels import dp4a_gemv, fused
from engine.kernels.dp4a_gemv import INTERPRET, NO_FUSION
from engine.kernels.iq4 import kvalues8
from engine.kernels.moe_gemv import combine, expert_planes
from engine.kernels.moe_grouped import block_rows, blocks, launch_args

KINDS = frozenset({1, 4, 5, 6, 8, 9})
ON = os.environ.get("STRATA_MOE_PROMPT_Q8", "0") == "1"
BM = int(os.environ.get("STRATA_MOE_Q8_BM", "64"))          # pairs a block
BN = int(os.environ.get("STRATA_MOE_Q8_BN", "64"))          # weight rows a program
WARPS = int(os.environ.get("STRATA_MOE_Q8_WARPS", "4"))
STAGES = int(os.environ.get("STRATA_MOE_Q8_STAGES", "2"))


@triton.jit
def _iq4_block(words, nn, n_ok, kb, K, INTERP: tl.constexpr):
    """IQ4 codes of weight rows nn's 32-value run kb (packed.iq4_words: word w holds values 4w..4w+3 and
    4w+16..4w+19) -> their int8 values [BN, 32] in value order."""
    w4 = tl.arange(0, 4)[None, :]
    wd = tl.load(words + nn * (K // 8) + kb * 4 + w4, mask=n_ok, other=0)           # [BN, 4]
    va, vb = kvalues8(wd, INTERP)
    sh = 24 - 8 * tl.arange(0, 4)[None, None, :]
    lo = (va[:, :, None] << sh) >> 24                                                 # [BN, 4 words, 4 bytes]
    hi = (vb[:, :, None] << sh) >> 24
    return tl.reshape(tl.permute(tl.join(lo, hi), (0, 3, 1, 2)), (nn.shape[0], 32)).to(tl.int8)


@triton.jit
def _w_block(codes, scales, sub, nn, n_ok, kb, K, KIND: tl.constexpr, INTERP: tl.constexpr):
    """Weight rows nn [BN, 1]'s 32-value block kb: (w int8 [BN, 32], d [BN, 1], e [BN, 1]): e is the
    second half's scale (kinds 8) or the minimum's factor (4: dmin * m, 9: m), else unused."""
    j = tl.arange(0, 32)[None, :]
    e = tl.zeros(nn.shape, dtype=tl.float32)
    if KIND == 4:                       # Q4_K: 64-value groups of 32 bytes, low nibbles first
        sb = nn * (K // 256) + kb // 8
        byte = tl.load(codes + nn * (K // 2) + (kb // 8) * 128 + ((kb % 8) // 2) * 32 + j, mask=n_ok, other=0)
        w = ((byte.to(tl.int32) >> (4 * (kb % 2))) & 0xF).to(tl.int8)
        d = tl.load(scales + sb * 2, mask=n_ok, other=0.0).to(tl.float32)
        dmin = tl.load(scales + sb * 2 + 1, mask=n_ok, other=0.0).to(tl.float32)
        d = d * tl.load(sub + sb * 16 + kb % 8, mask=n_ok, other=0).to(tl.float32)
        e = dmin * tl.load(sub + sb * 16 + 8 + kb % 8, mask=n_ok, other=0).to(tl.float32)
    elif KIND == 5 or KIND == 6:
        w = _iq4_block(codes.to(tl.pointer_type(tl.int32), bitcast=True), nn, n_ok, kb, K, INTERP)
        if KIND == 5:
            d = tl.load(scales + nn * (K // 32) + kb, mask=n_ok, other=0.0).to(tl.float32)
        else:
            sb = nn * (K // 256) + kb // 8
            d = tl.load(scales + sb, mask=n_ok, other=0.0).to(tl.float32)
            d = d * tl.load(sub + sb * 8 + kb % 8, mask=n_ok, other=0).to(tl.float32)
    else:                               # int8 codes
        w = tl.load(codes + nn * K + kb * 32 + j, mask=n_ok, other=0)
        if KIND == 8:
            d = tl.load(scales + nn * (K // 16) + 2 * kb, mask=n_ok, other=0.0)
            e = tl.load(scales + nn * (K // 16) + 2 * kb + 1, mask=n_ok, other=0.0)
        elif KIND == 9:
            d = tl.load(scales + (nn * (K // 32) + kb) * 2, mask=n_ok, other=0.0)
            e = tl.load(scales + (nn * (K // 32) + kb) * 2 + 1, mask=n_ok, other=0.0)
        else:
            d = tl.load(scales + nn * (K // 32) + kb, mask=n_ok, other=0.0).to(tl.float32)
    return w, d, e


@triton.jit
def _q8_group_kernel(xq, xds, PER_PAIR: tl.constexpr, TOPK: tl.constexpr, order_ptr, blk_e_ptr, blk_first_ptr,
                     blk_rows_ptr, E, codes_a, scales_a, sub_a, codes_b, scales_b, sub_b, NPA, NE, part, stride_pm,
                     K, cw, sw, bw, KIND: tl.constexpr, BN: tl.constexpr, BM: tl.constexpr, INTERP: tl.constexpr):
    """Program (block b, i): block b's pairs times weight rows [BN i, BN i + BN) of stack a (i < NPA) or b."""
    b = tl.program_id(0)
    i = tl.program_id(1)
    e = tl.load(blk_e_ptr + b)
    if e < E:
        in_b, n, m_ok, pair, m = block_rows(b, i, order_ptr, blk_first_ptr, blk_rows_ptr, NPA, PER_PAIR, TOPK, BN, BM)
        n_ok = (n < NE)[:, None]
        nn = tl.minimum(n, NE - 1).to(tl.int64)[:, None]
        codes, scales, sub = expert_planes(in_b, e.to(tl.int64) * NE, codes_a, scales_a, sub_a, codes_b, scales_b,
                                           sub_b, cw, sw, bw)
        jx = tl.arange(0, 32)[None, :]
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kb in range(0, K // 32):
            x = tl.load(xq + m[:, None] * K + kb * 32 + jx, mask=m_ok[:, None], other=0)           # [BM, 32]
            dx = tl.load(xds + (m * (K // 32) + kb) * 2, mask=m_ok, other=0.0)[:, None]
            w, d, ew = _w_block(codes, scales, sub, nn, n_ok, kb, K, KIND, INTERP)
            wt = tl.trans(w)
            d = tl.trans(d)                                                                         # [1, BN]
            ew = tl.trans(ew)
            if KIND == 8:               # a scale a 16-value half: each half's dot alone
                p = tl.dot(tl.where(jx < 16, x, 0).to(tl.int8), wt, out_dtype=tl.int32).to(tl.float32)
                p2 = tl.dot(tl.where(jx >= 16, x, 0).to(tl.int8), wt, out_dtype=tl.int32).to(tl.float32)
                acc = tl.fma(dx, tl.fma(ew, p2, d * p), acc)
            else:
                p = tl.dot(x, wt, out_dtype=tl.int32).to(tl.float32)
                acc = tl.fma(dx * d, p, acc)
                if KIND == 4 or KIND == 9:
                    sx = tl.load(xds + (m * (K // 32) + kb) * 2 + 1, mask=m_ok, other=0.0)[:, None]
                    if KIND == 4:
                        acc = tl.fma(-ew, sx, acc)
                    else:
                        acc = tl.fma(ew, sx, acc)
        col = n + tl.where(in_b, NE, 0)
        out = part + pair.to(tl.int64)[:, None] * stride_pm + col[None, :]
        tl.store(out, acc, mask=m_ok[:, None] & (n < NE)[None, :])


def supports(lw) -> bool:
    """Whether a block's three expert stacks are of kinds this kernel reads (all repacked; kind 6 with IQ4's
    table only: its lookup is IQ4's)."""
    return all(s.packed is not None and s.packed.kind in KINDS and s.packed.k % 32 == 0 and not s.packed.table
               for s in (lw.gate_exps, lw.up_exps, lw.down_exps))


def _grouped(xq, per_pair: bool, topk: int, tab, n_experts: int, a, b, ne: int, part: torch.Tensor,
             bm: int = 0, bn: int = 0, warps: int = 0, stages: int = -1):
    """One launch over the block table `tab` (made with bm pairs a block): part[pair, :] = the pair's int8
    x row (xq: (q, ds) of dp4a_gemv.quantize) times its expert's rows of a (then of b)."""
    bn = bn or BN
    grid, args = launch_args(tab, n_experts, a, b, ne, part, bn)
    stages = STAGES if stages < 0 else stages
    return _q8_group_kernel[grid](
        xq[0], xq[1], per_pair, topk, *args, KIND=a.kind, BN=bn, BM=bm or BM, INTERP=INTERPRET,
        num_warps=warps or WARPS, **NO_FUSION, **({"num_stages": stages} if stages else {}))


def routed(w: torch.Tensor, sel: torch.Tensor, lw, h: torch.Tensor, n_real=None,
           residual: torch.Tensor | None = None) -> torch.Tensor:
    """moe_grouped.routed's function with int8 x and int8 MMA: [T, D] float32."""
    t, d = h.shape
    topk = sel.shape[1]
    ne_all, ff = lw.gate_exps.shape[0], lw.gate_exps.shape[1]
    tab = blocks(sel, ne_all, n_real, BM)
    gu = torch.empty((t * topk, 2 * ff), dtype=torch.float32, device=h.device)
    _grouped(dp4a_gemv.quantize(h.contiguous()), False, topk, tab, ne_all, lw.gate_exps.packed, lw.up_exps.packed,
             ff, gu)
    gq = dp4a_gemv.buffers(t * topk, ff, h.device)
    fused.glu(gu[None], 1, ff, False, h.dtype, gq)
    y = torch.empty((t * topk, d), dtype=torch.float32, device=h.device)
    _grouped(gq, True, topk, tab, ne_all, lw.down_exps.packed, None, d, y)
    return combine(y, w, t, d, topk, n_real, residual)
