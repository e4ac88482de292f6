"""A prompt tile's routed experts on the GPU: the (row, expert) pairs grouped by expert and multiplied on
tensor cores, with no host round trip (issue 12, item 3).

The tile's pairs (row r's j-th expert is pair r * k + j) are sorted by expert on the device (a stable
sort: within an expert, pairs keep their order) and cut into blocks of GROUP_BM pairs of one expert; a block
table (expert, first pair, pairs) comes from cumulative counts and a search, all device ops of fixed
shape. Then, as for the decode tile (engine.kernels.moe_gemv), three launches: gate|up, act(gate) * up
(engine.kernels.fused.glu), down; each a program per (block, BN weight rows) running the prompt kernel's
256-value chunks (engine.kernels.stream_matmul._chunk_dot: dequantized weights on the tensor cores,
float32 sums) over the block's gathered x rows and its expert's rows of the repacked stack. A pair's
product depends only on its x row and its expert, whatever pairs share its block (as a row of the dense
prompt kernel's tensor-core tile), so prompt rows are row-invariant as dense ones. Rows at or past the real
count (a device scalar) join no block. The sum of a row's experts in its top-k order is moe_gemv's.
Importing this module imports triton.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from engine.kernels import fused
from engine.kernels.moe_gemv import combine, expert_planes, planes
from engine.kernels.stream_matmul import _chunk_dot

# pairs per block (one expert's rows share its dequantized weights on the tensor cores), weight rows per
# program, warps and pipeline stages; fixed for the run, so every pair is computed by the same code.
# H200, qwen3-30b-a3b layer 0, 512-row prompt tile (tests/gpu/bench_moe.py --sweep-grouped, 2026-12-04),
# gate|up + down: BM 32 BN 32 1,018 + 501 us (the old default), BM 32 BN 64 646 + 297, BM 64 BN 64 574 + 282,
# BM 64 BN 128 (8 warps) 595 + 276, BM 16 BN 64 913 + 381; 8 warps or 1 stage slower at every size. Then
# (run_long_decode.sh) BM 64 BN 64 at 2 stages 420 + 192 (Triton's default 3: 574 + 281; 4: 583 + 287),
# BN 128 spills, BM 128 slower
GROUP_BM = int(os.environ.get("STRATA_MOE_BM", "64"))
BN = int(os.environ.get("STRATA_MOE_BN", "64"))
WARPS = int(os.environ.get("STRATA_MOE_GROUP_WARPS", "4"))
STAGES = int(os.environ.get("STRATA_MOE_GROUP_STAGES", "2"))    # 0: Triton's default software pipelining


@triton.jit
def block_rows(b, i, order_ptr, blk_first_ptr, blk_rows_ptr, NPA, PER_PAIR: tl.constexpr, TOPK: tl.constexpr,
               BN: tl.constexpr, BM: tl.constexpr):
    """Program (block b, i)'s (in_b: stack b's weight rows, n: its weight rows in the stack, m_ok: its pairs
    that are real, pair: their indices, m: their x rows (int64))."""
    in_b = i >= NPA
    n = (i - tl.where(in_b, NPA, 0)) * BN + tl.arange(0, BN)
    q = tl.arange(0, BM)
    m_ok = q < tl.load(blk_rows_ptr + b)
    pair = tl.load(order_ptr + tl.load(blk_first_ptr + b) + q, mask=m_ok, other=0)
    if PER_PAIR:
        m = pair.to(tl.int64)
    else:
        m = (pair // TOPK).to(tl.int64)
    return in_b, n, m_ok, pair, m


@triton.jit
def _group_kernel(x_ptr, stride_xm, PER_PAIR: tl.constexpr, TOPK: tl.constexpr, order_ptr, blk_e_ptr,
                  blk_first_ptr, blk_rows_ptr, E, codes_a, scales_a, sub_a, codes_b, scales_b, sub_b, NPA, NE,
                  part, stride_pm, K, cw, sw, bw, KIND: tl.constexpr, BN: tl.constexpr, IEEE: tl.constexpr,
                  BM: tl.constexpr, TAB: tl.constexpr):
    b = tl.program_id(0)
    i = tl.program_id(1)
    e = tl.load(blk_e_ptr + b)
    if e < E:
        in_b, n, m_ok, pair, m = block_rows(b, i, order_ptr, blk_first_ptr, blk_rows_ptr, NPA, PER_PAIR, TOPK, BN, BM)
        n_ok = n < NE
        codes, scales, sub = expert_planes(in_b, e.to(tl.int64) * NE, codes_a, scales_a, sub_a, codes_b, scales_b,
                                           sub_b, cw, sw, bw)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for c in range(0, tl.cdiv(K, 256)):
            acc = _chunk_dot(acc, x_ptr, stride_xm, m, m_ok, codes, scales, sub, n, n_ok, c, K,
                             KIND, BN, IEEE, TAB)
        col = n + tl.where(in_b, NE, 0)
        out = part + pair.to(tl.int64)[:, None] * stride_pm + col[None, :]
        tl.store(out, acc, mask=m_ok[:, None] & n_ok[None, :])


def blocks(sel: torch.Tensor, n_experts: int, n_real: torch.Tensor | None, bm: int):
    """(order, expert, first, rows) of the blocks of bm pairs of one expert: `order` the pair indices
    sorted by expert (stable); block b holds order[first[b]: first[b] + rows[b]] of expert[b];
    expert[b] == n_experts marks an unused block (there are P / bm + n_experts of them in all)."""
    t, topk = sel.shape
    p = t * topk
    flat = sel.reshape(-1)
    if n_real is not None:                            # pairs of padding rows: an expert nobody has
        flat = torch.where(torch.arange(p, device=sel.device) // topk < n_real.reshape(()), flat, n_experts)
    order = torch.sort(flat, stable=True).indices
    counts = torch.zeros(n_experts + 1, dtype=torch.long, device=sel.device)
    counts.scatter_add_(0, flat, torch.ones_like(flat))
    counts = counts[:n_experts]
    starts = torch.cumsum(counts, 0) - counts
    nb = (counts + bm - 1) // bm
    bend = torch.cumsum(nb, 0)
    b = torch.arange(triton.cdiv(p, bm) + n_experts, device=sel.device)
    e = torch.searchsorted(bend, b, right=True)        # n_experts past the last used block
    ec = e.clamp(max=n_experts - 1)
    k = b - (bend[ec] - nb[ec])                       # the block's index within its expert
    first = starts[ec] + bm * k
    rows = (counts[ec] - bm * k).clamp(0, bm)
    return order, e, first, rows


def launch_args(tab, n_experts: int, a, b, ne: int, part: torch.Tensor, bn: int) -> tuple[tuple, tuple]:
    """(grid, arguments) a grouped kernel takes after its x and before its constexprs: the block table,
    stacks a (and b) and the output, for BN = bn weight rows a program."""
    order, e, first, rows = tab
    npa = triton.cdiv(ne, bn)
    ca, sa, ba, cw, sw, bw = planes(a, False)
    cb, sb, bb = planes(b if b is not None else a, False)[:3]
    return (e.shape[0], npa * (2 if b is not None else 1)), \
        (order, e, first, rows, n_experts, ca, sa, ba, cb, sb, bb, npa, ne, part, part.stride(0), a.k, cw, sw, bw)


def _grouped(x: torch.Tensor, per_pair: bool, topk: int, tab, n_experts: int, a, b, ne: int,
             part: torch.Tensor, bm: int = 0, bn: int = 0, warps: int = 0, stages: int = -1):
    """One grouped launch over the block table `tab` (made with bm pairs a block); bm, bn, warps and
    stages default to the module's configuration (tests/gpu/bench_moe.py sweeps them)."""
    bn = bn or BN
    grid, args = launch_args(tab, n_experts, a, b, ne, part, bn)
    stages = STAGES if stages < 0 else stages
    return _group_kernel[grid](
        x, x.stride(0), per_pair, topk, *args, KIND=a.kind, BN=bn, IEEE=x.dtype == torch.float32, BM=bm or GROUP_BM,
        TAB=a.table, num_warps=warps or WARPS, **({"num_stages": stages} if stages else {}))


def routed(w: torch.Tensor, sel: torch.Tensor, lw, h: torch.Tensor, n_real=None,
           residual: torch.Tensor | None = None) -> torch.Tensor:
    """moe_gemv.routed's function for prompt tiles (any row count): [T, D] float32. With
    STRATA_MOE_PROMPT_Q8=1, on int8 tensor cores where the stacks' types allow (engine.kernels.moe_grouped_q8)."""
    from engine.kernels import moe_grouped_q8

    if moe_grouped_q8.ON and moe_grouped_q8.supports(lw):
        return moe_grouped_q8.routed(w, sel, lw, h, n_real, residual)
    t, d = h.shape
    topk = sel.shape[1]
    ne_all, ff = lw.gate_exps.shape[0], lw.gate_exps.shape[1]
    h = h.contiguous()
    tab = blocks(sel, ne_all, n_real, GROUP_BM)
    # rows of pairs in no block (those of rows past the count) are never written: act * up makes garbage
    # of them that no block gathers, and the sum reads only real rows' pairs
    gu = torch.empty((t * topk, 2 * ff), dtype=torch.float32, device=h.device)
    _grouped(h, False, topk, tab, ne_all, lw.gate_exps.packed, lw.up_exps.packed, ff, gu)
    g = fused.glu(gu[None], 1, ff, False, h.dtype)
    y = torch.empty((t * topk, d), dtype=torch.float32, device=h.device)
    _grouped(g, True, topk, tab, ne_all, lw.down_exps.packed, None, d, y)
    return combine(y, w, t, d, topk, n_real, residual)
