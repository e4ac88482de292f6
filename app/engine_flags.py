"""The engine flags shared by every command (`strata`, `serve`, `generate`, `bench`, `batch-test`, `engine`)."""
from __future__ import annotations

import argparse
import os

from engine.messages import EngineConfig


def add_engine_flags(p: argparse.ArgumentParser, model_default: str | None = "default") -> None:
    g = p.add_argument_group("engine")
    g.add_argument("--model", default=model_default, help="GGUF path, or 'default' (bundled SmolLM2-135M)")
    g.add_argument("--devices", default="cpu", help="cpu | cpu,cpu | cuda:0,cuda:1 (one per stage)")
    g.add_argument("--layer-split", default="auto", help="K1,K2,...: first layer of each next stage, or auto")
    g.add_argument("--parallel", type=int, default=1, help="request slots")
    g.add_argument("--batch-groups", default="auto", help="G (divides --parallel) or auto")
    g.add_argument("--ctx", type=int, default=2048, help="context length per slot")
    g.add_argument("--draft", choices=["mtp", "lookup", "both", "replay"], default="mtp",
                   help="draft source; replay (strata bench --replay-accept): a request's own tokens from a "
                        "first run, kept at a set rate, with the MTP layer still run where the model has one")
    g.add_argument("--spec", type=int, default=1, help="window size: current token + up to N-1 proposals")
    g.add_argument("--spec-min-p", type=float, default=0.0)
    g.add_argument("--piped-mtp", type=int, default=None,
                   help="draft depth inside pipelined groups (env STRATA_PIPED_MTP)")
    g.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"],
                   help="compute dtype: auto = bfloat16; on CPU that is the fast mode (4-bit and Q8_0 matrices "
                        "kept as int4 groups, ~1x the file in memory); float32 = the reference numerics "
                        "(dense weights, as HF transformers)")
    g.add_argument("--decode-kernel", default="auto", choices=["auto", "q4k-mma", "dp4a", "imma", "bf16"],
                   help="GPU matmul for decode rows, one per load: q4k-mma (auto on compute capability 8.0+: "
                        "Q4_K on int8 tensor cores, fastest for many streams; other types dp4a), dp4a (int8 "
                        "dot products, ~10%% faster for one stream), imma (int8 tensor cores) or bf16 (Q4_K "
                        "dequantized to bfloat16 on tensor cores; other types dp4a)")


ENGINE_FIELDS = EngineConfig.__struct_fields__


def engine_config_from_args(a: argparse.Namespace, base: EngineConfig | None = None) -> EngineConfig:
    """`base` (default: the defaults) with every engine flag that was given (not None) on top;
    --piped-mtp falls back to $STRATA_PIPED_MTP."""
    d = {f: getattr(base or EngineConfig(), f) for f in ENGINE_FIELDS}
    d.update({f: getattr(a, f) for f in ENGINE_FIELDS if getattr(a, f, None) is not None})
    if getattr(a, "piped_mtp", None) is None and os.environ.get("STRATA_PIPED_MTP"):
        d["piped_mtp"] = int(os.environ["STRATA_PIPED_MTP"])
    d["batch_groups"], d["model"] = str(d["batch_groups"]), d["model"] or "default"
    return EngineConfig(**d)
