"""One decoder block on one tile of rows: attention (writing this tile's KV first) then the FFN."""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from engine.config import ModelConfig
from engine.gdn import delta_net
from engine.layers import apply_rope, attention, glu, rms_norm, rotate
from engine.quant import QuantTensor
from engine.weights import LayerWeights, linears

# GPU: dense blocks run as ten fused Triton launches (engine.kernels.fast_block); 0 = the torch ops below
FUSED_GPU_BLOCK = os.environ.get("STRATA_FUSED_BLOCK", "1") != "0"


@dataclass
class Tile:
    """A fixed number of rows; padding rows point at the scratch slot and are ignored by callers."""
    slot: torch.Tensor        # [T] long, the KV slot each row reads and writes
    pos: torch.Tensor         # [T] long, absolute position of each row
    n_real: int               # rows [0, n_real) are real
    n_dev: torch.Tensor | None = None   # n_real as a device scalar (GPU decode kernels skip the rest)
    at: tuple[int, int] | None = None   # a one-row CPU tile: its (slot, position) as host ints
    size: int = 0             # the tile's rows where only its real rows are passed (Stage.row_count_free)
    per_row: bool = False     # a CPU decode tile: each row's attention alone, as a one-row tile computes it
    run: tuple[int, int] | None = None  # a CPU tile of one slot's consecutive positions: (slot, first position)


def one_run(slot: torch.Tensor, pos: torch.Tensor) -> tuple[int, int] | None:
    """(slot, first position) where host rows are one slot's consecutive positions (a prompt tile), else
    None: the block then reads and writes their places as slices, not gathers (the same values)."""
    s0, p0 = int(slot[0]), int(pos[0])
    if torch.equal(slot, torch.full_like(slot, s0)) and torch.equal(pos, torch.arange(p0, p0 + pos.shape[0])):
        return s0, p0
    return None


def matmul_input(x: torch.Tensor, norm: torch.Tensor, cfg: ModelConfig, m: QuantTensor) -> torch.Tensor:
    """The RMSNorm of the residual x that the block's matmuls (m and its kind) read: on a GPU in their
    compute dtype, as the fused blocks give it (the linears would cast float32 rows in a kernel of their
    own; the grouped expert kernel takes them on its IEEE path: on an H200 it took 1.95 s of a 2.12 s
    qwen3.5-35b-a3b prompt tile so)."""
    return rms_norm(x, norm, cfg.norm_eps, m.compute_dtype)


def attention_part(lw: LayerWeights, cfg: ModelConfig, layer: int, x: torch.Tensor, tile: Tile,
                   k_cache: torch.Tensor, v_cache: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]):
    T = x.shape[0]
    rows = tile.size or T                         # the tile's row count: the matmuls' tiles
    h = matmul_input(x, lw.attn_norm, cfg, lw.wq)
    q, k, v = linears([lw.wq, lw.wk, lw.wv], lw.qkv, h, rows, tile.per_row)
    if lw.bq is not None:
        q, k, v = q + lw.bq, k + lw.bk, v + lw.bv
    gate = None
    if cfg.attn_gate:                             # qwen35: each head's q then its output gate
        qg = q.reshape(T, cfg.n_heads, 2, cfg.head_dim)
        q, gate = qg[:, :, 0], qg[:, :, 1].reshape(T, cfg.n_heads * cfg.head_dim)
    q = q.reshape(T, cfg.n_heads, cfg.head_dim)
    k = k.reshape(T, cfg.n_kv_heads, cfg.head_dim)
    v = v.reshape(T, cfg.n_kv_heads, cfg.head_dim)
    if lw.q_norm is not None:
        q = rms_norm(q, lw.q_norm, cfg.norm_eps)
        k = rms_norm(k, lw.k_norm, cfg.norm_eps)
    if len(rope) > 2:                             # CPU stages: rotation tables (engine.layers.rotate)
        tables, rope_fn = rope[2:], rotate
    else:
        tables, rope_fn = rope, apply_rope
    place = tile.at or tile.run                   # CPU rows of one slot's consecutive positions (one row,
    if place is not None:                         # or a prompt tile): slices and views instead of gathers
        s, p = place
        cos, sin = tables[0][p:p + T], tables[1][p:p + T]
    else:
        cos, sin = tables[0][tile.pos], tables[1][tile.pos]
    qk = rope_fn(torch.cat((q, k), 1), cos, sin, cfg.rope_neox)        # q's and k's heads in one pass
    q, k = qk[:, :cfg.n_heads], qk[:, cfg.n_heads:]
    if place is not None:
        k_cache[s, p:p + T] = k.to(k_cache.dtype)
        v_cache[s, p:p + T] = v.to(v_cache.dtype)
    else:
        k_cache[tile.slot, tile.pos] = k.to(k_cache.dtype)
        v_cache[tile.slot, tile.pos] = v.to(v_cache.dtype)
    a = attention(q, k_cache, v_cache, tile.slot, tile.pos, cfg.layer_window(layer), cfg.attn_scale, tile.at,
                  tile.size, tile.per_row)
    a = a.reshape(T, cfg.n_heads * cfg.head_dim)
    if gate is not None:
        a = (a.float() * torch.sigmoid(gate.float())).to(a.dtype)
    o = lw.wo.linear(a, rows, alone=tile.per_row)
    if lw.post_attn_norm is not None:
        o = rms_norm(o, lw.post_attn_norm, cfg.norm_eps)
    return x + o


def row_count_free(lw: LayerWeights) -> bool:
    """Whether a CPU block gives a tile's real rows, passed alone, the bits the whole tile gives them: true
    for the attention blocks with a dense FFN (int4 matrices compute each row alike at any row count,
    dense ones and the attention run at the tile's row count, Tile.size); the routed experts and the
    delta net have row-count dependent parts of their own."""
    return lw.router is None and lw.delta_net is None


def route(lw: LayerWeights, cfg: ModelConfig, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's experts (top-k, in score order) and their weights, from that row alone: softmax
    scores (qwen3moe), or sigmoid scores selected with the file's bias added (glm4moe); the selected
    weights renormalised where the model says so, then scaled."""
    logits = lw.router.linear(h, h.shape[0]).float()
    if cfg.gating == "sigmoid":
        scores = torch.sigmoid(logits)
        _, sel = torch.topk(scores + lw.exp_probs_b, cfg.n_expert_used, dim=-1)     # [T, k]
        w = scores.gather(-1, sel)
    else:
        w, sel = torch.topk(torch.softmax(logits, dim=-1), cfg.n_expert_used, dim=-1)
    if cfg.expert_weights_norm:
        w = w / w.sum(-1, keepdim=True)
    if cfg.expert_weights_scale != 1.0:
        w = w * cfg.expert_weights_scale
    return w, sel


def dense_ffn(gate: QuantTensor, up: QuantTensor, down: QuantTensor, stack, h: torch.Tensor, gelu: bool,
              rows: int = 0, alone: bool = False):
    T = rows or h.shape[0]
    g, u = linears([gate, up], stack, h, T, alone)
    return down.linear(glu(g, u, gelu), T, alone=alone)


def device_experts(lw: LayerWeights, rows: int) -> bool:
    """Whether a tile of this many rows runs its routed experts on the GPU without the host: repacked
    expert stacks; decode tiles by engine.kernels.moe_gemv (with the int8 decode kernel), prompt tiles by
    engine.kernels.moe_grouped."""
    if lw.router is None or lw.gate_exps.device.type != "cuda":
        return False
    from engine.kernels import moe_gemv, stream_matmul

    return (rows > stream_matmul.DECODE_ROWS or stream_matmul.takes_q8(rows)) and moe_gemv.supports(lw)


def moe(lw: LayerWeights, cfg: ModelConfig, h: torch.Tensor, n_dev: torch.Tensor | None = None,
        xq=None, residual: torch.Tensor | None = None) -> torch.Tensor:
    """Routed experts, row-invariant: each expert runs its rows through matmuls on tiles of the
    block's own tile size, and each row sums its experts in its own top-k order; then the shared
    experts (run on every row) are added. GPU tiles with repacked experts: all on the device
    (device_experts; n_dev the real row count there, xq h's int8 form where made), float32 out.
    residual (float32, only for blocks without shared experts): returns residual + that sum."""
    T = h.shape[0]
    if device_experts(lw, T):
        from engine.kernels import moe_gemv, moe_grouped, stream_matmul

        if T <= stream_matmul.DECODE_ROWS:
            w, sel = moe_gemv.route(lw, cfg, h, n_dev)
            return shared_experts(lw, h, moe_gemv.routed(w, sel, lw, h, n_dev, xq, residual))
        w, sel = route(lw, cfg, h)
        return shared_experts(lw, h, moe_grouped.routed(w, sel, lw, h, n_dev, residual))
    if residual is not None:
        return residual + moe(lw, cfg, h).float()
    w, sel = route(lw, cfg, h)
    w = w.to(h.dtype)
    ys = torch.zeros(h.shape[0], cfg.n_expert_used, h.shape[1], dtype=h.dtype, device=h.device)
    for e in torch.unique(sel).tolist():
        rows, ks = (sel == e).nonzero(as_tuple=True)
        x = h[rows]
        if x.is_cuda:       # GPU kernels are chosen by row count: padded, each row meets its tile kind's kernel
            x = torch.cat((x, x.new_zeros(T - x.shape[0], x.shape[1])))
        g, u = lw.gate_exps.expert(e).linear(x, T), lw.up_exps.expert(e).linear(x, T)
        y = lw.down_exps.expert(e).linear(glu(g, u, False), T)
        ys[rows, ks] = y[:rows.shape[0]].to(ys.dtype)
    out = ys[:, 0] * w[:, :1]
    for j in range(1, cfg.n_expert_used):
        out = out + ys[:, j] * w[:, j:j + 1]
    return shared_experts(lw, h, out)


def shared_experts(lw: LayerWeights, h: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """out + the shared experts' output on every row (where the block has them), in out's dtype."""
    if lw.gate_shexp is not None:
        shared = dense_ffn(lw.gate_shexp, lw.up_shexp, lw.down_shexp, lw.shexp_gate_up, h, False).float()
        if lw.shexp_gate is not None:           # qwen35moe: a sigmoid gate per row
            shared = shared * torch.sigmoid(lw.shexp_gate.linear(h, h.shape[0]).float())
        out = out + shared.to(out.dtype)
    return out


def ffn_part(lw: LayerWeights, cfg: ModelConfig, x: torch.Tensor, n_dev: torch.Tensor | None = None,
             rows: int = 0, alone: bool = False) -> torch.Tensor:
    """rows: the tile's row count where x holds only its real rows (Tile.size); alone: Tile.per_row."""
    h = matmul_input(x, lw.ffn_norm, cfg, lw.w_gate if lw.router is None else lw.router)
    if lw.router is not None:
        f = moe(lw, cfg, h, n_dev)
    else:
        f = dense_ffn(lw.w_gate, lw.w_up, lw.w_down, lw.gate_up, h, cfg.gelu, rows, alone)
    if lw.post_ffw_norm is not None:
        f = rms_norm(f, lw.post_ffw_norm, cfg.norm_eps)
    return x + f


def run_block(lw: LayerWeights, cfg: ModelConfig, layer: int, x: torch.Tensor, tile: Tile,
              k_cache: torch.Tensor, v_cache: torch.Tensor, rope) -> torch.Tensor:
    return run_blocks([lw], cfg, layer, x, tile, [k_cache], [v_cache], lambda _: rope)


def fused_blocks(x: torch.Tensor):
    """engine.kernels.fast_block where x's blocks run as fused kernels (on a GPU), else None."""
    if x.is_cuda and FUSED_GPU_BLOCK:
        from engine.kernels import fast_block
        return fast_block
    return None


def run_blocks(lws: list[LayerWeights], cfg: ModelConfig, first: int, x: torch.Tensor, tile: Tile,
               ks: list, vs: list, rope_of) -> torch.Tensor:
    """Blocks first, first + 1, ... in turn (rope_of(layer): the layer's rope tables). Consecutive fused
    GPU blocks hand on the next block's normed input: the kernel that ends a block (the residual sum)
    also makes the next block's attention RMSNorm and its int8 form, one launch less per block."""
    fast = fused_blocks(x)
    normed = None
    for j, lw in enumerate(lws):
        layer = first + j
        if fast is not None and fast.supports(cfg, lw):
            nxt = lws[j + 1] if j + 1 < len(lws) and fast.supports(cfg, lws[j + 1]) else None
            x, normed = fast.run_block_cuda(lw, cfg, layer, x, tile, ks[j], vs[j], rope_of(layer), normed, nxt)
            continue
        if lw.delta_net is not None:              # ks[j] / vs[j] hold this layer's conv and state rings
            h = matmul_input(x, lw.attn_norm, cfg, lw.delta_net.out)
            x = x + delta_net(lw.delta_net, cfg, h, tile.slot, tile.pos, tile.n_real, ks[j], vs[j],
                              tile.n_dev).float()
        else:
            x = attention_part(lw, cfg, layer, x, tile, ks[j], vs[j], rope_of(layer))
        x = ffn_part(lw, cfg, x, tile.n_dev, tile.size, tile.per_row)
    return x
