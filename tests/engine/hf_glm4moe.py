"""Transformers' Glm4MoeForCausalLM holding a GGUF's weights (test-only oracle): transformers' GGUF
reader does not take glm4moe, so the config comes from the metadata and every tensor is dequantized
by `gguf.quants.dequantize` (not the engine's decoders) and renamed to transformers' parameters, as
llama.cpp's converter named them the other way. The nextn block becomes one more decoder layer."""
from __future__ import annotations

import torch
from gguf.quants import dequantize

from engine.gguf_file import read_gguf

_ATTN = {"attn_norm.weight": "input_layernorm.weight", "post_attention_norm.weight": "post_attention_layernorm.weight",
         "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
         "attn_v.weight": "self_attn.v_proj.weight", "attn_q.bias": "self_attn.q_proj.bias",
         "attn_k.bias": "self_attn.k_proj.bias", "attn_v.bias": "self_attn.v_proj.bias",
         "attn_output.weight": "self_attn.o_proj.weight", "attn_q_norm.weight": "self_attn.q_norm.weight",
         "attn_k_norm.weight": "self_attn.k_norm.weight",
         "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
         "ffn_down.weight": "mlp.down_proj.weight", "ffn_gate_inp.weight": "mlp.gate.weight",
         "exp_probs_b.bias": "mlp.gate.e_score_correction_bias", "ffn_down_exps.weight": "mlp.experts.down_proj",
         "ffn_gate_shexp.weight": "mlp.shared_experts.gate_proj.weight",
         "ffn_up_shexp.weight": "mlp.shared_experts.up_proj.weight",
         "ffn_down_shexp.weight": "mlp.shared_experts.down_proj.weight"}


def load_glm4moe(path):
    import transformers

    gf = read_gguf(path)
    m = lambda k, d=None: gf.metadata.get(f"glm4moe.{k}", d)  # noqa: E731
    w = {n: torch.from_numpy(dequantize(gf.raw(n), t.qtype).reshape(t.torch_shape)).float()
         for n, t in gf.tensors.items()}
    head_dim = int(m("attention.key_length"))
    cfg = transformers.Glm4MoeConfig(
        vocab_size=w["token_embd.weight"].shape[0], hidden_size=int(m("embedding_length")),
        intermediate_size=int(m("feed_forward_length")), num_hidden_layers=int(m("block_count")),
        num_attention_heads=int(m("attention.head_count")), num_key_value_heads=int(m("attention.head_count_kv")),
        head_dim=head_dim, max_position_embeddings=int(m("context_length")),
        rms_norm_eps=float(m("attention.layer_norm_rms_epsilon")), attention_bias="blk.0.attn_q.bias" in w,
        rope_parameters={"rope_type": "default", "rope_theta": float(m("rope.freq_base")),
                         "partial_rotary_factor": int(m("rope.dimension_count")) / head_dim},
        moe_intermediate_size=int(m("expert_feed_forward_length")), num_experts_per_tok=int(m("expert_used_count")),
        n_shared_experts=int(m("expert_shared_count")), n_routed_experts=int(m("expert_count")),
        routed_scaling_factor=float(m("expert_weights_scale", 1.0)), n_group=1, topk_group=1,
        first_k_dense_replace=int(m("leading_dense_block_count", 0)), norm_topk_prob=bool(m("expert_weights_norm")),
        use_qk_norm="blk.0.attn_q_norm.weight" in w, tie_word_embeddings="output.weight" not in w)
    sd = {"model.embed_tokens.weight": w["token_embd.weight"], "model.norm.weight": w["output_norm.weight"],
          "lm_head.weight": w.get("output.weight", w["token_embd.weight"])}
    for name, t in w.items():
        parts = name.split(".")
        if parts[0] != "blk" or parts[2] == "nextn":
            continue
        p, rest = f"model.layers.{parts[1]}.", ".".join(parts[2:])
        if rest in _ATTN:
            sd[p + _ATTN[rest]] = t
    for i in range(cfg.num_hidden_layers):
        g = w.get(f"blk.{i}.ffn_gate_exps.weight")
        if g is not None:
            sd[f"model.layers.{i}.mlp.experts.gate_up_proj"] = torch.cat((g, w[f"blk.{i}.ffn_up_exps.weight"]), dim=1)
    with torch.device("meta"):
        model = transformers.Glm4MoeForCausalLM(cfg)
    model.load_state_dict(sd, strict=True, assign=True)
    model.model.rotary_emb = type(model.model.rotary_emb)(cfg)    # its inv_freq buffers were made on meta
    return model.float().eval()
