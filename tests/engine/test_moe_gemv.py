"""A decode tile's routed experts on the device (engine.kernels.moe_gemv).

Each (row, expert) pair must be exactly the int8 decode kernel's product on that expert alone (the same
pass, the same plan), the routed sum must be each row's experts weighted in its own top-k order, rows
past the device count must read nothing and hold zeros, and a row's result must not depend on the other
rows. Here under TRITON_INTERPRET=1; on a GPU with the real dp4a (tests/gpu/run_moe.sh).
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as QT

from engine.quant import QuantTensor
from tests.engine.test_packed import DEV, blocks, kernel_module, layouts

E, D, F, TOPK = 5, 256, 512, 2


@pytest.fixture(scope="module")
def mg():
    kernel_module("dp4a_gemv")
    return kernel_module("moe_gemv")


def stack(qt, n, k, seed) -> QuantTensor:
    block, size = GGML_QUANT_SIZES[qt]
    t = QuantTensor(blocks(qt, E * n, k, seed).to(DEV), qt, (E, n, k), torch.float32)
    assert t.repack(on_cpu=True) and t.packed.n == E * n
    return t


def experts(qt, down=None) -> SimpleNamespace:
    return SimpleNamespace(router=object(), gate_exps=stack(qt, F, D, 1), up_exps=stack(qt, F, D, 2),
                           down_exps=stack(down or qt, D, F, 3))


def packed_kind(qt, own_bits: bool) -> int:
    """The kind a stack of this type packs to with the planes and table codes on (own_bits) or off."""
    import engine.kernels.packed as packed

    if own_bits and qt in packed.TABLE_TYPES:
        return 14 if qt in packed.RUN16_INT8_TYPES else 6
    return packed.PLANE_KINDS[qt] if own_bits else packed.KIND[qt]


def tile_inputs(t: int, seed: int):
    """A tile's rows h [t, D], their experts sel [t, TOPK] (distinct, random order) and weights w."""
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(t, D, generator=gen).to(DEV)
    sel = torch.stack([torch.randperm(E, generator=gen)[:TOPK] for _ in range(t)]).to(DEV)
    w = torch.softmax(torch.randn(t, TOPK, generator=gen), -1).to(DEV)
    return h, sel, w, gen


def reference(dg, fused, lw, h, w, sel, n):
    """Row by row through the dense decode kernel on each selected expert's own views."""
    out = torch.zeros(h.shape[0], D, dtype=torch.float64)
    one = torch.tensor([1], device=DEV)
    for r in range(n):
        x = h[r:r + 1]
        for j in range(TOPK):
            e = int(sel[r, j])
            g, _ = dg.matmul_parts(x, lw.gate_exps.expert(e).packed, one)
            u, _ = dg.matmul_parts(x, lw.up_exps.expert(e).packed, one)
            q8 = dg.buffers(1, F, DEV)
            fused.glu(torch.cat((g, u), -1), 1, F, False, h.dtype, q8)
            y, _ = dg.matmul_parts(x.new_zeros(1, F), lw.down_exps.expert(e).packed, one, q8)
            out[r] += float(w[r, j]) * y[0, 0].double().cpu()
    return out


# (Q4_K, Q5_0): a Q4_K file's stacks where the down experts' K is not a multiple of 256 (GLM-4.5-Air);
# (Q4_K, Q6_K): a Q4_K_M file's down experts in half the layers (Qwen3-30B-A3B); (Q5_K, Q5_1): a Q5_K file's
@pytest.mark.parametrize("qt,down,planes", [
    pytest.param(qt, down, planes, id="-".join(t.name for t in (qt, down) if t) + ("-planes" if planes else ""))
    for qt, down, planes in [(QT.Q4_K, None, False), (QT.Q8_0, None, False), (QT.Q4_0, None, False),
                             (QT.IQ4_XS, None, False), (QT.Q4_K, QT.Q5_0, False), (QT.Q4_K, QT.Q6_K, False),
                             (QT.Q5_K, QT.Q5_1, False), (QT.Q4_K, QT.Q6_K, True), (QT.Q5_K, None, True),
                             (QT.Q2_K, QT.Q3_K, True), (QT.IQ1_S, QT.IQ2_XXS, True), (QT.IQ2_XS, QT.IQ1_M, True)]])
def test_routed_experts_are_each_rows_own_experts(mg, qt, down, planes, monkeypatch):
    import engine.kernels.dp4a_gemv as dg
    import engine.kernels.fused as fused
    import engine.kernels.packed as packed

    monkeypatch.setattr(packed, "GPU_IQ4", True)
    monkeypatch.setattr(packed, "Q6K_PLANES", planes)           # Q6_K stacks in 6-bit planes (kind 10)
    monkeypatch.setattr(packed, "Q5K_PLANES", planes)           # Q5_K's in 5-bit planes (kind 11)
    monkeypatch.setattr(packed, "Q2K_PLANES", planes)           # Q2_K's in 2-bit planes (kind 12)
    monkeypatch.setattr(packed, "Q3K_PLANES", planes)           # Q3_K's in 3-bit planes (kind 13)
    monkeypatch.setattr(packed, "IQ_TABLES", planes)            # the grid i-quants' table codes (kinds 6, 14)

    lw = experts(qt, down)
    assert mg.supports(lw) and lw.down_exps.packed.kind == packed_kind(down or qt, planes)
    t = 6
    h, sel, w, gen = tile_inputs(t, 4)
    n = torch.tensor([4], device=DEV)
    got = mg.routed(w, sel, lw, h, n)
    ref = reference(dg, fused, lw, h, w, sel, 4)
    assert ((got.cpu().double() - ref).norm() / ref.norm()).item() < 1e-6
    assert not got[4:].any()                                  # rows past the count: zeros
    res = torch.randn(t, D, generator=gen).to(DEV)
    assert torch.equal(mg.routed(w, sel, lw, h, n, residual=res), res + got)   # onto the residual stream

    # row 2 alone, and row 2 placed elsewhere among other rows: the same bits
    alone = mg.routed(w[2:3], sel[2:3], lw, h[2:3].contiguous())
    assert torch.equal(alone[0], got[2])
    perm = torch.tensor([5, 2, 0, 1], device=DEV)            # row 2 lands at place 1
    moved = mg.routed(w[perm], sel[perm], lw, h[perm].contiguous())
    assert torch.equal(moved[1], got[2])


def test_pairs_with_two_weight_rows_per_x_load_give_the_same_bits(mg, monkeypatch):
    """STRATA_MOE_XS=2, the default (each x load serves two weight rows; the pass is dp4a_gemv's, checked
    there for every type): every pair's product as at 1, rows past the count still zeros."""
    lw = experts(QT.Q4_K)
    h, sel, w, _ = tile_inputs(3, 7)
    n = torch.tensor([2], device=DEV)
    monkeypatch.setattr(mg, "PAIR_NR", 4)           # the GPU's: several programs a stack (64 or 128 rows each)
    monkeypatch.setattr(mg, "PAIR_XS", 1)
    for stack, k in ((lw.gate_exps, D), (lw.down_exps, F)):      # xs=2 too: two programs or more an expert
        assert stack.shape[1] >= 2 * 2 * mg.plan(stack.packed.kind, stack.shape[1], k, mg.PAIR_WARPS, 4)[0]
    one = mg.routed(w, sel, lw, h, n)
    monkeypatch.setattr(mg, "PAIR_XS", 2)
    two = mg.routed(w, sel, lw, h, n)
    assert torch.equal(one, two) and one[:2].any() and not two[2:].any()


def test_expert_views_of_a_repacked_stack_are_its_rows(mg):
    """expert(e) of a repacked stack views rows [e n, e n + n) of its planes (no copy) and unpacks to
    the GGUF values of that expert."""
    from engine.kernels.packed import unpack

    data = blocks(QT.Q4_K, E * F, D, 9)
    raw = QuantTensor(data.clone(), QT.Q4_K, (E, F, D), torch.float32)
    packed = QuantTensor(data.clone().to(DEV), QT.Q4_K, (E, F, D), torch.float32)
    assert packed.repack(on_cpu=True) and packed.data is None
    for e in (0, 3, 4):
        view = packed.expert(e)
        assert view.packed.codes.data_ptr() == packed.packed.codes[e * F].data_ptr()
        assert torch.equal(unpack(view.packed).cpu(), raw.expert(e).dequantize())


@pytest.mark.parametrize("gating,norm,scale", [("softmax", True, 1.0), ("softmax", False, 1.0),
                                               ("sigmoid", True, 2.5)])
def test_device_routing_picks_what_block_route_picks(mg, gating, norm, scale):
    """The two-launch router (logits, then scores / top-k / weights per row) picks the same experts in
    the same order as engine.block.route, with the same weights to float32 rounding; rows past the
    device count get expert 0 at weight 0."""
    from engine.block import route

    ne, d, t = 40, 320, 7
    gen = torch.Generator().manual_seed(12)
    router = QuantTensor(torch.randn(ne, d, generator=gen).view(torch.uint8).reshape(ne, -1).to(DEV), QT.F32,
                         (ne, d), torch.float32)
    lw = SimpleNamespace(router=router, exp_probs_b=(torch.randn(ne, generator=gen) * 0.3).to(DEV))
    cfg = SimpleNamespace(n_expert_used=6, gating=gating, expert_weights_norm=norm, expert_weights_scale=scale)
    h = torch.randn(t, d, generator=gen).to(DEV)
    w, sel = mg.route(lw, cfg, h, torch.tensor([5], device=DEV))
    ref_w, ref_sel = route(lw, cfg, h)
    assert torch.equal(sel[:5], ref_sel[:5])
    assert torch.allclose(w[:5], ref_w[:5], rtol=1e-4, atol=1e-7)        # logits of ~20: sums in another order
    assert not sel[5:].any() and not w[5:].any()


@pytest.mark.parametrize("qt,planes", layouts([QT.Q4_K, QT.IQ4_XS, QT.Q6_K], (QT.IQ2_XXS, QT.IQ1_M)))
def test_prompt_tile_groups_pairs_by_expert(mg, qt, planes, monkeypatch):
    """moe_grouped: the block table covers each real pair once, blocks of one expert, 16 pairs at most;
    the routed sum is each row's experts in its own top-k order (float32 tensor-core sums of the dequantized
    weights, x not rounded), rows past the count zeros, and a row alone gives the bits it gives among others."""
    gr = kernel_module("moe_grouped")
    import engine.kernels.packed as packed
    from engine.kernels.packed import unpack

    monkeypatch.setattr(packed, "GPU_IQ4", True)
    monkeypatch.setattr(packed, "Q6K_PLANES", planes)
    monkeypatch.setattr(packed, "Q5K_PLANES", planes)
    monkeypatch.setattr(packed, "Q2K_PLANES", planes)
    monkeypatch.setattr(packed, "Q3K_PLANES", planes)
    monkeypatch.setattr(packed, "IQ_TABLES", planes)
    lw = experts(qt)
    assert lw.gate_exps.packed.kind == packed_kind(qt, planes)
    gen = torch.Generator().manual_seed(8)
    t = 20
    sel = torch.stack([torch.randperm(E, generator=gen)[:TOPK] for _ in range(t)]).to(DEV)
    sel[:18, 0] = 3                                       # expert 3: 18 pairs, two blocks
    sel[:18, 1] = torch.where(sel[:18, 1] == 3, 4, sel[:18, 1])
    n = torch.tensor([18], device=DEV)
    order, e, first, rows = gr.blocks(sel, E, n, 16)
    seen = []
    for b in range(e.shape[0]):
        if int(e[b]) < E:
            got = order[int(first[b]):int(first[b]) + int(rows[b])].tolist()
            assert 1 <= len(got) <= 16 and all(int(sel.reshape(-1)[p]) == int(e[b]) for p in got)
            seen += got
    assert sorted(seen) == list(range(18 * TOPK))
    assert int((e == 3).sum()) == 2

    h = torch.randn(t, D, generator=gen).to(DEV)
    w = torch.softmax(torch.randn(t, TOPK, generator=gen), -1).to(DEV)
    out = gr.routed(w, sel, lw, h, n)
    assert not out[18:].any()
    wg, wu, wd = (unpack(s.packed).double().reshape(E, -1, s.shape[2]) for s in (lw.gate_exps, lw.up_exps,
                                                                                  lw.down_exps))
    ref = torch.zeros(18, D, dtype=torch.float64)
    for r in range(18):
        for j in range(TOPK):
            ex = int(sel[r, j])
            x = h[r].double().cpu()
            g, u = wg[ex].cpu() @ x, wu[ex].cpu() @ x
            ref[r] += float(w[r, j]) * (wd[ex].cpu() @ (g * torch.sigmoid(g) * u))
    assert ((out[:18].cpu().double() - ref).norm() / ref.norm()).item() < 1e-5
    alone = gr.routed(w[5:6], sel[5:6], lw, h[5:6])
    assert torch.equal(alone[0], out[5])


@pytest.mark.parametrize("qt,down", [(QT.Q4_K, QT.Q6_K), (QT.IQ4_XS, QT.IQ4_NL), (QT.Q5_K, QT.Q8_0)],
                         ids=lambda t: t.name)
def test_prompt_tile_on_int8_tensor_cores(mg, qt, down, monkeypatch):
    """moe_grouped_q8 (STRATA_MOE_PROMPT_Q8=1): each launch's pair products are the float64 products of the
    pairs' int8 x (dp4a_gemv.quantize's rounding) with the expert's exact values; rows past the count hold
    zeros; a row alone gives the bits it gives among others; moe_grouped.routed takes this path when on."""
    gr = kernel_module("moe_grouped")
    q8 = kernel_module("moe_grouped_q8")
    import engine.kernels.dp4a_gemv as dg
    import engine.kernels.fused as fused
    import engine.kernels.packed as packed
    from engine.kernels.packed import unpack

    monkeypatch.setattr(packed, "GPU_IQ4", True)
    monkeypatch.setattr(packed, "Q6K_PLANES", False)     # (this kernel reads Q6_K's and Q5_K's int8 codes, not
    monkeypatch.setattr(packed, "Q5K_PLANES", False)     # their planes)
    monkeypatch.setattr(q8, "BN", 256)         # fewer, larger programs for the interpreter (the same arithmetic)
    lw = experts(qt, down)
    assert q8.supports(lw)
    t = 20
    h, sel, w, _ = tile_inputs(t, 4)
    n = torch.tensor([18], device=DEV)
    tab = gr.blocks(sel, E, n, q8.BM)

    def check(x, gu, stack, rows_of_pair, cols):
        xr = (x[0].float().reshape(x[0].shape[0], -1, 32) * x[1][..., :1]).reshape(x[0].shape[0], -1).double().cpu()
        for p in range(18 * TOPK):
            e = int(sel.reshape(-1)[p])
            ref = xr[rows_of_pair(p)] @ unpack(stack.expert(e).packed).double().cpu().T
            assert ((gu[p, cols].double().cpu() - ref).norm() / ref.norm()).item() < 1e-6

    xq = dg.quantize(h)
    gu = torch.zeros((t * TOPK, 2 * F), device=DEV)
    q8._grouped(xq, False, TOPK, tab, E, lw.gate_exps.packed, lw.up_exps.packed, F, gu)
    check(xq, gu, lw.gate_exps, lambda p: p // TOPK, slice(0, F))
    check(xq, gu, lw.up_exps, lambda p: p // TOPK, slice(F, 2 * F))
    gq = dg.buffers(t * TOPK, F, DEV)
    fused.glu(gu[None], 1, F, False, h.dtype, gq)
    y = torch.zeros((t * TOPK, D), device=DEV)
    q8._grouped(gq, True, TOPK, tab, E, lw.down_exps.packed, None, D, y)
    check(gq, y, lw.down_exps, lambda p: p, slice(0, D))

    got = q8.routed(w, sel, lw, h, n)
    assert got[:18].any() and not got[18:].any()
    alone = q8.routed(w[2:3], sel[2:3], lw, h[2:3].contiguous())
    assert torch.equal(alone[0], got[2])
    monkeypatch.setattr(q8, "ON", True)
    assert torch.equal(gr.routed(w[2:3], sel[2:3], lw, h[2:3].contiguous()), alone)
