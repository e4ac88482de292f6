"""`strata bench` on a tiny synthetic model: the figures are consistent with each other (speed itself is
the benchmark's business, not a test's)."""
from __future__ import annotations

import json

import pytest

from app.cli import main


@pytest.mark.parametrize("extra", [[], ["--spec", "3", "--draft", "lookup"]], ids=["plain", "lookup-drafts"])
def test_bench_figures_add_up(capsys, synthetic, extra):
    rc = main(["bench", "--model", str(synthetic("llama")), "--streams", "1,3", "--parallel", "3",
               "--max-tokens", "12", "--prompt-tokens", "24", "--json", *extra])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["results"]
    assert [r["streams"] for r in rows] == [1, 3]
    for r in rows:
        # decode-only aggregate = the streams' decode rates added up = streams x their mean
        assert r["tok_s_decode"] == pytest.approx(r["streams"] * r["tok_s_per_stream"], abs=0.02 * r["streams"])
        assert 0 < r["tok_s_total"] and 0 < r["ttft_s"] < r["wall_s"]
        assert out["layout"]["stages"] == ["cpu:0-5"]
        if not extra:
            assert r["drafts_offered"] == 0 and r["tokens_per_window"] == 1.0
        else:
            assert 0 < r["drafts_offered"] and 0 <= r["drafts_accepted"] <= r["drafts_offered"]
            assert r["tokens_per_window"] >= 1.0
