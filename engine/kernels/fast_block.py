"""The decoder block on a GPU in ten kernel launches, nine after a block that made its normed input
(engine.block.run_blocks' CUDA path). MoE blocks run their routed experts (engine.block.moe) between the
same attention and residual kernels.

    rms_norm -> q|k|v matmul (one launch) -> sum + q/k norm + RoPE + KV write -> attention
    -> wo matmul -> sum + residual (+ post norm) + ffn RMSNorm -> gate|up matmul (one launch)
    -> sum + act * up -> down matmul -> sum + residual (+ post norm) (+ the next block's RMSNorm)

Within a stage the first block's rms_norm is the only one: each block's last kernel makes the next
block's normed input (engine.block.run_blocks), so a block is nine launches.

On decode tiles the int8 matmul (engine.kernels.dp4a_gemv) reads its x rounded to int8: rms_norm,
residual_norm, the attention kernel and glu write that form beside their output.

The matmuls leave split-K partial sums (engine.kernels.quant_matmul.matmul_parts); the kernel after
each one adds them in a fixed order as it reads them (engine.kernels.fused). Every kernel works row
by row with a configuration that depends on the weight shapes only, so a row's result does not depend
on the other rows or their number: the block is row-invariant like the torch path it replaces, not
bit-equal to it. The residual stream stays float32; matmul inputs are in the weights' compute dtype.
Importing this module imports triton: import it lazily.
"""
from __future__ import annotations

import torch

from engine.block import moe
from engine.kernels import dp4a_gemv, fused
from engine.kernels.attention import tile_attention
from engine.kernels import stream_matmul
from engine.kernels.quant_matmul import KERNEL_TYPES, matmul_parts


def _w(qt) -> tuple[torch.Tensor, object]:
    """(data, qtype) for matmul_parts: GGUF bytes with a kernel, else the dense copy (qtype None)."""
    if qt.qtype in KERNEL_TYPES:
        return qt.data, qt.qtype
    return qt.dense_weight(), None


def _parts(x: torch.Tensor, mats: list, stacked=None, n_real=None, xq=None) -> tuple[torch.Tensor, int]:
    """Split-K partial sums of x @ [W1; W2; ...].T, (part [S, T, N], S), from one launch where the
    matrices are stacked in the streaming layout (or are one such matrix). n_real: the tile's real
    row count on the device (decode tiles compute only those); xq: x's int8 form where the kernel that
    made x wrote it (see _q8)."""
    if stacked is not None:
        return stream_matmul.matmul_parts(x, stacked, n_real, xq)
    if len(mats) == 1 and mats[0].packed is not None:
        return stream_matmul.matmul_parts(x, mats[0].packed, n_real, xq)
    if all(m.packed is None for m in mats):
        return matmul_parts(x, [_w(m) for m in mats])
    # mixed layouts (a GGUF file with, say, Q6_K for v beside Q4_K for q, k): each matrix summed in order
    sums = [stream_matmul.sum_parts(*_parts(x, [m], None, n_real, xq)) for m in mats]
    return torch.cat(sums, -1)[None], 1


def _q8(T: int, k: int, mats: list, device):
    """Buffers for the int8 form of a decode tile's matmul input, when the int8 kernel reads it."""
    if stream_matmul.takes_q8(T) and any(m.packed is not None for m in mats):
        return dp4a_gemv.buffers(T, k, device)
    return None


def supports(cfg, lw) -> bool:
    return (lw.w_gate is not None or lw.router is not None) and lw.wq is not None \
        and not cfg.attn_gate \
        and cfg.rope_dim % 2 == 0 \
        and cfg.rope_dim <= cfg.head_dim and cfg.head_dim & (cfg.head_dim - 1) == 0


def run_block_cuda(lw, cfg, layer: int, x: torch.Tensor, tile, k_cache: torch.Tensor, v_cache: torch.Tensor,
                   rope, normed=None, nxt=None) -> tuple[torch.Tensor, tuple | None]:
    """The block on x: (new x, the next block's normed input or None). normed: this block's attention
    RMSNorm of x and its int8 form (h, q8), made by the block before; nxt: the next block's weights,
    whose attention RMSNorm the block's last kernel then makes too (engine.block.run_blocks)."""
    T = x.shape[0]
    dt = lw.wq.compute_dtype
    eps = cfg.norm_eps
    x = x.float().contiguous()
    if normed is None:
        q8 = _q8(T, x.shape[1], [lw.wq, lw.wk, lw.wv], x.device)
        h = fused.rms_norm(x, lw.attn_norm, eps, dt, q8)
    else:
        h, q8 = normed
    part, s = _parts(h, [lw.wq, lw.wk, lw.wv], lw.qkv, tile.n_dev, q8)
    q = fused.qkv_rope_kv(part, s, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.rope_dim, cfg.rope_neox,
                          rope[0], rope[1], tile.slot, tile.pos, k_cache, v_cache, lw.q_norm, lw.k_norm, eps,
                          torch.float32, lw.bqkv)
    q8 = _q8(T, cfg.n_heads * cfg.head_dim, [lw.wo], x.device) if cfg.head_dim % 32 == 0 else None
    a = tile_attention(q, k_cache, v_cache, tile.slot, tile.pos, cfg.layer_window(layer), cfg.attn_scale, dt,
                       tile.n_dev, q8)
    part, s = _parts(a.view(T, cfg.n_heads * cfg.head_dim), [lw.wo], None, tile.n_dev, q8)
    if lw.router is not None:           # routed experts (engine.block.moe: on the device where repacked)
        q8 = _q8(T, x.shape[1], [lw.gate_exps], x.device)
        x, h = fused.residual_norm(x, part, s, lw.post_attn_norm, lw.ffn_norm, eps, dt, q8)
        if lw.post_ffw_norm is None and lw.gate_shexp is None:
            return moe(lw, cfg, h, tile.n_dev, q8, residual=x), None     # the experts' sum lands on x
        part, s = moe(lw, cfg, h, tile.n_dev, q8).float()[None], 1
    else:
        q8 = _q8(T, x.shape[1], [lw.w_gate, lw.w_up], x.device)
        x, h = fused.residual_norm(x, part, s, lw.post_attn_norm, lw.ffn_norm, eps, dt, q8)
        part, s = _parts(h, [lw.w_gate, lw.w_up], lw.gate_up, tile.n_dev, q8)
        q8 = _q8(T, lw.w_gate.shape[0], [lw.w_down], x.device)
        g = fused.glu(part, s, lw.w_gate.shape[0], cfg.gelu, dt, q8)
        part, s = _parts(g, [lw.w_down], None, tile.n_dev, q8)
    if nxt is None:
        return fused.residual_norm(x, part, s, lw.post_ffw_norm, None, eps, dt)[0], None
    # the block's last kernel also makes the next block's attention RMSNorm and its int8 form
    q8 = _q8(T, x.shape[1], [nxt.wq, nxt.wk, nxt.wv], x.device)
    x, h = fused.residual_norm(x, part, s, lw.post_ffw_norm, nxt.attn_norm, eps, nxt.wq.compute_dtype, q8)
    return x, (h, q8)
