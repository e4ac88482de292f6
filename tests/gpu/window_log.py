"""Sum a STRATA_WINDOW_LOG file (engine.window_log) by kind of window: how many, the tokens they gave,
the wall time from the commit before to theirs, and the device-side time from launch to commit.

    python3 tests/gpu/window_log.py LOG [--after N]   (N: skip the first N windows, e.g. a warm-up)
A request starts at a window that reads a prompt after one that did not (one active request at a time).

    python3 tests/gpu/window_log.py --own-plain LOG...
The last request of each log (a bench's measured one) against its own process's plain pace: its wall time
from the prompt's window to its last commit over its tokens at the ms per token of its plain windows (each
after three more plain ones: a window's time is the gap since the commit before). A plain process reads
1.001-1.006 against itself (H100, 2026-12-06); a guarded one below that gained from drafts, above it lost."""
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


def own_plain(path: str) -> str:
    ws = [json.loads(line) for line in open(path)]
    start = max(i for i, w in enumerate(ws) if w["prompt"] or w["rows"] > 50)     # the last prompt's window
    seg, prev = [], ws[start]["t"]
    for w in ws[start + 1:]:
        seg.append((w["rows"] == w["active"] and not w["prompt"], (w["t"] - prev) / 1e3, w["kept"]))
        prev = w["t"]
    plain = [(ms, kept) for i, (_, ms, kept) in enumerate(seg) if i >= 3 and all(p for p, _, _ in seg[i - 3:i + 1])]
    if not plain:
        return f"{path}: no plain windows"
    per_token = sum(ms for ms, _ in plain) / sum(k for _, k in plain)
    tokens, span = sum(k for _, _, k in seg), sum(ms for _, ms, _ in seg)
    return (f"{path}: {tokens} tokens in {span:.1f} ms; its plain windows {per_token * 1e3:.1f} us a token "
            f"({len(plain)}) -> {tokens * per_token:.1f} ms: ratio {span / (tokens * per_token):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("log", nargs="+")
    ap.add_argument("--after", type=int, default=0)
    ap.add_argument("--own-plain", action="store_true")
    a = ap.parse_args()
    if a.own_plain:
        for path in a.log:
            print(own_plain(path))
        return
    a.log = a.log[0]
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
