"""Where a decode step's wall time goes beside the GPU's own work: one stream decoding, on the engine
in this process, timed plain, then with the GPU kernels' time from torch.profiler (CUDA activity only:
its host tracing costs more than the steps; and cProfile on the stage thread clashes with the engine
thread's under Python 3.12).

    python3 tests/gpu/profile_host.py MODEL [STEPS] [DEVICES]      (DEVICES cpu: the CPU path's parts)

Prints the step time and the GPU kernel time per step (the rest of a step the GPU waits for the host),
and the kernels that took most of it. SPEC=N (env): MTP drafts at that window size (a model with an
MTP layer; random weights reject nearly every proposal, but the drafter runs its whole chain each
window), with the drafter's parts timed too. TEMP=T (env): sampled at that temperature (seed 1).
"""
from __future__ import annotations

import os
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from engine.core import EngineCore
from engine.messages import AddRequest, EngineConfig, LoadModel, SamplingParams


def sync() -> None:
    """Wait for the GPU (a CPU dry run of this script has none)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed_parts(core, steps: int) -> dict[str, float]:
    """Run `steps` decode steps with timers around the host-side parts of a step: us per step each."""
    import engine.graphs as graphs
    import engine.pipeline as pl
    import engine.scheduler as sch
    import engine.stage as st

    total: dict[str, float] = {}
    patched = []

    def wrap(owner, attr, name):
        real = getattr(owner, attr)

        def timed(*a, **k):
            t = time.perf_counter()
            try:
                return real(*a, **k)
            finally:
                total[name] = total.get(name, 0.0) + time.perf_counter() - t
        setattr(owner, attr, timed)
        patched.append((owner, attr, real))

    wrap(sch.Scheduler, "_launch", "scheduler: build the window (engine thread)")
    wrap(sch.Scheduler, "_launch_chained", "scheduler: build a chained window (engine thread)")
    wrap(sch.Scheduler, "_commit", "scheduler: commit picks, detokenize, emit (engine thread)")
    wrap(pl.Pipeline, "_run_stage", "stage thread: whole window")
    wrap(st.Stage, "embed", "stage: embed the tokens")
    wrap(st.Stage, "forward_logits", "stage: forward over the tiles (queued, on a GPU)")
    wrap(st.Stage, "logits", "stage: head")
    wrap(graphs.TileGraph, "run", "graph: copy inputs, replay, copy outputs")
    wrap(torch.cuda.CUDAGraph, "replay", "graph: replay call (launch)")
    wrap(torch.cuda.Stream, "synchronize", "stream sync (GPU still busy)")
    wrap(pl.Pipeline, "_logits", "logits to the host")
    wrap(sch, "window_verdicts", "verdicts: picks on the host")
    wrap(pl.WindowLogits, "picks", "stage: the device's picks (argmax or sampler launches)")
    wrap(pl.Pipeline, "_successor", "stage: wait for the chained successor")
    if torch.cuda.is_available():
        import engine.kernels.sample as smp
        wrap(smp, "sample", "stage: engine.kernels.sample (its launches)")
    import engine.drafts as dr
    wrap(dr.MtpDrafter, "advance", "drafter: catch-up and chain (whole)")
    wrap(dr.MtpDrafter, "_rows", "drafter: layer rows")
    wrap(dr.MtpDrafter, "_propose", "drafter: head and pick (host)")
    t0 = time.perf_counter()
    for _ in range(steps):
        core.step()
    total["step (wall)"] = time.perf_counter() - t0
    for owner, attr, real in patched:
        setattr(owner, attr, real)
    return {k: v / steps * 1e6 for k, v in sorted(total.items(), key=lambda kv: -kv[1])}


def main() -> int:
    model = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    out: list = []
    core = EngineCore(out.append)
    devices = sys.argv[3] if len(sys.argv) > 3 else "cuda:0"
    spec = int(os.environ.get("SPEC", "1"))
    if spec > 1:                                     # drafts every window: the guard would pause them here
        os.environ.setdefault("STRATA_DRAFT_GUARD", "0")
    core.handle(LoadModel(config=EngineConfig(model=model, devices=devices, ctx=1024, spec=spec)))
    sp = SamplingParams(max_tokens=steps * 5, ignore_eos=True, temperature=float(os.environ.get("TEMP", "0")), seed=1)
    core.handle(AddRequest(request_id="a", prompt="Hello there", sampling=sp))
    for _ in range(steps):                           # prompt, then warm decode steps
        core.step()
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        core.step()
    sync()
    print(f"{steps} decode steps: {(time.perf_counter() - t0) / steps * 1e6:.0f} us per step")
    print(f"  host time per step, by part (wall clock inside each call; stream sync = waiting for the GPU):")
    for name, us in timed_parts(core, steps).items():
        print(f"  {us:8.1f} us  {name}")
    if not torch.cuda.is_available():        # a CPU run (DEVICES cpu): the host parts are all there is
        return 0
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            core.step()
        sync()
    ka = prof.key_averages()
    gpu = sum(e.self_device_time_total for e in ka) / steps
    print(f"GPU kernels {gpu:.0f} us per step")
    for e in sorted(ka, key=lambda e: -e.self_device_time_total)[:12]:
        print(f"  {e.self_device_time_total / steps:8.1f} us  {e.count / steps:5.1f}x  {e.key[:90]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
