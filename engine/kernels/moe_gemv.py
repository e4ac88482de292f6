"""A decode tile's routed experts on the GPU, with no host round trip (issue 12).

The experts of a row are picked on the device in two launches (`route`: the router's float32 logits,
then per row engine.block.route's scores, top-k and weights), then three launches run every
(row, expert) pair of the tile's real rows:

- gate|up: a program per (BN weight rows, pair) reads the pair's expert id from the device and runs
  the int8 decode pass of engine.kernels.dp4a_gemv over that expert's rows of the repacked stack
  (the stacks are [n_expert * rows, K] planes, expert e's rows in turn); the first programs read the
  gate stack, the rest the up stack, so one launch gives a pair's gate and up.
- act(gate) * up (engine.kernels.fused.glu) on the pair rows, written with its int8 form.
- down: the same pass, each pair on its own row of that.

then `_combine_kernel` sums a row's experts in its own top-k order, weighted, in float32 (onto the
residual stream where the block adds nothing else). Pairs of rows at or past the real count read no
expert and give zeros. A pair reads only its row's x and its own expert, by the same code whatever the
other rows are: the tile is row-invariant. A pair's product is the dense decode kernel's pass on that
expert (more weight rows per program: PAIR_NR). The tile's work needs no host sync, so MoE stages
replay decode tiles as CUDA graphs.
Importing this module imports triton.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from engine.kernels import dp4a_gemv, fused, pdl
from engine.kernels.dp4a_gemv import INTERPRET, NO_FUSION, WARPS, _pass, plan
from engine.kernels.stream_matmul import all_rows


@triton.jit
def expert_planes(in_b, first, codes_a, scales_a, sub_a, codes_b, scales_b, sub_b, cw, sw, bw):
    """(codes, scales, sub) pointers at weight row `first` of stack b where in_b, else of stack a; cw, sw,
    bw: each plane's elements per weight row."""
    if in_b:
        codes = codes_b + first * cw
        scales = scales_b + first * sw
        sub = sub_b + first * bw
    else:
        codes = codes_a + first * cw
        scales = scales_a + first * sw
        sub = sub_a + first * bw
    return codes, scales, sub


@triton.jit
def _pair_kernel(xq, xds, PER_PAIR: tl.constexpr, nreal_ptr, T, sel_ptr, TOPK: tl.constexpr,
                 codes_a, scales_a, sub_a, codes_b, scales_b, sub_b, NPA, NE, part, K, stride_pm, cw, sw, bw,
                 KIND: tl.constexpr, BN: tl.constexpr, L: tl.constexpr, EVEN: tl.constexpr,
                 INTERP: tl.constexpr, XS: tl.constexpr, PDL: tl.constexpr, TAB: tl.constexpr):
    """Program (i, pair): weight rows [W i, W i + W) (W = BN * XS: XS weight rows per x load) of stack a
    (i < NPA) or of stack b (the rest) for pair = r * TOPK + j, expert sel[r, j], stored at part[pair, col]
    (b's columns after a's NE)."""
    pdl.enter(PDL)
    i = tl.program_id(0)
    pair = tl.program_id(1)
    r = pair // TOPK
    M = tl.minimum(tl.load(nreal_ptr), T)
    e = tl.load(sel_ptr + pair).to(tl.int64) * NE            # the expert's first weight row (read beside M:
    in_b = i >= NPA                                          # sel is written for every row of the tile)
    n_loc = (i - tl.where(in_b, NPA, 0)) * (BN * XS) + tl.arange(0, BN)
    out = part + pair.to(tl.int64) * stride_pm + tl.where(in_b, NE, 0)
    if r < M:
        codes, scales, sub = expert_planes(in_b, e, codes_a, scales_a, sub_a, codes_b, scales_b, sub_b, cw, sw, bw)
        if PER_PAIR:
            row = pair.to(tl.int64)
        else:
            row = r.to(tl.int64)
        _pass(0, 1, xq + row * (K // 4), xds + row * (K // 32) * 2, codes, scales, sub, out, n_loc, NE, K,
              stride_pm, KIND, BN, L, EVEN, INTERP, 1, XS, False, 0, TAB)
    else:
        n_all = (i - tl.where(in_b, NPA, 0)) * (BN * XS) + tl.arange(0, BN * XS)
        tl.store(out + n_all, tl.zeros((BN * XS,), dtype=tl.float32), mask=n_all < NE)


@triton.jit
def _combine_kernel(y, stride_y, w_ptr, res, out, D, nreal_ptr, T, TOPK: tl.constexpr, BLOCK: tl.constexpr,
                    RES: tl.constexpr, PDL: tl.constexpr):
    pdl.enter(PDL)
    r = tl.program_id(0)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = c < D
    M = tl.minimum(tl.load(nreal_ptr), T)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    if r < M:
        for j in tl.static_range(TOPK):
            wj = tl.load(w_ptr + r * TOPK + j)
            acc = tl.fma(wj, tl.load(y + (r * TOPK + j).to(tl.int64) * stride_y + c, mask=ok, other=0.0), acc)
    if RES:
        acc = tl.load(res + r.to(tl.int64) * D + c, mask=ok, other=0.0) + acc
    tl.store(out + r.to(tl.int64) * D + c, acc, mask=ok)


@triton.jit
def _logits_kernel(h_ptr, w_ptr, out_ptr, nreal_ptr, T, E, D, BK: tl.constexpr, PDL: tl.constexpr):
    """Router logit of expert e for each real row: float32 sums over D in BK steps, a fixed order; the
    rows one after another by the same code. PDL: the expert's router row goes to L2 before the wait."""
    e = tl.program_id(0).to(tl.int64)
    if PDL:
        pdl.prefetch_run(w_ptr + e * D, D * (w_ptr.dtype.element_ty.primitive_bitwidth // 8), PDL)
    pdl.enter(PDL)
    M = tl.minimum(tl.load(nreal_ptr), T)
    for r in range(0, M):
        acc = tl.zeros((BK,), dtype=tl.float32)
        for k0 in range(0, D, BK):
            k = k0 + tl.arange(0, BK)
            x = tl.load(h_ptr + r * D + k, mask=k < D, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + e * D + k, mask=k < D, other=0.0).to(tl.float32)
            acc = tl.fma(w, x, acc)
        tl.store(out_ptr + r * E + e, tl.sum(acc, axis=0))


@triton.jit
def _topk_kernel(logit_ptr, bias_ptr, w_ptr, sel_ptr, nreal_ptr, T, E, scale, TOPK: tl.constexpr,
                 KP: tl.constexpr, BE: tl.constexpr, SIGMOID: tl.constexpr, NORM: tl.constexpr,
                 PDL: tl.constexpr):
    """Row r's experts and weights from its logits: softmax scores, or sigmoid scores picked with the
    bias added; the k largest in order (ties: the lower expert), renormalised where NORM, scaled."""
    pdl.enter(PDL)
    r = tl.program_id(0)
    e = tl.arange(0, BE)
    ok = e < E
    j = tl.arange(0, KP)
    if r < tl.minimum(tl.load(nreal_ptr), T):
        lg = tl.load(logit_ptr + r * E + e, mask=ok, other=float("-inf"))
        if SIGMOID:
            s = 1.0 / (1.0 + tl.exp(-lg))
            key = tl.where(ok, s + tl.load(bias_ptr + e, mask=ok, other=0.0), float("-inf"))
        else:
            p = tl.exp(lg - tl.max(lg, axis=0))
            s = p / tl.sum(p, axis=0)
            key = tl.where(ok, s, float("-inf"))
        ws = tl.zeros((KP,), dtype=tl.float32)
        ids = tl.zeros((KP,), dtype=tl.int32)
        for t in tl.static_range(TOPK):
            best = tl.max(key, axis=0)
            pick = tl.min(tl.where(key == best, e, BE), axis=0)
            ws = tl.where(j == t, tl.sum(tl.where(e == pick, s, 0.0), axis=0), ws)
            ids = tl.where(j == t, pick, ids)
            key = tl.where(e == pick, float("-inf"), key)
        if NORM:
            ws = ws / tl.sum(ws, axis=0)
        tl.store(w_ptr + r * TOPK + j, ws * scale, mask=j < TOPK)
        tl.store(sel_ptr + r * TOPK + j, ids.to(tl.int64), mask=j < TOPK)
    else:
        tl.store(w_ptr + r * TOPK + j, tl.zeros((KP,), dtype=tl.float32), mask=j < TOPK)
        tl.store(sel_ptr + r * TOPK + j, tl.zeros((KP,), dtype=tl.int64), mask=j < TOPK)


def route(lw, cfg, h: torch.Tensor, n_real=None) -> tuple[torch.Tensor, torch.Tensor]:
    """engine.block.route's function in two launches for a decode tile: (w float32 [T, k], sel int64
    [T, k]); rows at or past the device count n_real get expert 0 at weight 0."""
    t, d = h.shape
    ne, topk = lw.router.shape[0], cfg.n_expert_used
    n_real = all_rows(n_real, t, h.device)
    logits = torch.empty((t, ne), dtype=torch.float32, device=h.device)
    _logits_kernel[(ne,)](h, lw.router.dense_weight(), logits, n_real, t, ne, d,
                          BK=min(2048, triton.next_power_of_2(d)), num_warps=4, **NO_FUSION,
                          **pdl.launch(h.device))
    w = torch.empty((t, topk), dtype=torch.float32, device=h.device)
    sel = torch.empty((t, topk), dtype=torch.int64, device=h.device)
    sigmoid = cfg.gating == "sigmoid"
    _topk_kernel[(t,)](logits, lw.exp_probs_b if sigmoid else logits, w, sel, n_real, t, ne,
                       float(cfg.expert_weights_scale), TOPK=topk, KP=triton.next_power_of_2(topk),
                       BE=triton.next_power_of_2(ne), SIGMOID=sigmoid, NORM=bool(cfg.expert_weights_norm),
                       num_warps=1 if ne <= 256 else 4, **pdl.launch(h.device))
    return w, sel


def supports(lw) -> bool:
    """Whether a block's routed experts can run here: all three stacks repacked, gate and up alike."""
    stacks = (lw.gate_exps, lw.up_exps, lw.down_exps)
    return lw.router is not None and all(s.packed is not None for s in stacks) \
        and lw.gate_exps.qtype == lw.up_exps.qtype and lw.gate_exps.shape == lw.up_exps.shape


def planes(p, words: bool) -> tuple:
    """(codes, scales, sub) of a repacked stack and their elements per weight row (cw, sw, bw), for
    expert_planes; words: the codes as int32 words (the int8 pass reads four bytes at a time)."""
    sub = p.sub if p.sub is not None else p.scales
    codes = p.codes.view(torch.int32) if words else p.codes
    return codes, p.scales, sub, codes.shape[1], p.scales[0].numel(), sub[0].numel()


# weight rows per thread and warps per program of the pair kernel: fixed, so every pair is computed by
# the same code. H200, qwen3-30b-a3b layer (tests/gpu/bench_moe.py): 1 row gate|up 15.6 us + down 8.6 us
# at nr 4, 4 warps (932 / 844 GB/s) against 33.6 + 23.1 at nr 1 (the dense kernel's); 8 rows 74.7 + 31.9
# against 56.9 + 37.6
PAIR_NR = int(os.environ.get("STRATA_MOE_NR", "16" if INTERPRET else "4"))
PAIR_WARPS = int(os.environ.get("STRATA_MOE_WARPS", str(WARPS)))
# weight rows per x load (engine.kernels.dp4a_gemv._pass; the same bits at 1 or 2). H200, 2026-12-02
# (bench_moe.py, nr 4, 4 warps, xs 1 -> 2): 1 row gate|up 15.5 -> 12.8 us, down 9.4 -> 6.6; 8 rows 72.5 ->
# 68.6, 34.5 -> 32.2; strata bench on the qwen3-30b-a3b shape (512-token prompt, 128 tokens): one stream
# 334.7 -> 362.3 tok/s, eight 939.0 -> 979.2
PAIR_XS = int(os.environ.get("STRATA_MOE_XS", "2"))


def _pairs(xq, per_pair: bool, n_real, t: int, sel: torch.Tensor, a, b, ne: int, k: int,
           part: torch.Tensor, nr: int | None = None, warps: int | None = None, xs: int | None = None):
    """part[pair, :] = x[row] @ expert(sel[pair]) rows of a (then of b where given): see _pair_kernel.
    Returns the launched kernel (its n_regs, n_spills)."""
    nr, warps, xs = nr or PAIR_NR, warps or PAIR_WARPS, xs or PAIR_XS
    bn, lanes = plan(a.kind, ne, k, warps, nr)
    npa = triton.cdiv(ne, bn * xs)
    ca, sa, ba, cw, sw, bw = planes(a, True)
    cb, sb, bb = planes(b if b is not None else a, True)[:3]
    topk = sel.shape[1]
    return _pair_kernel[(npa * (2 if b is not None else 1), t * topk)](
        xq[0].view(torch.int32), xq[1], per_pair, n_real, t, sel, topk, ca, sa, ba, cb, sb, bb, npa, ne, part, k,
        part.stride(0), cw, sw, bw, KIND=a.kind, BN=bn, L=lanes,
        EVEN=(k // dp4a_gemv.unit_values(a.kind)) % lanes == 0, INTERP=INTERPRET, XS=xs, TAB=a.table, num_warps=warps,
        **NO_FUSION, **pdl.launch(part.device))


def routed(w: torch.Tensor, sel: torch.Tensor, lw, h: torch.Tensor, n_real=None, xq=None,
           residual: torch.Tensor | None = None) -> torch.Tensor:
    """sum_j w[r, j] * expert_{sel[r, j]}(h[r]) for the tile's rows [T, D] float32 (rows at or past the
    device count n_real hold zeros), added to residual [T, D] float32 where given. w float32 [T, k],
    sel [T, k] from `route`; xq: h's int8 form where the kernel that made h wrote it (dp4a_gemv.buffers)."""
    t, d = h.shape
    topk = sel.shape[1]
    ff = lw.gate_exps.shape[1]
    n_real = all_rows(n_real, t, h.device)
    xq = xq if xq is not None else dp4a_gemv.quantize(h)
    sel = sel.contiguous()
    gu = torch.empty((t * topk, 2 * ff), dtype=torch.float32, device=h.device)
    _pairs(xq, False, n_real, t, sel, lw.gate_exps.packed, lw.up_exps.packed, ff, d, gu)
    gq = dp4a_gemv.buffers(t * topk, ff, h.device)
    fused.glu(gu[None], 1, ff, False, h.dtype, gq)
    y = torch.empty((t * topk, d), dtype=torch.float32, device=h.device)
    _pairs(gq, True, n_real, t, sel, lw.down_exps.packed, None, d, ff, y)
    return combine(y, w, t, d, topk, n_real, residual)


def combine(y: torch.Tensor, w: torch.Tensor, t: int, d: int, topk: int, n_real=None,
            residual: torch.Tensor | None = None) -> torch.Tensor:
    """[T, D] float32: row r = (residual[r] +) sum_j w[r, j] * y[r * k + j], j in order; rows at or
    past the device count n_real: zeros (or the residual)."""
    n_real = all_rows(n_real, t, y.device)
    out = torch.empty((t, d), dtype=torch.float32, device=y.device)
    block = min(1024, triton.next_power_of_2(d))
    res = residual.contiguous() if residual is not None else out
    _combine_kernel[(t, triton.cdiv(d, block))](y, y.stride(0), w.float().contiguous(), res, out, d, n_real, t,
                                               TOPK=topk, BLOCK=block, RES=residual is not None, num_warps=4,
                                               **NO_FUSION, **pdl.launch(y.device))
    return out
