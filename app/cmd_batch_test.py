"""`strata batch-test`: every slot's tokens and logits against the same prompt decoded alone.

The reference runs each prompt alone on one stage (the first device), one slot, no drafts. The
layout under test runs one prompt per slot, all at once. Both return the float32 logits row each
emitted token was picked from; on the exact paths those rows are bit-identical. One line per slot:
  slot 0: IDENTICAL (24 tokens, logits max|diff| 0)
  slot 0: LOGITS DIFFER max|diff| 3.1e-04 at token 0 (24 tokens identical)
  slot 0: DIFFERS at 7 (logits max|diff| 2.3e-01, first at token 0)
  slot 0: ERROR ... / EMPTY (0 tokens, reference 24)
--prompt-tokens LO[-HI]: long prompts instead (slot i's about LO + (HI - LO) i / (slots - 1) tokens).
--follow-up: then a second turn per slot, its prompt the first one + the reference's reply + a question,
sent to the same engine, whose slots still hold the first prompts: each reads only what follows the
reused prefix, at other tile boundaries than the reference, which reads the whole prompt afresh. The
line says how many positions were reused (none is an error: the check would prove nothing).
Exit 0 (all identical), 2 (a token or logit mismatch), 1 (an error or an empty output).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np

from app.cmd_bench import bench_prompt, filler_words_per_token
from app.engine_flags import add_engine_flags, engine_config_from_args
from app.local_engine import local_client
from app.run_requests import run_together
from engine.loader import place
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
FOLLOW_UP = "\n\nThank you. Now say that again, in fewer words:"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_engine_flags(p)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prompt-tokens", default="", metavar="LO[-HI]",
                   help="long prompts: slot i's about LO + (HI - LO) i / (slots - 1) tokens")
    p.add_argument("--follow-up", action="store_true",
                   help="then a second turn per slot that reuses its first prompt's cached prefix")


def prompt_lengths(spec: str, n: int) -> list[int] | None:
    """Slot i's prompt length from LO[-HI] (None: the short built-in prompts)."""
    if not spec:
        return None
    try:
        lo, _, hi = spec.partition("-")
        lo, hi = int(lo), int(hi or lo)
    except ValueError:
        raise SystemExit(f"--prompt-tokens {spec!r}: give LO or LO-HI, e.g. 2000-8000") from None
    if not 1 <= lo <= hi:
        raise SystemExit(f"--prompt-tokens {spec!r}: need 1 <= LO <= HI")
    return [lo + (hi - lo) * i // max(1, n - 1) for i in range(n)]


def prompt_of(i: int, lengths: list[int] | None, words_per_token: float) -> str:
    return PROMPTS[i % len(PROMPTS)] if lengths is None else bench_prompt(lengths[i], f"slot {i}", words_per_token)


def first_difference(a: list[int], b: list[int]) -> int | None:
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return k
    return None if len(a) == len(b) else min(len(a), len(b))


def requests(n: int, sp: SamplingParams, tag: str, prompts: list[str] | None = None) -> list[AddRequest]:
    prompts = prompts or [PROMPTS[i % len(PROMPTS)] for i in range(n)]
    return [AddRequest(request_id=f"{tag}{i}", prompt=prompts[i], return_logits=True,
                       sampling=msgspec.structs.replace(sp, seed=sp.seed + i)) for i in range(n)]


def logit_difference(a: list[bytes], b: list[bytes], n: int) -> tuple[float, int | None]:
    """Largest |difference| over the first n pick rows, and the first row whose bytes differ."""
    worst, first = 0.0, None
    for k, (x, y) in enumerate(zip(a[:n], b[:n])):
        if x != y:
            first = k if first is None else first
            d = np.abs(np.frombuffer(x, np.float32).astype(np.float64) - np.frombuffer(y, np.float32))
            worst = max(worst, float(np.nan_to_num(d, nan=np.inf).max()))
    return worst, first


def verdict_line(ref, o) -> tuple[str, int]:
    """One slot's report line and its exit code (0 identical, 2 mismatch, 1 error or empty)."""
    d = o.done
    acc = f" (drafts {d.drafts_accepted}/{d.drafts_offered})" if d.drafts_offered else ""
    if d.finish_reason == "error":
        return f"slot {d.slot}: ERROR {d.error}", 1
    if not o.tokens:
        return f"slot {d.slot}: EMPTY (0 tokens, reference {len(ref.tokens)}, finish {d.finish_reason})", 1
    if len(d.logits) != len(o.tokens):
        return f"slot {d.slot}: ERROR {len(d.logits)} logits rows for {len(o.tokens)} tokens", 1
    k = first_difference(ref.tokens, o.tokens)
    worst, first = logit_difference(ref.done.logits, d.logits, len(o.tokens) if k is None else k + 1)
    if k is not None:
        where = "" if first is None else f", first at token {first}"
        return f"slot {d.slot}: DIFFERS at {k} (logits max|diff| {worst:.1e}{where}){acc}", 2
    if first is not None:
        return f"slot {d.slot}: LOGITS DIFFER max|diff| {worst:.1e} at token {first} ({len(o.tokens)} tokens identical){acc}", 2
    return f"slot {d.slot}: IDENTICAL ({len(o.tokens)} tokens, logits max|diff| 0){acc}", 0


@dataclass
class References:
    """The prompts and what each gave alone (the second turn's too with --follow-up)."""
    sp: SamplingParams
    lengths: list[int] | None
    first: list[str]
    second: list[str]
    reference: dict
    reference2: dict


def run(args: argparse.Namespace) -> int:
    cfg = engine_config_from_args(args)
    place(cfg)        # a bad layout, file or size is said now, not after the reference has run
    # the reference engine is closed before the layout under test loads: a model of over half a GPU fits
    # there once only
    refs = references(cfg, args)
    if refs is None:
        return 1
    with local_client(cfg) as eng:
        return compare(eng, cfg, args, refs)


def references(cfg, args: argparse.Namespace) -> References | None:
    """Each slot's prompt alone on a fresh one-stage, one-slot engine without drafts (None on a failure)."""
    sp = SamplingParams(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed,
                        max_tokens=args.max_tokens, ignore_eos=True)
    solo = msgspec.structs.replace(cfg, devices=cfg.devices.split(",")[0], layer_split="auto", parallel=1,
                                   batch_groups="auto", spec=1, piped_mtp=0)
    lengths = prompt_lengths(getattr(args, "prompt_tokens", ""), cfg.parallel)
    with local_client(solo) as ref_eng:
        wpt = filler_words_per_token(ref_eng) if lengths else 0.0
        first = [prompt_of(i, lengths, wpt) for i in range(cfg.parallel)]
        reference = run_reference(ref_eng, requests(cfg.parallel, sp, "s", first))
        if reference is None:
            return None
        second = [first[i] + reference[str(i)].text + FOLLOW_UP for i in range(cfg.parallel)]
        reference2 = {}
        if getattr(args, "follow_up", False):
            reference2 = run_reference(ref_eng, requests(cfg.parallel, sp, "t", second), fresh=True)
            if reference2 is None:
                return None
    return References(sp, lengths, first, second, reference, reference2)


def compare(eng, cfg, args: argparse.Namespace, refs: References | None = None) -> int:
    """Run one prompt per slot at once on `eng` (an engine client loaded with cfg's layout; `strata soak`
    passes the worker it has just soaked) against each prompt alone (refs, or `references` run now on a
    second engine); print the report, return the exit code."""
    refs = refs or references(cfg, args)
    if refs is None:
        return 1
    eff = eng.ready.config
    together = run_together(eng, requests(cfg.parallel, refs.sp, "b", refs.first))
    stages = " | ".join(f"{s.device}:{s.first_layer}-{s.end_layer - 1}" for s in eff.stages)
    print(f"# layout: stages [{stages}], {eff.parallel} slots in groups {eff.groups}, draft {eff.draft} "
          f"spec {eff.spec} piped-mtp {eff.piped_mtp}{' (MTP layer ' + Path(eff.mtp_file).name + ')' if eff.mtp_file else ''}"
          f"{', decode ' + eff.decode_kernel if eff.decode_kernel else ''}, "
          f"T={args.temperature} seed={args.seed}")
    for note in eff.fallbacks:
        print(f"# note: {note}")
    if refs.lengths:
        counts = ", ".join(str(refs.reference[str(i)].done.prompt_tokens) for i in range(cfg.parallel))
        print(f"# prompts of {counts} tokens")
    codes = set()
    for i in range(cfg.parallel):
        line, code = verdict_line(refs.reference[str(i)], together[f"b{i}"])
        print(line)
        codes.add(code)
    if refs.reference2:                         # (--follow-up)
        print("# follow-up turn: each slot's prompt + the reference's reply + a question, on the slots that "
              "hold the first prompts (the reference reads it afresh)")
        again = run_together(eng, requests(cfg.parallel, refs.sp, "c", refs.second))
        for i in range(cfg.parallel):
            line, code = verdict_line(refs.reference2[str(i)], again[f"c{i}"])
            reused = again[f"c{i}"].done.cached_tokens
            if reused == 0 and code == 0:
                line, code = f"slot {again[f'c{i}'].done.slot}: ERROR no prefix reused (the check proves nothing)", 1
            print(f"{line}; {reused} prompt positions reused" if code != 1 else line)
            codes.add(code)
    sys.stdout.flush()
    return 1 if 1 in codes else 2 if 2 in codes else 0


def run_reference(ref_eng, reqs: list[AddRequest], fresh: bool = False) -> dict | None:
    """Each request alone on the one-slot reference engine, by its index; fresh: a one-token request of
    another text first, so the slot holds nothing the request could reuse (checked). None on a failure."""
    out = {}
    for r in reqs:
        if fresh:
            run_together(ref_eng, [AddRequest(request_id="flush", prompt="Reset.",
                                              sampling=SamplingParams(max_tokens=1))])
        o = run_together(ref_eng, [r])[r.request_id]
        if o.done.finish_reason == "error" or not o.tokens or len(o.done.logits) != len(o.tokens):
            why = o.done.error or f"{len(o.tokens)} tokens, {len(o.done.logits)} logits rows"
            print(f"reference run for prompt {r.request_id[1:]} failed: {why}", file=sys.stderr)
            return None
        if fresh and o.done.cached_tokens:
            print(f"reference run for prompt {r.request_id[1:]} reused {o.done.cached_tokens} positions",
                  file=sys.stderr)
            return None
        out[r.request_id[1:]] = o
    return out
