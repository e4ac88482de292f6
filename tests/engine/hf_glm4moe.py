"""Transformers' Glm4MoeForCausalLM holding a GGUF's weights (test-only oracle): transformers' GGUF
reader does not take glm4moe, so the config comes from the metadata and every tensor is dequantized
by `gguf.quants.dequantize` (not the engine's decoders) and renamed to transformers' parameters, as
llama.cpp's converter named them the other way. The nextn block becomes one more decoder layer."""
from __future__ import annotations

import transformers

from tests.engine.hf_gguf import BLOCK_NAMES, block_tensors, build, file_tensors, gate_up_experts

NAMES = {**BLOCK_NAMES, "attn_q.bias": "self_attn.q_proj.bias", "attn_k.bias": "self_attn.k_proj.bias",
         "attn_v.bias": "self_attn.v_proj.bias", "exp_probs_b.bias": "mlp.gate.e_score_correction_bias",
         "ffn_gate_shexp.weight": "mlp.shared_experts.gate_proj.weight",
         "ffn_up_shexp.weight": "mlp.shared_experts.up_proj.weight",
         "ffn_down_shexp.weight": "mlp.shared_experts.down_proj.weight"}


def load_glm4moe(path):
    meta, w = file_tensors(path)
    m = lambda k, d=None: meta.get(f"glm4moe.{k}", d)  # noqa: E731
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
    sd.update({f"model.layers.{i}.{NAMES[rest]}": t for i, rest, t in block_tensors(w) if rest in NAMES})
    gate_up_experts(w, sd, cfg.num_hidden_layers)
    return build(transformers.Glm4MoeForCausalLM, cfg, sd)
