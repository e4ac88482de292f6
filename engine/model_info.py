"""What a GGUF file holds, from its header alone: no torch, fast enough for the GUI's model picker."""
from __future__ import annotations

from collections import Counter

from engine.config import ModelConfig, model_config
from engine.gguf_file import GGUFFile, read_gguf
from engine.messages import ModelInfo
from engine.model_files import resolve_model


def layer_bytes(gf: GGUFFile, n_blocks: int, bytes_per_value: int | None = None) -> list[int]:
    """Bytes of each block: quantized bytes as stored, or `bytes_per_value` per weight value for
    matrices (the dense copy CPU stages keep; 1-D norms stay float32)."""
    out = [0] * n_blocks
    for t in gf.tensors.values():
        if t.name.startswith("blk."):
            i = int(t.name.split(".")[1])
            if i < n_blocks:
                dense = bytes_per_value is not None and len(t.shape) > 1
                out[i] += t.n_elements * bytes_per_value if dense else t.nbytes
    return out


def model_info(gf: GGUFFile, cfg: ModelConfig | None = None) -> ModelInfo:
    cfg = cfg or model_config(gf)
    return ModelInfo(
        path=str(gf.path), name=cfg.name, arch=cfg.arch, n_layers=cfg.n_layers, n_embd=cfg.n_embd,
        n_heads=cfg.n_heads, n_kv_heads=cfg.n_kv_heads, vocab_size=cfg.vocab_size,
        context_length=cfg.context_length,
        quant_types=dict(Counter(t.qtype.name for t in gf.tensors.values())),
        file_bytes=gf.path.stat().st_size, layer_bytes=layer_bytes(gf, cfg.n_layers + cfg.n_mtp),
        mtp_layers=cfg.n_mtp, has_chat_template=bool(gf.get("tokenizer.chat_template")),
        tokenizer=str(gf.get("tokenizer.ggml.model", "")))


def probe_model(model: str) -> ModelInfo:
    """ModelInfo for a path (or 'default'), read from the header only."""
    return model_info(read_gguf(resolve_model(model)))
