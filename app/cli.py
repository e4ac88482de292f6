"""`strata`: one command for the desktop app, the server, the worker and the engine tools.

Each subcommand lives in its own module; this file only dispatches (imports stay lazy so
`strata serve` never imports Qt and `strata` (the app) never imports torch in the GUI process).
"""
from __future__ import annotations

import argparse
import importlib
import sys

# subcommand -> (module, help)
COMMANDS = {
    "generate": ("app.cmd_generate", "generate text from a prompt"),
    "inspect": ("app.cmd_inspect", "describe a GGUF file"),
    "make-model": ("app.cmd_make_model", "write a synthetic GGUF with random weights"),
    "bench": ("app.cmd_bench", "measure tok/s for 1..N concurrent streams"),
    "batch-test": ("app.cmd_batch_test", "check that batched slots give the same tokens and logits as alone"),
    "mtp-train": ("app.cmd_mtp_train", "train an MTP (draft) layer for a model that has none, by self-distillation"),
    "soak": ("app.cmd_soak", "many concurrent clients against a worker and server on loopback for a while"),
    "serve": ("app.server_main", "OpenAI-compatible HTTP server (headless)"),
    "selftest": ("app.cmd_selftest", "start the engine worker, answer one chat message, print the figures (headless)"),
    "engine": ("app.worker_main", "the engine worker process (started by the app and the server)"),
    "app": ("app.gui_main", "the desktop app (default with no subcommand)"),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--selftest"]:                 # `strata --selftest`: the installer's end-to-end check
        argv[0] = "selftest"
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = ["app", *argv]
    parser = argparse.ArgumentParser(prog="strata", description="Strata Studio")
    sub = parser.add_subparsers(dest="command", required=True)
    modules = {}
    for name, (module, help_text) in COMMANDS.items():
        if argv[0] not in (name, "-h", "--help"):
            sub.add_parser(name, help=help_text)
            continue
        mod = importlib.import_module(module)
        mod.add_arguments(sub.add_parser(name, help=help_text, description=help_text))
        modules[name] = mod
    args = parser.parse_args(argv)
    from app.engine_client import EngineFailure
    from engine.errors import EngineError

    try:
        return int(modules[args.command].run(args) or 0)
    except EngineError as e:
        print(f"strata {args.command}: error: {e}", file=sys.stderr)
        return 1
    except EngineFailure as e:
        print(f"strata {args.command}: error: {e.reply.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `strata inspect ... | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
