"""A CPU stage's decode tiles run all its blocks in one C call (engine.cpu_layers, engine/native/decode_layers.c).
It must give a tile the bits the torch blocks give it (the caches too), and each row the bits it gets alone;
stages it cannot run keep the torch blocks."""
from __future__ import annotations

import pytest
import torch

from app.cli import main
from engine import cpu_gemm, cpu_layers
from engine.block import Tile
from engine.loader import load_model
from engine.messages import EngineConfig

pytestmark = pytest.mark.skipif(not cpu_gemm.available(), reason="the CPU kernels need AVX512-BF16 and a C compiler")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Synthetic shapes with 64-value heads (the kernels' sizes): gemma3 (q / k norms, post norms, gelu, 64-key
    sliding windows, Q6_K downs), qwen3 (q / k norms, silu), llama (interleaved rotation, two-part int4)."""
    from engine.synthetic import make_model

    root = tmp_path_factory.mktemp("layers")
    return {"gemma3": make_model("gemma3", "small", root / "g.gguf", qtype="Q4_K", qtype_map="*ffn_down*=Q6_K"),
            "qwen3": make_model("qwen3", "small", root / "q.gguf", qtype="Q4_1"),
            "llama": make_model("llama", "small", root / "l.gguf", mtp=1, qtype="Q8_0")}


def _path(name, made, smol_path, gemma_file):
    return {"default": smol_path, "gemma": gemma_file}.get(name) or made[name]


def _decode(stage, x, slot, pos, fused):
    """The stage's blocks over a decode tile from its caches as they are: (hidden out, caches after); the
    caches are put back."""
    saved = [t.clone() for t in stage.k + stage.v]
    stage._decode_layers = fused
    y = stage._forward(x, Tile(torch.tensor(slot), torch.tensor(pos), len(slot), per_row=True))
    after = [t.clone() for t in stage.k + stage.v]
    for t, s in zip(stage.k + stage.v, saved):
        t.copy_(s)
    return y, after


@pytest.mark.parametrize("name", ["default", "gemma", "gemma3", "qwen3", "llama"])
def test_decode_layers_give_a_tile_the_torch_blocks_bits(name, made, smol_path, gemma_file):
    stage = load_model(EngineConfig(model=str(_path(name, made, smol_path, gemma_file)), devices="cpu",
                                    parallel=2)).pipeline.stages[0]
    fused = stage.decode_layers()
    assert fused is not None
    g = torch.Generator().manual_seed(0)
    d = stage.cfg.n_embd
    scale = 4.0 if stage.cfg.embed_scale != 1.0 else 1.0    # Gemma's residual stream is larger
    for slot, n in ((0, 90), (1, 30)):            # two slots' prompts (prompt tiles: the torch blocks)
        stage._forward(torch.randn(n, d, generator=g) * scale,
                       Tile(torch.full((n,), slot), torch.arange(n), n, per_row=False))
    # one row; then four: a slot's next two positions (a draft window's) and the other slot's, past the window
    for slot, pos in (([0], [90]), ([0, 1, 0, 1], [90, 30, 91, 31])):
        x = torch.randn(len(slot), d, generator=g) * scale
        y_torch, kv_torch = _decode(stage, x, slot, pos, None)
        y, kv = _decode(stage, x, slot, pos, fused)
        assert torch.equal(y, y_torch), (y - y_torch).abs().max()
        assert all(torch.equal(a, b) for a, b in zip(kv, kv_torch))
        assert not torch.equal(y, x)
        for i in range(len(slot)):                # each row alone: its bits in the tile (rows before it written)
            stage._decode_layers = fused
            alone = stage._forward(x[i:i + 1], Tile(torch.tensor(slot[i:i + 1]), torch.tensor(pos[i:i + 1]), 1,
                                                    per_row=True))
            assert torch.equal(alone[0], y[i])
        for t, s in zip(stage.k + stage.v, kv):
            t.copy_(s)


def test_a_decode_tiles_padding_rows_come_back_as_zeros(made):
    stage = load_model(EngineConfig(model=str(made["qwen3"]), devices="cpu")).pipeline.stages[0]
    x = torch.randn(8, stage.cfg.n_embd)
    y = stage._forward(x, Tile(torch.tensor([0, 0] + [stage.scratch_slot] * 6), torch.tensor([0, 1] + [0] * 6), 2,
                               per_row=True))
    assert stage.decode_layers() is not None and y.shape == x.shape
    assert torch.equal(y[2:], torch.zeros(6, stage.cfg.n_embd)) and y[:2].abs().sum() > 0


def test_stages_the_loop_cannot_run_keep_the_torch_blocks(made, synthetic, monkeypatch):
    moe = load_model(EngineConfig(model=str(synthetic("qwen3moe", qtype="Q4_K", shape="small")), devices="cpu"))
    assert moe.pipeline.stages[0].decode_layers() is None                   # routed experts
    ref = load_model(EngineConfig(model=str(made["qwen3"]), devices="cpu", dtype="float32"))
    assert ref.pipeline.stages[0].decode_layers() is None                   # the float32 reference mode
    tiny = load_model(EngineConfig(model=str(synthetic("llama", qtype="Q4_K")), devices="cpu"))
    assert tiny.pipeline.stages[0].decode_layers() is None                  # 16-value heads
    monkeypatch.setattr(cpu_layers, "ENABLED", False)                       # STRATA_CPU_LAYERS=0
    assert load_model(EngineConfig(model=str(made["qwen3"]), devices="cpu")).pipeline.stages[0].decode_layers() is None


@pytest.mark.parametrize("flags", [[], ["--temperature", "0.8", "--seed", "3"], ["--draft", "mtp", "--spec", "3"],
                                   ["--devices", "cpu,cpu", "--batch-groups", "2", "--piped-mtp", "2"]],
                         ids=["greedy", "sampled", "spec3", "piped"])
def test_rows_through_the_loop_keep_their_bits_in_any_batch(made, capsys, flags):
    rc = main(["batch-test", "--model", str(made["llama"]), "--parallel", "4", "--max-tokens", "12", *flags])
    out = capsys.readouterr().out
    assert rc == 0 and out.count("IDENTICAL") == 4, out


def test_the_mtp_drafters_block_runs_the_loop_with_the_torch_blocks_bits(made):
    """engine.drafts.MtpDrafter: its block over a decode tile's rows in the loop too (prompt tiles' rows keep
    the torch block)."""
    from engine.block import run_block
    from engine.layers import rotation_tables

    d = load_model(EngineConfig(model=str(made["llama"]), devices="cpu", draft="mtp", parallel=2)).drafter
    fused = d._decode_layers(3)
    assert fused is not None and d._decode_layers(cpu_gemm.MIN_TILE) is None
    x = torch.randn(3, d.cfg.n_embd, generator=torch.Generator().manual_seed(1))
    slot, pos = torch.tensor([0, 0, 1]), torch.tensor([5, 6, 3])
    saved = d.k.clone(), d.v.clone()
    tables = (*d.rope, *rotation_tables(*d.rope, d.cfg.rope_neox))
    y_torch = run_block(d.w.block, d.cfg, d.layer, x, Tile(slot, pos, 3, per_row=True), d.k, d.v, tables)
    kv_torch = d.k.clone(), d.v.clone()
    d.k.copy_(saved[0])
    d.v.copy_(saved[1])
    assert torch.equal(fused.run(x, slot, pos), y_torch)
    assert torch.equal(d.k, kv_torch[0]) and torch.equal(d.v, kv_torch[1])
