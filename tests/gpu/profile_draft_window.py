"""Where a chained draft window's GPU time goes (issue 17): one stream decoding with MTP drafts chained on
the device (engine.draft_chain), on the engine in this process.

    SPEC=4 python3 tests/gpu/profile_draft_window.py MODEL [STEPS]

Prints three things:
1. each captured graph replayed alone (CUDA events, no profiler): the trunk's decode tiles and the
   drafter's passes, us per replay;
2. the decode steps' wall time and tokens per step, plain timing;
3. from one torch.profiler trace (CUDA activity only): per step the GPU's busy time, the idle time inside
   the steps' span, the kernels and copies launched from graphs and outside them, and the kernels that
   took most of the time, each with its launch kind (graph or eager).
SPEC=1 profiles plain chained windows for comparison. STRATA_* switches apply as in the engine.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from engine.core import EngineCore
from engine.messages import AddRequest, EngineConfig, LoadModel, SamplingParams


def replay_us(graph, n: int = 200) -> float:
    """One graph's replay time on the GPU alone: n replays between two events."""
    for _ in range(10):
        graph.replay()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        graph.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / n


def generated(core) -> int:
    return sum(s.seq.n_generated for s in core.scheduler.slots if s.seq is not None)


def trace_table(path: str, steps: int) -> None:
    """Per-step GPU busy / idle time and the kernels by launch kind from a chrome trace."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    launch = {}                     # correlation id -> the runtime call that launched it
    for e in events:
        if e.get("cat") == "cuda_runtime" and "args" in e:
            launch[e["args"].get("correlation")] = e["name"]
    print(f"  ({len(launch)} launch records in the trace)")
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e]
    if not gpu:
        print("no GPU activity in the trace")
        return
    gpu.sort(key=lambda e: e["ts"])
    busy, end = 0.0, None
    for e in gpu:                   # union of the activity intervals
        s, t = e["ts"], e["ts"] + e["dur"]
        if end is None or s >= end:
            busy += e["dur"]
            end = t
        elif t > end:
            busy += t - end
            end = t
    span = gpu[-1]["ts"] + gpu[-1]["dur"] - gpu[0]["ts"]
    by_kind: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    by_name: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    for e in gpu:
        how = launch.get(e.get("args", {}).get("correlation"), "?")
        kind = "graph" if "Graph" in how else ("copy" if e["cat"] != "kernel" else "eager")
        by_kind[kind][0] += 1
        by_kind[kind][1] += e["dur"]
        by_name[kind, e["name"][:80]][0] += 1
        by_name[kind, e["name"][:80]][1] += e["dur"]
    print(f"GPU per step: span {span / steps:.0f} us, busy {busy / steps:.0f} us, idle {(span - busy) / steps:.0f} us")
    for kind, (n, us) in sorted(by_kind.items()):
        print(f"  {kind:6s} {n / steps:6.1f} per step  {us / steps:8.1f} us")
    print("  top kernels and copies (us per step, count per step, launch kind):")
    for (kind, name), (n, us) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:30]:
        print(f"  {us / steps:8.1f} us {n / steps:5.1f}x {kind:5s} {name}")


def main() -> int:
    model = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    spec = int(os.environ.get("SPEC", "4"))
    os.environ.setdefault("STRATA_DRAFT_GUARD", "0")       # drafts every window
    out: list = []
    core = EngineCore(out.append)
    core.handle(LoadModel(config=EngineConfig(model=model, devices="cuda:0", ctx=2048, spec=spec)))
    stage = core.model.pipeline.stages[-1]
    print(f"model {os.path.basename(model)}, --spec {spec}")
    print("1. graphs replayed alone (us per replay):")
    with torch.inference_mode():
        for n, g in sorted(stage._graphs.items()):
            print(f"  trunk tile {n:3d} rows          {replay_us(g.graph):8.1f}")
        d = core.model.drafter
        if d is not None and d.graphs is not None:
            for (name, n), g in sorted(d.graphs.graphs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
                print(f"  drafter {name:7s} {n:3d} rows    {replay_us(g.graph):8.1f}")
            for (k, width), w in sorted(d.windows.items()):
                if w.graph is not None:
                    print(f"  draft window, {k} slot(s) of {width} rows {replay_us(w.graph):8.1f}")
    sp = SamplingParams(max_tokens=steps * 12, ignore_eos=True, temperature=0.0, seed=1)
    core.handle(AddRequest(request_id="a", prompt="def fibonacci(n):\n    ", sampling=sp))
    for _ in range(steps):                               # prompt, then warm decode steps
        core.step()
    torch.cuda.synchronize()
    g0, t0 = generated(core), time.perf_counter()
    for _ in range(steps):
        core.step()
    torch.cuda.synchronize()
    dt, made = time.perf_counter() - t0, generated(core) - g0
    print(f"2. {steps} decode steps: {dt / steps * 1e6:.0f} us per step, {made / steps:.2f} tokens per step, "
          f"{made / dt:.1f} tok/s")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            core.step()
        torch.cuda.synchronize()
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    print("3. profiled steps:")
    trace_table(path, steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
