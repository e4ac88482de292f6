"""`strata bench` on a tiny synthetic model: the figures are consistent with each other (speed itself is
the benchmark's business, not a test's)."""
from __future__ import annotations

import json

import pytest

from app.cli import main


# lookup drafts need a continuation that repeats itself: the reference numerics give one on this model
@pytest.mark.parametrize("extra", [[], ["--spec", "3", "--draft", "lookup", "--dtype", "float32"]], ids=["plain", "lookup-drafts"])
def test_bench_figures_add_up(capsys, synthetic, extra):
    rc = main(["bench", "--model", str(synthetic("llama")), "--streams", "1,3", "--parallel", "3",
               "--max-tokens", "12", "--prompt-tokens", "40", "--json", *extra])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["results"]
    assert [r["streams"] for r in rows] == [1, 3]
    for r in rows:
        # decode-only aggregate = the streams' decode rates added up = streams x their mean
        assert r["tok_s_decode"] == pytest.approx(r["streams"] * r["tok_s_per_stream"], abs=0.02 * r["streams"])
        assert 0 < r["tok_s_total"] and 0 < r["ttft_s"] < r["wall_s"]
        assert out["layout"]["stages"] == ["cpu:0-5"]
        assert abs(r["prompt_tokens"] - 40) <= 6                            # sized to the model's tokenizer
        assert r["window_ms"] > 0
        if not extra:
            assert r["drafts_offered"] == 0 and r["tokens_per_window"] == 1.0
            assert r["rows_per_window"] == r["streams"]                   # one group: every stream's row
        else:
            assert 0 < r["drafts_offered"] and 0 <= r["drafts_accepted"] <= r["drafts_offered"]
            assert r["tokens_per_window"] >= 1.0
            assert r["rows_per_window"] > r["streams"]                    # proposals ride along


def test_prompt_kinds_edit_copies_and_drafts_pay_there(capsys):
    """The bundled prompt kinds (issue 17, item 3) on the default model with prompt-lookup drafts: the
    edit prompt (return a file with one rename) is answered mostly by copying, so its windows carry far
    more tokens than prose does; each kind's prompt is its own bundled text."""
    got = {}
    for kind in ("edit", "prose"):
        rc = main(["bench", "--prompt-kind", kind, "--streams", "1", "--max-tokens", "48", "--spec", "4",
                   "--draft", "lookup", "--json"])
        assert rc == 0
        got[kind] = json.loads(capsys.readouterr().out)["results"][0]
    assert all(r["prompt_kind"] == k for k, r in got.items())
    assert got["edit"]["prompt_tokens"] > 200 and got["prose"]["prompt_tokens"] > 150
    assert got["edit"]["tokens_per_window"] >= 2.5 > got["prose"]["tokens_per_window"], got
    assert got["edit"]["acceptance"] > got["prose"]["acceptance"], got


def test_read_beside_a_decoding_stream(capsys, synthetic):
    """--read-beside (issue 14, item 3): one stream decodes while another's long prompt is read; the
    report has the read's speed beside the stream and alone, and the stream's longest gap during the read."""
    rc = main(["bench", "--model", str(synthetic("llama")), "--streams", "1", "--max-tokens", "8",
               "--read-beside", "400", "--json"])
    assert rc == 0
    b = json.loads(capsys.readouterr().out)["read_beside"]
    assert b["prompt_tokens"] > 250 and b["read_tok_s_alone"] > 0 and b["read_tok_s_beside"] > 0
    assert b["read_speed_vs_alone"] == pytest.approx(b["read_tok_s_beside"] / b["read_tok_s_alone"], abs=1e-3)
    assert b["median_gap_before_ms"] > 0 and b["longest_gap_ms"] >= b["median_gap_before_ms"]


def test_window_costs_by_rows_and_part(capsys):
    """--window-costs (issue 13, item 3): a decode window of each row count timed by part on the default
    model with its MTP layer: every part measured for every row count, the drafter's at the plan's depth (how
    the parts compare is the benchmark's business: the test machine's load moves them)."""
    rc = main(["bench", "--streams", "1", "--max-tokens", "8", "--spec", "3", "--draft", "mtp",
               "--window-costs", "1,4", "--json"])
    assert rc == 0
    c = json.loads(capsys.readouterr().out)["window_costs"]
    assert c["rows"] == [1, 4] and c["depth"] == 2
    assert all(len(c[p]) == 2 and min(c[p]) > 0 for p in ("trunk_ms", "pick_ms", "draft_ms")), c


def test_window_costs_wait_for_no_request(synthetic):
    """Measured only while no request runs: asked during one, a clear refusal, and the request goes on."""
    from app.engine_client import EngineFailure
    from app.local_engine import local_client
    from engine.messages import AddRequest, EngineConfig, SamplingParams

    with local_client(EngineConfig(model=str(synthetic("llama")), ctx=4096)) as eng:
        h = eng.submit(AddRequest(request_id="a", prompt="a long one", sampling=SamplingParams(max_tokens=3000)))
        next(iter(h))
        with pytest.raises(EngineFailure, match="while no request runs"):
            eng.measure_windows([1, 2])
        text, done = h.result(timeout=120)
        assert done.finish_reason == "length" and done.completion_tokens == 3000
        assert len(eng.measure_windows([2]).trunk_ms) == 1


def test_a_request_that_fails_part_way_fails_the_bench(capsys, synthetic, monkeypatch):
    """A window that fails ends its request in an error: the bench says so and exits non-zero instead of
    printing a rate over the tokens it got (2026-12-06: guarded GPU benches had measured requests that
    ended after 310-335 of 512 tokens and printed their rates)."""
    from engine import scheduler
    real, calls = scheduler.Scheduler._finish, [0]

    def failing(self, *a, **k):
        calls[0] += 1
        if calls[0] == 30:
            raise RuntimeError("a planted window failure")
        return real(self, *a, **k)
    monkeypatch.setattr(scheduler.Scheduler, "_finish", failing)
    rc = main(["bench", "--model", str(synthetic("llama")), "--streams", "1", "--max-tokens", "40",
               "--prompt-tokens", "20"])
    err = capsys.readouterr().err
    assert rc == 1 and calls[0] >= 30
    assert "ended in an error after" in err and "of 40 tokens: RuntimeError: a planted window failure" in err
