"""`strata batch-test`: every slot's tokens against the same prompt decoded alone.

The reference runs each prompt alone on one stage (the first device), one slot, no drafts. The
layout under test runs one prompt per slot, all at once. One line per slot: IDENTICAL or
DIFFERS at k. Exit 0 (all identical), 2 (a mismatch), 1 (error).
"""
from __future__ import annotations

import argparse
import sys

import msgspec

from app.engine_flags import add_engine_flags, engine_config_from_args
from app.local_engine import local_client
from app.run_requests import run_together
from engine.messages import AddRequest, SamplingParams

PROMPTS = [
    "The capital of France is",
    "Write a short poem about the sea.\n",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "List three colours:",
    "Once upon a time, in a small village by the mountains, there lived an old clockmaker who",
    "Q: What is 12 times 7?\nA:",
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "Translate to French: good morning, my friend.",
]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_engine_flags(p)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)


def first_difference(a: list[int], b: list[int]) -> int | None:
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return k
    return None if len(a) == len(b) else min(len(a), len(b))


def requests(n: int, sp: SamplingParams, tag: str) -> list[AddRequest]:
    return [AddRequest(request_id=f"{tag}{i}", prompt=PROMPTS[i % len(PROMPTS)],
                       sampling=msgspec.structs.replace(sp, seed=sp.seed + i)) for i in range(n)]


def run(args: argparse.Namespace) -> int:
    cfg = engine_config_from_args(args)
    sp = SamplingParams(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed,
                        max_tokens=args.max_tokens, ignore_eos=True)
    solo = msgspec.structs.replace(cfg, devices=cfg.devices.split(",")[0], layer_split="auto", parallel=1,
                                   batch_groups="auto", spec=1, piped_mtp=0)
    reference = {}
    with local_client(solo) as eng:
        for r in requests(cfg.parallel, sp, "s"):
            o = run_together(eng, [r])[r.request_id]
            if o.done.finish_reason == "error":
                print(f"reference run failed: {o.done.error}", file=sys.stderr)
                return 1
            reference[r.request_id[1:]] = o.tokens
    with local_client(cfg) as eng:
        eff = eng.ready.config
        together = run_together(eng, requests(cfg.parallel, sp, "b"))
    stages = " | ".join(f"{s.device}:{s.first_layer}-{s.end_layer - 1}" for s in eff.stages)
    print(f"# layout: stages [{stages}], {eff.parallel} slots in groups {eff.groups}, draft {eff.draft} "
          f"spec {eff.spec} piped-mtp {eff.piped_mtp}, T={args.temperature} seed={args.seed}")
    for note in eff.fallbacks:
        print(f"# note: {note}")
    mismatch = failed = False
    for i in range(cfg.parallel):
        o = together[f"b{i}"]
        if o.done.finish_reason == "error":
            failed = True
            print(f"slot {o.done.slot}: ERROR {o.done.error}")
            continue
        k = first_difference(reference[str(i)], o.tokens)
        acc = f" (drafts {o.done.drafts_accepted}/{o.done.drafts_offered})" if o.done.drafts_offered else ""
        if k is None:
            print(f"slot {o.done.slot}: IDENTICAL ({len(o.tokens)} tokens){acc}")
        else:
            mismatch = True
            print(f"slot {o.done.slot}: DIFFERS at {k}{acc}")
    sys.stdout.flush()
    return 1 if failed else 2 if mismatch else 0
