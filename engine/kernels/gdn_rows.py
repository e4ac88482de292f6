"""The gated delta net's per-row recurrence on the GPU (engine.gdn.rows is the torch form it replaces there,
with the same ring conventions), as three launches:

1. conv (one program per row and head): the causal conv over positions p-K+1..p and SiLU of each row's q,
   k (l2-normalised, q also scaled by 1/sqrt(head size)) and v inputs. An earlier position's input comes
   from the tile where an earlier row of the tile holds it (the last such row), else from the slot's
   conv ring (written by earlier launches; zeros before position 0).
2. scan (one program per value head and block of BJ state columns): walks the tile's rows in order. A
   column of the state S (head size x head size) depends on its own column only, so the columns split
   over programs. S stays in registers from a row to the next row of its slot at the next position, and
   is read from the state ring at p-1 otherwise (zeros at p = 0); it decays by exp(g), takes the delta
   rule's update, goes into the ring at p, and the row's output is q's product with it.
3. finish (one program per row and value head): the row's conv inputs into the conv ring at p, by the last
   row of the tile at that ring row only (a prompt tile holds rows STATE_RING positions apart); and, for
   the mixer, the gated RMSNorm weight * norm(o) * silu(z).

Before, one program per value head walked the rows and read each row's state and conv inputs back from
the rings (H200, qwen3.5-35b-a3b shape: 155.7 ms of a 234.7 ms 512-row prompt tile, rows one after
another at a global round trip each). Now no launch reads what the same launch writes, except a scan
program its own state columns, so the order programs run in does not matter. No host synchronisation:
slots, positions and the real rows' count are read on the device. A row's result depends on its slot's
rings and its slot's rows, computed in the same order whatever else the tile holds.
Importing this module imports triton.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

BJ = 32                         # state columns per scan program (a [head size, BJ] block in registers)
BT = 128                        # rows compared at a time when a row looks for its slot's earlier rows


@triton.jit
def _earlier_row(slot_ptr, pos_ptr, t, s, q, BT: tl.constexpr):
    """The last row before t in the tile holding slot s at position q, or -1."""
    found = t * 0 - 1
    for u0 in range(0, t, BT):
        u = u0 + tl.arange(0, BT)
        ok = u < t
        hit = ok & (tl.load(slot_ptr + u, mask=ok, other=-1).to(tl.int64) == s) \
            & (tl.load(pos_ptr + u, mask=ok, other=-1).to(tl.int32) == q)
        found = tl.maximum(found, tl.max(tl.where(hit, u, -1), 0))
    return found


@triton.jit
def _conv(mixed_ptr, ring_ptr, w_ptr, slot_ptr, pos_ptr, t, s, p, ch, stride_mt, stride_rs, stride_rr, RING,
          K: tl.constexpr, BT: tl.constexpr):
    """SiLU of the causal conv of channels ch at row t (slot s, position p)."""
    acc = tl.load(mixed_ptr + t * stride_mt + ch) * tl.load(w_ptr + ch * K + (K - 1))
    for i in tl.static_range(K - 1):
        q = p - (K - 1) + i
        u = _earlier_row(slot_ptr, pos_ptr, t, s, q, BT)
        here = ch * 0 + u >= 0
        tile = tl.load(mixed_ptr + u * stride_mt + ch, mask=here, other=0.0)
        ring = tl.load(ring_ptr + s * stride_rs + ((q + RING) % RING) * stride_rr + ch,
                       mask=(ch * 0 + q >= 0) & (ch * 0 + u < 0), other=0.0)
        acc += tl.where(here, tile, ring) * tl.load(w_ptr + ch * K + i)
    return acc / (1.0 + tl.exp(-acc))


@triton.jit
def _conv_kernel(mixed_ptr, w_ptr, ring_ptr, slot_ptr, pos_ptr, n_ptr, qk_ptr, v_ptr, stride_mt, stride_rs,
                 stride_rr, NK, NV, RING, eps, q_scale, HD: tl.constexpr, K: tl.constexpr, BT: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)            # key heads (q and k), then value heads (v)
    if t < tl.load(n_ptr):
        s = tl.load(slot_ptr + t).to(tl.int64)
        p = tl.load(pos_ptr + t).to(tl.int32)
        d = tl.arange(0, HD)
        kd = NK * HD
        if h < NK:
            cq = _conv(mixed_ptr, ring_ptr, w_ptr, slot_ptr, pos_ptr, t, s, p, h * HD + d, stride_mt, stride_rs,
                       stride_rr, RING, K, BT)
            ck = _conv(mixed_ptr, ring_ptr, w_ptr, slot_ptr, pos_ptr, t, s, p, kd + h * HD + d, stride_mt,
                       stride_rs, stride_rr, RING, K, BT)
            tl.store(qk_ptr + (t * 2 * NK + h) * HD + d, cq * tl.rsqrt(tl.sum(cq * cq, 0) + eps) * q_scale)
            tl.store(qk_ptr + (t * 2 * NK + NK + h) * HD + d, ck * tl.rsqrt(tl.sum(ck * ck, 0) + eps))
        else:
            j = h - NK
            cv = _conv(mixed_ptr, ring_ptr, w_ptr, slot_ptr, pos_ptr, t, s, p, 2 * kd + j * HD + d, stride_mt,
                       stride_rs, stride_rr, RING, K, BT)
            tl.store(v_ptr + (t * NV + j) * HD + d, cv)


@triton.jit
def _scan_inputs(qk_ptr, v_ptr, g_ptr, beta_ptr, slot_ptr, pos_ptr, t, n, j, kh, d, col, NK, NV, HD: tl.constexpr):
    """Row t's slot, position, q, k, v and its two per-head scalars (zeros from row n on)."""
    s = tl.load(slot_ptr + t, mask=t < n, other=0).to(tl.int64)
    p = tl.load(pos_ptr + t, mask=t < n, other=0).to(tl.int32)
    q = tl.load(qk_ptr + (t * 2 * NK + kh) * HD + d, mask=d * 0 + t < n, other=0.0)
    k = tl.load(qk_ptr + (t * 2 * NK + NK + kh) * HD + d, mask=d * 0 + t < n, other=0.0)
    v = tl.load(v_ptr + (t * NV + j) * HD + col, mask=col * 0 + t < n, other=0.0)
    ga = tl.load(g_ptr + t * NV + j, mask=t < n, other=0.0)
    gb = tl.load(beta_ptr + t * NV + j, mask=t < n, other=0.0)
    return s, p, q, k, v, ga, gb


@triton.jit
def _scan_kernel(qk_ptr, v_ptr, g_ptr, beta_ptr, state_ptr, out_ptr, slot_ptr, pos_ptr, n_ptr, stride_ss,
                 stride_sr, stride_sh, NK, NV, RING, dtb_ptr, A_ptr, HD: tl.constexpr, TILED: tl.constexpr,
                 BJ: tl.constexpr, GATED: tl.constexpr):
    j = tl.program_id(0)
    if TILED:
        kh = j % NK
    else:
        kh = j // (NV // NK)
    d = tl.arange(0, HD)
    col = tl.program_id(1) * BJ + tl.arange(0, BJ)
    n = tl.load(n_ptr)
    S = tl.zeros((HD, BJ), dtype=tl.float32)
    last_s = tl.load(slot_ptr).to(tl.int64) * 0 - 1      # the slot and position S holds (none yet)
    last_p = tl.load(pos_ptr).to(tl.int32) * 0 - 2
    # each row's inputs are loaded one row ahead, so their latency hides behind the row before
    s_n, p_n, q_n, k_n, v_n, ga_n, gb_n = _scan_inputs(qk_ptr, v_ptr, g_ptr, beta_ptr, slot_ptr, pos_ptr, 0, n,
                                                       j, kh, d, col, NK, NV, HD)
    for t in range(n):
        s, p, q, k, v, ga, gb = s_n, p_n, q_n, k_n, v_n, ga_n, gb_n
        s_n, p_n, q_n, k_n, v_n, ga_n, gb_n = _scan_inputs(qk_ptr, v_ptr, g_ptr, beta_ptr, slot_ptr, pos_ptr, t + 1,
                                                           n, j, kh, d, col, NK, NV, HD)
        if GATED:       # g_ptr / beta_ptr hold the projections a and b: the decay and beta from them here
            a = ga + tl.load(dtb_ptr + j)
            decay = tl.exp(tl.where(a > 20.0, a, tl.log(1.0 + tl.exp(tl.minimum(a, 20.0)))) * tl.load(A_ptr + j))
            beta = 1.0 / (1.0 + tl.exp(-gb))
        else:
            decay = tl.exp(ga)
            beta = gb
        if (s == last_s) & (p == last_p + 1):
            S = S * decay
        else:           # from the ring (this program's own columns: an earlier row of this tile may have written them)
            tl.debug_barrier()
            prev = state_ptr + s * stride_ss + ((p - 1 + RING) % RING) * stride_sr + j * stride_sh
            S = tl.load(prev + d[:, None] * HD + col[None, :], mask=d[:, None] * 0 + col[None, :] * 0 + p > 0,
                        other=0.0) * decay
        delta = (v - tl.sum(S * k[:, None], 0)) * beta
        S = S + k[:, None] * delta[None, :]
        here = state_ptr + s * stride_ss + (p % RING) * stride_sr + j * stride_sh
        tl.store(here + d[:, None] * HD + col[None, :], S)
        tl.store(out_ptr + (t * NV + j) * HD + col, tl.sum(S * q[:, None], 0))
        last_s = s
        last_p = p


@triton.jit
def _finish_kernel(mixed_ptr, ring_ptr, out_ptr, slot_ptr, pos_ptr, n_ptr, stride_mt, stride_rs, stride_rr, NK,
                   NV, RING, z_ptr, nw_ptr, y_ptr, norm_eps, HD: tl.constexpr, BT: tl.constexpr,
                   GATED: tl.constexpr):
    # the last row first: under the interpreter (programs one after another in order) a row that wrote a
    # ring row a later row of its slot also writes would be seen, as it would race on a GPU
    t = tl.num_programs(0) - 1 - tl.program_id(0)
    j = tl.program_id(1)
    n = tl.load(n_ptr)
    if t < n:
        s = tl.load(slot_ptr + t).to(tl.int64)
        p = tl.load(pos_ptr + t).to(tl.int32)
        d = tl.arange(0, HD)
        later = t * 0
        for u0 in range(t + 1, n, BT):       # a later row of the slot at the same ring row writes it instead
            u = u0 + tl.arange(0, BT)
            ok = u < n
            hit = ok & (tl.load(slot_ptr + u, mask=ok, other=-1).to(tl.int64) == s) \
                & (tl.load(pos_ptr + u, mask=ok, other=0).to(tl.int32) % RING == p % RING)
            later += tl.sum(hit.to(tl.int32), 0)
        if later == 0:
            at = ring_ptr + s * stride_rs + (p % RING) * stride_rr
            kd = NK * HD
            vc = 2 * kd + j * HD + d
            tl.store(at + vc, tl.load(mixed_ptr + t * stride_mt + vc))
            if j < NK:
                tl.store(at + j * HD + d, tl.load(mixed_ptr + t * stride_mt + j * HD + d))
                tl.store(at + kd + j * HD + d, tl.load(mixed_ptr + t * stride_mt + kd + j * HD + d))
        if GATED:       # the gated RMSNorm of the head's output: weight * norm(o) * silu(z)
            at_o = (t * NV + j) * HD + d
            o = tl.load(out_ptr + at_o)
            z = tl.load(z_ptr + at_o)
            y = o * tl.rsqrt(tl.sum(o * o, 0) / HD + norm_eps) * tl.load(nw_ptr + d) * (z / (1.0 + tl.exp(-z)))
            tl.store(y_ptr + at_o, y.to(y_ptr.dtype.element_ty))


def gdn_rows(mixed: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, conv_w: torch.Tensor, slot: torch.Tensor,
             pos: torch.Tensor, n_real: int, conv_ring: torch.Tensor, state_ring: torch.Tensor, nk: int, nv: int,
             hd: int, tiled: bool, eps: float, n_dev: torch.Tensor | None = None) -> torch.Tensor:
    """mixed [T, channels], g / beta [T, nv] (float32); rings as engine.gdn.state_buffers -> out [T, nv, hd]
    (rows from n_real on: zeros). n_dev: the count of real rows as a device scalar, read by the kernels
    (inside a CUDA graph, where n_real is the tile's size; padding rows then cost nothing)."""
    out = torch.zeros((mixed.shape[0], nv, hd), dtype=torch.float32, device=mixed.device)
    _launch(mixed, g, beta, conv_w, slot, pos, n_real, conv_ring, state_ring, nk, nv, hd, tiled, eps, n_dev, out)
    return out


def gdn_gated(mixed: torch.Tensor, z: torch.Tensor, b: torch.Tensor, a: torch.Tensor, w, slot: torch.Tensor,
              pos: torch.Tensor, n_real: int, conv_ring: torch.Tensor, state_ring: torch.Tensor, nk: int, nv: int,
              hd: int, tiled: bool, eps: float, norm_eps: float, dtype: torch.dtype,
              n_dev: torch.Tensor | None = None) -> torch.Tensor:
    """The mixer from its projections to the out matrix's input: mixed [T, channels], z [T, nv, hd], b and a
    [T, nv] (float32), w the block's DeltaNetWeights -> weight * rmsnorm(o) * silu(z), [T, nv * hd] in
    dtype (padding rows: zeros), as engine.gdn.delta_net computes it in torch ops."""
    T = mixed.shape[0]
    y = torch.zeros((T, nv * hd), dtype=dtype, device=mixed.device)
    out = torch.empty((T, nv, hd), dtype=torch.float32, device=mixed.device)
    _launch(mixed, a, b, w.conv, slot, pos, n_real, conv_ring, state_ring, nk, nv, hd, tiled, eps, n_dev, out,
            (w.dt_bias, w.a, z.contiguous(), w.norm, y, norm_eps))
    return y


def _launch(mixed, g, beta, conv_w, slot, pos, n_real, conv_ring, state_ring, nk, nv, hd, tiled, eps, n_dev, out,
            gated=None) -> None:
    if n_dev is None and n_real == 0:
        return
    if n_dev is None:
        n_dev = torch.full((1,), n_real, dtype=torch.int32, device=mixed.device)
    T = mixed.shape[0]
    mixed, g, beta = mixed.contiguous(), g.contiguous(), beta.contiguous()
    dtb, A, z, nw, y, norm_eps = gated if gated is not None else (g, g, out, g, out, 0.0)
    K, ring = conv_w.shape[1], conv_ring.shape[1]
    qk = torch.empty((T, 2, nk, hd), dtype=torch.float32, device=mixed.device)
    v = torch.empty((T, nv, hd), dtype=torch.float32, device=mixed.device)
    _conv_kernel[(T, nk + nv)](mixed, conv_w.contiguous(), conv_ring, slot, pos, n_dev, qk, v, mixed.stride(0),
                               conv_ring.stride(0), conv_ring.stride(1), nk, nv, ring, eps, hd ** -0.5, HD=hd, K=K,
                               BT=BT, num_warps=4)
    bj = min(BJ, hd)
    _scan_kernel[(nv, hd // bj)](qk, v, g, beta, state_ring, out, slot, pos, n_dev, state_ring.stride(0),
                                 state_ring.stride(1), state_ring.stride(2), nk, nv, ring, dtb, A, HD=hd,
                                 TILED=tiled, BJ=bj, GATED=gated is not None, num_warps=4)
    _finish_kernel[(T, nv)](mixed, conv_ring, out, slot, pos, n_dev, mixed.stride(0), conv_ring.stride(0),
                            conv_ring.stride(1), nk, nv, ring, z, nw, y, norm_eps, HD=hd, BT=BT,
                            GATED=gated is not None, num_warps=4)
