"""ModelConfig: everything the engine needs from GGUF metadata, checked once at load."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from engine.errors import ModelFileError
from engine.gguf_file import GGUFFile

SUPPORTED_ARCHS = ("llama", "qwen3", "qwen3moe", "gemma3", "glm4moe", "qwen35", "qwen35moe", "qwen3next")
HYBRID_ARCHS = ("qwen35", "qwen35moe", "qwen3next")   # gated delta net layers between gated attention layers
# Rows of one slot's recurrent state a stage keeps (engine/gdn.py): a window's rejected rows and the
# conv kernel's history must fit, so a window offers a slot at most STATE_RING - conv kernel proposals
STATE_RING = 32
GATING = {1: "softmax", 2: "sigmoid"}   # llama.cpp's expert_gating_func values the engine runs
GEMMA3_LOCAL_ROPE_BASE = 10_000.0   # not in the metadata (ENVIRONMENT.md); llama.cpp hard-codes it too
GEMMA3_SWA_PATTERN = 6              # every 6th layer is global


@dataclass
class ModelConfig:
    arch: str
    name: str
    n_layers: int                   # trunk layers (MTP layers excluded)
    n_mtp: int                      # nextn layers after the trunk
    n_embd: int
    n_ff: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    rope_dim: int
    rope_base: float
    rope_neox: bool                 # rotate halves (neox) or adjacent pairs (llama GGUF)
    norm_eps: float
    vocab_size: int
    context_length: int
    tied_embeddings: bool
    qk_norm: bool = False
    n_expert: int = 0
    n_expert_used: int = 0
    expert_ff: int = 0
    n_shared_expert: int = 0        # glm4moe: shared experts beside the routed ones (ffn_*_shexp)
    shexp_ff: int = 0               # the shared experts' feed-forward rows (0: none)
    dense_lead: int = 0             # glm4moe: the first layers have a dense FFN, the rest experts
    gating: str = "softmax"         # router scores: softmax, or sigmoid plus a selection bias (exp_probs_b)
    expert_weights_norm: bool = True    # the selected experts' weights are renormalised to sum 1
    expert_weights_scale: float = 1.0   # then scaled by this
    attn_bias: bool = False         # glm4moe: q, k and v have biases
    attn_gate: bool = False         # qwen35: q's projection also gives a sigmoid gate on each head's output
    recurrent: list[bool] = field(default_factory=list)    # per trunk layer: a gated delta net layer
    ssm_conv: int = 0               # gated delta net: causal conv kernel, key heads, value heads, head size
    ssm_k_heads: int = 0
    ssm_v_heads: int = 0
    ssm_head_dim: int = 0
    ssm_tiled: bool = True          # value heads in llama.cpp's tiled order (qwen35); grouped by key head (qwen3next)
    shexp_gated: bool = False       # qwen35moe: the shared expert's output is scaled by a sigmoid gate
    mtp_post_norm: bool = False     # the nextn layer joins the trunk's hidden state after the output norm
    embed_scale: float = 1.0
    attn_scale: float = 0.0
    gelu: bool = False              # GeGLU (gemma) instead of SwiGLU
    post_norms: bool = False        # gemma: norm after attention and after the FFN
    sliding_window: int = 0
    swa_layers: list[bool] = field(default_factory=list)
    rope_base_local: float = 0.0

    def layer_rope_base(self, layer: int) -> float:
        if self.swa_layers and self.swa_layers[layer] and self.rope_base_local:
            return self.rope_base_local
        return self.rope_base

    def layer_window(self, layer: int) -> int:
        """Sliding window in tokens for this layer, 0 for full attention."""
        return self.sliding_window if self.swa_layers and self.swa_layers[layer] else 0

    @property
    def is_moe(self) -> bool:
        return self.n_expert > 0

    def layer_is_moe(self, layer: int) -> bool:
        """Routed experts in this block (the nextn block too), or a dense FFN."""
        return self.is_moe and layer >= self.dense_lead

    def is_recurrent(self, layer: int) -> bool:
        """A gated delta net block (trunk layers only: a nextn block has full attention)."""
        return layer < len(self.recurrent) and self.recurrent[layer]

    @property
    def ssm_conv_dim(self) -> int:
        """Channels of the delta net's conv: q and k (key heads) then v (value heads)."""
        return (2 * self.ssm_k_heads + self.ssm_v_heads) * self.ssm_head_dim

    def layer_kinds(self) -> str:
        """The blocks' kinds in order, runs collapsed: '1 dense + 45 moe + 1 nextn (moe)'; on a hybrid
        model the mixers: '3 delta-net + 1 attention + ... + 1 nextn (attention); FFN moe'."""
        hybrid = any(self.recurrent)

        def kind(i: int) -> str:
            if hybrid:
                return "delta-net" if self.is_recurrent(i) else "attention"
            return "moe" if self.layer_is_moe(i) else "dense"
        runs: list[list] = []
        for k in map(kind, range(self.n_layers)):
            if runs and runs[-1][1] == k:
                runs[-1][0] += 1
            else:
                runs.append([1, k])
        text = " + ".join(f"{n} {k}" for n, k in runs)
        if self.n_mtp:
            text += f" + {self.n_mtp} nextn ({kind(self.n_layers)})"
        return text + (f"; FFN {'moe' if self.is_moe else 'dense'}" if hybrid else "")

    def cache_bytes(self, layer: int, ctx: int, n_slots: int) -> int:
        """Bytes a stage sets aside for one block's cache over n_slots slot rows: f32 K and V for ctx
        positions, or a gated delta net block's STATE_RING rows of conv inputs and per-head states."""
        if self.is_recurrent(layer):
            return STATE_RING * (self.ssm_conv_dim + self.ssm_v_heads * self.ssm_head_dim ** 2) * 4 * n_slots
        return 2 * self.n_kv_heads * self.head_dim * 4 * ctx * n_slots

    @property
    def ffn_norm_name(self) -> str:
        """glm4moe and the hybrids name their FFN input norm post_attention_norm (llama.cpp's attn_post_norm)."""
        return "post_attention_norm.weight" if self.arch == "glm4moe" or self.arch in HYBRID_ARCHS \
            else "ffn_norm.weight"


def _need(gf: GGUFFile, key: str):
    if key not in gf.metadata:
        raise ModelFileError(gf.path, f"missing metadata key {key!r}")
    return gf.metadata[key]


MAX_DIM = 1 << 24          # any one size (width, heads, vocabulary) beyond this is corrupt
MAX_LAYERS = 1 << 16


def _shown(value) -> str:
    r = repr(value.tolist() if hasattr(value, "tolist") else value)
    return r if len(r) <= 40 else r[:37] + "..."


def _int(gf: GGUFFile, key: str, value, lo: int = 0, hi: int = MAX_DIM) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ModelFileError(gf.path, f"metadata {key!r} should be an integer, not {_shown(value)}")
    if not lo <= value <= hi:
        raise ModelFileError(gf.path, f"metadata {key!r} is {value:,}, outside {lo:,}..{hi:,}")
    return value


def _float(gf: GGUFFile, key: str, value, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise ModelFileError(gf.path, f"metadata {key!r} should be a number from {lo:g} to {hi:g}, not {_shown(value)}")
    return float(value)


def model_config(gf: GGUFFile) -> ModelConfig:
    """The model's shape from its metadata; a missing, mistyped or out-of-range value is a ModelFileError."""
    arch = gf.get("general.architecture")
    if not isinstance(arch, str) or arch not in SUPPORTED_ARCHS:
        raise ModelFileError(gf.path, f"unknown architecture {_shown(arch)} (supported: {', '.join(SUPPORTED_ARCHS)})")

    def k(name, default=None):
        v = gf.get(f"{arch}.{name}", default)
        return _need(gf, f"{arch}.{name}") if v is None else v

    def kint(name, default=None, lo=0, hi=MAX_DIM):
        return _int(gf, f"{arch}.{name}", k(name, default), lo, hi)

    def kfloat(name, default, lo, hi):
        return _float(gf, f"{arch}.{name}", k(name, default), lo, hi)

    n_embd, n_heads = kint("embedding_length", lo=1), kint("attention.head_count", lo=1)
    n_kv = k("attention.head_count_kv", n_heads)
    if isinstance(n_kv, np.ndarray) and n_kv.ndim == 1 and len(n_kv) and n_kv.dtype.kind in "iu":
        n_kv = n_kv[0].item()             # per-layer KV head counts: the engine uses the first for all layers
    n_kv = _int(gf, f"{arch}.attention.head_count_kv", n_kv, lo=1)
    head_dim = kint("attention.key_length", max(1, n_embd // n_heads), lo=1)
    n_mtp = kint("nextn_predict_layers", 0)
    n_blocks = kint("block_count", lo=1, hi=MAX_LAYERS)
    embd = gf.tensors.get("token_embd.weight")
    if embd is not None:                  # the vocabulary is the embedding's row count
        if len(embd.shape) != 2:
            raise ModelFileError(gf.path, f"tensor 'token_embd.weight' has shape {list(embd.shape)}, expected 2 dimensions")
        vocab = embd.shape[1]
    else:
        tokens = gf.get("tokenizer.ggml.tokens")
        vocab = _int(gf, f"{arch}.vocab_size", gf.get(f"{arch}.vocab_size", len(tokens) if isinstance(tokens, list) else 0))
    name = gf.get("general.name", gf.path.stem)
    cfg = ModelConfig(
        arch=arch, name=name if isinstance(name, str) else gf.path.stem, n_layers=n_blocks - n_mtp, n_mtp=n_mtp,
        n_embd=n_embd, n_ff=kint("feed_forward_length", 0), n_heads=n_heads, n_kv_heads=n_kv,
        head_dim=head_dim, rope_dim=kint("rope.dimension_count", head_dim, lo=2),
        rope_base=kfloat("rope.freq_base", 10_000.0, 1e-3, 1e12), rope_neox=arch != "llama",
        norm_eps=kfloat("attention.layer_norm_rms_epsilon", 1e-6, 0.0, 1.0), vocab_size=vocab,
        context_length=kint("context_length", 4096, lo=16, hi=1 << 30), tied_embeddings="output.weight" not in gf.tensors,
        qk_norm=arch in ("qwen3", "qwen3moe", "gemma3"),
    )
    cfg.attn_scale = 1.0 / math.sqrt(head_dim)
    if arch in ("qwen3moe", "glm4moe", "qwen35moe", "qwen3next"):
        cfg.n_expert, cfg.n_expert_used = kint("expert_count", lo=1, hi=1 << 16), kint("expert_used_count", lo=1, hi=1 << 16)
        cfg.expert_ff = kint("expert_feed_forward_length", 0) or cfg.n_ff
    if arch == "glm4moe":
        cfg.qk_norm = "blk.0.attn_q_norm.weight" in gf.tensors       # GLM-4.5 has them, GLM-4.5-Air not
        cfg.attn_bias = "blk.0.attn_q.bias" in gf.tensors
        cfg.n_shared_expert = kint("expert_shared_count", 0, hi=1 << 10)
        cfg.shexp_ff = cfg.n_shared_expert * cfg.expert_ff
        cfg.dense_lead = kint("leading_dense_block_count", 0, hi=MAX_LAYERS)
        gating = kint("expert_gating_func", 2, hi=255)
        if gating not in GATING:
            raise ModelFileError(gf.path, f"metadata 'glm4moe.expert_gating_func' is {gating}: the engine runs "
                                          f"{', '.join(f'{k} ({v})' for k, v in GATING.items())}")
        cfg.gating = GATING[gating]
        norm = k("expert_weights_norm", False)
        if not isinstance(norm, bool):
            raise ModelFileError(gf.path, "metadata 'glm4moe.expert_weights_norm' should be true or false, "
                                          f"not {_shown(norm)}")
        cfg.expert_weights_norm = norm
        cfg.expert_weights_scale = kfloat("expert_weights_scale", 1.0, 0.0, 1e6)
    if arch in HYBRID_ARCHS:
        _hybrid(gf, cfg, kint)
    if arch == "gemma3":
        cfg.embed_scale = math.sqrt(n_embd)
        cfg.gelu = cfg.post_norms = True
        cfg.sliding_window = kint("attention.sliding_window", 0, hi=1 << 30)
        cfg.swa_layers = [(i + 1) % GEMMA3_SWA_PATTERN != 0 for i in range(n_blocks)]
        cfg.rope_base_local = GEMMA3_LOCAL_ROPE_BASE
    _check(gf, cfg)
    return cfg


def _hybrid(gf: GGUFFile, cfg: ModelConfig, kint) -> None:
    """qwen35 / qwen35moe / qwen3next: which blocks are gated delta nets, and their sizes (llama.cpp's keys)."""
    interval = kint("full_attention_interval", 4, lo=1, hi=MAX_LAYERS)
    cfg.recurrent = [(i + 1) % interval != 0 for i in range(cfg.n_layers)]
    cfg.attn_gate = cfg.qk_norm = cfg.mtp_post_norm = True
    cfg.ssm_conv = kint("ssm.conv_kernel", lo=1, hi=1 << 10)
    cfg.ssm_k_heads, cfg.ssm_v_heads = kint("ssm.group_count", lo=1), kint("ssm.time_step_rank", lo=1)
    cfg.ssm_head_dim = kint("ssm.state_size", lo=1)
    inner = kint("ssm.inner_size", lo=1)
    if cfg.ssm_v_heads % cfg.ssm_k_heads or inner != cfg.ssm_v_heads * cfg.ssm_head_dim:
        raise ModelFileError(gf.path, f"implausible delta net: {cfg.ssm_k_heads} key heads, {cfg.ssm_v_heads} value "
                                      f"heads of {cfg.ssm_head_dim}, inner size {inner}")
    if cfg.ssm_conv >= STATE_RING:
        raise ModelFileError(gf.path, f"delta net conv kernel {cfg.ssm_conv}: the engine keeps {STATE_RING} rows")
    cfg.ssm_tiled = cfg.arch != "qwen3next"     # llama.cpp reorders qwen35's value heads only
    if cfg.arch in ("qwen35moe", "qwen3next"):
        cfg.shexp_gated, cfg.n_shared_expert = True, 1
        cfg.shexp_ff = kint("expert_shared_feed_forward_length", cfg.n_ff or cfg.expert_ff, lo=1)


def _check(gf: GGUFFile, cfg: ModelConfig) -> None:
    if cfg.n_layers <= 0 or cfg.n_heads <= 0 or cfg.n_kv_heads <= 0 or cfg.n_heads % cfg.n_kv_heads:
        raise ModelFileError(gf.path, f"implausible shape: {cfg.n_layers} layers, {cfg.n_heads}/{cfg.n_kv_heads} heads")
    if cfg.rope_dim > cfg.head_dim or cfg.rope_dim % 2 or cfg.head_dim % 2:
        raise ModelFileError(gf.path, f"implausible shape: rope dimension {cfg.rope_dim}, head dimension {cfg.head_dim} "
                                      "(both even, rope at most the head)")
    dense_ff = not cfg.is_moe or cfg.dense_lead > 0
    if cfg.vocab_size < 1 or (cfg.is_moe and cfg.expert_ff < 1) or (dense_ff and cfg.n_ff < 1):
        raise ModelFileError(gf.path, f"implausible shape: vocabulary {cfg.vocab_size}, feed-forward "
                                      f"{cfg.n_ff}, experts' feed-forward {cfg.expert_ff}")
    if cfg.is_moe and cfg.n_expert_used > cfg.n_expert:
        raise ModelFileError(gf.path, f"implausible shape: {cfg.n_expert_used} of {cfg.n_expert} experts used")
    last = f"blk.{cfg.n_layers + cfg.n_mtp - 1}.attn_norm.weight"     # bounds the layer count by the file
    for name in ("token_embd.weight", "output_norm.weight", "blk.0.attn_norm.weight", last):
        if name not in gf.tensors:
            raise ModelFileError(gf.path, f"missing tensor {name!r}")


def expected_shapes(cfg: ModelConfig) -> dict[str, tuple[tuple[int, ...], bool]]:
    """Tensor name -> (GGUF shape, innermost first; required) for every tensor the engine reads."""
    d, q, kv = cfg.n_embd, cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    out = {"token_embd.weight": ((d, cfg.vocab_size), True), "output_norm.weight": ((d,), True),
           "output.weight": ((d, cfg.vocab_size), False)}
    qg = q * 2 if cfg.attn_gate else q
    for b in range(cfg.n_layers + min(cfg.n_mtp, 1)):
        p = f"blk.{b}."
        out.update({p + "attn_norm.weight": ((d,), True), p + "ffn_norm.weight": ((d,), False),
                    p + "post_attention_norm.weight": ((d,), False), p + "post_ffw_norm.weight": ((d,), False)})
        out[p + cfg.ffn_norm_name] = ((d,), True)
        if cfg.is_recurrent(b):
            out.update(_delta_net_shapes(cfg, p))
        else:
            out.update({
                p + "attn_q.weight": ((d, qg), True), p + "attn_k.weight": ((d, kv), True),
                p + "attn_v.weight": ((d, kv), True), p + "attn_output.weight": ((q, d), True),
                p + "attn_q_norm.weight": ((cfg.head_dim,), False), p + "attn_k_norm.weight": ((cfg.head_dim,), False),
            })
        if cfg.attn_bias:
            out.update({p + "attn_q.bias": ((q,), True), p + "attn_k.bias": ((kv,), True),
                        p + "attn_v.bias": ((kv,), True)})
        if cfg.layer_is_moe(b):
            e, f = cfg.n_expert, cfg.expert_ff
            out.update({p + "ffn_gate_inp.weight": ((d, e), True), p + "ffn_gate_exps.weight": ((d, f, e), True),
                        p + "ffn_up_exps.weight": ((d, f, e), True), p + "ffn_down_exps.weight": ((f, d, e), True)})
            if cfg.gating == "sigmoid":
                out[p + "exp_probs_b.bias"] = ((e,), True)
            if cfg.shexp_gated:
                out[p + "ffn_gate_inp_shexp.weight"] = ((d,), True)
            if cfg.shexp_ff:
                fs = cfg.shexp_ff
                out.update({p + "ffn_gate_shexp.weight": ((d, fs), True), p + "ffn_up_shexp.weight": ((d, fs), True),
                            p + "ffn_down_shexp.weight": ((fs, d), True)})
        else:
            out.update({p + "ffn_gate.weight": ((d, cfg.n_ff), True), p + "ffn_up.weight": ((d, cfg.n_ff), True),
                        p + "ffn_down.weight": ((cfg.n_ff, d), True)})
        if b >= cfg.n_layers:
            p += "nextn."
            out.update({p + "eh_proj.weight": ((2 * d, d), True), p + "enorm.weight": ((d,), True),
                        p + "hnorm.weight": ((d,), True), p + "shared_head_norm.weight": ((d,), True),
                        p + "shared_head_head.weight": ((d, cfg.vocab_size), False),
                        p + "embed_tokens.weight": ((d, cfg.vocab_size), False)})
    return out


def _delta_net_shapes(cfg: ModelConfig, p: str) -> dict[str, tuple[tuple[int, ...], bool]]:
    """qwen35: attn_qkv, attn_gate, ssm_beta, ssm_alpha. qwen3next: ssm_ba, and attn_qkv plus
    attn_gate or (older files) ssm_in with q, k, v and z side by side per key head (the loader picks)."""
    d, nv, value = cfg.n_embd, cfg.ssm_v_heads, cfg.ssm_v_heads * cfg.ssm_head_dim
    nxt = cfg.arch == "qwen3next"
    return {p + "attn_qkv.weight": ((d, cfg.ssm_conv_dim), not nxt), p + "attn_gate.weight": ((d, value), not nxt),
            p + "ssm_in.weight": ((d, cfg.ssm_conv_dim + value), False),
            p + "ssm_conv1d.weight": ((cfg.ssm_conv, cfg.ssm_conv_dim), True), p + "ssm_dt.bias": ((nv,), True),
            p + "ssm_a": ((nv,), True), p + "ssm_beta.weight": ((d, nv), not nxt),
            p + "ssm_alpha.weight": ((d, nv), not nxt), p + "ssm_ba.weight": ((d, 2 * nv), nxt),
            p + "ssm_norm.weight": ((cfg.ssm_head_dim,), True), p + "ssm_out.weight": ((value, d), True)}


def check_tensor_shapes(gf: GGUFFile, cfg: ModelConfig) -> None:
    """Every tensor the engine will read is present and has the shape the metadata implies (else one
    ModelFileError naming the first that does not), before any memory is set aside for the model."""
    for name, (shape, required) in expected_shapes(cfg).items():
        t = gf.tensors.get(name)
        if t is None:
            if required:
                raise ModelFileError(gf.path, f"missing tensor {name!r}")
            continue
        if tuple(t.shape) != shape:
            raise ModelFileError(gf.path, f"tensor {name!r} has shape {list(t.shape)}, but the metadata implies "
                                          f"{list(shape)}")
