"""Whether a guarded request gives every token it should: the bench's code / prose / edit prompts, one
stream, max_tokens tokens with EOS ignored, decoded without drafts and then at --spec SPEC under the draft
guard (one engine each, as `strata bench` loads them); prints each request's token count, finish reason and
where the guarded tokens first differ from the plain ones.

    python3 tests/gpu/guard_tokens.py MODEL [--devices cuda:0] [--spec 4] [--max-tokens 512] [--kinds code,prose,edit]

(2026-12-06, H100: `strata bench` measured guarded requests of 310-335 tokens of 512 on code and prose.)"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app import bench_prompts  # noqa: E402
from app.local_engine import local_client  # noqa: E402
from app.run_requests import run_together  # noqa: E402
from engine.messages import AddRequest, EngineConfig, SamplingParams  # noqa: E402


def run(model: str, devices: str, spec: int, kinds: list[str], max_tokens: int) -> dict:
    sp = SamplingParams(max_tokens=max_tokens, ignore_eos=True, seed=0)
    reqs = [AddRequest(request_id=k, prompt=bench_prompts.prompt(k, "0", ""), sampling=sp) for k in kinds]
    out = {}
    with local_client(EngineConfig(model=model, devices=devices, parallel=1, spec=spec, ctx=2048)) as eng:
        for r in reqs:                               # one at a time: a lone request each
            out[r.request_id] = run_together(eng, [r])[r.request_id]
        guard = eng.transport.core.scheduler.guard
        print(f"spec {spec}: guard {guard.note!r}, paused windows {guard.paused_windows}", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--devices", default="cuda:0")
    ap.add_argument("--spec", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--kinds", default="code,prose,edit")
    a = ap.parse_args()
    kinds = a.kinds.split(",")
    plain = run(a.model, a.devices, 0, kinds, a.max_tokens)
    guarded = run(a.model, a.devices, a.spec, kinds, a.max_tokens)
    bad = 0
    for k in kinds:
        p, g = plain[k], guarded[k]
        same = p.tokens == g.tokens
        first = next((i for i, (x, y) in enumerate(zip(p.tokens, g.tokens)) if x != y), min(len(p.tokens),
                                                                                              len(g.tokens)))
        print(f"{k:6s} plain {len(p.tokens)} tokens ({p.done.finish_reason}, {p.done.completion_tokens}), "
              f"guarded {len(g.tokens)} ({g.done.finish_reason}, {g.done.completion_tokens}, "
              f"{g.done.windows} windows): {'IDENTICAL' if same else f'DIFFER from token {first}'}", flush=True)
        if g.done.error:
            print(f"       guarded error: {g.done.error}", flush=True)
        bad += not same
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
