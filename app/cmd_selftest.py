"""`strata --selftest` (or `strata selftest`): checks an installation end to end, headless.

Starts the engine worker process exactly as the app does (app/engine_process.py), loads the model
(the bundled default unless --model says otherwise), answers one chat message, prints the reply, the
devices and the figures, and exits 0. Any failure ends with one `SELFTEST FAIL: ...` line (plus the
worker's last output lines where there are any) and exit code 1. It opens no window and never
imports Qt, so it runs without a display; QT_QPA_PLATFORM defaults to offscreen all the same.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time

from app.engine_flags import add_engine_flags, engine_config_from_args

PROMPT = "What is the capital of France?"
EXPECT = "Paris"            # what the bundled default model answers (checked only for --model default)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_engine_flags(p)
    p.add_argument("--prompt", default=PROMPT, help="the chat message to answer")
    p.add_argument("--max-tokens", type=int, default=24)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds allowed for each of start, load and reply")


def _gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB"


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("strata-studio")
    except Exception:  # noqa: BLE001 - a frozen app may carry no metadata
        return "dev"


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    t_start = time.perf_counter()
    frozen = "frozen" if getattr(sys, "frozen", False) else "not frozen"
    print(f"strata selftest: Strata Studio {_version()}, Python {platform.python_version()}, "
          f"{platform.system()} {platform.machine()}, {frozen} ({sys.executable})", flush=True)
    try:
        _check(args, t_start)
    except Exception as e:  # noqa: BLE001 - every failure becomes one clear line and exit code 1
        from app.engine_client import EngineFailure

        tail = getattr(e, "stderr_tail", "")
        if tail:
            print("engine output (last lines):\n  " + tail.replace("\n", "\n  "), file=sys.stderr)
        what = e.reply.message if isinstance(e, EngineFailure) else str(e)
        kind = e.reply.kind if isinstance(e, EngineFailure) else type(e).__name__
        print(f"SELFTEST FAIL: {kind}: {what}", flush=True)
        return 1
    print(f"SELFTEST PASS in {time.perf_counter() - t_start:.1f} s", flush=True)
    return 0


def _check(args: argparse.Namespace, t_start: float) -> None:
    from app.engine_client import connect_worker
    from engine.messages import AddRequest, ChatMessage, SamplingParams
    from ui.devices import list_devices          # psutil + NVML/nvidia-smi: no Qt, no torch

    devices = list_devices()
    print("devices (this machine): " + "; ".join(
        f"{d.id} {d.name}, {_gb(d.total_bytes)} ({_gb(d.free_bytes)} free)" for d in devices), flush=True)
    config = engine_config_from_args(args)

    t0 = time.perf_counter()
    client = connect_worker(start_timeout=args.timeout)
    start_s = time.perf_counter() - t0
    try:
        hello = client.transport.hello
        print(f"worker: pid {hello.pid}, engine {hello.engine_version}, protocol {hello.protocol}, "
              f"started in {start_s:.2f} s", flush=True)
        t0 = time.perf_counter()
        steps: dict[str, float] = {}                   # load step (layers as one) -> seconds since the load began

        def on_progress(p) -> None:
            steps["layers" if p.message.startswith("layer ") else p.message] = time.perf_counter() - t0

        ready = client.load(config, on_progress=on_progress, timeout=args.timeout)
        load_wall = time.perf_counter() - t0
        print("load steps (s since the load began): " + ", ".join(f"{k} {v:.2f}" for k, v in steps.items()),
              flush=True)
        eff = ready.config
        print(f"model: {ready.model.name} ({ready.model.arch}, {ready.model.n_layers} layers, "
              f"{ready.model.file_bytes / 1e6:.0f} MB, {', '.join(ready.model.quant_types)})", flush=True)
        print("stages: " + "; ".join(f"{s.index}: {s.device} layers {s.first_layer}-{s.end_layer - 1}"
                                     f"{' + head' if s.has_head else ''}" for s in eff.stages)
              + f" | dtype {eff.dtype}, ctx {eff.ctx}, slots {eff.parallel}", flush=True)
        for note in eff.fallbacks:
            print(f"fallback: {note}", flush=True)

        req = AddRequest(request_id="selftest", messages=[ChatMessage(role="user", content=args.prompt)],
                         sampling=SamplingParams(temperature=0.0, max_tokens=args.max_tokens))
        print(f"prompt: {args.prompt}", flush=True)
        t0 = time.perf_counter()
        text, done = client.submit(req).result(timeout=args.timeout)
        reply_s = time.perf_counter() - t0
        print(f"reply: {text.strip()}", flush=True)
        deadline = time.monotonic() + 2.0           # the worker publishes telemetry at ~10 Hz
        while client.latest_telemetry is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if (tel := client.latest_telemetry) is not None:
            print("devices (engine): " + "; ".join(
                f"{m.device} {m.name} {_gb(m.used_bytes)} used of {_gb(m.total_bytes)}" for m in tel.memory),
                flush=True)
    finally:
        client.close()

    prompt_tps = done.prompt_tokens / done.prompt_s if done.prompt_s else 0.0
    decode_tps = (done.completion_tokens - 1) / done.decode_s if done.decode_s else 0.0
    print(f"figures: worker start {start_s:.2f} s | load {ready.load_seconds:.2f} s (wall {load_wall:.2f} s) | "
          f"prompt {done.prompt_tokens} tok at {prompt_tps:.1f} tok/s | decode {done.completion_tokens} tok at "
          f"{decode_tps:.1f} tok/s | ttft {done.ttft_s:.2f} s | reply {reply_s:.2f} s | "
          f"total {time.perf_counter() - t_start:.1f} s", flush=True)
    if done.finish_reason not in ("stop", "length"):
        raise RuntimeError(f"the reply ended with finish_reason {done.finish_reason!r} {done.error}".strip())
    if not text.strip() or done.completion_tokens < 1:
        raise RuntimeError("the reply is empty")
    if config.model == "default" and args.prompt == PROMPT and EXPECT not in text:
        raise RuntimeError(f"the default model did not answer {EXPECT!r}: its numerics look broken")
