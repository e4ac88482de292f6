"""Which CPUs a process's threads ran on: polls /proc/PID (and the processes under it) every --interval
seconds until PID ends, then prints one line, the busiest threads first (user + system time):

    threads: NAME@LAST_CPU{CPU:SAMPLES,...}=SECONDS ...   (CPU:SAMPLES: where it was seen while it ran)

and one line with the CPUs the processes were allowed (taskset) and how often the busiest thread moved.
    python3 tests/gpu/thread_cpus.py PID [--interval 0.5] [--top 6]
It never fails: whatever goes wrong, it prints what it has and exits 0 (run_guard_windows.sh runs it beside
each bench)."""
from __future__ import annotations

import argparse
import os
import time
from collections import Counter

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def stat_fields(path: str) -> tuple[str, list[str]] | None:
    """(comm, fields from field 3 on) of a /proc stat file, or None when it is gone."""
    try:
        with open(path) as f:
            s = f.read()
    except OSError:
        return None
    lo, hi = s.find("("), s.rfind(")")
    if lo < 0 or hi < 0:
        return None
    return s[lo + 1:hi], s[hi + 2:].split()


def tree(root: int) -> list[int]:
    """root and the processes under it."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        st = stat_fields(f"/proc/{d}/stat")
        if st and len(st[1]) > 1:
            kids.setdefault(int(st[1][1]), []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def allowed(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Cpus_allowed_list:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("pid", type=int)
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--top", type=int, default=6)
    a = ap.parse_args()
    threads: dict[tuple[int, int], dict] = {}      # (pid, tid) -> name, ticks, last cpu, cpus seen, moves
    masks: dict[int, str] = {}
    samples = 0
    try:
        while os.path.exists(f"/proc/{a.pid}"):
            samples += 1
            for pid in tree(a.pid):
                if pid not in masks:
                    masks[pid] = allowed(pid)
                try:
                    tids = os.listdir(f"/proc/{pid}/task")
                except OSError:
                    continue
                for tid in tids:
                    st = stat_fields(f"/proc/{pid}/task/{tid}/stat")
                    if not st or len(st[1]) < 37:
                        continue
                    name, f = st
                    ticks, cpu = int(f[11]) + int(f[12]), int(f[36])   # fields 14, 15 and 39
                    t = threads.setdefault((pid, int(tid)), {"name": name, "ticks": 0, "cpu": cpu,
                                                             "seen": Counter(), "moves": 0})
                    if ticks > t["ticks"]:                  # it ran since the last look: count where
                        t["seen"][cpu] += 1
                        if cpu != t["cpu"]:
                            t["moves"] += 1
                    t.update(name=name, ticks=ticks, cpu=cpu)
            time.sleep(a.interval)
    except Exception as e:  # noqa: BLE001 - never fail the caller
        print(f"threads: poller stopped early ({type(e).__name__}: {e})")
    try:
        busy = sorted(threads.values(), key=lambda t: -t["ticks"])[:a.top]
        parts = []
        for t in busy:
            if t["ticks"] == 0:
                continue
            seen = ",".join(f"{c}:{n}" for c, n in sorted(t["seen"].items()))
            parts.append(f"{t['name'].replace(' ', '_')}@{t['cpu']}{{{seen}}}={t['ticks'] / TICK:.2f}s")
        print("threads: " + (" ".join(parts) or "(none seen)"))
        m = ", ".join(f"{c} ({n})" for c, n in Counter(masks.values()).most_common())
        print(f"threads: {len(threads)} in {len(masks)} processes, {samples} samples, allowed cpus (processes) "
              f"{m or '?'}; "
              f"moves while running: " + " ".join(f"{t['name'].replace(' ', '_')}:{t['moves']}"
                                                 for t in busy if t["ticks"]))
    except Exception as e:  # noqa: BLE001
        print(f"threads: no summary ({type(e).__name__}: {e})")


if __name__ == "__main__":
    main()
