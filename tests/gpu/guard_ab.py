"""Drafts under the guard against none, in one process: one engine loaded at --spec SPEC, each round's
requests decoded without drafts (Configure(spec=1)) and with them (Configure(spec=SPEC) after a short plain
request: a fresh guard each time, as in a fresh engine), the order swapped every round. Processes land at different paces (a plain
window 0.72-0.75 ms in one, 0.8-1.15 in the next, H100, 2026-12-06), so comparing two processes hides a few
percent either way; within one process the two sides share the pace. Prints each round's decode tok/s
(streams together) and, per prompt kind, the guarded side's median against the plain side's.

    python3 tests/gpu/guard_ab.py MODEL [--devices cuda:0] [--spec 4] [--streams 1] [--rounds 4]
        [--max-tokens 512] [--kinds code,prose,edit]

On the GPU machine with the default model and its trained layer: `bash tests/gpu/run_mtp_train.sh a` (carry
[".mdl/a"]), then at once `bash tests/gpu/run_mtp_train.sh j && PYTHONPATH=/tmp/site:$PWD python3
tests/gpu/guard_ab.py /tmp/mdl/SmolLM2-135M-Instruct.Q4_1.gguf` (carry [".mdl/b", ".mdl/b.sha256", ".wheels"])."""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app import bench_prompts  # noqa: E402
from app.local_engine import local_client  # noqa: E402
from app.run_requests import run_together  # noqa: E402
from engine.messages import AddRequest, Configure, EngineConfig, SamplingParams  # noqa: E402


def decode_rate(eng, kind: str, streams: int, max_tokens: int, tag: str) -> tuple[float, int]:
    """(decode tok/s of `streams` requests of one kind decoded together, the tokens they gave)."""
    sp = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    reqs = [AddRequest(request_id=f"{tag}{i}", prompt=bench_prompts.prompt(kind, f"{tag}{i}", ""), sampling=sp)
            for i in range(streams)]
    dones = [o.done for o in run_together(eng, reqs).values()]
    for d in dones:
        if d.finish_reason == "error":
            raise SystemExit(f"request {d.request_id} ended in an error: {d.error}")
    return sum((d.completion_tokens - 1) / d.decode_s for d in dones), sum(d.completion_tokens for d in dones)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--devices", default="cuda:0")
    ap.add_argument("--spec", type=int, default=4)
    ap.add_argument("--streams", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--kinds", default="code,prose,edit")
    a = ap.parse_args()
    kinds = a.kinds.split(",")
    rates: dict[tuple[str, int], list[float]] = {(k, s): [] for k in kinds for s in (1, a.spec)}
    cfg = EngineConfig(model=a.model, devices=a.devices, parallel=a.streams, spec=a.spec, ctx=2048)
    with local_client(cfg) as eng:
        guard = eng.transport.core.scheduler.guard
        for s in (1, a.spec):                                   # warm-up: each side once
            eng.configure(Configure(spec=s))
            decode_rate(eng, kinds[0], a.streams, 64, f"w{s}-")
        for r in range(a.rounds):
            for kind in kinds:
                for s in ((1, a.spec) if r % 2 == 0 else (a.spec, 1)):
                    if s > 1:      # a fresh guard: a plain window passes it depth 0 (a short untimed request)
                        eng.configure(Configure(spec=1))
                        decode_rate(eng, kind, a.streams, 2, f"f{r}{kind}-")
                    eng.configure(Configure(spec=s))
                    rate, n = decode_rate(eng, kind, a.streams, a.max_tokens, f"r{r}{kind}{s}-")
                    rates[kind, s].append(rate)
                    note = f"  ({guard.note})" if s > 1 and guard.note else ""
                    print(f"round {r + 1} {kind:6s} spec {s}: {rate:8.1f} tok/s, {n} tokens{note}", flush=True)
    print(f"\n{a.streams} stream(s), {a.rounds} rounds, --spec {a.spec} under the guard against none "
          f"(median decode tok/s; ratio > 1: drafts faster)")
    for kind in kinds:
        plain, guarded = statistics.median(rates[kind, 1]), statistics.median(rates[kind, a.spec])
        print(f"  {kind:6s} none {plain:8.1f}  guarded {guarded:8.1f}  ratio {guarded / plain:.3f}  "
              f"(rounds: {' '.join(f'{g / p:.3f}' for g, p in zip(rates[kind, a.spec], rates[kind, 1]))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
