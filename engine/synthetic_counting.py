"""A synthetic model whose next token is predictable: it counts (token x -> x + 1), and so does its MTP
layer (the token at t+1 -> the token at t+2).

The residual stream carries the token's embedding almost unchanged (every block's weights are tiny),
and the output head is the embedding shifted by one row, so the largest logit after x is x + 1. The
nextn layer's eh_proj passes the embedding half of its input through, so the drafter proposes
exactly what the target will pick: acceptance near 1. Random-weight models exercise the draft
mechanism with acceptance near 0; this one exercises it with acceptance near 1, so an off-by-one in
the drafter's rows or positions shows up as lost acceptance.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from gguf.quants import quantize

from engine.gguf_append import partial_writer
from engine.synthetic import _add_metadata, _resolve
from engine.synthetic_shapes import check, layout

SMALL_STD = 0.002


def _weights(name: str, shape: tuple[int, ...], role: str, emb: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    rows = tuple(reversed(shape))                       # torch / numpy order
    if name == "token_embd.weight":
        return emb
    if name == "output.weight" or name.endswith("nextn.shared_head_head.weight"):
        return np.roll(emb, 1, axis=0)                  # head row y = embedding of y - 1
    if name.endswith("nextn.embed_tokens.weight"):
        return emb
    if name.endswith("nextn.eh_proj.weight"):           # [d, 2d]: keep the embedding half
        d = rows[0]
        return np.concatenate([np.eye(d, dtype=np.float32), np.zeros((d, d), np.float32)], axis=1)
    if role == "norm":
        return np.ones(rows, np.float32)
    return (rng.standard_normal(rows) * SMALL_STD).astype(np.float32)


def make_counting_model(out: str | os.PathLike, arch: str = "llama", shape: str = "small", mtp: int = 1,
                        qtype: str = "Q8_0", seed: int = 0) -> Path:
    shape_name, s, q = _resolve(arch, shape, qtype)
    check(arch, s, mtp)
    rng = np.random.default_rng(seed)
    specs = layout(arch, s, mtp)
    vocab = next(sp.shape[1] for sp in specs if sp.name == "token_embd.weight")
    emb = rng.standard_normal((vocab, s.d_model)).astype(np.float32)
    return write_designed_model(out, arch, f"{shape_name}-counting", s, mtp, q, seed, specs,
                                lambda sp: _weights(sp.name, sp.shape, sp.role, emb, rng))


def write_designed_model(out, arch: str, name: str, s, mtp: int, q, seed: int, specs, weights) -> Path:
    """A GGUF of hand-designed float weights: `weights(spec)` gives each tensor (numpy, in the spec's
    shape); norms, routers and vectors are stored as F32, matrices quantized to q."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with partial_writer(out, arch) as w:
        _add_metadata(w, arch, name, s, mtp, q, seed)
        for sp in specs:
            data = weights(sp)
            if sp.role in ("norm", "router", "conv") or data.ndim == 1 or q.name == "F32":
                w.add_tensor(sp.name, data.astype(np.float32))
            else:
                w.add_tensor(sp.name, quantize(data, q), raw_dtype=q)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
    return out
