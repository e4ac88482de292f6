"""CPU stages in the fast mode run a window's decode rows (several streams, a slot's proposals) in shared
tiles of up to 8 rows, a lone row in its own 1-row tile (engine.stage.Stage.rows_free): each row must get
the bits it gets alone, which batch-test checks (each slot alone, then all together), greedy, sampled
and with MTP drafts. A matrix without an int4 form (Q6_K, as in most downloaded Q4_K_M files) runs each
row of a decode tile alone; the reference mode (dense everywhere) keeps one decode row per tile."""
from __future__ import annotations

import pytest
import torch

from app.cli import main
from engine.loader import TILE_SIZES, load_model
from engine.messages import EngineConfig


@pytest.fixture(scope="module")
def q4k(synthetic):
    return synthetic("llama", mtp=1, qtype="Q4_K")


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """gemma3 (sliding-window layers) in Q4_K with its ffn_down in Q6_K: dense copies on a CPU stage."""
    from engine.synthetic import make_model

    return make_model("gemma3", "small", tmp_path_factory.mktemp("mixed") / "gemma3-q6k-down.gguf", qtype="Q4_K",
                      qtype_map="*ffn_down*=Q6_K")


def test_int4_stages_take_shared_decode_tiles_and_dense_ones_do_not(q4k, mixed, synthetic):
    assert load_model(EngineConfig(model=str(q4k), devices="cpu")).pipeline.tiles == TILE_SIZES["cpu-rows"]
    lm = load_model(EngineConfig(model=str(mixed), devices="cpu"))
    assert lm.pipeline.tiles == TILE_SIZES["cpu-rows"] and lm.pipeline.stages[0].layers[0].w_down.int4 is None
    # the reference mode's dense GEMMs give a row other bits at another row count
    assert load_model(EngineConfig(model=str(q4k), devices="cpu", dtype="float32")).pipeline.tiles == TILE_SIZES["cpu"]
    # routed experts have row-count dependent parts
    moe = synthetic("qwen3moe", qtype="Q4_K")
    assert load_model(EngineConfig(model=str(moe), devices="cpu")).pipeline.tiles == TILE_SIZES["cpu"]


@pytest.mark.parametrize("flags", [[], ["--temperature", "0.8", "--seed", "3"], ["--draft", "mtp", "--spec", "3"],
                                   ["--devices", "cpu,cpu", "--batch-groups", "2", "--piped-mtp", "2"],
                                   ["--draft", "mtp", "--spec", "3", "torch-attention"]],
                         ids=["greedy", "sampled", "spec3", "piped", "spec3-torch-attention"])
def test_rows_in_shared_decode_tiles_keep_their_bits(q4k, capsys, monkeypatch, flags):
    """torch-attention: without the CPU attention kernel (a CPU without AVX512-BF16), torch's per-row path."""
    if "torch-attention" in flags:
        from engine import cpu_attention

        monkeypatch.setattr(cpu_attention, "ENABLED", False)
        flags = flags[:-1]
    rc = main(["batch-test", "--model", str(q4k), "--parallel", "4", "--max-tokens", "12", *flags])
    out = capsys.readouterr().out
    assert rc == 0 and out.count("IDENTICAL") == 4, out


def test_a_dense_matrix_gives_each_row_of_a_decode_tile_its_one_row_bits():
    """QuantTensor.linear(alone=True): a dense copy's rows one per call. In float32 this machine's GEMM
    gives a row other bits in a padded 8-row call than alone (its bfloat16 one happened not to)."""
    import numpy as np
    from gguf.constants import GGMLQuantizationType as QT

    from engine.quant import QuantTensor
    from engine.synthetic import _random_blocks

    data = torch.from_numpy(_random_blocks(QT.Q6_K, 512, np.random.default_rng(0), 0.02)).reshape(512, -1)
    for dtype in (torch.float32, torch.bfloat16):
        qt = QuantTensor(data, QT.Q6_K, (512, 256), dtype)
        x = torch.randn(5, 256, generator=torch.Generator().manual_seed(1)).to(dtype)
        alone = torch.cat([qt.linear(x[i:i + 1], 1) for i in range(5)])
        assert torch.equal(qt.linear(x, 8, alone=True), alone)


@pytest.mark.parametrize("flags", [[], ["--temperature", "0.8", "--seed", "3"]], ids=["greedy", "sampled"])
def test_a_layout_with_dense_matrices_is_exact(mixed, capsys, flags):
    rc = main(["batch-test", "--model", str(mixed), "--parallel", "4", "--max-tokens", "12", *flags])
    out = capsys.readouterr().out
    assert rc == 0 and out.count("IDENTICAL") == 4, out


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("window", [0, 3])
@pytest.mark.parametrize("head_dim", [8, 16])
def test_a_slots_run_of_decode_rows_gets_each_rows_one_row_attention(dtype, window, head_dim):
    """torch's path for a decode tile (where the CPU attention kernel does not run): a draft window's rows
    of one slot convert that slot's cache once (engine.layers._rows_attention), and each row still gets the
    bits it gets alone, with sliding windows whose rows start apart by a part of 64 bytes (3 KV heads of 8
    values: 96 bytes a position) and runs broken by another slot or a gap."""
    from engine.layers import _one_row_attention, _rows_attention

    g = torch.Generator().manual_seed(head_dim + window)
    k_cache = torch.randn(3, 20, 3, head_dim, generator=g).to(dtype)
    v_cache = torch.randn(3, 20, 3, head_dim, generator=g).to(dtype)
    slot = [1, 1, 1, 1, 0, 2, 2, 1, 1]
    pos = [9, 10, 11, 12, 4, 6, 8, 13, 14]
    q = torch.randn(len(slot), 6, head_dim, generator=g)
    rows = _rows_attention(q, k_cache, v_cache, slot, pos, window, 0.3)
    for i, (s, p) in enumerate(zip(slot, pos)):
        assert torch.equal(rows[i:i + 1], _one_row_attention(q[i:i + 1], k_cache, v_cache, s, p, window, 0.3)), i
