"""Triton attention for one tile of rows over the slot KV cache (GPU path of engine.layers.attention).

One program per (row, head): it walks its own slot's keys from the window start to its own position
in fixed blocks with an online softmax in float32 (a version with one program per KV head for its group
of query heads was 2x slower on an H200 at 1 real row: fewer programs, 2026-12-01). Padding rows past
the tile's real count (a device scalar) write zeros and read no keys. Nothing depends on the other rows, so the result
is row-invariant by construction, and nothing needs the host: the loop bounds are read on the device,
which keeps the stage forward free of host syncs (and capturable in a CUDA graph).
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from engine.kernels.fused import _q8

# keys per loop step (by head size: a 128-key block of 256-value heads would not fit in registers) and
# warps per program; the same for every tile, so a row's sums are blocked the same way whatever tile it is
# in. H200, one real row of a decode tile at position 100 (tests/gpu/run_row_kernels.sh): 128 keys per
# step against 64, llama-3-8b 271 -> 238 us per tile, smollm2-135m 199 -> 143 (32: 388 and 274)
BLOCK_N = int(os.environ.get("STRATA_ATTN_BN", "0"))
WARPS = int(os.environ.get("STRATA_ATTN_WARPS", "4"))


def block_n(head_dim: int) -> int:
    return BLOCK_N or (128 if head_dim <= 128 else 64)


@triton.jit
def _attn_kernel(q_ptr, k_ptr, v_ptr, o_ptr, slot_ptr, pos_ptr, nreal_ptr, stride_qt, stride_qh, stride_ks,
                 stride_kc, stride_kh, stride_ot, stride_oh, window, scale, q8_ptr, ds_ptr, G: tl.constexpr,
                 HD: tl.constexpr, BN: tl.constexpr, HAS_N: tl.constexpr, Q8: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    kvh = h // G
    d = tl.arange(0, HD)
    o_off = t * stride_ot + h * stride_oh + d
    real = True
    if HAS_N:
        real = t < tl.load(nreal_ptr)
    if real:
        slot = tl.load(slot_ptr + t).to(tl.int64)
        pos = tl.load(pos_ptr + t).to(tl.int32)
        q = tl.load(q_ptr + t * stride_qt + h * stride_qh + d).to(tl.float32) * scale
        lo = tl.where(window > 0, tl.maximum(pos - window + 1, 0), 0)
        start = (lo // BN) * BN
        base = slot * stride_ks + kvh * stride_kh
        m = tl.full((), float("-inf"), tl.float32)
        l = tl.zeros((), tl.float32)
        acc = tl.zeros((HD,), tl.float32)
        for s in range(start, pos + 1, BN):
            n = s + tl.arange(0, BN)
            ok = (n <= pos) & (n >= lo)
            off = base + n.to(tl.int64)[:, None] * stride_kc + d[None, :]
            k = tl.load(k_ptr + off, mask=ok[:, None], other=0.0).to(tl.float32)
            sc = tl.where(ok, tl.sum(k * q[None, :], axis=1), float("-inf"))
            m_new = tl.maximum(m, tl.max(sc, axis=0))
            p = tl.exp(sc - m_new)
            alpha = tl.exp(m - m_new)
            v = tl.load(v_ptr + off, mask=ok[:, None], other=0.0).to(tl.float32)
            l = l * alpha + tl.sum(p, axis=0)
            acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
            m = m_new
        y = acc / l
    else:                               # a padding row of a tile: zeros, no keys read
        y = tl.zeros((HD,), tl.float32)
    tl.store(o_ptr + o_off, y.to(o_ptr.dtype.element_ty))
    if Q8:                              # the int8 form of this head's part of the row (out contiguous)
        _q8(y, o_ptr, q8_ptr, ds_ptr, t, tl.num_programs(1) * HD, h * HD, HD)


def tile_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slot: torch.Tensor,
                   pos: torch.Tensor, window: int, scale: float, out_dtype=torch.float32,
                   n_real: torch.Tensor | None = None, q8=None) -> torch.Tensor:
    """q [T, H, hd]; caches [slots, ctx, kvh, hd]; slot/pos [T] -> [T, H, hd] in out_dtype (float32).
    n_real (a device scalar): rows from there on are padding and get zeros. q8: (q, ds) buffers
    (engine.kernels.dp4a_gemv.buffers for [T, H * hd]) that also get the output's int8 form (hd a
    multiple of 32), the input of the int8 decode matmul."""
    T, H, hd = q.shape
    kvh = k_cache.shape[2]
    q = q.contiguous()
    out = torch.empty((T, H, hd), dtype=out_dtype, device=q.device)
    _attn_kernel[(T, H)](q, k_cache, v_cache, out, slot, pos, n_real if n_real is not None else slot,
                         q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
                         out.stride(0), out.stride(1), int(window), float(scale),
                         q8[0] if q8 is not None else out, q8[1] if q8 is not None else out, G=H // kvh, HD=hd,
                         BN=block_n(hd), HAS_N=n_real is not None, Q8=q8 is not None, num_warps=WARPS)
    return out
