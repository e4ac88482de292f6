"""Transformers' Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM / Qwen3NextForCausalLM holding a GGUF's
weights (test-only oracle).

Transformers' GGUF reader does not take qwen35, so the config comes from the metadata and every tensor
is dequantized by `gguf.quants.dequantize` (not the engine's decoders), then llama.cpp's converter is
undone: norms lose the +1 it added (transformers' zero-centred norms), except the delta net's own norm;
ssm_a = -exp(A_log) goes back to A_log; the conv gets its channel axis back; and for qwen35 the value
heads go back from llama.cpp's tiled order (value head j of key head j mod key heads) to transformers'
grouped order, in every tensor that has them (qwen3next files keep transformers' order, and its older
ssm_in / ssm_ba are transformers' in_proj_qkvz / in_proj_ba as they are). The nextn block becomes one
more full-attention decoder layer.
"""
from __future__ import annotations

import torch
import transformers

from tests.engine.hf_gguf import BLOCK_NAMES, block_tensors, build, file_tensors, gate_up_experts

NAMES = {**BLOCK_NAMES,
         "attn_qkv.weight": "linear_attn.in_proj_qkv.weight", "attn_gate.weight": "linear_attn.in_proj_z.weight",
         "ssm_beta.weight": "linear_attn.in_proj_b.weight", "ssm_alpha.weight": "linear_attn.in_proj_a.weight",
         "ssm_in.weight": "linear_attn.in_proj_qkvz.weight", "ssm_ba.weight": "linear_attn.in_proj_ba.weight",
         "ssm_conv1d.weight": "linear_attn.conv1d.weight", "ssm_dt.bias": "linear_attn.dt_bias",
         "ssm_a": "linear_attn.A_log", "ssm_norm.weight": "linear_attn.norm.weight",
         "ssm_out.weight": "linear_attn.out_proj.weight", "ffn_gate_inp_shexp.weight": "mlp.shared_expert_gate.weight",
         "ffn_gate_shexp.weight": "mlp.shared_expert.gate_proj.weight",
         "ffn_up_shexp.weight": "mlp.shared_expert.up_proj.weight",
         "ffn_down_shexp.weight": "mlp.shared_expert.down_proj.weight"}
_ZERO_CENTRED = ("attn_norm.weight", "post_attention_norm.weight", "attn_q_norm.weight", "attn_k_norm.weight")


def _grouped(t: torch.Tensor, dim: int, nk: int, nv: int, width: int) -> torch.Tensor:
    """Value heads from llama.cpp's tiled order [k0v0, k1v0, ..., k0v1, ...] to grouped [k0v0, k0v1, ...]."""
    shape = list(t.shape)
    t = t.reshape(*shape[:dim], nv // nk, nk, width, *shape[dim + 1:])
    return t.transpose(dim, dim + 1).reshape(shape)


def load_qwen35(path):
    meta, w = file_tensors(path)
    arch = meta["general.architecture"]
    m = lambda k, d=None: meta.get(f"{arch}.{k}", d)  # noqa: E731
    n_trunk, hd = int(m("block_count")) - int(m("nextn_predict_layers", 0)), int(m("attention.key_length"))
    nk, nv, lhd = int(m("ssm.group_count")), int(m("ssm.time_step_rank")), int(m("ssm.state_size"))
    interval = int(m("full_attention_interval"))
    kinds = ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(n_trunk)]
    kinds += ["full_attention"] * (int(m("block_count")) - n_trunk)            # the nextn block
    common = dict(
        vocab_size=w["token_embd.weight"].shape[0], hidden_size=int(m("embedding_length")),
        num_hidden_layers=int(m("block_count")), num_attention_heads=int(m("attention.head_count")),
        num_key_value_heads=int(m("attention.head_count_kv")), head_dim=hd,
        max_position_embeddings=int(m("context_length")), rms_norm_eps=float(m("attention.layer_norm_rms_epsilon")),
        rope_parameters={"rope_type": "default", "rope_theta": float(m("rope.freq_base")),
                         "partial_rotary_factor": int(m("rope.dimension_count")) / hd},
        linear_conv_kernel_dim=int(m("ssm.conv_kernel")), linear_key_head_dim=lhd, linear_value_head_dim=lhd,
        linear_num_key_heads=nk, linear_num_value_heads=nv, layer_types=kinds,
        tie_word_embeddings="output.weight" not in w)
    if arch == "qwen3next":
        cfg = transformers.Qwen3NextConfig(
            **common, intermediate_size=int(m("feed_forward_length")), decoder_sparse_step=1, mlp_only_layers=[],
            moe_intermediate_size=int(m("expert_feed_forward_length")), norm_topk_prob=True,
            shared_expert_intermediate_size=int(m("expert_shared_feed_forward_length")),
            num_experts_per_tok=int(m("expert_used_count")), num_experts=int(m("expert_count")))
        model_class = transformers.Qwen3NextForCausalLM
    elif arch == "qwen35moe":
        cfg = transformers.Qwen3_5MoeTextConfig(
            **common, moe_intermediate_size=int(m("expert_feed_forward_length")),
            shared_expert_intermediate_size=int(m("expert_shared_feed_forward_length")),
            num_experts_per_tok=int(m("expert_used_count")), num_experts=int(m("expert_count")))
        model_class = transformers.Qwen3_5MoeForCausalLM
    else:
        cfg = transformers.Qwen3_5TextConfig(**common, intermediate_size=int(m("feed_forward_length")))
        model_class = transformers.Qwen3_5ForCausalLM
    sd = {"model.embed_tokens.weight": w["token_embd.weight"], "model.norm.weight": w["output_norm.weight"] - 1,
          "lm_head.weight": w.get("output.weight", w["token_embd.weight"])}
    kd, tiled = nk * lhd, arch != "qwen3next"
    grouped = _grouped if tiled else (lambda t, *_: t)  # noqa: E731
    for i, rest, t in block_tensors(w):
        if rest in _ZERO_CENTRED:
            t = t - 1
        elif rest in ("attn_qkv.weight", "ssm_conv1d.weight"):
            t = t.reshape(2 * kd + nv * lhd, -1)          # rows (qkv) or channels (conv): q, k, then v heads
            t = torch.cat((t[:2 * kd], grouped(t[2 * kd:], 0, nk, nv, lhd)))
            t = t[:, None, :] if rest == "ssm_conv1d.weight" else t
        elif rest == "attn_gate.weight":
            t = grouped(t, 0, nk, nv, lhd)
        elif rest in ("ssm_beta.weight", "ssm_alpha.weight", "ssm_dt.bias"):
            t = grouped(t, 0, nk, nv, 1)
        elif rest == "ssm_a":
            t = grouped(torch.log(-t), 0, nk, nv, 1)
        elif rest == "ssm_out.weight":
            t = grouped(t, 1, nk, nv, lhd)
        elif rest == "ffn_gate_inp_shexp.weight":
            t = t.reshape(1, -1)
        if rest in NAMES:
            sd[f"model.layers.{i}.{NAMES[rest]}"] = t
    gate_up_experts(w, sd, cfg.num_hidden_layers)
    return build(model_class, cfg, sd)
