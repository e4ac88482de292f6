"""STRATA_WINDOW_LOG (engine.window_log): every committed window of a real engine as a line of JSON, and
tests/gpu/window_log.py's sums by kind of window."""
from __future__ import annotations

import json
import subprocess
import sys

from app.local_engine import local_client
from app.run_requests import run_together
from engine.messages import AddRequest, EngineConfig, SamplingParams


def test_each_committed_window_is_logged_and_summed_by_kind(synthetic, monkeypatch, tmp_path):
    log = tmp_path / "w.jsonl"
    monkeypatch.setenv("STRATA_WINDOW_LOG", str(log))
    monkeypatch.setenv("STRATA_CHAIN", "1")                  # chained windows on the CPU stage
    reqs = [AddRequest(request_id="a", prompt="a lone request", sampling=SamplingParams(max_tokens=12,
                                                                                       ignore_eos=True))]
    with local_client(EngineConfig(model=str(synthetic("llama")), parallel=1)) as eng:
        got = run_together(eng, reqs)["a"]
    ws = [json.loads(line) for line in log.read_text().splitlines()]
    assert sum(w["kept"] for w in ws) == len(got.tokens) == 12
    times = [w["t"] for w in ws]
    assert times == sorted(times) and all(w["launched"] <= w["t"] for w in ws)   # commits in order, after launch
    assert sum(w["chain"] for w in ws) >= 8 and not any(w["proposed"] for w in ws)
    out = subprocess.run([sys.executable, "tests/gpu/window_log.py", str(log)], capture_output=True, text=True,
                         check=True).stdout
    chained = [line for line in out.splitlines() if line.strip().startswith("chained")]
    assert len(chained) == 1 and int(chained[0].split()[1]) == sum(w["chain"] for w in ws)
