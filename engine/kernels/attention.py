"""Triton attention for one tile of rows over the slot KV cache (GPU path of engine.layers.attention).

One program per (row, KV head) for all the query heads that share that KV head (each key block is read
once for them): it walks its own slot's keys from the window start to its own position in fixed blocks
(a size set by the model's shape) with an online softmax in float32. Nothing depends on the other rows, so the result
is row-invariant by construction, and nothing needs the host: the loop bounds are read on the device,
which keeps the stage forward free of host syncs (and capturable in a CUDA graph).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

@triton.jit
def _attn_kernel(q_ptr, k_ptr, v_ptr, o_ptr, slot_ptr, pos_ptr, nreal_ptr, stride_qt, stride_qh, stride_ks,
                 stride_kc, stride_kh, stride_ot, stride_oh, window, scale, G: tl.constexpr, GP: tl.constexpr,
                 HD: tl.constexpr, BN: tl.constexpr, HAS_N: tl.constexpr):
    """Row t, the G query heads of KV head kvh (GP: G rounded up to a power of two): each key block is
    read once for all of them."""
    t = tl.program_id(0)
    kvh = tl.program_id(1)
    g = tl.arange(0, GP)
    gok = g < G
    h = kvh * G + g
    d = tl.arange(0, HD)
    o_off = t * stride_ot + h[:, None] * stride_oh + d[None, :]
    real = True
    if HAS_N:
        real = t < tl.load(nreal_ptr)
    if real:
        slot = tl.load(slot_ptr + t).to(tl.int64)
        pos = tl.load(pos_ptr + t).to(tl.int32)
        q = tl.load(q_ptr + t * stride_qt + h[:, None] * stride_qh + d[None, :], mask=gok[:, None],
                    other=0.0).to(tl.float32) * scale
        lo = tl.where(window > 0, tl.maximum(pos - window + 1, 0), 0)
        start = (lo // BN) * BN
        base = slot * stride_ks + kvh * stride_kh
        m = tl.full((GP,), float("-inf"), tl.float32)
        l = tl.zeros((GP,), tl.float32)
        acc = tl.zeros((GP, HD), tl.float32)
        for s in range(start, pos + 1, BN):
            n = s + tl.arange(0, BN)
            ok = (n <= pos) & (n >= lo)
            off = base + n.to(tl.int64)[:, None] * stride_kc + d[None, :]
            k = tl.load(k_ptr + off, mask=ok[:, None], other=0.0).to(tl.float32)
            sc = tl.where(ok[None, :], tl.sum(q[:, None, :] * k[None, :, :], axis=2), float("-inf"))
            m_new = tl.maximum(m, tl.max(sc, axis=1))
            p = tl.exp(sc - m_new[:, None])
            alpha = tl.exp(m - m_new)
            v = tl.load(v_ptr + off, mask=ok[:, None], other=0.0).to(tl.float32)
            l = l * alpha + tl.sum(p, axis=1)
            acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)
            m = m_new
        tl.store(o_ptr + o_off, (acc / l[:, None]).to(o_ptr.dtype.element_ty), mask=gok[:, None])
    else:                               # a padding row of a decode tile: zeros, no keys read
        tl.store(o_ptr + o_off, tl.zeros((GP, HD), tl.float32).to(o_ptr.dtype.element_ty), mask=gok[:, None])


def block_n(gp: int, hd: int) -> int:
    """Keys per step: the [G, BN, HD] products stay within 64 floats per thread of 4 warps (a function of
    the model's shape only)."""
    return max(16, min(64, 8192 // (gp * hd)))


def tile_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slot: torch.Tensor,
                   pos: torch.Tensor, window: int, scale: float, out_dtype=torch.float32,
                   n_real: torch.Tensor | None = None) -> torch.Tensor:
    """q [T, H, hd]; caches [slots, ctx, kvh, hd]; slot/pos [T] -> [T, H, hd] in out_dtype (float32).
    n_real (a device scalar): rows from there on are padding and get zeros."""
    T, H, hd = q.shape
    kvh = k_cache.shape[2]
    g = H // kvh
    gp = triton.next_power_of_2(g)
    q = q.contiguous()
    out = torch.empty((T, H, hd), dtype=out_dtype, device=q.device)
    _attn_kernel[(T, kvh)](q, k_cache, v_cache, out, slot, pos, n_real if n_real is not None else slot,
                           q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
                           out.stride(0), out.stride(1), int(window), float(scale), G=g, GP=gp, HD=hd,
                           BN=block_n(gp, hd), HAS_N=n_real is not None, num_warps=4)
    return out
