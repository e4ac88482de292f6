"""The transformer's pieces as plain functions on one tile of rows.

Every function here is row-invariant: a row's result depends only on that row (and, for attention,
on its own slot's KV), never on the other rows of the tile. The tile always has the same number of
rows (padding rows included), so every torch call runs at one fixed shape (ENVIRONMENT.md: a fixed
row count makes CPU matmuls row-invariant); attention walks fixed-size key blocks with an online
softmax, so extra fully-masked blocks are exact no-ops.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from engine import cpu_attention, cpu_gemm

# CPU tiles of several rows walk the keys in blocks of a fixed grid: KEY_BLOCK keys from position 0, each
# next block as long as its start (no shorter than KEY_BLOCK, no longer than LONG_BLOCK): 0, 128, 256, 512,
# 1024, 1536, ... A block past a row's position, or before its window, is an exact no-op for it, so a row's
# result does not depend on the blocks its tile adds. Fewer, longer blocks cost fewer torch calls: on this
# 2-core machine against 64-key blocks everywhere, `strata bench --streams 1 --prompt-tokens 400 / 2000`
# reads Gemma 3 270M's prompt at 310-329 / 295-299 tok/s (276.7 / 269.8), SmolLM2's at 362-399 / 284-304
# (396.4 / 240.7).
KEY_BLOCK = 128
LONG_BLOCK = 512


def key_blocks(lo: int, hi: int) -> list[tuple[int, int]]:
    """(start, size) of the grid's blocks that hold keys lo..hi."""
    start = 0 if lo < LONG_BLOCK else lo // LONG_BLOCK * LONG_BLOCK
    out = []
    while start <= hi:
        size = max(KEY_BLOCK, min(start, LONG_BLOCK))
        if start + size > lo:
            out.append((start, size))
        start += size
    return out


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float, gpu_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """RMSNorm computed in float32 (the residual stream is float32 on every device); on a GPU the result
    may be rounded to gpu_dtype in the same kernel (a CPU stage's matmuls take float32 inputs)."""
    if x.is_cuda:
        from engine.kernels.fused import rms_norm as fused_rms_norm

        return fused_rms_norm(x, w, eps, gpu_dtype)
    y = cpu_gemm.rms_norm(x, w, eps) if x.device.type == "cpu" else None     # one call (engine/native)
    return y if y is not None else torch_rms_norm(x, w, eps)


def torch_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """rms_norm's CPU form, on any device: x * rsqrt(mean(x^2) + eps) * w in float32, in one torch call
    (what autograd can see through: engine.mtp_train trains with it on a GPU too)."""
    return F.rms_norm(x.float(), (x.shape[-1],), w, eps)


def rope_tables(base: float, rope_dim: int, n_pos: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin [n_pos, rope_dim/2], computed in float64 then rounded once."""
    inv = 1.0 / (base ** (torch.arange(0, rope_dim, 2, dtype=torch.float64) / rope_dim))
    ang = torch.arange(n_pos, dtype=torch.float64)[:, None] * inv[None, :]
    return ang.cos().float().to(device), ang.sin().float().to(device)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, neox: bool) -> torch.Tensor:
    """x [T, heads, hd]; cos/sin [T, rope_dim/2] already gathered at each row's position."""
    half = cos.shape[-1]
    rot, rest = x[..., : 2 * half], x[..., 2 * half:]
    c, s = cos[:, None, :].to(x.dtype), sin[:, None, :].to(x.dtype)
    if neox:
        a, b = rot[..., :half], rot[..., half:]
        out = torch.cat((a * c - b * s, b * c + a * s), dim=-1)
    else:
        a, b = rot[..., 0::2], rot[..., 1::2]
        out = torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)
    return torch.cat((out, rest), dim=-1) if rest.shape[-1] else out


def rotation_tables(cos: torch.Tensor, sin: torch.Tensor, neox: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(C, S) [n_pos, rope_dim] for `rotate`: cos and the signed sin laid out on the rotated dims."""
    if neox:
        return torch.cat((cos, cos), -1), torch.cat((-sin, sin), -1)
    return torch.stack((cos, cos), -1).flatten(-2), torch.stack((-sin, sin), -1).flatten(-2)


def rotate(x: torch.Tensor, c: torch.Tensor, s: torch.Tensor, neox: bool) -> torch.Tensor:
    """apply_rope in fewer torch calls, with the same bits: x * C + swap(x) * S, where swap exchanges each
    rotated pair (a*c + b*(-s) rounds as a*c - b*s; b*c + a*s is the same sum). c, s: rotation_tables'
    rows [T, rope_dim] at each row's position."""
    rd = c.shape[-1]
    rot = x[..., :rd] if rd < x.shape[-1] else x
    if neox:
        sw = torch.cat((rot[..., rd // 2:], rot[..., :rd // 2]), -1)
    else:
        sw = rot.unflatten(-1, (rd // 2, 2)).flip(-1).flatten(-2)
    out = rot * c[:, None, :].to(x.dtype) + sw * s[:, None, :].to(x.dtype)
    return torch.cat((out, x[..., rd:]), -1) if rd < x.shape[-1] else out


def attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slot: torch.Tensor,
              pos: torch.Tensor, window: int, scale: float, at: tuple[int, int] | None = None,
              rows: int = 0, per_row: bool = False) -> torch.Tensor:
    """Row-invariant attention of each row over its own slot's cached keys 0..pos.

    q [T, H, hd]; k_cache/v_cache [slots, ctx, kvh, hd]; slot/pos [T] (long). `window` > 0 limits each
    row to the last `window` positions (sliding-window layers). Returns [T, H, hd]. at: a one-row
    tile's (slot, pos) as host ints, where the caller has them. rows: the tile's row count where q holds
    only its real rows (T < rows): the rows are computed as in the full tile (its products have the same
    shapes; rows added at the first row's slot and position, so a sliding window's blocks before all the
    real rows' windows are not walked, are left out of the result; the CPU fast mode's tiles run
    engine.cpu_attention's kernel instead, whose rows need no padding). per_row: a CPU
    decode tile, whose rows each get a one-row tile's attention (the bits a row alone in its tile gets;
    the kernel's rows get them at any row count).
    """
    if not q.is_cuda and cpu_attention.usable(q, k_cache):
        return cpu_attention.attention(q, k_cache, v_cache, slot, pos, window, scale, decode=per_row)  # fast mode
    if per_row and not q.is_cuda and q.shape[0] > 1:
        return _rows_attention(q, k_cache, v_cache, slot.tolist(), pos.tolist(), window, scale)
    if rows > q.shape[0] and not q.is_cuda:
        n = q.shape[0]
        pad = rows - n
        out = attention(torch.cat((q, q.new_zeros(pad, *q.shape[1:]))), k_cache, v_cache,
                        torch.cat((slot, slot[:1].expand(pad))), torch.cat((pos, pos[:1].expand(pad))),
                        window, scale)
        return out[:n]
    if q.is_cuda:
        from engine.kernels.attention import tile_attention

        return tile_attention(q, k_cache, v_cache, slot, pos, window, scale).to(q.dtype)
    T, H, hd = q.shape
    if T == 1:
        s, p = at if at is not None else (int(slot[0]), int(pos[0]))
        return _one_row_attention(q, k_cache, v_cache, s, p, window, scale)
    kvh = k_cache.shape[2]
    g = H // kvh
    out_dtype, q = q.dtype, q.float()
    qg = (q * scale).view(T, kvh, g, hd)
    pos_hi = int(pos.max())
    lo = max(0, int(pos.min()) - window + 1) if window else 0
    m = torch.full((T, kvh, g, 1), -math.inf, dtype=q.dtype, device=q.device)
    l = torch.zeros((T, kvh, g, 1), dtype=q.dtype, device=q.device)
    acc = torch.zeros((T, kvh, g, hd), dtype=q.dtype, device=q.device)
    # Each key block is read once per slot in the tile and multiplied with all the tile's query rows
    # at once (one [T*g, hd] x [hd, B] product per KV head, a fixed shape for a tile size); a row keeps
    # the products with its own slot's keys. A row's sums come from products of the same shape
    # whatever slots the other rows read (a fixed row count keeps CPU matmuls row-invariant).
    slots, row_of = torch.unique(slot, return_inverse=True)
    mine = [(row_of == u)[:, None, None, None] for u in range(slots.shape[0])]
    qm = qg.permute(1, 0, 2, 3).reshape(kvh, T * g, hd)

    def own(products):          # products [U] of [kvh, T*g, n] -> [T, kvh, g, n], each row its slot's
        out = None
        for u, pr in enumerate(products):
            pr = pr.view(kvh, T, g, pr.shape[-1]).permute(1, 0, 2, 3)
            out = pr if out is None else torch.where(mine[u], pr, out)
        return out

    one = int(slots[0]) if slots.shape[0] == 1 else None      # one slot (a prompt): its blocks are slices
    for start, size in key_blocks(lo, pos_hi):
        kpos = torch.arange(start, start + size, device=q.device)
        if one is not None and start + size <= k_cache.shape[1]:
            kb = k_cache[one, start:start + size][None].float()    # [1, B, kvh, hd]
            vb = v_cache[one, start:start + size][None].float()
        else:
            idx = kpos.clamp(max=k_cache.shape[1] - 1)
            kb = k_cache[slots[:, None], idx[None, :]].float()    # [U, B, kvh, hd]
            vb = v_cache[slots[:, None], idx[None, :]].float()
        s = own([torch.matmul(qm, kb[u].permute(1, 2, 0)) for u in range(kb.shape[0])])     # [T, kvh, g, B]
        ok = kpos[None, :] <= pos[:, None]
        if window:
            ok &= kpos[None, :] > (pos[:, None] - window)
        s = s.masked_fill(~ok[:, None, None, :], -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - m_safe)
        alpha = torch.exp(m - m_safe)
        l = l * alpha + p.sum(-1, keepdim=True)
        pm = p.permute(1, 0, 2, 3).reshape(kvh, T * g, size)
        acc = acc * alpha + own([torch.matmul(pm, vb[u].permute(1, 0, 2)) for u in range(vb.shape[0])])
        m = m_new
    return (acc / l).reshape(T, H, hd).to(out_dtype)


def _one_row_attention(q, k_cache, v_cache, slot: int, pos: int, window: int, scale: float) -> torch.Tensor:
    """A one-row tile (CPU decode rows): a plain softmax over the slot's own keys, read in place. The
    row is alone in its tile whatever else runs, so this is as row-invariant as the blocked path."""
    lo = max(0, pos - window + 1) if window else 0
    return _row_over(q, k_cache[slot, lo:pos + 1].float(), v_cache[slot, lo:pos + 1].float(), scale)


def _row_over(q, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """One row's attention over its keys and values k, v [L, kvh, hd] (float32, rows kvh * hd apart)."""
    _, H, hd = q.shape
    k = k.permute(1, 2, 0)                                      # [kvh, hd, L]
    v = v.permute(1, 0, 2)                                      # [kvh, L, hd]
    qg = (q.float() * scale).view(k.shape[0], H // k.shape[0], hd)
    p = torch.softmax(torch.matmul(qg, k), dim=-1)
    return torch.matmul(p, v).reshape(1, H, hd).to(q.dtype)


def _rows_attention(q, k_cache, v_cache, slots: list[int], pos: list[int], window: int, scale: float) -> torch.Tensor:
    """A CPU decode tile's rows, each with the bits a one-row tile gives it (_one_row_attention). A run of
    rows of one slot at consecutive positions (a draft window's) converts that slot's keys and values to
    float32 once, and each row multiplies its own part of them: the same values with the same strides, a
    fresh buffer's alignment where a part starts past a whole 64 bytes (sliding windows), so the same
    products. Where engine.cpu_attention's kernel does not run (no AVX512-BF16, STRATA_CPU_ATTN=0): a
    --spec 4 window of the default model converted its slot's cache four times a layer, a third of the
    window (2 cores, `strata bench --model default --devices cpu --spec 4`, 2026-12-05)."""
    out, i, n = [], 0, len(slots)
    while i < n:
        j = i + 1
        while j < n and slots[j] == slots[i] and pos[j] == pos[j - 1] + 1:
            j += 1
        los = [max(0, p - window + 1) if window else 0 for p in pos[i:j]]
        k = k_cache[slots[i], los[0]:pos[j - 1] + 1].float()
        v = v_cache[slots[i], los[0]:pos[j - 1] + 1].float()
        row_bytes = k[0].numel() * 4
        for r, lo in zip(range(i, j), los):
            a, b = lo - los[0], pos[r] + 1 - los[0]
            kr, vr = k[a:b], v[a:b]
            if a and k_cache.dtype != torch.float32 and (a * row_bytes) % 64:
                kr, vr = kr.clone(), vr.clone()
            out.append(_row_over(q[r:r + 1], kr, vr, scale))
        i = j
    return torch.cat(out)


def glu(gate: torch.Tensor, up: torch.Tensor, gelu: bool) -> torch.Tensor:
    act = F.gelu(gate, approximate="tanh") if gelu else F.silu(gate)
    return act * up
