"""--batch-groups auto with MTP drafts over several stages (engine.group_choice): serial batch MTP in one
group or piped MTP in a group per stage, whichever the windows measured at load make faster, said in the
effective configuration; an explicit --batch-groups, or no drafts, is taken as it is."""
from __future__ import annotations

import re

import pytest

from app.local_engine import local_client
from app.run_requests import run_together
from engine import group_choice
from engine.loader import load_model
from engine.messages import AddRequest, EngineConfig, SamplingParams


def load(model, **kw):
    return load_model(EngineConfig(model=str(model), devices="cpu,cpu", parallel=4, draft="mtp", **kw))


def auto_note(lm) -> str | None:
    return next((n for n in lm.effective.fallbacks if n.startswith("batch-groups auto:")), None)


def test_auto_groups_take_the_layout_the_measured_windows_make_faster(synthetic):
    """The real measurement on two CPU stages (the scheduler decoding a filler prompt in each layout): the
    note names the layout, both measured figures, and the layout it names is the one loaded (its tok/s figure
    the higher)."""
    lm = load(synthetic("llama", mtp=1), spec=3, piped_mtp=2)
    try:
        note = auto_note(lm)
        assert note is not None, lm.effective.fallbacks
        serial, piped = (float(x) for x in re.findall(r"(\d+) tok/s", note))
        assert serial > 0 and piped > 0
        assert len(lm.groups) == (2 if piped > serial else 1)
        assert ("piped MTP in 2 groups" in note) == (len(lm.groups) == 2)
        assert lm.effective.groups == lm.groups
    finally:
        lm.pipeline.close()


def test_a_context_shorter_than_the_measurement_run(synthetic):
    """A 40-position context, shorter than the filler prompt and the run's tokens: the run's prompts are cut
    to fit, and the measurement still runs."""
    lm = load_model(EngineConfig(model=str(synthetic("llama", mtp=1)), devices="cpu,cpu", parallel=8, ctx=40,
                                 draft="mtp", spec=4, piped_mtp=3))
    lm.pipeline.close()
    assert auto_note(lm) and "not measured" not in auto_note(lm)


@pytest.mark.parametrize("faster, groups", [("serial", 1), ("piped", 2)])
def test_the_choice_follows_the_measurement_and_the_engine_runs_it(synthetic, monkeypatch, faster, groups):
    """Measurements that favour one side load that side, and requests then run with its drafts: serial
    windows draft at the --spec depth, piped ones at the --piped-mtp depth."""
    def rate(pipeline, groups, *a, **kw):
        return (1000.0 if (len(groups) == 1) == (faster == "serial") else 100.0), 2.0
    monkeypatch.setattr(group_choice, "decode_rate", rate)
    model = synthetic("llama", mtp=1)
    lm = load(model, spec=4, piped_mtp=1)
    lm.pipeline.close()
    assert len(lm.groups) == groups and auto_note(lm)
    cfg = EngineConfig(model=str(model), devices="cpu,cpu", parallel=4, draft="mtp", spec=4, piped_mtp=1)
    reqs = [AddRequest(request_id=f"r{i}", prompt=f"request {i} here", sampling=SamplingParams(max_tokens=12))
            for i in range(4)]
    with local_client(cfg) as eng:
        assert len(eng.ready.config.groups) == groups
        out = run_together(eng, reqs)
    assert all(len(o.tokens) == 12 and o.done.drafts_offered > 0 for o in out.values())
    # (a random MTP layer: its proposals are rejected, so each window offers its depth: 3 serial, 1 piped)
    offered, windows = (sum(getattr(o.done, f) for o in out.values()) for f in ("drafts_offered", "windows"))
    assert offered > 2 * windows if groups == 1 else offered <= windows


@pytest.mark.parametrize("kw", [dict(spec=3, piped_mtp=2, batch_groups="2"),
                                dict(spec=3, piped_mtp=2, batch_groups="1"), dict(spec=1, piped_mtp=0)])
def test_no_measurement_where_the_groups_are_given_or_nothing_drafts(synthetic, monkeypatch, kw):
    def never(*a, **k):
        raise AssertionError("measured")
    monkeypatch.setattr(group_choice, "decode_rate", never)
    lm = load(synthetic("llama", mtp=1), **kw)
    lm.pipeline.close()
    assert auto_note(lm) is None
    assert len(lm.groups) == int(kw.get("batch_groups", 2))
