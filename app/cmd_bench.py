"""`strata bench`: decode tok/s per stream and in total for 1..N concurrent streams, time to first
token, prompt-read tok/s, drafts offered/accepted, tokens per window and per-stage busy %.

tok_s_decode is the decode-only aggregate (the streams' decode rates added up, comparable with
llama-batched-bench's S_TG); tok_s_total is generated tokens over wall time, prompt reading included.
Stage busy % is GPU time on GPU stages (CUDA events), executor time on CPU stages."""
from __future__ import annotations

import argparse
import json
import time

import msgspec

from app import bench_prompts
from app.engine_flags import add_engine_flags, engine_config_from_args
from app.local_engine import local_client
from app.run_requests import run_together
from engine.messages import AddRequest, SamplingParams, Telemetry

BENCH_TEXT = ("The history of the printing press begins in the fifteenth century, when movable type changed how "
              "books were made, how ideas travelled and who could read them. ")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_engine_flags(p)
    p.add_argument("--streams", default="1,2,4", help="comma-separated concurrent stream counts")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--prompt-tokens", type=int, default=64,
                   help="approximate prompt length per stream (the filler kind; the others are their own length)")
    p.add_argument("--prompt-kind", choices=bench_prompts.KINDS, default="filler",
                   help="filler text, or a bundled code / prose / edit (return a file with one rename) prompt")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--json", action="store_true")


def bench_prompt(n_tokens: int, tag: str) -> str:
    # streams (and levels) differ in their first words so prefix reuse cannot help
    words = (f"Stream {tag}. " + BENCH_TEXT * (n_tokens // 20 + 1)).split(" ")
    return " ".join(words[: max(1, int(n_tokens * 0.75))])


def run_level(eng, n: int, args, tag: str) -> dict:
    sp = SamplingParams(temperature=args.temperature, max_tokens=args.max_tokens, ignore_eos=True, seed=1)
    kind = getattr(args, "prompt_kind", "filler")
    reqs = [AddRequest(request_id=f"{tag}{i}", sampling=msgspec.structs.replace(sp, seed=i),
                       prompt=bench_prompts.prompt(kind, f"{tag}{i}", bench_prompt(args.prompt_tokens, f"{tag}{i}")))
            for i in range(n)]
    tel: list[Telemetry] = []
    t0 = time.monotonic()
    out = run_together(eng, reqs, tel.append)
    wall = time.monotonic() - t0
    dones = [o.done for o in out.values()]
    gen = sum(d.completion_tokens for d in dones)
    decode_rates = [(d.completion_tokens - 1) / d.decode_s for d in dones if d.decode_s > 0]
    first, last = (tel[0], tel[-1]) if len(tel) >= 2 else (None, None)
    span = (last.t - first.t) if first else 0.0
    busy = [round(100 * (b - a) / span, 1) for a, b in zip(first.stage_busy_s_total, last.stage_busy_s_total)] \
        if span > 0 else []
    offered = sum(d.drafts_offered for d in dones)
    accepted = sum(d.drafts_accepted for d in dones)
    windows = sum(d.windows for d in dones)
    return {
        "streams": n, "wall_s": round(wall, 2), "prompt_kind": kind,
        "prompt_tokens": round(sum(d.prompt_tokens for d in dones) / n, 1),
        "tok_s_per_stream": round(sum(decode_rates) / len(decode_rates), 2) if decode_rates else 0.0,
        # the streams' decode rates added up while they run together (llama-batched-bench's S_TG)
        "tok_s_decode": round(sum(decode_rates), 2),
        "tok_s_total": round(gen / wall, 2),
        "ttft_s": round(sum(d.ttft_s for d in dones) / n, 3),
        "prompt_tok_s": round(sum(d.prompt_tokens - d.cached_tokens for d in dones)
                              / max(1e-9, max(d.prompt_s for d in dones)), 1),
        "drafts_offered": offered, "drafts_accepted": accepted,
        "acceptance": round(accepted / offered, 3) if offered else None,
        "tokens_per_window": round(gen / windows, 3) if windows else None,
        "mean_acceptance_length": round(1 + accepted / windows, 3) if windows and offered else None,
        "stage_busy_pct": busy,
    }


def run(args: argparse.Namespace) -> int:
    levels = [int(x) for x in args.streams.split(",") if x.strip()]
    cfg = engine_config_from_args(args)
    cfg = msgspec.structs.replace(cfg, parallel=max(cfg.parallel, *levels))
    with local_client(cfg) as eng:
        eff = eng.ready.config
        run_level(eng, 1, _warm(args), "w")
        rows = [run_level(eng, n, args, f"b{n}_") for n in levels]
    layout = {"stages": [f"{s.device}:{s.first_layer}-{s.end_layer - 1}" for s in eff.stages], "groups": eff.groups,
              "draft": eff.draft, "spec": eff.spec, "piped_mtp": eff.piped_mtp, "dtype": eff.dtype,
              "load_s": round(eng.ready.load_seconds, 2), "model": eff.model_name, "fallbacks": eff.fallbacks}
    if args.json:
        print(json.dumps({"layout": layout, "results": rows}))
        return 0
    print(f"# {layout['model']}: stages {layout['stages']}, groups {layout['groups']}, draft {layout['draft']} "
          f"spec {layout['spec']} piped-mtp {layout['piped_mtp']}, {layout['dtype']}, load {layout['load_s']} s")
    for note in eff.fallbacks:
        print(f"# note: {note}")
    cols = ["streams", "tok_s_per_stream", "tok_s_decode", "tok_s_total", "ttft_s", "prompt_tok_s", "drafts_offered",
            "drafts_accepted", "tokens_per_window", "mean_acceptance_length", "stage_busy_pct"]
    width = {c: max(len(c), 8) for c in cols}
    print("  ".join(f"{c:>{width[c]}}" for c in cols))
    for r in rows:
        print("  ".join(f"{str(r[c]):>{width[c]}}" for c in cols))
    return 0


def _warm(args):
    """A short warm-up level so the first measured level does not pay one-time costs."""
    ns = argparse.Namespace(**vars(args))
    ns.max_tokens = 4
    return ns
