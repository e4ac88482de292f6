"""MTP drafts (solo, batched, piped in pipelined groups) and prompt-lookup drafts: accepted when they
are the target's own pick, counted by position, and never changing a token."""
from __future__ import annotations

import pytest

from app.cli import main
from app.local_engine import local_client
from app.run_requests import next_telemetry, run_together
from engine.drafts import lookup_proposals
from engine.messages import AddRequest, EngineConfig, SamplingParams, Telemetry


def test_lookup_proposals_copy_the_latest_earlier_match():
    toks = [1, 2, 3, 4, 5, 9, 9, 1, 2, 3]
    assert lookup_proposals(toks, 3) == [4, 5, 9]
    assert lookup_proposals([1, 2, 3], 3) == []


@pytest.mark.parametrize("layout", [
    dict(devices="cpu", parallel=1, spec=4),                                   # solo
    dict(devices="cpu", parallel=3, spec=4),                                   # batched, one group
    dict(devices="cpu,cpu", parallel=4, batch_groups="2", piped_mtp=3),        # piped, 2 slots per group
    dict(devices="cpu,cpu,cpu", parallel=3, batch_groups="3", piped_mtp=2),    # piped, 3 stages
])
def test_mtp_drafts_are_accepted_on_a_model_whose_drafter_agrees(counting, layout):
    reqs = [AddRequest(request_id=f"r{i}", prompt=f"count from {i}",
                       sampling=SamplingParams(max_tokens=24, ignore_eos=True)) for i in range(layout["parallel"])]
    tel: list[Telemetry] = []
    with local_client(EngineConfig(model=str(counting("llama")), **layout)) as eng:
        out = run_together(eng, reqs, tel.append)
        tel.append(next_telemetry(eng))   # one published after the last commit
    depth = layout.get("piped_mtp") or layout["spec"] - 1
    for o in out.values():
        toks = o.tokens
        assert toks == list(range(toks[0], toks[0] + 24)), "the counting model counts"
        d = o.done
        assert d.drafts_offered > 0 and d.drafts_accepted / d.drafts_offered > 0.9
        assert d.completion_tokens / d.windows > 0.8 * (depth + 1) * 24 / 25
    last = tel[-1]
    assert last.drafts_offered_total >= sum(o.done.drafts_offered for o in out.values())
    assert len(last.drafts_offered_by_pos) == depth and all(a <= b for a, b in
                                                            zip(last.drafts_accepted_by_pos, last.drafts_offered_by_pos))


@pytest.mark.parametrize("arch", ["qwen3moe", "glm4moe", "qwen35moe"])
def test_piped_mtp_on_counting_moe_is_exact(counting, capsys, arch):
    rc = main(["batch-test", "--model", str(counting(arch)), "--devices", "cpu,cpu", "--parallel", "4",
               "--batch-groups", "2", "--piped-mtp", "3", "--max-tokens", "20"])
    out = capsys.readouterr().out
    assert rc == 0 and out.count("IDENTICAL") == 4, out
    assert "(drafts 0/" not in out


def test_spec_min_p_cuts_the_chain(synthetic):
    """Random drafter: its probabilities are tiny, so with spec-min-p 0.5 only the first proposal goes."""
    r = AddRequest(request_id="a", prompt="hi", sampling=SamplingParams(max_tokens=12, ignore_eos=True))
    offered = {}
    for min_p in (0.0, 0.5):
        with local_client(EngineConfig(model=str(synthetic("llama", mtp=1)), spec=4, spec_min_p=min_p)) as eng:
            d = run_together(eng, [r])["a"].done
        offered[min_p] = d.drafts_offered / d.windows
    assert offered[0.5] <= 1.0 < 2.0 < offered[0.0]


@pytest.mark.slow
def test_lookup_drafts_on_the_default_model_pay_on_repetitive_text():
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu. " * 4
    r = AddRequest(request_id="a", prompt=text, sampling=SamplingParams(max_tokens=24))
    # the reference numerics: their greedy continuation loops ("the ratio of the ratio of ..."), which is
    # the repetitive text lookup drafts exist for (the fast mode's continuation does not loop here)
    with local_client(EngineConfig(draft="lookup", spec=5, dtype="float32")) as eng:
        d = run_together(eng, [r])["a"].done
    assert d.drafts_accepted > 5 and d.completion_tokens / d.windows > 1.5


def test_configure_changes_draft_depth_without_reload(counting):
    from engine.messages import Configure

    r = lambda rid: AddRequest(request_id=rid, prompt="count", sampling=SamplingParams(max_tokens=16, ignore_eos=True))  # noqa: E731
    with local_client(EngineConfig(model=str(counting("llama")), spec=1)) as eng:
        off = run_together(eng, [r("a")])["a"]
        eng.configure(Configure(spec=4))
        on = run_together(eng, [r("b")])["b"]
        eng.configure(Configure(draft="lookup"))
        lookup = run_together(eng, [r("c")])["c"]
    assert off.done.drafts_offered == 0 and on.done.drafts_accepted > 10
    assert off.tokens == on.tokens == lookup.tokens     # drafts change how many tokens a window yields, never which
    assert lookup.done.drafts_accepted < on.done.drafts_accepted   # a counting sequence never repeats itself


def test_the_default_models_trained_mtp_layer(capsys):
    """The MTP layer shipped for the default model (engine/mtp/, trained by strata mtp-train) loads with
    MTP drafts on, its first proposals are often the model's own greedy picks on the bundled code prompt
    (measured with spec 4: 19 of 34 first and 9 of 34 second proposals), and drafting with it is exact,
    solo and in piped groups."""
    from app import bench_prompts

    sp = SamplingParams(max_tokens=48, ignore_eos=True)
    r = AddRequest(request_id="c", prompt=bench_prompts.prompt("code", "t", ""), sampling=sp)
    with local_client(EngineConfig(model="default", draft="mtp", spec=2)) as eng:
        assert eng.ready.config.mtp_file.endswith("SmolLM2-135M-Instruct.Q4_1.mtp.gguf")
        d = run_together(eng, [r])["c"].done
    assert d.drafts_offered >= 20 and d.drafts_accepted / d.drafts_offered > 0.25, (d.drafts_accepted, d.drafts_offered)
    for flags in (["--parallel", "2", "--spec", "3"],
                  ["--devices", "cpu,cpu", "--parallel", "4", "--batch-groups", "2", "--piped-mtp", "2",
                   "--temperature", "0.8", "--seed", "3"]):
        rc = main(["batch-test", "--model", "default", "--draft", "mtp", "--max-tokens", "16", *flags])
        out = capsys.readouterr().out
        assert rc == 0 and out.count("IDENTICAL") == int(flags[flags.index("--parallel") + 1]), out
