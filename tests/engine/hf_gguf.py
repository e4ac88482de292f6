"""Shared by the test-only transformers builders (hf_glm4moe.py, hf_qwen35.py): a GGUF's tensors
dequantized by `gguf.quants.dequantize`, the block tensor names both layouts share, and the model made
on the meta device then given those tensors."""
from __future__ import annotations

import torch
from gguf.quants import dequantize

from engine.gguf_file import read_gguf

# GGUF block tensor (after "blk.N.") -> transformers' parameter (after "model.layers.N.")
BLOCK_NAMES = {"attn_norm.weight": "input_layernorm.weight",
               "post_attention_norm.weight": "post_attention_layernorm.weight",
               "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
               "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
               "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight",
               "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
               "ffn_down.weight": "mlp.down_proj.weight", "ffn_gate_inp.weight": "mlp.gate.weight",
               "ffn_down_exps.weight": "mlp.experts.down_proj"}


def file_tensors(path) -> tuple[dict, dict[str, torch.Tensor]]:
    """(the file's metadata, every tensor dequantized to float32 in torch order)."""
    gf = read_gguf(path)
    return gf.metadata, {n: torch.from_numpy(dequantize(gf.raw(n), t.qtype).reshape(t.torch_shape)).float()
                         for n, t in gf.tensors.items()}


def block_tensors(w: dict[str, torch.Tensor]):
    """(block index, name after 'blk.N.', tensor) of every trunk or nextn-block tensor but the nextn extras."""
    for name, t in w.items():
        parts = name.split(".")
        if parts[0] == "blk" and parts[2] != "nextn":
            yield int(parts[1]), ".".join(parts[2:]), t


def gate_up_experts(w: dict[str, torch.Tensor], sd: dict, n_blocks: int) -> None:
    """transformers' fused experts.gate_up_proj from the file's gate and up expert stacks."""
    for i in range(n_blocks):
        g = w.get(f"blk.{i}.ffn_gate_exps.weight")
        if g is not None:
            sd[f"model.layers.{i}.mlp.experts.gate_up_proj"] = torch.cat((g, w[f"blk.{i}.ffn_up_exps.weight"]), dim=1)


def build(model_class, cfg, sd: dict[str, torch.Tensor]):
    with torch.device("meta"):
        model = model_class(cfg)
    model.load_state_dict(sd, strict=True, assign=True)
    model.model.rotary_emb = type(model.model.rotary_emb)(cfg)    # its inv_freq buffers were made on meta
    return model.float().eval()
