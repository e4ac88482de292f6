"""Shapes, tensor layouts and architecture metadata of the synthetic models (see engine/synthetic.py).

Names and keys follow llama.cpp as the `gguf` package spells them (MODEL_TENSOR / TENSOR_NAMES,
Keys.LLM / Keys.Attention / Keys.Rope). GGUF shapes list the innermost dimension first: a matrix
that maps `n_in` features to `n_out` features has the GGUF shape (n_in, n_out).
"""
from __future__ import annotations

from dataclasses import dataclass

from gguf.constants import TENSOR_NAMES, GGUFValueType, Keys, MODEL_TENSOR as T

from engine.errors import ConfigError

ARCHS = ("llama", "qwen3", "qwen3moe", "gemma3", "glm4moe", "qwen35", "qwen35moe", "qwen3next")
MOE_ARCHS = ("qwen3moe", "glm4moe", "qwen35moe", "qwen3next")
HYBRID = ("qwen35", "qwen35moe", "qwen3next")      # gated delta net blocks between gated attention blocks
VOCAB_SIZE = 49152  # the default model's (SmolLM2) tokenizer is copied into every synthetic model

_RMS_EPS = {"llama": 1e-5, "qwen3": 1e-6, "qwen3moe": 1e-6, "gemma3": 1e-6, "glm4moe": 1e-5, "qwen35": 1e-6,
            "qwen35moe": 1e-6, "qwen3next": 1e-6}
_HAS_QK_NORM = {"qwen3", "qwen3moe", "gemma3", *HYBRID}
_HAS_HEAD_DIM_KEYS = {"qwen3", "qwen3moe", "gemma3", "glm4moe", *HYBRID}
_ROPE_FRACTION = {"glm4moe": 2, "qwen35": 4, "qwen35moe": 4, "qwen3next": 4}     # rope on head_dim / this
# glm4moe as GLM-4.5-Air: q/k/v biases, no q/k norms, rope on half of each head, sigmoid routing
# with a selection bias, one shared expert, the first block dense
GLM_ROUTED_SCALE = 2.5    # GLM-4.5's (Air's is 1.0): synthetic files exercise a scale other than 1


@dataclass(frozen=True)
class Shape:
    """Model dimensions; the expert fields are used by MoE archs only, sliding_window by gemma3 only,
    n_shared and dense_lead by glm4moe only, the delta net fields (ssm_*, attn_interval) by qwen35*."""
    n_layer: int
    d_model: int
    n_head: int
    n_head_kv: int
    head_dim: int
    ffn: int
    context: int
    rope_base: float
    n_expert: int = 0
    n_expert_used: int = 0
    expert_ffn: int = 0
    sliding_window: int = 0
    n_shared: int = 1
    dense_lead: int = 1
    ssm_k_heads: int = 2
    ssm_v_heads: int = 4          # a multiple of the key heads: value head j reads key head j mod key heads
    ssm_conv: int = 4
    attn_interval: int = 3        # every 3rd block has full attention (the real models: every 4th)
    ssm_head_dim: int = 0         # 0: head_dim


SHAPES: dict[str, Shape] = {
    # Tests: a few MB. 6 layers so gemma3 has five sliding layers and one global (every 6th).
    "tiny": Shape(n_layer=6, d_model=64, n_head=4, n_head_kv=2, head_dim=16, ffn=128, context=4096,
                  rope_base=10000.0, n_expert=8, n_expert_used=2, expert_ffn=32, sliding_window=16),
    # Tests of K-quants: every matrix row is a multiple of 256, so Q4_K / Q6_K need no fallback.
    "small": Shape(n_layer=6, d_model=256, n_head=4, n_head_kv=2, head_dim=64, ffn=512, context=4096,
                   rope_base=10000.0, n_expert=8, n_expert_used=2, expert_ffn=256, sliding_window=64),
    # SmolLM2-135M's shape (the bundled default model), for GPU speed runs where the real file can't travel.
    "smollm2-135m": Shape(n_layer=30, d_model=576, n_head=9, n_head_kv=3, head_dim=64, ffn=1536, context=8192,
                          rope_base=100000.0),
    # Gemma 3 270M's (the second real model of these machines; heads of 256 values in a KV group of 4)
    "gemma3-270m": Shape(n_layer=18, d_model=640, n_head=4, n_head_kv=1, head_dim=256, ffn=2048, context=32768,
                         rope_base=1000000.0, sliding_window=512),
    "llama-3-8b": Shape(n_layer=32, d_model=4096, n_head=32, n_head_kv=8, head_dim=128, ffn=14336,
                        context=8192, rope_base=500000.0, sliding_window=4096),
    "qwen3-30b-a3b": Shape(n_layer=48, d_model=2048, n_head=32, n_head_kv=4, head_dim=128, ffn=6144,
                           context=40960, rope_base=1000000.0, n_expert=128, n_expert_used=8,
                           expert_ffn=768, sliding_window=4096),
    # The hybrids' published shapes, as transformers' Qwen3_5TextConfig, Qwen3_5MoeTextConfig and
    # Qwen3NextConfig give them (Qwen3.5-9B, Qwen3.5-35B-A3B, Qwen3-Next-80B-A3B), with this vocabulary
    "qwen3.5-9b": Shape(n_layer=32, d_model=4096, n_head=16, n_head_kv=4, head_dim=256, ffn=12288, context=262144,
                        rope_base=10000000.0, ssm_k_heads=16, ssm_v_heads=32, attn_interval=4, ssm_head_dim=128),
    "qwen3.5-35b-a3b": Shape(n_layer=40, d_model=2048, n_head=16, n_head_kv=2, head_dim=256, ffn=512, context=262144,
                             rope_base=10000000.0, n_expert=256, n_expert_used=8, expert_ffn=512, ssm_k_heads=16,
                             ssm_v_heads=32, attn_interval=4, ssm_head_dim=128),
    "qwen3-next-80b-a3b": Shape(n_layer=48, d_model=2048, n_head=16, n_head_kv=2, head_dim=256, ffn=5632,
                                context=262144, rope_base=10000000.0, n_expert=512, n_expert_used=10, expert_ffn=512,
                                ssm_k_heads=16, ssm_v_heads=32, attn_interval=4, ssm_head_dim=128),
    "glm-4.5-air": Shape(n_layer=46, d_model=4096, n_head=96, n_head_kv=8, head_dim=128, ffn=10944,
                         context=131072, rope_base=1000000.0, n_expert=128, n_expert_used=8, expert_ffn=1408),
}


@dataclass(frozen=True)
class TensorSpec:
    """One tensor to write. role: 'weight' (takes the file's qtype), 'norm' or 'router' (always F32)."""
    name: str
    shape: tuple[int, ...]  # GGUF order, innermost first
    role: str


def check(arch: str, shape: Shape, mtp: int) -> None:
    """Raise ConfigError for a combination that cannot make a model."""
    if arch not in ARCHS:
        raise ConfigError(f"unknown arch {arch!r}: choose one of {', '.join(ARCHS)}")
    if arch in MOE_ARCHS and shape.n_expert == 0:
        with_experts = ", ".join(k for k, v in SHAPES.items() if v.n_expert)
        raise ConfigError(f"arch {arch} needs a shape with experts ({with_experts})")
    if mtp < 0:
        raise ConfigError(f"mtp must be 0 or more, not {mtp}")


def _name(kind: T, bid: int | None = None, suffix: str = "weight") -> str:
    return TENSOR_NAMES[kind].format(bid=bid) + "." + suffix


def is_recurrent(arch: str, s: Shape, bid: int) -> bool:
    return arch in HYBRID and bid < s.n_layer and (bid + 1) % s.attn_interval != 0


def _delta_net(arch: str, s: Shape, bid: int) -> list[TensorSpec]:
    """A gated delta net block's mixer, as llama.cpp names and shapes it: qwen35 with separate
    projections, qwen3next as its older files have it (ssm_in: q, k, v, z per key head; ssm_beta_alpha)."""
    d, nv, hd = s.d_model, s.ssm_v_heads, s.ssm_head_dim or s.head_dim
    conv, value = (2 * s.ssm_k_heads + nv) * hd, nv * hd
    if arch == "qwen3next":
        inputs = [TensorSpec(_name(T.SSM_IN, bid), (d, conv + value), "weight"),
                  TensorSpec(_name(T.SSM_BETA_ALPHA, bid), (d, 2 * nv), "weight")]
    else:
        inputs = [TensorSpec(_name(T.ATTN_QKV, bid), (d, conv), "weight"),
                  TensorSpec(_name(T.ATTN_GATE, bid), (d, value), "weight"),
                  TensorSpec(_name(T.SSM_BETA, bid), (d, nv), "weight"),
                  TensorSpec(_name(T.SSM_ALPHA, bid), (d, nv), "weight")]
    return [TensorSpec(_name(T.ATTN_NORM, bid), (d,), "norm"), *inputs,
            TensorSpec(_name(T.SSM_CONV1D, bid), (s.ssm_conv, conv), "conv"),
            TensorSpec(_name(T.SSM_DT, bid, "bias"), (nv,), "bias"),
            TensorSpec(TENSOR_NAMES[T.SSM_A].format(bid=bid), (nv,), "decay"),
            TensorSpec(_name(T.SSM_NORM, bid), (hd,), "norm"),
            TensorSpec(_name(T.SSM_OUT, bid), (value, d), "weight")]


def _attention(arch: str, s: Shape, bid: int) -> list[TensorSpec]:
    if is_recurrent(arch, s, bid):
        return _delta_net(arch, s, bid)
    q, kv = s.n_head * s.head_dim, s.n_head_kv * s.head_dim
    specs = [
        TensorSpec(_name(T.ATTN_NORM, bid), (s.d_model,), "norm"),
        TensorSpec(_name(T.ATTN_Q, bid), (s.d_model, 2 * q if arch in HYBRID else q), "weight"),
        TensorSpec(_name(T.ATTN_K, bid), (s.d_model, kv), "weight"),
        TensorSpec(_name(T.ATTN_V, bid), (s.d_model, kv), "weight"),
        TensorSpec(_name(T.ATTN_OUT, bid), (q, s.d_model), "weight"),
    ]
    if arch == "glm4moe":
        specs += [TensorSpec(_name(T.ATTN_Q, bid, "bias"), (q,), "bias"),
                  TensorSpec(_name(T.ATTN_K, bid, "bias"), (kv,), "bias"),
                  TensorSpec(_name(T.ATTN_V, bid, "bias"), (kv,), "bias")]
    if arch in _HAS_QK_NORM:
        specs += [TensorSpec(_name(T.ATTN_Q_NORM, bid), (s.head_dim,), "norm"),
                  TensorSpec(_name(T.ATTN_K_NORM, bid), (s.head_dim,), "norm")]
    if arch == "gemma3":
        specs.append(TensorSpec(_name(T.ATTN_POST_NORM, bid), (s.d_model,), "norm"))
    return specs


def _feed_forward(arch: str, s: Shape, bid: int) -> list[TensorSpec]:
    # glm4moe and qwen35 name their FFN input norm post_attention_norm (llama.cpp's attn_post_norm)
    named = arch == "glm4moe" or arch in HYBRID
    specs = [TensorSpec(_name(T.ATTN_POST_NORM if named else T.FFN_NORM, bid), (s.d_model,), "norm")]
    if arch in MOE_ARCHS and not (arch == "glm4moe" and bid < s.dense_lead):
        e, f = s.n_expert, s.expert_ffn
        specs += [
            TensorSpec(_name(T.FFN_GATE_INP, bid), (s.d_model, e), "router"),
            TensorSpec(_name(T.FFN_GATE_EXP, bid), (s.d_model, f, e), "weight"),
            TensorSpec(_name(T.FFN_UP_EXP, bid), (s.d_model, f, e), "weight"),
            TensorSpec(_name(T.FFN_DOWN_EXP, bid), (f, s.d_model, e), "weight"),
        ]
        if arch in ("qwen35moe", "qwen3next"):
            specs += [
                TensorSpec(_name(T.FFN_GATE_INP_SHEXP, bid), (s.d_model,), "router"),
                TensorSpec(_name(T.FFN_GATE_SHEXP, bid), (s.d_model, f), "weight"),
                TensorSpec(_name(T.FFN_UP_SHEXP, bid), (s.d_model, f), "weight"),
                TensorSpec(_name(T.FFN_DOWN_SHEXP, bid), (f, s.d_model), "weight"),
            ]
        if arch == "glm4moe":
            fs = f * s.n_shared
            specs += [
                TensorSpec(_name(T.FFN_EXP_PROBS_B, bid, "bias"), (e,), "bias"),
                TensorSpec(_name(T.FFN_GATE_SHEXP, bid), (s.d_model, fs), "weight"),
                TensorSpec(_name(T.FFN_UP_SHEXP, bid), (s.d_model, fs), "weight"),
                TensorSpec(_name(T.FFN_DOWN_SHEXP, bid), (fs, s.d_model), "weight"),
            ]
    else:
        specs += [
            TensorSpec(_name(T.FFN_GATE, bid), (s.d_model, s.ffn), "weight"),
            TensorSpec(_name(T.FFN_UP, bid), (s.d_model, s.ffn), "weight"),
            TensorSpec(_name(T.FFN_DOWN, bid), (s.ffn, s.d_model), "weight"),
        ]
    if arch == "gemma3":
        specs.append(TensorSpec(_name(T.FFN_POST_NORM, bid), (s.d_model,), "norm"))
    return specs


def _nextn(s: Shape, bid: int, own_head: bool) -> list[TensorSpec]:
    """The MTP extras of block `bid`: eh_proj maps concat(enorm(embedding), hnorm(hidden)) to d."""
    d = s.d_model
    specs = [
        TensorSpec(_name(T.NEXTN_EH_PROJ, bid), (2 * d, d), "weight"),
        TensorSpec(_name(T.NEXTN_ENORM, bid), (d,), "norm"),
        TensorSpec(_name(T.NEXTN_HNORM, bid), (d,), "norm"),
        TensorSpec(_name(T.NEXTN_SHARED_HEAD_NORM, bid), (d,), "norm"),
    ]
    if own_head:
        specs += [TensorSpec(_name(T.NEXTN_EMBED_TOKENS, bid), (d, VOCAB_SIZE), "weight"),
                  TensorSpec(_name(T.NEXTN_SHARED_HEAD_HEAD, bid), (d, VOCAB_SIZE), "weight")]
    return specs


def layout(arch: str, s: Shape, mtp: int = 0, mtp_own_head: bool = False) -> list[TensorSpec]:
    """Every tensor of the model in file order: globals, trunk blocks, then the MTP (nextn) blocks."""
    specs = [TensorSpec(_name(T.TOKEN_EMBD), (s.d_model, VOCAB_SIZE), "weight"),
             TensorSpec(_name(T.OUTPUT_NORM), (s.d_model,), "norm")]
    if arch != "gemma3":  # gemma3 ties the output head to token_embd
        specs.append(TensorSpec(_name(T.OUTPUT), (s.d_model, VOCAB_SIZE), "weight"))
    for bid in range(s.n_layer + mtp):
        specs += _attention(arch, s, bid) + _feed_forward(arch, s, bid)
        if bid >= s.n_layer:
            specs += _nextn(s, bid, mtp_own_head)
    return specs


def arch_metadata(arch: str, s: Shape, mtp: int = 0) -> dict[str, tuple[object, GGUFValueType]]:
    """The `{arch}.*` keys llama.cpp reads for this arch, as key -> (value, GGUF type)."""
    u32, f32 = GGUFValueType.UINT32, GGUFValueType.FLOAT32
    meta = {
        Keys.LLM.VOCAB_SIZE: (VOCAB_SIZE, u32),
        Keys.LLM.CONTEXT_LENGTH: (s.context, u32),
        Keys.LLM.EMBEDDING_LENGTH: (s.d_model, u32),
        Keys.LLM.BLOCK_COUNT: (s.n_layer + mtp, u32),
        Keys.LLM.FEED_FORWARD_LENGTH: (s.ffn, u32),
        Keys.Attention.HEAD_COUNT: (s.n_head, u32),
        Keys.Attention.HEAD_COUNT_KV: (s.n_head_kv, u32),
        Keys.Attention.LAYERNORM_RMS_EPS: (_RMS_EPS[arch], f32),
        Keys.Rope.DIMENSION_COUNT: (s.head_dim // _ROPE_FRACTION.get(arch, 1), u32),
        Keys.Rope.FREQ_BASE: (s.rope_base, f32),
    }
    if arch in _HAS_HEAD_DIM_KEYS or s.n_head * s.head_dim != s.d_model:
        meta[Keys.Attention.KEY_LENGTH] = (s.head_dim, u32)
        meta[Keys.Attention.VALUE_LENGTH] = (s.head_dim, u32)
    if arch in MOE_ARCHS:
        meta[Keys.LLM.EXPERT_COUNT] = (s.n_expert, u32)
        meta[Keys.LLM.EXPERT_USED_COUNT] = (s.n_expert_used, u32)
        meta[Keys.LLM.EXPERT_FEED_FORWARD_LENGTH] = (s.expert_ffn, u32)
    if arch == "glm4moe":
        meta[Keys.LLM.EXPERT_SHARED_COUNT] = (s.n_shared, u32)
        meta[Keys.LLM.LEADING_DENSE_BLOCK_COUNT] = (s.dense_lead, u32)
        meta[Keys.LLM.EXPERT_WEIGHTS_SCALE] = (GLM_ROUTED_SCALE, f32)
        meta[Keys.LLM.EXPERT_WEIGHTS_NORM] = (True, GGUFValueType.BOOL)
        meta[Keys.LLM.EXPERT_GATING_FUNC] = (2, u32)         # sigmoid
    if arch in ("qwen35", "qwen35moe"):
        half = s.head_dim // _ROPE_FRACTION[arch] // 2        # multimodal rope sections, text uses them as one
        sections = [half * 11 // 32, half * 11 // 32]
        meta[Keys.Rope.DIMENSION_SECTIONS] = ([*sections, half - sum(sections), 0], GGUFValueType.ARRAY)
    if arch in HYBRID:
        meta[Keys.LLM.FULL_ATTENTION_INTERVAL] = (s.attn_interval, u32)
        meta[Keys.SSM.CONV_KERNEL] = (s.ssm_conv, u32)
        meta[Keys.SSM.STATE_SIZE] = (s.ssm_head_dim or s.head_dim, u32)
        meta[Keys.SSM.GROUP_COUNT] = (s.ssm_k_heads, u32)
        meta[Keys.SSM.TIME_STEP_RANK] = (s.ssm_v_heads, u32)
        meta[Keys.SSM.INNER_SIZE] = (s.ssm_v_heads * (s.ssm_head_dim or s.head_dim), u32)
    if arch in ("qwen35moe", "qwen3next"):
        meta[Keys.LLM.EXPERT_SHARED_FEED_FORWARD_LENGTH] = (s.expert_ffn, u32)
    if arch == "gemma3":
        meta[Keys.Attention.SLIDING_WINDOW] = (s.sliding_window, u32)
    if mtp:
        meta[Keys.LLM.NEXTN_PREDICT_LAYERS] = (mtp, u32)
    return {key.format(arch=arch): value for key, value in meta.items()}
