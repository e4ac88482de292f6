"""MTP drafts (solo, batched, piped in pipelined groups) and prompt-lookup drafts: accepted when they
are the target's own pick, counted by position, and never changing a token."""
from __future__ import annotations

import msgspec
import pytest

from app.cli import main
from app.local_engine import local_client
from app.run_requests import next_telemetry, run_together
from engine.drafts import lookup_proposals, replay_proposals
from engine.messages import AddRequest, EngineConfig, SamplingParams, Telemetry


def test_lookup_proposals_copy_the_latest_earlier_match():
    toks = [1, 2, 3, 4, 5, 9, 9, 1, 2, 3]
    assert lookup_proposals(toks, 3) == [4, 5, 9]
    assert lookup_proposals([1, 2, 3], 3) == []


def test_replay_proposals_keep_the_recorded_tokens_at_the_rate_asked():
    rec = list(range(100, 5100))
    assert replay_proposals(rec, 7, 3, 1.0, 1) == [107, 108, 109]
    assert replay_proposals(rec, 4998, 5, 1.0, 1) == [5098, 5099]                 # the recording's end
    assert replay_proposals(rec, 7, 3, 1.0, 1) == replay_proposals(rec, 7, 3, 1.0, 1)
    firsts = [replay_proposals(rec, t, 4, 0.7, 3) for t in range(5000)]
    kept_first = sum(f[0] == rec[t] for t, f in enumerate(firsts)) / 5000
    assert 0.67 < kept_first < 0.73
    for t, f in enumerate(firsts):             # a run of kept tokens, then at most one wrong one, then none
        n = next((j for j, tok in enumerate(f) if tok != rec[t + j]), len(f))
        assert f[:n] == rec[t:t + n] and len(f) <= n + 1 and (n == len(f) or f[n] == rec[t + n] + 1)
    # a position's draw is its own: the second proposal is kept at the same rate after a kept first one
    seconds = [f for t, f in enumerate(firsts) if len(f) > 1 and f[0] == rec[t]]
    assert seconds and 0.65 < sum(f[1] == f[0] + 1 for f in seconds) / len(seconds) < 0.75


@pytest.mark.parametrize("layout", [dict(devices="cpu", parallel=2, spec=4),
                                    dict(devices="cpu,cpu", parallel=4, batch_groups="2", piped_mtp=3)])
def test_replayed_drafts_keep_every_token_and_offer_at_the_rate(synthetic, layout):
    """The replay source on a random-weight model with an MTP layer (whose own drafts are never kept):
    the tokens are the drafts-off run's, and proposals are kept as the replay says."""
    model = str(synthetic("llama", mtp=1))
    reqs = [AddRequest(request_id=f"r{i}", prompt=f"tell {i}", sampling=SamplingParams(max_tokens=24, ignore_eos=True,
                                                                                     seed=i))
            for i in range(layout["parallel"])]
    with local_client(EngineConfig(model=model, devices=layout["devices"], parallel=layout["parallel"])) as eng:
        plain = run_together(eng, reqs)
    for accept in (1.0, 0.5):
        replayed = [msgspec.structs.replace(r, sampling=msgspec.structs.replace(
            r.sampling, replay=plain[r.request_id].tokens, replay_accept=accept)) for r in reqs]
        with local_client(EngineConfig(model=model, draft="replay", **layout)) as eng:
            out = run_together(eng, replayed)
        for r in reqs:
            o = out[r.request_id]
            assert o.tokens == plain[r.request_id].tokens
            assert o.done.drafts_offered > 0
            if accept == 1.0:
                assert o.done.drafts_accepted == o.done.drafts_offered
            else:
                assert 0 < o.done.drafts_accepted < o.done.drafts_offered


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
    (measured with spec 4, 64 tokens: 14 of 42 first, 4 of 42 second, 2 of 41 third proposals), and
    drafting with it is exact, solo and in piped groups."""
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
