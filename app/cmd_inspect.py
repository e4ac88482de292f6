"""`strata inspect FILE.gguf`: architecture, layers, quant types (the mix and bits per weight), tokenizer,
MTP layers, bytes per layer; a tensor type the engine cannot decode is named in one line."""
from __future__ import annotations

import argparse
import json
from collections import Counter

from engine.config import model_config
from engine.gguf_file import read_gguf
from engine.model_files import resolve_model
from engine.messages import format_quant_mix
from engine.model_info import layer_bytes, mtp_source, quant_mix, unsupported_tensor
from engine.tool_format import tool_format


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="GGUF file, or 'default'")
    p.add_argument("--json", action="store_true")


def describe(path) -> dict:
    gf = read_gguf(resolve_model(str(path)))
    cfg = model_config(gf)
    per_layer = layer_bytes(gf, cfg.n_layers + cfg.n_mtp)
    weights, bits = quant_mix(gf)
    mtp_file, mtp_note = mtp_source(gf, cfg)
    return {
        "file": str(gf.path), "size_bytes": gf.path.stat().st_size, "gguf_version": gf.version,
        "name": cfg.name, "architecture": cfg.arch, "layers": cfg.n_layers, "mtp_layers": cfg.n_mtp,
        "mtp_file": mtp_file, "mtp_note": mtp_note,
        "embedding": cfg.n_embd, "heads": cfg.n_heads, "kv_heads": cfg.n_kv_heads, "head_dim": cfg.head_dim,
        "ffn": cfg.n_ff, "experts": cfg.n_expert, "experts_used": cfg.n_expert_used,
        "shared_experts": cfg.n_shared_expert, "expert_gating": cfg.gating if cfg.is_moe else "",
        "layer_kinds": cfg.layer_kinds(), "vocab": cfg.vocab_size,
        "context_length": cfg.context_length, "rope_base": cfg.rope_base, "sliding_window": cfg.sliding_window,
        "tokenizer": gf.get("tokenizer.ggml.model", ""), "tokenizer_pre": gf.get("tokenizer.ggml.pre", ""),
        "chat_template": "tokenizer.chat_template" in gf.metadata,
        "tool_format": tool_format(gf.get("tokenizer.chat_template")),
        "quant_types": dict(Counter(t.qtype.name for t in gf.tensors.values()).most_common()),
        "quant_weights": weights, "bits_per_weight": round(bits, 4), "unsupported": unsupported_tensor(gf),
        "tensors": len(gf.tensors), "layer_bytes": per_layer,
    }


def run(args: argparse.Namespace) -> int:
    d = describe(args.file)
    if args.json:
        print(json.dumps(d))
        return 0
    mib = 1 << 20
    print(f"{d['file']}  ({d['size_bytes'] / mib:.1f} MiB, GGUF v{d['gguf_version']})")
    print(f"  name           {d['name']}")
    print(f"  architecture   {d['architecture']}: {d['layers']} layers, d {d['embedding']}, "
          f"{d['heads']}/{d['kv_heads']} heads (head dim {d['head_dim']}), ffn {d['ffn']}")
    print(f"  blocks         {d['layer_kinds']}")
    if d["experts"]:
        shared = f", {d['shared_experts']} shared" if d["shared_experts"] else ""
        print(f"  experts        {d['experts']} routed, top-{d['experts_used']} by {d['expert_gating']}{shared}")
    print(f"  vocab          {d['vocab']}, context {d['context_length']}, rope base {d['rope_base']:g}"
          + (f", sliding window {d['sliding_window']}" if d["sliding_window"] else ""))
    print(f"  tokenizer      {d['tokenizer']} (pre {d['tokenizer_pre'] or '-'}), chat template: "
          f"{'yes' if d['chat_template'] else 'no (plain fallback)'}, function calls: {d['tool_format']}")
    if d["mtp_layers"]:
        mtp = str(d["mtp_layers"])
    elif d["mtp_file"]:
        mtp = f"none in the file; drafts load the one trained for it: {d['mtp_file']}"
    else:
        mtp = "none" + (f" ({d['mtp_note']})" if d["mtp_note"] else "")
    print(f"  MTP layers     {mtp}")
    print("  quant types    " + ", ".join(f"{k} x{v}" for k, v in d["quant_types"].items()))
    print("  type mix       " + format_quant_mix(d["quant_weights"], d["bits_per_weight"]))
    if d["unsupported"]:
        print(f"  unsupported    {d['unsupported']}: generate and serve refuse this file")
    print("  bytes/layer    " + " ".join(f"{i}:{b / mib:.2f}M" for i, b in enumerate(d["layer_bytes"])))
    return 0
