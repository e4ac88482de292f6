"""The CPU fast mode (engine.cpu_int4, --dtype auto on CPU): 4-bit and Q8_0 matrices kept as int4 groups.

The codes stay GGUF's; each 32-value group's scale and zero are rounded to bfloat16, so the values are
the file's within bfloat16 rounding. The kernel must give a row the same bits whatever the other rows of
its tile are and however many; and on the default model the fast mode must stay close to the reference
numerics while keeping the weights near the file's size."""
from __future__ import annotations

import gguf
import numpy as np
import pytest
import torch
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as QT

from engine import cpu_int4
from engine.loader import load_model
from engine.messages import EngineConfig
from engine.quant import dequantize
from engine.synthetic import _random_blocks


def blocks(qt, n, k, seed):
    if qt == QT.Q5_1:          # no random-block writer for it: gguf's own quantizer on random weights
        x = np.random.default_rng(seed).standard_normal((n, k)).astype(np.float32) * 0.02
        return torch.from_numpy(gguf.quants.quantize(x, qt))
    block, _ = GGML_QUANT_SIZES[qt]
    return torch.from_numpy(_random_blocks(qt, n * k // block, np.random.default_rng(seed), 0.02)).reshape(n, -1)


@pytest.mark.parametrize("qt,k", [(QT.Q4_0, 576), (QT.Q4_1, 320), (QT.Q4_K, 1280), (QT.Q8_0, 576), (QT.Q5_0, 320),
                                  (QT.Q5_1, 576)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_int4_values_are_the_files_and_rows_do_not_depend_on_the_tile(qt, k):
    n = 48
    data = blocks(qt, n, k, 3)
    assert cpu_int4.supports(qt, (n, k))
    w = cpu_int4.from_gguf(data, qt, n, k)
    ref = dequantize(data, qt, n * k).reshape(n, k)
    v = cpu_int4.values(w)
    assert ((v - ref).abs() <= ref.abs().amax(1, keepdim=True) * 2 ** -7).all()      # bfloat16 scales
    x = torch.randn(32, k, generator=torch.Generator().manual_seed(4))
    y = cpu_int4.linear(x, w, 32)
    exact = x.double() @ ref.double().T
    assert ((y.double() - exact).norm() / exact.norm()).item() < 1e-2
    other = torch.randn(32, k, generator=torch.Generator().manual_seed(5))
    other[9] = x[3]
    assert torch.equal(cpu_int4.linear(other, w, 32)[9], y[3])          # other rows, other place
    assert torch.equal(cpu_int4.linear(x[3:4], w, 32)[0], y[3])         # alone in its tile
    assert torch.equal(cpu_int4.linear(x[3:5], w, 1)[0], cpu_int4.linear(x[3:4], w, 1)[0])


def test_stacked_matrices_give_each_one_its_own_bits():
    """q|k|v in one call (the fast mode's Int4Stack): each matrix's columns equal its own call's, and the
    matrices keep working as views of the stack."""
    ws = [cpu_int4.from_gguf(blocks(QT.Q4_1, n, 576, n), QT.Q4_1, n, 576) for n in (576, 192, 192)]
    x = torch.randn(32, 576, generator=torch.Generator().manual_seed(6))
    alone = [cpu_int4.linear(x, w, 32) for w in ws]
    st = cpu_int4.Int4Stack(cpu_int4.stack(ws), [576, 192, 192])
    for got, want, w in zip(st.split_linear(x, 32, torch.bfloat16), alone, ws):
        assert torch.equal(got, want) and torch.equal(cpu_int4.linear(x, w, 32), want)
    assert cpu_int4.stack([ws[0], cpu_int4.from_gguf(blocks(QT.Q4_1, 48, 576, 9), QT.Q4_1, 48, 576)]) is None


def test_types_and_shapes_without_an_int4_form():
    assert not cpu_int4.supports(QT.Q6_K, (48, 256))
    assert not cpu_int4.supports(QT.Q4_0, (40, 64))          # the kernel packs rows in 16s
    assert not cpu_int4.supports(QT.Q4_0, (48, 64, 32))


def test_default_model_fast_mode_is_close_to_the_reference_and_small():
    text = "The quick brown fox jumps over the lazy dog. Rivers carry water from the hills to the sea, and "
    got = {}
    for dtype in ("float32", "auto"):
        m = load_model(EngineConfig(model="default", dtype=dtype, ctx=128))
        try:
            st = m.pipeline.stages[0]
            # the matrices' working forms; the embedding table is read from the file's mapped pages a row
            # at a time (only looked-up rows become resident): weight_bytes leaves it out
            assert st.embedding.data is not None and st.embedding.int4 is None
            got[dtype] = (m.pipeline.score(m.tokenizer.encode(text)).float(), st.weight_bytes, m.effective)
        finally:
            m.pipeline.close()
    ref, dense_bytes, _ = got["float32"]
    fast, fast_bytes, eff = got["auto"]
    assert eff.dtype == "bfloat16" and "int4" in eff.weights
    p, q = torch.log_softmax(ref, -1), torch.log_softmax(fast, -1)
    kl = (p.exp() * (p - q)).sum(-1)
    assert kl.mean() < 0.01 and (fast.argmax(-1) == ref.argmax(-1)).float().mean() > 0.9
    file_bytes = m.info.file_bytes
    assert fast_bytes < 1.3 * file_bytes < dense_bytes


@pytest.mark.parametrize("arch", ["qwen3moe", "qwen35moe"])
def test_moe_experts_stay_int4_and_the_prediction_holds(synthetic, arch):
    """Expert stacks convert expert by expert: a MoE model's weights stay near the file's size, the
    memory prediction (engine.model_info.layer_bytes, what the settings panel shows) is what the stage
    holds, and the logits stay close to the reference numerics."""
    from engine.model_info import layer_bytes
    from engine.stage import layer_weight_bytes

    path = synthetic(arch, mtp=0, qtype="Q4_K", shape="small")
    text = "The quick brown fox jumps over the lazy dog. Rivers carry water from the hills to the sea"
    got = {}
    for dtype in ("float32", "auto"):
        m = load_model(EngineConfig(model=str(path), dtype=dtype, ctx=128))
        try:
            st = m.pipeline.stages[0]
            got[dtype] = m.pipeline.score(m.tokenizer.encode(text)).float()
            blocks = sum(layer_weight_bytes(lw) for lw in st.layers)
            predicted = sum(layer_bytes(m.gf, m.cfg.n_layers, 2 if dtype == "auto" else 4, dtype == "auto"))
            assert abs(blocks - predicted) <= 0.02 * predicted, (dtype, blocks, predicted)
            if dtype == "auto":
                stack = st.layers[1].gate_exps
                assert all(stack.expert(e).int4 is not None for e in range(stack.shape[0]))
                assert blocks < 1.3 * sum(layer_bytes(m.gf, m.cfg.n_layers))     # the file's bytes of them
        finally:
            m.pipeline.close()
    p, q = torch.log_softmax(got["float32"], -1), torch.log_softmax(got["auto"], -1)
    assert (p.exp() * (p - q)).sum(-1).mean() < 0.01



@pytest.mark.parametrize("window", [0, 16])
def test_a_tiles_real_rows_attend_as_in_the_full_tile(window):
    """attention(q of a tile's real rows, rows=T) gives each real row the float32 bits the whole padded
    T-row tile gives it (a lone real row too: the one-row path sums in another order), on random keys."""
    from engine.layers import attention

    g = torch.Generator().manual_seed(4)
    T, H, kvh, hd, ctx = 32, 8, 2, 64, 96
    k_cache, v_cache = (torch.randn(3, ctx, kvh, hd, generator=g) for _ in range(2))
    q = torch.randn(T, H, hd, generator=g)
    for n in (1, 5):
        slot = torch.tensor([1] * n + [2] * (T - n))
        pos = torch.tensor(list(range(70, 70 + n)) + [0] * (T - n))
        full = attention(q, k_cache, v_cache, slot, pos, window, 0.125)
        real = attention(q[:n], k_cache, v_cache, slot[:n], pos[:n], window, 0.125, rows=T)
        assert torch.equal(real, full[:n]), n


def test_key_blocks_are_one_grid_whatever_the_tile():
    """The CPU attention's key blocks (128, 128, 256, then 512 each) are one grid whatever range a tile
    asks for, and a row gets the same bits whether its tile's other rows reach past it (blocks past the
    row) or before its window (blocks before it): those blocks are exact no-ops for it."""
    from engine.layers import attention, key_blocks

    assert key_blocks(0, 1100) == [(0, 128), (128, 128), (256, 256), (512, 512), (1024, 512)]
    for lo, hi in ((0, 40), (130, 700), (600, 1600), (2049, 2049)):
        blocks = key_blocks(lo, hi)
        assert blocks[0][0] <= lo < blocks[0][0] + blocks[0][1] and blocks[-1][0] <= hi < sum(blocks[-1])
        assert set(blocks) <= set(key_blocks(0, hi)), (lo, hi)
    g = torch.Generator().manual_seed(7)
    T, H, kvh, hd, ctx = 8, 8, 2, 64, 1200
    k_cache, v_cache = (torch.randn(3, ctx, kvh, hd, generator=g) for _ in range(2))
    q = torch.randn(T, H, hd, generator=g)
    for window, p in ((0, 500), (300, 500), (300, 1000)):
        alone = torch.tensor([1] * T), torch.arange(p - T + 1, p + 1)          # rows up to p: row T - 1 is p
        past = torch.tensor([2] * (T - 1) + [1]), torch.tensor([1100] * (T - 1) + [p])
        before = torch.tensor([2] * (T - 1) + [1]), torch.tensor([5] * (T - 1) + [p])
        want = attention(q, k_cache, v_cache, *alone, window, 0.125)[-1]
        for slot, pos in (past, before):
            assert torch.equal(attention(q, k_cache, v_cache, slot, pos, window, 0.125)[-1], want), (window, p)


@pytest.mark.parametrize("arch", ["default", "gemma3"])
def test_a_tiles_padding_rows_are_left_out_with_the_same_bits(tmp_path, arch):
    """A fast-mode CPU stage runs a prompt tile's real rows only (Stage.row_count_free): 5 real rows of a
    32-row tile and a lone real row give the bits the full padded tile gives them (the lone row's
    attention still runs as in a full tile: the one-row path would differ; dense Q6_K matrices and a Q6_K
    head run padded to the tile), and their logits are the same computed alone."""
    from engine.block import Tile
    from engine.synthetic import make_model

    model = "default" if arch == "default" else str(make_model(
        arch, "small", tmp_path / "g.gguf", qtype="Q4_K", qtype_map="*ffn_down*=Q6_K,output.weight=Q6_K"))
    m = load_model(EngineConfig(model=model, dtype="auto", ctx=128, parallel=2))
    try:
        st = m.pipeline.stages[0]
        assert st.row_count_free and st.scratch_slot == 2
        rows = m.pipeline.tiles.prompt
        x = st.embed(torch.randint(0, m.cfg.vocab_size, (rows,), generator=torch.Generator().manual_seed(2)))
        for n in (5, 1):
            slot = torch.tensor([1] * n + [st.scratch_slot] * (rows - n))       # slot 1 of 2 (scratch: 2)
            pos = torch.tensor(list(range(40, 40 + n)) + [0] * (rows - n))
            trimmed = st._forward(x, Tile(slot, pos, n))
            assert not trimmed[n:].any()
            st.row_count_free = False
            try:
                full = st._forward(x, Tile(slot, pos, n))
                full_logits = st.logits(full)[:n]
            finally:
                st.row_count_free = True
            assert torch.equal(trimmed[:n], full[:n]), n
            assert torch.equal(st.logits(trimmed[n - 1:n])[0], full_logits[n - 1])
    finally:
        m.pipeline.close()
