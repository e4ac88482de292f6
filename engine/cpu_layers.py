"""A CPU stage's decode tiles through all its blocks in one call (engine/native/decode_layers.c, built and
loaded with the other CPU kernels by engine.cpu_gemm).

With the matmuls and the attention on the project's kernels, a one-row decode step of the default model on
2 cores still spent about half its time in torch's small ops between them (~115 dispatches a block: norms,
conversions, splits, the rotation, cache writes, silu, residual adds). The C loop calls the same kernels and
does those steps itself, with the torch blocks' roundings: the real models' decode tiles come out bit for
bit as the torch blocks give them (the activations run on the kernels' exp; decode_layers.c says where
silu's bits differ from torch's).

A stage runs its decode tiles (Tile.per_row) here when every block is a dense attention block the loop
knows (no delta net, routed experts, biases or output gate), every matrix is int4 on int4_rows.c or Q6_K on
q6_k_rows.c, the caches are bfloat16 and the attention runs decode_attention.c; decided once per stage, so
each kind of tile always runs the same code. STRATA_CPU_LAYERS=0 keeps torch's ops.
"""
from __future__ import annotations

import ctypes
import os
from ctypes import c_float, c_int64, c_void_p

import torch

from engine import cpu_attention, cpu_gemm
from engine.cpu_int4 import Int4Stack

ENABLED = os.environ.get("STRATA_CPU_LAYERS", "1") != "0"
INT4, Q6_K = 1, 2               # decode_layers.c's Mat kinds


class Mat(ctypes.Structure):
    _fields_ = [("kind", c_int64), ("n", c_int64), ("parts", c_int64), ("a", c_void_p), ("sz", c_void_p)]


NORMS = ("attn_norm", "q_norm", "k_norm", "post_attn_norm", "ffn_norm", "post_ffw_norm")


class Layer(ctypes.Structure):
    _fields_ = [("qkv", Mat * 3), ("wo", Mat), ("gate_up", Mat * 2), ("down", Mat), ("n_qkv", c_int64),
                ("n_gate_up", c_int64), *[(n, c_void_p) for n in NORMS], ("rope_c", c_void_p),
                ("rope_s", c_void_p), ("k_cache", c_void_p), ("v_cache", c_void_p), ("window", c_int64),
                ("scale", c_float)]


class Shape(ctypes.Structure):
    _fields_ = [*[(n, c_int64) for n in ("dim", "n_heads", "n_kv_heads", "head_dim", "ffn", "rope_dim", "ctx",
                                          "neox", "gelu")], ("eps", c_float)]


def _mat(m) -> Mat | None:
    """A matrix as decode_layers.c reads it: what QuantTensor.linear runs a decode tile on, where that is
    int4_rows.c or q6_k_rows.c."""
    if m is None or m.compute_dtype != torch.bfloat16 or m.q8:
        return None
    if m.data is not None and cpu_gemm.q6_k_rows(m.qtype, m.shape, 1):
        return Mat(Q6_K, m.shape[0], 0, m.data.data_ptr(), None) if m.data.is_contiguous() else None
    if m.int4 is not None:
        return _int4(m.int4)
    return None


def _int4(w) -> Mat | None:
    if not cpu_gemm.rows_usable(w.n, w.k):
        return None
    return Mat(INT4, w.n, 2 if w.twice else 1, w.packed.data_ptr(), w.sz.data_ptr())


def _mats(stack, mats: list) -> list[Mat] | None:
    """One Mat for an int4 stack of the matrices, else one each."""
    if isinstance(stack, Int4Stack) and stack.sizes == [m.shape[0] for m in mats]:
        one = _int4(stack.weight)
        return [one] if one is not None else None
    out = [_mat(m) for m in mats]
    return None if any(m is None for m in out) else out


def _float_vector(t: torch.Tensor | None, n: int) -> bool:
    return t is None or (t.dtype == torch.float32 and t.dim() == 1 and t.shape[0] == n and t.is_contiguous())


class DecodeLayers:
    """Blocks as decode_layers.c runs them (the Layer structs point into their weights, caches and tables,
    which the blocks' owner keeps)."""

    def __init__(self, cfg, ctx: int, layers: list[Layer]):
        self.n = len(layers)
        self.layers = (Layer * len(layers))(*layers)
        self.shape = Shape(cfg.n_embd, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.n_ff, cfg.rope_dim, ctx,
                           int(cfg.rope_neox), int(cfg.gelu), cfg.norm_eps)

    def run(self, x: torch.Tensor, slot: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """The blocks over x [T, dim] (rows at KV slot / position slot, pos [T]): the new residual stream."""
        y = x.to(torch.float32, copy=True).contiguous()
        slot, pos = slot.to(torch.int64).contiguous(), pos.to(torch.int64).contiguous()
        if y.shape[0] and cpu_gemm._load().strata_decode_layers(
                self.layers, self.n, ctypes.byref(self.shape), y.data_ptr(), y.shape[0], slot.data_ptr(),
                pos.data_ptr()) != 0:
            raise MemoryError("the CPU decode-layers kernel could not allocate its scratch")
        return y


def build(cfg, ctx: int, blocks: list[tuple]) -> DecodeLayers | None:
    """DecodeLayers for blocks [(LayerWeights, layer index, k cache, v cache, rotation tables (C, S))] on a CPU
    in the fast mode, or None where a block, matrix, cache or the kernels do not allow it."""
    if not (ENABLED and cpu_gemm.available() and cpu_gemm.ROWS_KERNEL and cpu_attention.ENABLED
            and cpu_attention.DECODE):
        return None
    hd, H, kvh = cfg.head_dim, cfg.n_heads, cfg.n_kv_heads
    if not (hd % 32 == 0 and hd <= 256 and H % kvh == 0 and H // kvh <= 16 and 0 < cfg.rope_dim <= hd
            and cfg.rope_dim % 2 == 0 and cfg.n_ff > 0 and not cfg.attn_gate):
        return None
    layers = []
    for lw, layer, k, v, (c, s) in blocks:
        if (lw.wq is None or lw.delta_net is not None or lw.router is not None or lw.bq is not None
                or lw.w_gate is None or (lw.q_norm is None) != (lw.k_norm is None)):
            return None
        norms = [getattr(lw, n) for n in NORMS]
        if lw.attn_norm is None or lw.ffn_norm is None or not all(
                _float_vector(t, hd if n in ("q_norm", "k_norm") else cfg.n_embd) for n, t in zip(NORMS, norms)):
            return None
        qkv, gate_up = _mats(lw.qkv, [lw.wq, lw.wk, lw.wv]), _mats(lw.gate_up, [lw.w_gate, lw.w_up])
        wo, down = _mat(lw.wo), _mat(lw.w_down)
        if qkv is None or gate_up is None or wo is None or down is None:
            return None
        if not (k.device.type == "cpu" and k.dtype == v.dtype == torch.bfloat16 and k.is_contiguous()
                and v.is_contiguous() and c.dtype == s.dtype == torch.float32 and c.is_contiguous()
                and s.is_contiguous() and c.shape == s.shape == (ctx, cfg.rope_dim)):
            return None
        layers.append(Layer((Mat * 3)(*qkv), wo, (Mat * 2)(*gate_up), down, len(qkv), len(gate_up),
                            *[t.data_ptr() if t is not None else None for t in norms], c.data_ptr(), s.data_ptr(),
                            k.data_ptr(), v.data_ptr(), cfg.layer_window(layer), cfg.attn_scale))
    return DecodeLayers(cfg, ctx, layers) if layers else None


def for_stage(stage) -> DecodeLayers | None:
    """A CPU stage's blocks (its rotation tables are engine.layers.rotation_tables' already)."""
    if stage.device.type != "cpu" or stage.dtype != torch.bfloat16:
        return None
    tables = [stage.rope[stage.cfg.layer_rope_base(stage.first + j)] for j in range(len(stage.layers))]
    if any(len(t) != 4 for t in tables):
        return None
    return build(stage.cfg, stage.ctx, [(lw, stage.first + j, stage.k[j], stage.v[j], tables[j][2:])
                                        for j, lw in enumerate(stage.layers)])
