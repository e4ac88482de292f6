"""Sum a STRATA_WINDOW_LOG file (engine.window_log) by kind of window: how many, the tokens they gave,
the wall time from the commit before to theirs, and the device-side time from launch to commit.

    python3 tests/gpu/window_log.py LOG [--after N]   (N: skip the first N windows, e.g. a warm-up)
A request starts at a window that reads a prompt after one that did not (one active request at a time)."""
from __future__ import annotations

import argparse
import json
from collections import defaultdict


def kind(w: dict) -> str:
    if w["prompt"]:
        return "prompt"
    if w["proposed"]:
        return "drafts" + (" +catch-up" if w["gaps"] else "")
    if w["chain"]:
        return "chained"
    return "followed" if w["followed"] else "plain"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--after", type=int, default=0)
    a = ap.parse_args()
    ws = [json.loads(line) for line in open(a.log)][a.after:]
    requests, cur = [], []
    for w in ws:
        if cur and w["prompt"] and not cur[-1]["prompt"]:
            requests.append(cur)
            cur = []
        cur.append(w)
    requests.append(cur)
    for i, req in enumerate(requests):
        by = defaultdict(lambda: [0, 0, 0.0, 0.0])
        for prev, w in zip(req, req[1:]):
            k = by[kind(w)]
            k[0] += 1
            k[1] += w["kept"]
            k[2] += (w["t"] - prev["t"]) / 1e3
            k[3] += (w["t"] - w["launched"]) / 1e3
        wall = (req[-1]["t"] - req[0]["t"]) / 1e3
        toks = sum(w["kept"] for w in req[1:])
        print(f"request {i}: {len(req)} windows, {toks} tokens in {wall:.1f} ms ({toks / max(wall, 1e-9) * 1e3:.0f} "
              f"tok/s), active {req[-1]['active']}")
        for name, (n, kept, ms, lat) in sorted(by.items(), key=lambda kv: -kv[1][2]):
            print(f"  {name:18s} {n:5d} windows {kept:6d} tokens {ms:8.1f} ms between commits "
                  f"({ms / max(n, 1):.3f} a window, {kept / max(ms, 1e-9) * 1e3:6.0f} tok/s), launch to commit "
                  f"{lat / max(n, 1):.3f} ms")


if __name__ == "__main__":
    main()
