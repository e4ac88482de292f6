"""`strata generate`: one prompt through the in-process engine; prints the text and the figures."""
from __future__ import annotations

import argparse
import json
import sys
import time

from app.engine_flags import add_engine_flags, engine_config_from_args
from app.local_engine import local_client
from engine.messages import AddRequest, ChatMessage, SamplingParams, TokenDelta


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_engine_flags(p)
    p.add_argument("--prompt", required=True)
    p.add_argument("--chat", action="store_true", help="wrap the prompt as a user message in the chat template")
    p.add_argument("--system", default=None, help="system message (with --chat)")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--min-p", type=float, default=0.0)
    p.add_argument("--repetition-penalty", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stop", action="append", default=[])
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def run(args: argparse.Namespace) -> int:
    sp = SamplingParams(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p,
                        repetition_penalty=args.repetition_penalty, seed=args.seed, max_tokens=args.max_tokens,
                        stop=args.stop)
    if args.chat:
        msgs = ([ChatMessage(role="system", content=args.system)] if args.system else [])
        req = AddRequest(request_id="gen", messages=msgs + [ChatMessage(role="user", content=args.prompt)], sampling=sp)
    else:
        req = AddRequest(request_id="gen", prompt=args.prompt, sampling=sp)
    with local_client(engine_config_from_args(args)) as client:
        stream = not args.json and sys.stdout.isatty()
        t0 = time.perf_counter()
        handle, parts, ids = client.submit(req), [], []
        for ev in handle:
            if isinstance(ev, TokenDelta):
                parts.append(ev.text)
                ids += ev.token_ids
                if stream:
                    print(ev.text, end="", flush=True)
        text, done, ready = "".join(parts), handle.done, client.ready
        wall = time.perf_counter() - t0
    figures = {
        "load_s": round(ready.load_seconds, 3),
        "prompt_tokens": done.prompt_tokens,
        "prompt_tok_s": round(done.prompt_tokens / done.prompt_s, 1) if done.prompt_s else None,
        "completion_tokens": done.completion_tokens,
        "decode_tok_s": round((done.completion_tokens - 1) / done.decode_s, 1) if done.decode_s else None,
        "ttft_s": round(done.ttft_s, 3), "finish_reason": done.finish_reason, "wall_s": round(wall, 3),
    }
    if args.json:
        print(json.dumps({"text": text, "token_ids": ids, **figures}))
    else:
        if not stream:
            print(text, end="")
        print()
        print(f"-- load {figures['load_s']} s | prompt {done.prompt_tokens} tok at {figures['prompt_tok_s']} tok/s | "
              f"decode {done.completion_tokens} tok at {figures['decode_tok_s']} tok/s | ttft {figures['ttft_s']} s | "
              f"{done.finish_reason}", file=sys.stderr)
    return 0
