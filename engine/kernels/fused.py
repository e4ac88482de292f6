"""Fused row-wise Triton kernels of the GPU decoder block (engine.kernels.fast_block).

Each one replaces a run of small torch kernels and, where it follows a matmul, also adds up that
matmul's split-K partial sums (engine.kernels.quant_matmul.matmul_parts) in their fixed order:

- rms_norm:      y = x * rsqrt(mean(x^2) + eps) * w, one program per row.
- qkv_rope_kv:   q, k, v from the partials; optional per-head q/k RMSNorm; RoPE (neox or adjacent
                 pairs, partial rotary dims); rotated q out; k and v written into the KV cache at
                 (slot, pos). One program per (row, head).
- residual_norm: x + o (o optionally RMS-normed first), and the RMSNorm of that sum for the next
                 matmul. One program per row.
- glu:           act(gate) * up (SiLU, or tanh-GELU), from the gate|up partials.

Every program reads only its own row, so all of them are row-invariant. All arithmetic is float32;
outputs are rounded once to their buffer's dtype. Importing this module imports triton.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from engine.kernels import pdl
from engine.kernels.dp4a_gemv import q8_store


@triton.jit
def _sum_parts(part_ptr, S, stride_ps, offs, mask):
    acc = tl.load(part_ptr + offs, mask=mask, other=0.0)
    for s in range(1, S):
        acc += tl.load(part_ptr + s * stride_ps + offs, mask=mask, other=0.0)
    return acc


@triton.jit
def _q8(y, out_ptr, q_ptr, ds_ptr, r, N, c0, BLOCK: tl.constexpr):
    """The int8 decode matmul's x (engine.kernels.dp4a_gemv) from y, this program's BLOCK outputs of
    row r starting at column c0, as rounded to the output dtype: what dp4a_gemv.quantize would make of
    the stored row."""
    yq = tl.reshape(y.to(out_ptr.dtype.element_ty).to(tl.float32), (BLOCK // 32, 32))
    q8_store(yq, c0 // 32 + tl.arange(0, BLOCK // 32), q_ptr + r * N, ds_ptr + r * (N // 32) * 2, N)


@triton.jit
def _rms(x, w_ptr, c, ok, N, eps):
    """x's RMSNorm times the weight at w_ptr: the one form rms_norm and residual_norm share."""
    w = tl.load(w_ptr + c, mask=ok, other=0.0).to(tl.float32)
    return x * (1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)) * w


# 0: by the row's size (H200, one real row of a 16-row llama-3-8b tile: 4 warps 208 us per tile of 64
# launches, 8 warps 192, 16 warps 183; smollm2-135m's 576 values: 4 warps 106, 8 warps 104)
NORM_WARPS = int(os.environ.get("STRATA_NORM_WARPS", "0"))


def norm_warps(n: int) -> int:
    """Warps of a program that RMS-normalises a row of n. The sum of squares' order follows the warps, so
    rms_norm (a stage's first block) and residual_norm (the block before, within a stage) take the same
    number: otherwise a row's normed input differs in its last bits between a layout that splits the
    layers there and one that does not, and the bfloat16 and int8 roundings after it now and then flip
    (H200, llama-3-8b shape split at layer 12, batch-test T 0.7 seed 5: one slot's 16th token differed)."""
    return NORM_WARPS or (8 if n >= 2048 else 4)


@triton.jit
def _rms_kernel(x_ptr, w_ptr, out_ptr, N, stride_x, stride_o, eps, q_ptr, ds_ptr, BLOCK: tl.constexpr,
                Q8: tl.constexpr, PDL: tl.constexpr):
    pdl.enter(PDL)
    r = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    ok = c < N
    x = tl.load(x_ptr + r * stride_x + c, mask=ok, other=0.0).to(tl.float32)
    y = _rms(x, w_ptr, c, ok, N, eps)
    tl.store(out_ptr + r * stride_o + c, y.to(out_ptr.dtype.element_ty), mask=ok)
    if Q8:
        _q8(y, out_ptr, q_ptr, ds_ptr, r, N, 0, BLOCK)


def _q8_args(q8, out: torch.Tensor) -> tuple:
    """(q, ds, Q8) kernel arguments: q8 = dp4a_gemv.buffers(...) to fill, or None."""
    return (q8[0], q8[1], True) if q8 is not None else (out, out, False)


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float, out_dtype=torch.float32, q8=None) -> torch.Tensor:
    """RMSNorm over the last dim of x (any leading shape) in float32 -> out_dtype. q8: (q, ds) buffers
    (dp4a_gemv.buffers) that also get the output's int8 form; x 2-D then."""
    n = x.shape[-1]
    rows = x.reshape(-1, n)
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    out = torch.empty(rows.shape, dtype=out_dtype, device=x.device)
    if rows.shape[0]:
        q, ds, on = _q8_args(q8, out)
        _rms_kernel[(rows.shape[0],)](rows, w, out, n, rows.stride(0), out.stride(0), float(eps), q, ds,
                                      BLOCK=triton.next_power_of_2(n), Q8=on, num_warps=norm_warps(n),
                                      **pdl.launch(x.device))
    return out.reshape(x.shape)


@triton.jit
def _qkv_kernel(part_ptr, S, stride_ps, stride_pm, q_ptr, stride_qt, k_ptr, v_ptr, stride_cs, stride_cp,
                stride_ch, slot_ptr, pos_ptr, cos_ptr, sin_ptr, stride_r, qn_ptr, kn_ptr, eps, b_ptr,
                H: tl.constexpr, KVH: tl.constexpr, HD: tl.constexpr, HALF: tl.constexpr,
                NEOX: tl.constexpr, QKNORM: tl.constexpr, BIAS: tl.constexpr, PDL: tl.constexpr):
    pdl.enter(PDL)
    t = tl.program_id(0)
    h = tl.program_id(1)                       # [0, H): query heads, [H, H + KVH): key/value heads
    is_q = h < H
    d = tl.arange(0, HD)
    if NEOX:
        pd = tl.where(d < HALF, d + HALF, d - HALF)
        sign = tl.where(d < HALF, -1.0, 1.0)
        ci = d % HALF
    else:
        pd = d ^ 1
        sign = tl.where(d % 2 == 0, -1.0, 1.0)
        ci = d // 2
    rot = d < 2 * HALF
    pd = tl.where(rot, pd, d)
    ci = tl.where(rot, ci, 0)
    col = tl.where(is_q, h * HD, H * HD + (h - H) * HD)
    row = part_ptr + t.to(tl.int64) * stride_pm + col
    xs = _sum_parts(row, S, stride_ps, d, d < HD)
    xp = _sum_parts(row, S, stride_ps, pd, d < HD)
    if BIAS:                                   # (glm4moe) q|k|v's bias, before the norms and RoPE
        xs += tl.load(b_ptr + col + d)
        xp += tl.load(b_ptr + col + pd)
    if QKNORM:
        wq = tl.load(qn_ptr + d)
        wk = tl.load(kn_ptr + d)
        wpq = tl.load(qn_ptr + pd)
        wpk = tl.load(kn_ptr + pd)
        r = 1.0 / tl.sqrt(tl.sum(xs * xs, axis=0) / HD + eps)
        xs = xs * r * tl.where(is_q, wq, wk)
        xp = xp * r * tl.where(is_q, wpq, wpk)
    pos = tl.load(pos_ptr + t)
    c = tl.load(cos_ptr + pos * stride_r + ci, mask=rot, other=1.0)
    s = tl.load(sin_ptr + pos * stride_r + ci, mask=rot, other=0.0)
    y = tl.where(rot, xs * c + sign * xp * s, xs)
    hv = h + d * 0                             # the head as a vector (masks need vectors)
    tl.store(q_ptr + t.to(tl.int64) * stride_qt + h * HD + d, y.to(q_ptr.dtype.element_ty), mask=hv < H)
    kvh = tl.maximum(h - H, 0)
    slot = tl.load(slot_ptr + t).to(tl.int64)
    at = slot * stride_cs + pos.to(tl.int64) * stride_cp + kvh * stride_ch + d
    is_kv = hv >= H
    tl.store(k_ptr + at, y.to(k_ptr.dtype.element_ty), mask=is_kv)
    v = _sum_parts(part_ptr + t.to(tl.int64) * stride_pm + (H + KVH) * HD + kvh * HD, S, stride_ps, d, is_kv)
    if BIAS:
        v += tl.load(b_ptr + (H + KVH) * HD + kvh * HD + d)
    tl.store(v_ptr + at, v.to(v_ptr.dtype.element_ty), mask=is_kv)


def qkv_rope_kv(part: torch.Tensor, S: int, n_heads: int, n_kv: int, head_dim: int, rope_dim: int,
                neox: bool, cos: torch.Tensor, sin: torch.Tensor, slot: torch.Tensor, pos: torch.Tensor,
                k_cache: torch.Tensor, v_cache: torch.Tensor, q_norm, k_norm, eps: float, q_dtype,
                bias: torch.Tensor | None = None) -> torch.Tensor:
    """part [S, T, (H + 2 KVH) * hd] partial sums of q|k|v (plus bias, float32 q|k|v, where given).
    Writes k, v at each row's (slot, pos); returns the rotated q [T, H, hd] in q_dtype."""
    T = part.shape[1]
    q = torch.empty((T, n_heads, head_dim), dtype=q_dtype, device=part.device)
    if T == 0:
        return q
    if triton.next_power_of_2(head_dim) != head_dim:
        raise ValueError(f"head_dim {head_dim} is not a power of two")
    qk = q_norm is not None
    _qkv_kernel[(T, n_heads + n_kv)](
        part, S, part.stride(0), part.stride(1), q, q.stride(0), k_cache, v_cache, k_cache.stride(0),
        k_cache.stride(1), k_cache.stride(2), slot, pos, cos, sin, cos.stride(0),
        q_norm if qk else cos, k_norm if qk else cos, float(eps), bias if bias is not None else cos,
        H=n_heads, KVH=n_kv, HD=head_dim, HALF=rope_dim // 2, NEOX=bool(neox), QKNORM=qk,
        BIAS=bias is not None, num_warps=1,
        **pdl.launch(part.device))
    return q


@triton.jit
def _residual_kernel(x_ptr, part_ptr, S, stride_ps, stride_pm, post_ptr, norm_ptr, xo_ptr, h_ptr, N, eps, q_ptr,
                     ds_ptr, HAS_POST: tl.constexpr, HAS_NORM: tl.constexpr, BLOCK: tl.constexpr, Q8: tl.constexpr,
                     PDL: tl.constexpr):
    pdl.enter(PDL)
    r = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    ok = c < N
    o = _sum_parts(part_ptr + r * stride_pm, S, stride_ps, c, ok)
    if HAS_POST:
        o = _rms(o, post_ptr, c, ok, N, eps)
    x = tl.load(x_ptr + r * N + c, mask=ok, other=0.0) + o
    tl.store(xo_ptr + r * N + c, x, mask=ok)
    if HAS_NORM:
        y = _rms(x, norm_ptr, c, ok, N, eps)
        tl.store(h_ptr + r * N + c, y.to(h_ptr.dtype.element_ty), mask=ok)
        if Q8:
            _q8(y, h_ptr, q_ptr, ds_ptr, r, N, 0, BLOCK)


def residual_norm(x: torch.Tensor, part: torch.Tensor, S: int, post_w, norm_w, eps: float, h_dtype, q8=None):
    """x [T, N] float32 (contiguous) + (optionally RMS-normed with post_w) sum of part [S, T, N].
    Returns (new x, its RMSNorm with norm_w in h_dtype, or None without norm_w). q8: as in rms_norm,
    for the RMSNorm output."""
    T, N = x.shape
    xo = torch.empty_like(x)
    h = torch.empty((T, N), dtype=h_dtype, device=x.device) if norm_w is not None else None
    if T:
        q, ds, on = _q8_args(q8 if h is not None else None, xo)
        _residual_kernel[(T,)](x, part, S, part.stride(0), part.stride(1),
                               post_w if post_w is not None else x, norm_w if norm_w is not None else x,
                               xo, h if h is not None else xo, N, float(eps), q, ds, HAS_POST=post_w is not None,
                               HAS_NORM=norm_w is not None, BLOCK=triton.next_power_of_2(N), Q8=on,
                               num_warps=norm_warps(N), **pdl.launch(x.device))
    return xo, h


@triton.jit
def _glu_kernel(part_ptr, S, stride_ps, stride_pm, out_ptr, NF, q_ptr, ds_ptr, GELU: tl.constexpr,
                BLOCK: tl.constexpr, Q8: tl.constexpr, PDL: tl.constexpr):
    pdl.enter(PDL)
    r = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = c < NF
    row = part_ptr + r * stride_pm
    g = _sum_parts(row, S, stride_ps, c, ok)
    u = _sum_parts(row + NF, S, stride_ps, c, ok)
    if GELU:
        z = 0.7978845608028654 * (g + 0.044715 * g * g * g)
        a = 0.5 * g * (1.0 + (1.0 - 2.0 / (tl.exp(2.0 * z) + 1.0)))
    else:
        a = g / (1.0 + tl.exp(-g))
    y = a * u
    tl.store(out_ptr + r * NF + c, y.to(out_ptr.dtype.element_ty), mask=ok)
    if Q8:
        _q8(y, out_ptr, q_ptr, ds_ptr, r, NF, tl.program_id(1) * BLOCK, BLOCK)


def glu(part: torch.Tensor, S: int, n_ff: int, gelu: bool, out_dtype, q8=None) -> torch.Tensor:
    """act(gate) * up from part [S, T, 2 * n_ff] (gate columns first) -> [T, n_ff] in out_dtype.
    q8: as in rms_norm."""
    T = part.shape[1]
    out = torch.empty((T, n_ff), dtype=out_dtype, device=part.device)
    if T:
        block = min(1024, triton.next_power_of_2(n_ff))
        q, ds, on = _q8_args(q8, out)
        _glu_kernel[(T, triton.cdiv(n_ff, block))](part, S, part.stride(0), part.stride(1), out, n_ff, q, ds,
                                                  GELU=bool(gelu), BLOCK=block, Q8=on, num_warps=4,
                                                  **pdl.launch(part.device))
    return out
