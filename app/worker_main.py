"""`strata engine`: the engine worker process.

The app and `strata serve` start it themselves (app/engine_process.py); by hand:

    STRATA_ENGINE_SECRET=... strata engine --endpoint tcp://127.0.0.1:5555

The secret travels in an environment variable (named by --secret-env), never on the command line,
where other local users could read it. Without one, a fresh secret is made and printed on stdout.
"""
from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys

SECRET_ENV = "STRATA_ENGINE_SECRET"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--endpoint", default="tcp://127.0.0.1:0",
                   help="ipc://PATH or loopback tcp://127.0.0.1:PORT (0 = any free port; printed on stdout)")
    p.add_argument("--secret-env", default=SECRET_ENV, metavar="NAME",
                   help=f"environment variable holding the per-launch secret (default {SECRET_ENV})")
    p.add_argument("--parent-pid", type=int, default=None,
                   help="exit when this process dies (the app passes its own pid)")
    p.add_argument("--telemetry-hz", type=float, default=10.0)
    p.add_argument("--stall-timeout", type=float, default=30.0,
                   help="seconds without engine progress (outside a load) before it counts as hung")


def run(args: argparse.Namespace) -> int:
    import zmq

    from engine.worker import Worker

    secret = os.environ.pop(args.secret_env, "")          # children of the engine do not inherit it
    made = not secret
    secret = secret or secrets.token_urlsafe(32)
    if args.parent_pid:
        # The parent supervises us: Ctrl-C in its terminal is its business, not ours.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        worker = Worker(args.endpoint, secret, parent_pid=args.parent_pid,
                        telemetry_hz=args.telemetry_hz, stall_timeout=args.stall_timeout)
    except (ValueError, zmq.ZMQError) as e:
        print(f"strata engine: error: {e}", file=sys.stderr)
        return 2
    if made:
        print(f"STRATA_ENGINE_SECRET {secret}", flush=True)
    return worker.serve()
