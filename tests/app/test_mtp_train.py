"""`strata mtp-train` end to end on a tiny synthetic llama: the file it writes keeps every original tensor
and key, adds a nextn block the engine loads and drafts with (batch-test IDENTICAL), the engine's drafter
computes what the trained module computes, and a second run resumes from the checkpoint."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGUFReader

from app.cli import main
from engine import mtp_trainer
from engine.gguf_file import read_gguf
from engine.layers import rms_norm
from engine.loader import load_model
from engine.messages import EngineConfig
from engine.model_info import probe_model

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from engine.synthetic import make_model

    d = tmp_path_factory.mktemp("mtp_train")
    src = make_model("llama", "tiny", d / "m.gguf")
    out = d / "m-mtp.gguf"
    (d / "text").mkdir()
    for i in range(3):
        (d / "text" / f"n{i}.md").write_text(f"Note {i}: the quick brown fox jumps over the lazy dog. " * 12)
    args = ["mtp-train", "--model", str(src), "--out", str(out), "--tokens", "160", "--seq-tokens", "40",
            "--qtype", "F32", "--text", str(d / "text"), "--text-tokens", "300", "--text-seq", "48"]
    assert main(args + ["--steps", "4"]) == 0
    first = torch.load(out.with_name(out.name + ".ckpt"), weights_only=True)
    assert main(args + ["--steps", "7"]) == 0           # resumes: the same text, three more steps
    return src, out, first


def test_the_file_is_the_model_plus_a_nextn_block(trained):
    src, out, _ = trained
    a, b = read_gguf(src), read_gguf(out)
    assert all(np.array_equal(a.raw(n), b.raw(n)) for n in a.tensors)
    added = set(b.tensors) - set(a.tensors)
    assert "blk.6.nextn.eh_proj.weight" in added and "blk.6.attn_q.weight" in added and "blk.6.ffn_down.weight" in added
    assert not any("embed_tokens" in n or "shared_head_head" in n for n in added)     # shares the model's
    assert b.metadata["llama.block_count"] == 7 and b.metadata["llama.nextn_predict_layers"] == 1
    same = lambda x, y: np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y  # noqa: E731
    assert all(same(v, b.metadata[k]) for k, v in a.metadata.items() if k != "llama.block_count")
    assert len(GGUFReader(out).tensors) == len(b.tensors)                  # gguf's own reader agrees


def test_a_second_run_resumed_from_the_checkpoint(trained):
    _, out, first = trained
    last = torch.load(out.with_name(out.name + ".ckpt"), weights_only=True)
    assert first["step"] == 4 and last["step"] == 7
    assert not torch.equal(first["layer"]["eh_proj"], last["layer"]["eh_proj"])


def test_the_engine_drafter_computes_what_was_trained(trained):
    src, out, _ = trained
    m = load_model(EngineConfig(model=str(out), dtype="float32", ctx=256, draft="mtp", spec=2))
    try:
        layer = mtp_trainer.new_layer(load_model(EngineConfig(model=str(src), dtype="float32", ctx=256)))
        layer.w.load_state_dict(torch.load(out.with_name(out.name + ".ckpt"), weights_only=True)["layer"])
        tokens = m.tokenizer.encode("The quick brown fox jumps over the lazy dog by the river bank")
        hidden, _ = m.pipeline.score_hidden(tokens)
        n = len(tokens) - 1
        with torch.no_grad():
            want = layer(hidden[:n], torch.tensor(tokens[1:]))
            g = m.drafter._rows(hidden[:n], tokens[1:], [0] * n, list(range(n)))
            got = m.drafter.head.linear(rms_norm(g, m.drafter.w.head_norm, m.cfg.norm_eps)).float()
        assert (got - want).abs().max().item() < 1e-4
        assert torch.equal(got.argmax(-1), want.argmax(-1))
        with torch.no_grad():                  # a chain step: row t+1 joins the layer's own output at t
            _, want2 = layer(hidden[:n], torch.tensor(tokens[1:]), chain=True)
            for t in (0, n - 3):
                m.drafter._rows(hidden[:n], tokens[1:], [0] * n, list(range(n)))     # catch-up rows' KV again
                g2 = m.drafter._rows(g[t:t + 1], [tokens[t + 2]], [0], [t + 1])
                got2 = m.drafter.head.linear(rms_norm(g2, m.drafter.w.head_norm, m.cfg.norm_eps)).float()
                assert (got2[0] - want2[t]).abs().max().item() < 1e-4, t
    finally:
        m.pipeline.close()


def test_drafting_with_the_trained_layer_is_exact(trained, capsys):
    _, out, _ = trained
    rc = main(["batch-test", "--model", str(out), "--devices", "cpu,cpu", "--parallel", "4", "--batch-groups", "2",
               "--piped-mtp", "2", "--max-tokens", "16"])
    text = capsys.readouterr().out
    assert rc == 0 and text.count("IDENTICAL") == 4, text


def test_a_sidecar_layer_is_read_beside_its_model(tmp_path, capsys):
    """--sidecar writes the layer alone as MODEL.mtp.gguf; loading MODEL with MTP drafts on gives it that
    layer (the effective configuration names it); without them, or beside another model, it is left alone."""
    import shutil

    from engine.synthetic import make_model

    src = make_model("llama", "tiny", tmp_path / "m.gguf")
    side = tmp_path / "m.mtp.gguf"
    assert main(["mtp-train", "--model", str(src), "--out", str(side), "--tokens", "80", "--seq-tokens", "40",
                 "--steps", "2", "--sidecar"]) == 0
    assert side.stat().st_size < src.stat().st_size / 4 and "token_embd.weight" not in read_gguf(side).tensors
    m = load_model(EngineConfig(model=str(src), ctx=128, draft="mtp", spec=3))
    try:
        assert m.drafter is not None and m.info.mtp_layers == 1
        assert m.effective.mtp_file == str(side) and m.info.mtp_text() == "1 trained for this file, in m.mtp.gguf"
    finally:
        m.pipeline.close()
    for off in (dict(draft="lookup", spec=3), dict(draft="mtp", spec=1)):      # no MTP drafts: no layer to run
        m = load_model(EngineConfig(model=str(src), ctx=128, **off))
        assert m.drafter is None and m.info.mtp_layers == 0
        m.pipeline.close()
    rc = main(["batch-test", "--model", str(src), "--devices", "cpu,cpu", "--parallel", "2", "--batch-groups", "2",
               "--piped-mtp", "2", "--max-tokens", "12"])
    text = capsys.readouterr().out
    assert rc == 0 and text.count("IDENTICAL") == 2 and "(drafts 0/0)" not in text, text
    other = make_model("llama", "tiny", tmp_path / "o.gguf", seed=1, qtype="Q4_0")    # another file
    shutil.copy(side, tmp_path / "o.mtp.gguf")
    m = load_model(EngineConfig(model=str(other), ctx=128, draft="mtp", spec=3))
    try:
        assert m.drafter is None and any("not used" in n for n in m.effective.fallbacks)
    finally:
        m.pipeline.close()
    # what the settings panel and `strata inspect` read from the headers, before any load
    mine, theirs = probe_model(str(src)), probe_model(str(other))
    assert (mine.mtp_layers, mine.mtp_file, mine.mtp_note) == (0, str(side), "")
    assert mine.mtp_text() == "1 trained for this file, in m.mtp.gguf"
    assert theirs.mtp_file == "" and theirs.mtp_note == "o.mtp.gguf not used: it was trained for another model"
    assert main(["inspect", str(other)]) == 0 and "MTP layers     none (o.mtp.gguf not used" in capsys.readouterr().out
    (tmp_path / "o.mtp.gguf").write_bytes(side.read_bytes()[:5000])      # a truncated sidecar: the model loads
    assert "o.mtp.gguf not used: " in probe_model(str(other)).mtp_note
    m = load_model(EngineConfig(model=str(other), ctx=128, draft="mtp", spec=3))
    try:
        assert m.drafter is None and any("o.mtp.gguf not used" in n for n in m.effective.fallbacks)
    finally:
        m.pipeline.close()


def test_model_text_stopped_part_way_continues_where_it_was(tmp_path):
    """The text is saved as it is written; a run that stopped part way goes on from the saved rounds and
    ends with the text one uninterrupted run writes (each sequence's draws are keyed by its own seed)."""
    from app.cmd_mtp_train import model_text
    from engine.synthetic import make_model

    src = str(make_model("llama", "tiny", tmp_path / "m.gguf"))
    whole = model_text(src, "cpu", 60, 10, tmp_path / "whole.pt")
    part = tmp_path / "part.pt"
    first, lens = model_text(src, "cpu", 20, 10, part)
    state = torch.load(part, weights_only=True)
    assert state["complete"] and state["written"] >= 20 and len(first) < len(whole[0])
    assert lens == whole[1][:len(lens)] and all(0 < n < len(s) for s, n in zip(first, lens))   # prompt lengths
    state["complete"] = False                      # as if stopped after these rounds
    torch.save(state, part)
    assert model_text(src, "cpu", 60, 10, part) == whole
    assert model_text(src, "cpu", 60, 10, part) == whole      # complete now: read back, nothing written


def test_held_out_text_comes_from_prompts_and_files_it_never_trained_on(tmp_path):
    """Sequences written from one prompt are alike, so the held-out figure holds out whole prompts (and
    whole files of --text); files are read in pieces of --text-seq tokens up to the budget."""
    from app.cmd_mtp_train import by_prompt, file_text, held_apart

    prompts = [[1, 2, 3], [4, 5], [6, 7, 8, 9], [10], [11, 12]]
    seqs = [p + [100 + k, 200 + k] for k in range(50) for p in prompts[k % 5:k % 5 + 1]]
    lens = [len(prompts[k % 5]) for k in range(50)]
    train, held = held_apart(by_prompt(seqs, lens))
    assert len(train) + len(held) == 50 and 5 <= len(held) <= 10
    key = lambda s, n: tuple(s[:n])  # noqa: E731
    held_prompts = {key(s, lens[seqs.index(s)]) for s in held}
    assert not held_prompts & {key(s, lens[seqs.index(s)]) for s in train}

    for i in range(6):
        (tmp_path / f"m{i}.py").write_text(f"def f{i}(x):\n    return x * {i}\n" * 40)
    (tmp_path / "skip.bin").write_text("not text " * 100)
    m = load_model(EngineConfig(model="default", dtype="float32", ctx=256))
    try:
        files = file_text(m.tokenizer, [str(tmp_path)], 10_000, 64)
        assert len(files) == 6 and all(len(c) <= 64 for f in files for c in f)
        capped = file_text(m.tokenizer, [str(tmp_path)], 300, 64)
        assert sum(len(c) for f in capped for c in f) <= 300 + 64
        train, held = held_apart(files)
        held_set = {tuple(c) for c in held}
        assert held and train and all(len({tuple(c) in held_set for c in f}) == 1 for f in files)   # whole files
    finally:
        m.pipeline.close()
