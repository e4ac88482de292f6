"""`strata soak`, the short version CI runs (issue 18, item 4): concurrent streaming and plain clients,
cancels and early drops, against a real worker (4 slots in 2 groups on two CPU stages) and server on
loopback; the long run (32 clients, 10 minutes, the default model) is reported in the closing note."""
from __future__ import annotations

import json
import subprocess
import sys


def test_short_soak_ends_clean_with_idle_slots_flat_memory_and_identical_batches(synthetic, tmp_path):
    out = tmp_path / "soak.json"
    r = subprocess.run([sys.executable, "-m", "app.cli", "soak", "--model", str(synthetic("llama", mtp=1)),
                        "--clients", "6", "--seconds", "20", "--piped-mtp", "2", "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rep = json.loads(out.read_text())
    o = rep["outcomes"]
    assert not o.get("bad") and rep["bad_examples"] == []
    assert o.get("completed", 0) >= 20 and o.get("cancelled by the client", 0) >= 1, o
    assert rep["end_state"] == {"idle": True, "slots": ["idle"] * 4, "queue_depth": 0, "in_flight": 0}
    assert rep["batch_test_exit"] == 0 and "IDENTICAL" in r.stderr and "DIFFER" not in r.stderr
    mem = rep["worker_rss_mib"]
    assert mem["after_warmup_min"] > 0 and mem["after_warmup_max"] - mem["after_warmup_min"] < 64, mem
