"""`strata serve`: the OpenAI-compatible HTTP server, headless (no Qt).

    strata serve --model M [engine flags] [--host 127.0.0.1] [--port 8080] [--api-key K]

Starts the engine worker, starts listening at once (/health answers 503 "loading" until the model is
in), loads, prints the address, and serves until Ctrl-C or SIGTERM. A crashed engine is restarted
with the same settings (up to --max-restarts times); requests in flight get a 503 meanwhile.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

from app.engine_flags import add_engine_flags, engine_config_from_args

API_KEY_ENV = "STRATA_API_KEY"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from app.server import DEFAULT_HOST, DEFAULT_MAX_QUEUE
    from app.server_errors import DEFAULT_MAX_BODY

    add_engine_flags(p)
    g = p.add_argument_group("server")
    g.add_argument("--host", default=DEFAULT_HOST,
                   help="address to bind (default loopback only; 0.0.0.0 exposes it to the network)")
    g.add_argument("--port", type=int, default=8080, help="0 = any free port (printed)")
    g.add_argument("--api-key", default=os.environ.get(API_KEY_ENV) or None,
                   help=f"require 'Authorization: Bearer KEY' on every endpoint but /health "
                        f"(better: env {API_KEY_ENV}; a command line is visible to other local users)")
    g.add_argument("--max-queue", type=int, default=DEFAULT_MAX_QUEUE,
                   help="requests that may wait for a slot; beyond that the server answers 503")
    g.add_argument("--max-body-mb", type=float, default=DEFAULT_MAX_BODY / 2**20,
                   help="largest request body in MiB; a bigger one gets 413")
    g.add_argument("--max-restarts", type=int, default=3, help="engine crashes to recover from before giving up")
    g.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"],
                   help="uvicorn's log level (info logs every request)")


def _say(msg: str) -> None:
    print(f"strata serve: {msg}", flush=True)


def _load(client, config, server) -> bool:
    from app.engine_client import EngineFailure

    t0 = time.monotonic()
    try:
        ready = client.load(config)
    except EngineFailure as e:
        server.app.state.load_error = f"the model did not load: {e.reply.message}"
        print(f"strata serve: error: {server.app.state.load_error}", file=sys.stderr, flush=True)
        return False
    c = ready.config
    stages = ", ".join(f"{s.device}[{s.first_layer}:{s.end_layer}]" for s in c.stages)
    _say(f"ready in {time.monotonic() - t0:.1f} s: {c.model_name} ({c.arch}, {c.n_layers} layers, ctx {c.ctx}, "
         f"{c.parallel} slots, stages {stages}, {c.dtype})")
    for line in c.fallbacks:
        _say(f"note: {line}")
    return True


def run(args: argparse.Namespace) -> int:
    from app.engine_client import EngineFailure, connect_worker
    from app.server import ServerThread, exposure_warning

    config = engine_config_from_args(args)
    exposure = exposure_warning(args.host, args.api_key)
    if exposure:
        _say(f"warning: {exposure}")
    try:
        client = connect_worker()
    except EngineFailure as e:
        print(f"strata serve: error: the engine did not start: {e}", file=sys.stderr)
        return 1
    server = ServerThread(client, args.host, args.port, api_key=args.api_key, max_queue=args.max_queue,
                          log_level=args.log_level, max_body=int(args.max_body_mb * 2**20), log_exposure=False)
    try:
        url = server.start()
    except OSError as e:
        client.close()
        print(f"strata serve: error: cannot listen on {args.host}:{args.port}: {e.strerror or e}", file=sys.stderr)
        return 1
    stop = threading.Event()
    try:
        _say(f"listening on {url} (loading {config.model} ...)")
        if not _load(client, config, server):
            return 1
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        _say(f"OpenAI base URL: {url}/v1" + ("  (API key required)" if args.api_key else ""))
        return _serve(client, server, stop, args.max_restarts)
    finally:
        server.stop()
        client.close()


def _serve(client, server, stop: threading.Event, max_restarts: int) -> int:
    from app.engine_client import EngineFailure

    restarts = 0
    while not stop.wait(0.25):
        if not server.running:
            print("strata serve: error: the HTTP server stopped", file=sys.stderr)
            return 1
        if client.state != "crashed":
            continue
        err = client.error
        print(f"strata serve: the engine crashed: {err.reply.message if err else 'no reason given'}", file=sys.stderr)
        tail = getattr(err, "stderr_tail", "")
        if tail:
            print(tail, file=sys.stderr)
        if restarts >= max_restarts:
            print(f"strata serve: error: giving up after {restarts} restarts", file=sys.stderr)
            return 1
        restarts += 1
        _say(f"restarting the engine ({restarts}/{max_restarts}) ...")
        try:
            client.restart()
            _say("the engine is back")
        except EngineFailure as e:
            server.app.state.load_error = f"the engine restart failed: {e.reply.message}"
            print(f"strata serve: error: {server.app.state.load_error}", file=sys.stderr)
            return 1
    _say("stopping")
    return 0
