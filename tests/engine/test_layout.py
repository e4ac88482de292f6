"""Layer splits, devices and groups: `auto`, and bad layouts refused with a message saying what to change."""
from __future__ import annotations

import pytest

from engine import layout
from engine.errors import ConfigError, OutOfMemoryError
from engine.loader import load_model
from engine.messages import EngineConfig


def test_explicit_split():
    assert layout.parse_split("16,24", 32, 3) == [0, 16, 24]
    assert layout.parse_split("auto", 32, 3) is None


@pytest.mark.parametrize("spec,stages,needle", [
    ("24,16", 3, "not increasing"),
    ("16,16", 3, "not increasing"),
    ("40", 2, "out of range"),
    ("8", 3, "gives 2 stages but --devices lists 3"),
    ("a,b", 3, "not a list of layer numbers"),
])
def test_bad_splits(spec, stages, needle):
    with pytest.raises(ConfigError, match=needle):
        layout.parse_split(spec, 32, stages)


def test_auto_split_balances_bytes():
    starts = layout.auto_split([10] * 30, [1, 1], first_extra=0, last_extra=0)
    assert starts == [0, 15]
    starts = layout.auto_split([10] * 30, [1, 3], first_extra=0, last_extra=0)
    assert 6 <= starts[1] <= 9
    # the head on the last stage counts against it
    assert layout.auto_split([10] * 30, [1, 1], first_extra=0, last_extra=100)[1] > 15


def test_devices():
    assert layout.parse_devices("cpu,cpu") == ["cpu", "cpu"]
    with pytest.raises(ConfigError, match="does not exist"):
        layout.parse_devices("cuda:7")
    with pytest.raises(ConfigError, match="unknown device"):
        layout.parse_devices("tpu")


def test_groups():
    assert layout.slot_groups(4, "auto", 2).groups == [[0, 1], [2, 3]]
    note = layout.slot_groups(3, "auto", 2)
    assert note.groups == [[0, 1, 2]] and "do not divide" in note.note
    with pytest.raises(ConfigError, match="does not divide"):
        layout.slot_groups(4, "3", 2)


def test_more_stages_than_layers(synthetic):
    with pytest.raises(ConfigError, match="only 6 layers"):
        load_model(EngineConfig(model=str(synthetic("llama")), devices=",".join(["cpu"] * 7)))


def test_stage_that_does_not_fit(synthetic, monkeypatch):
    monkeypatch.setattr(layout, "free_bytes", lambda dev: 1000)
    with pytest.raises(OutOfMemoryError, match="stage 0 \\(cpu\\) needs"):
        load_model(EngineConfig(model=str(synthetic("llama"))))


def test_out_of_memory_while_capturing_graphs_says_what_to_change(synthetic, monkeypatch):
    """CUDA reports a graph capture's out of memory as an AcceleratorError (GLM-4.5-Air's shape with Q5_0
    down experts as int8 planes on an 80 GB card): the load fails as an out-of-memory with what to change,
    and its pipeline is closed; another error at capture stays itself."""
    import torch

    from engine.pipeline import Pipeline
    from engine.stage import Stage

    closed = []
    close = Pipeline.close
    monkeypatch.setattr(Pipeline, "close", lambda self: (closed.append(self), close(self)))
    for error, expect, match in ((torch.AcceleratorError("CUDA error: out of memory"), OutOfMemoryError,
                                  "stage 0 \\(cpu\\) ran out of memory capturing its tile graphs after its .* GiB "
                                  "of weights loaded: move layers"),
                                 (RuntimeError("CUDA error: an illegal memory access"), RuntimeError, "illegal")):
        def capture(self, n_rows, with_logits=False, error=error):
            raise error
        monkeypatch.setattr(Stage, "capture", capture)
        with pytest.raises(expect, match=match):
            load_model(EngineConfig(model=str(synthetic("llama")), devices="cpu,cpu"))
    assert len(closed) == 2


def test_effective_config_reports_layout(synthetic):
    m = load_model(EngineConfig(model=str(synthetic("llama", mtp=1)), devices="cpu,cpu", layer_split="2",
                                parallel=3, piped_mtp=2))
    try:
        eff = m.effective
        assert [(s.first_layer, s.end_layer) for s in eff.stages] == [(0, 2), (2, 6)]
        assert eff.groups == [[0, 1, 2]] and any("do not divide" in f for f in eff.fallbacks)
        assert eff.mtp_layers == 1 and eff.piped_mtp == 2 and eff.stages[-1].has_head
    finally:
        m.pipeline.close()


def test_auto_split_gives_the_drafting_last_stage_fewer_layers(synthetic):
    def last_stage_layers(**kw):
        m = load_model(EngineConfig(model=str(synthetic("llama", mtp=1)), devices="cpu,cpu", parallel=4, **kw))
        try:
            s = m.effective.stages[-1]
            return s.end_layer - s.first_layer, m.effective.fallbacks
        finally:
            m.pipeline.close()
    plain, _ = last_stage_layers()
    drafting, notes = last_stage_layers(batch_groups="2", piped_mtp=3)
    assert 1 <= drafting <= plain
    assert any("reads the head and the MTP layer about 4 times per window" in n for n in notes)


def test_ctx_above_the_trained_context_is_kept_and_said(synthetic):
    """--ctx above the model's trained context: loaded as asked (the KV cache holds it), with a note;
    a prompt that does not fit is refused naming the loaded --ctx and the trained length."""
    from engine.core import EngineCore
    from engine.messages import AddRequest, ErrorReply, LoadModel

    path = str(synthetic("llama"))
    out: list = []
    core = EngineCore(out.append)
    trained = None
    try:
        core.handle(LoadModel(config=EngineConfig(model=path, devices="cpu", ctx=64)))
        trained = core.model.cfg.context_length
        core.handle(LoadModel(config=EngineConfig(model=path, devices="cpu", ctx=trained + 256)))
        eff = core.model.effective
        assert eff.ctx == trained + 256
        assert core.model.pipeline.stages[0].k[0].shape[1] == trained + 256
        assert any(f"above the model's trained context ({trained} tokens)" in n for n in eff.fallbacks), eff.fallbacks
        core.handle(AddRequest(request_id="long", token_ids=[5] * (trained + 256)))
        err = [m for m in out if isinstance(m, ErrorReply)][-1]
        assert err.request_id == "long" and err.kind == "request"
        assert f"holds {trained + 256} per slot" in err.message and f"--ctx {trained + 256}" in err.message
        assert f"trained on {trained}" in err.message
    finally:
        core.unload()


def test_decode_kernel_is_checked_and_said(synthetic):
    """--decode-kernel: a bad name is refused; on CPU-only stages it is not used, and that is said."""
    model = str(synthetic("llama"))
    with pytest.raises(ConfigError, match="--decode-kernel 'fast'"):
        load_model(EngineConfig(model=model, decode_kernel="fast"))
    m = load_model(EngineConfig(model=model, decode_kernel="imma"))
    assert m.effective.decode_kernel == ""
    assert any("--decode-kernel imma applies to GPU stages only" in f for f in m.effective.fallbacks)
    assert load_model(EngineConfig(model=model)).effective.fallbacks == []


def test_types_stay_in_the_files_layout_where_their_gpu_form_does_not_fit(tmp_path, monkeypatch):
    """GPU stages repack Q5_1 (10 bits a value) and Q5_0 (8.5) for streaming, more than the file's 6 and
    5.5: where that does not fit but the file's bytes do, the type that grows most stays as stored first,
    then the next, and the effective configuration says so; the load's kernels then leave them
    unrepacked (packed.FIT_KEEP), and a later load starts again from none."""
    from engine import loader
    from engine.gguf_file import read_gguf
    from engine.kernels import packed
    from engine.model_info import compact_orders
    from engine.synthetic import make_model

    path = make_model("llama", "tiny", tmp_path / "q5.gguf", qtype="Q5_0", qtype_map="*.ffn_down.weight=Q5_1")
    assert compact_orders(read_gguf(path)) == [frozenset(), frozenset({"Q5_1"}), frozenset({"Q5_1", "Q5_0"})]
    monkeypatch.setattr(layout, "parse_devices", lambda spec: ["cuda:0"])
    monkeypatch.setattr(loader, "_decode_kernel", lambda config, devices, notes: "dp4a")
    monkeypatch.setattr(layout, "free_bytes", lambda dev: 1 << 50)
    config = EngineConfig(model=str(path), devices="cuda:0")
    p = loader.place(config)
    need = {keep: sum(loader._stage_starts(p.gf, p.cfg, config, p.devices, p.dtype, p.ctx, p.groups.groups, p.plan,
                                           [], keep)[1]) for keep in compact_orders(p.gf)}
    full, q51, both = need.values()
    assert full > q51 > both
    for free, compact in ((full, frozenset()), (full - 1, {"Q5_1"}), (both, {"Q5_1", "Q5_0"})):
        monkeypatch.setattr(layout, "free_bytes", lambda dev, free=free: free)
        p = loader.place(config)
        assert p.compact == compact
        said = [n for n in p.notes if "stay in the file's layout" in n]
        assert len(said) == (1 if compact else 0)
        if compact:
            assert said[0].startswith(", ".join(sorted(compact)) + " matrices") and "GiB more" in said[0]
    monkeypatch.setattr(layout, "free_bytes", lambda dev: both - 1)
    with pytest.raises(OutOfMemoryError, match="stage 0 \\(cuda:0\\) needs"):
        loader.place(config)
    monkeypatch.setattr(packed, "FIT_KEEP", frozenset({"Q5_1"}))
    assert packed.supports(packed.QT.Q5_0, 64) and not packed.supports(packed.QT.Q5_1, 64)
    monkeypatch.undo()
    packed.FIT_KEEP = frozenset({"Q5_1"})
    m = load_model(EngineConfig(model=str(path)))        # a CPU load: nothing kept for fit
    m.pipeline.close()
    assert packed.FIT_KEEP == frozenset()
