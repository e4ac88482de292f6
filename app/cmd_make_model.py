"""`strata make-model`: a GGUF with random but valid weights, for tests and GPU benchmarks."""
from __future__ import annotations

import argparse
import sys
import time

from gguf.quants import QuantError

from engine.errors import ConfigError
from engine.synthetic import ARCHS, MIX, QTYPES, SHAPES, make_model
from engine.synthetic_counting import make_counting_model
from engine.synthetic_induction import make_induction_model


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--arch", required=True, choices=ARCHS)
    p.add_argument("--shape", default="tiny", choices=list(SHAPES))
    p.add_argument("--mtp", type=int, default=0, help="number of nextn (MTP) layers after the trunk")
    p.add_argument("--qtype", default="Q8_0", help="one of " + ", ".join(QTYPES))
    p.add_argument("--qtype-map", default="", metavar="PATTERN=TYPE,...",
                   help="mixed file: tensors whose name matches a glob get that type instead of --qtype, "
                        "e.g. 'output.weight=Q6_K,*.attn_v.weight=Q4_K' (first match wins; short rows fall back)")
    p.add_argument("--mix", action="store_true",
                   help=f"mixed file like the downloaded low-bit ones: --qtype for most matrices, and {MIX} "
                        "(--qtype-map rules take precedence)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--weights", choices=["random", "counting", "induction"], default="random",
                   help="counting: a model that counts (x -> x+1) with an MTP layer that agrees (acceptance ~1); "
                        "induction: a model that repeats the text with period layers+1 through attention "
                        "(shape tiny or small, llama/qwen3/qwen3moe), with an MTP layer that agrees")
    p.add_argument("--out", required=True)


def run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    last = [0.0]

    def progress(done: int, total: int) -> None:
        if sys.stderr.isatty() and time.perf_counter() - last[0] > 0.5:
            last[0] = time.perf_counter()
            print(f"\r{done / total:6.1%} of {total / 2**20:,.0f} MiB", end="", file=sys.stderr)

    if args.weights != "random" and (args.mix or args.qtype_map):
        raise ConfigError("--mix and --qtype-map apply to --weights random only")
    try:
        if args.weights == "counting":
            path = make_counting_model(args.out, args.arch, args.shape, mtp=args.mtp, qtype=args.qtype, seed=args.seed)
        elif args.weights == "induction":
            path = make_induction_model(args.out, args.arch, args.shape, mtp=args.mtp, qtype=args.qtype,
                                        seed=args.seed)
    except (NotImplementedError, QuantError):   # gguf.quants quantizes only the simple types
        raise ConfigError(f"--weights {args.weights} quantizes real values through gguf, which cannot write "
                          f"{args.qtype.upper()}; use Q8_0, Q4_0, Q4_1, Q5_0 or F16") from None
    if args.weights == "random":
        qtype_map = ",".join(m for m in (args.qtype_map, MIX if args.mix else "") if m)
        path = make_model(args.arch, args.shape, args.out, mtp=args.mtp, qtype=args.qtype, seed=args.seed,
                          progress=progress, qtype_map=qtype_map)
    size = path.stat().st_size
    print(f"\nwrote {path} ({size / 2**20:,.1f} MiB) in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0
