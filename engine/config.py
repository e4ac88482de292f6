"""ModelConfig: everything the engine needs from GGUF metadata, checked once at load."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from engine.errors import ModelFileError
from engine.gguf_file import GGUFFile

SUPPORTED_ARCHS = ("llama", "qwen3", "qwen3moe", "gemma3")
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

    @property
    def kv_bytes_per_token(self) -> int:
        """f32 K and V, all trunk layers."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * 4


def _need(gf: GGUFFile, key: str):
    if key not in gf.metadata:
        raise ModelFileError(gf.path, f"missing metadata key {key!r}")
    return gf.metadata[key]


def model_config(gf: GGUFFile) -> ModelConfig:
    arch = gf.get("general.architecture")
    if arch not in SUPPORTED_ARCHS:
        raise ModelFileError(gf.path, f"unknown architecture {arch!r} (supported: {', '.join(SUPPORTED_ARCHS)})")

    def k(name, default=None):
        v = gf.get(f"{arch}.{name}", default)
        return _need(gf, f"{arch}.{name}") if v is None else v

    n_embd, n_heads = int(k("embedding_length")), int(k("attention.head_count"))
    n_kv = k("attention.head_count_kv", n_heads)
    n_kv = int(n_kv[0] if hasattr(n_kv, "__len__") else n_kv)
    head_dim = int(k("attention.key_length", n_embd // n_heads))
    n_mtp = int(k("nextn_predict_layers", 0))
    n_blocks = int(k("block_count"))
    tokens = gf.get("tokenizer.ggml.tokens")
    vocab = int(gf.get(f"{arch}.vocab_size", len(tokens) if tokens is not None else 0))
    if "token_embd.weight" in gf.tensors:
        vocab = gf.tensors["token_embd.weight"].shape[1]
    cfg = ModelConfig(
        arch=arch, name=str(gf.get("general.name", gf.path.stem)), n_layers=n_blocks - n_mtp, n_mtp=n_mtp,
        n_embd=n_embd, n_ff=int(k("feed_forward_length", 0)), n_heads=n_heads, n_kv_heads=n_kv,
        head_dim=head_dim, rope_dim=int(k("rope.dimension_count", head_dim)),
        rope_base=float(k("rope.freq_base", 10_000.0)), rope_neox=arch != "llama",
        norm_eps=float(k("attention.layer_norm_rms_epsilon", 1e-6)), vocab_size=vocab,
        context_length=int(k("context_length", 4096)), tied_embeddings="output.weight" not in gf.tensors,
        qk_norm=arch in ("qwen3", "qwen3moe", "gemma3"),
    )
    cfg.attn_scale = 1.0 / math.sqrt(head_dim)
    if arch == "qwen3moe":
        cfg.n_expert, cfg.n_expert_used = int(k("expert_count")), int(k("expert_used_count"))
        cfg.expert_ff = int(k("expert_feed_forward_length", 0)) or cfg.n_ff
    if arch == "gemma3":
        cfg.embed_scale = math.sqrt(n_embd)
        cfg.gelu = cfg.post_norms = True
        cfg.sliding_window = int(k("attention.sliding_window", 0))
        cfg.swa_layers = [(i + 1) % GEMMA3_SWA_PATTERN != 0 for i in range(n_blocks)]
        cfg.rope_base_local = GEMMA3_LOCAL_ROPE_BASE
    _check(gf, cfg)
    return cfg


def _check(gf: GGUFFile, cfg: ModelConfig) -> None:
    if cfg.n_layers <= 0 or cfg.n_heads <= 0 or cfg.n_kv_heads <= 0 or cfg.n_heads % cfg.n_kv_heads:
        raise ModelFileError(gf.path, f"implausible shape: {cfg.n_layers} layers, {cfg.n_heads}/{cfg.n_kv_heads} heads")
    for name in ("token_embd.weight", "output_norm.weight", "blk.0.attn_q.weight"):
        if name not in gf.tensors:
            raise ModelFileError(gf.path, f"missing tensor {name!r}")
