"""Runs `python -m app.cli ARGS` with Python's garbage collections timed: each one over GC_MS (default 2)
milliseconds printed to stderr with its generation and the objects it looked at (issue 17: ~90 ms stalls in
guarded one-stream benches, 2026-12-06)."""
import gc
import os
import sys
import time

LIMIT = float(os.environ.get("GC_MS", "2")) / 1e3
started = {}


def timed(phase, info):
    if phase == "start":
        started["t"] = time.perf_counter()
        return
    took = time.perf_counter() - started.get("t", time.perf_counter())
    if took > LIMIT:
        print(f"gc: generation {info['generation']} {took * 1e3:.1f} ms, collected {info['collected']}, "
              f"objects {len(gc.get_objects(info['generation']))}", file=sys.stderr)


gc.callbacks.append(timed)
sys.argv = ["strata"] + sys.argv[1:]
from app.cli import main  # noqa: E402

sys.exit(main())
