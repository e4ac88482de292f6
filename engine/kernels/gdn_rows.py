"""The gated delta net's per-row recurrence on the GPU: one program per value head walks the tile's real
rows in order (engine.gdn.rows is the torch form it replaces there, with the same ring conventions).

For row t (slot s, position p) and value head j: the row's conv inputs go into the slot's conv ring at p;
the causal conv over positions p-K+1..p (zeros before 0) and SiLU give q and k of j's key head and j's
v; q and k are l2-normalised (q also scaled by 1/sqrt(head size)); the state S (head size x head size)
is the ring's at p-1 (zeros at p = 0), decays by exp(g), takes the delta rule's update and goes into
the ring at p; the output is q's product with the new S.

Why one program per value head: heads are independent, while a slot's rows depend on each other in
order; a program runs its rows one after another and reads back only what it wrote itself, after a
barrier: its v channels, its state, and its own copy of its key head's q and k inputs (the ring's last
channels; engine.gdn.state_buffers). Reading q and k from the channels that every program of the key
head writes would race on a tile with more than STATE_RING - K rows of one slot (a prompt): a program
that ran that far ahead overwrites the ring row a slower one has yet to read. (The kernel also writes
those shared channels, as the torch form does, and never reads them.) No host synchronisation: slots,
positions and the real rows' count are read on the device. A row's result depends on its slot's ring
and its own inputs only, computed in the same order whatever the tile holds.
Importing this module imports triton.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

WARPS = 8
BJ = 32                         # state columns per step (a [head size, BJ] block in registers)


@triton.jit
def _conv(mixed_ptr, ring_ptr, w_ptr, t, s, p, ch, rch, stride_mt, stride_rs, stride_rr, RING, K: tl.constexpr):
    """SiLU of the causal conv of channels ch at row t (the ring's earlier positions, at ring channels rch;
    this row's input)."""
    acc = tl.load(mixed_ptr + t * stride_mt + ch) * tl.load(w_ptr + ch * K + (K - 1))
    for i in tl.static_range(K - 1):
        q = p - (K - 1) + i
        back = tl.load(ring_ptr + s * stride_rs + ((q + RING) % RING) * stride_rr + rch, mask=ch * 0 + q >= 0,
                       other=0.0)
        acc += back * tl.load(w_ptr + ch * K + i)
    return acc / (1.0 + tl.exp(-acc))


@triton.jit
def _gdn_rows_kernel(mixed_ptr, g_ptr, beta_ptr, w_ptr, conv_ring_ptr, state_ring_ptr, out_ptr, slot_ptr,
                     pos_ptr, n_ptr, stride_mt, stride_cs, stride_cr, stride_ss, stride_sr, stride_sh, NK, NV,
                     RING, eps, q_scale, dtb_ptr, A_ptr, z_ptr, nw_ptr, y_ptr, norm_eps, HD: tl.constexpr,
                     K: tl.constexpr, TILED: tl.constexpr, BJ: tl.constexpr, GATED: tl.constexpr):
    j = tl.program_id(0)
    if TILED:
        kh = j % NK
    else:
        kh = j // (NV // NK)
    kd = NK * HD
    d = tl.arange(0, HD)
    e = tl.arange(0, BJ)
    qc = kh * HD + d
    kc = kd + kh * HD + d
    own_q = 2 * kd + NV * HD + j * 2 * HD + d         # this program's copies of q's and k's inputs
    own_k = own_q + HD
    for t in range(tl.load(n_ptr)):
        s = tl.load(slot_ptr + t).to(tl.int64)
        p = tl.load(pos_ptr + t).to(tl.int32)
        at = s * stride_cs + (p % RING) * stride_cr
        # this row's conv inputs into the ring: q and k into the shared channels (the same values from each
        # value head of kh; never read here) and into this program's own, v into its channels
        xq = tl.load(mixed_ptr + t * stride_mt + qc)
        xk = tl.load(mixed_ptr + t * stride_mt + kc)
        tl.store(conv_ring_ptr + at + qc, xq)
        tl.store(conv_ring_ptr + at + kc, xk)
        tl.store(conv_ring_ptr + at + own_q, xq)
        tl.store(conv_ring_ptr + at + own_k, xk)
        vc = 2 * kd + j * HD + d
        tl.store(conv_ring_ptr + at + vc, tl.load(mixed_ptr + t * stride_mt + vc))
        cq = _conv(mixed_ptr, conv_ring_ptr, w_ptr, t, s, p, qc, own_q, stride_mt, stride_cs, stride_cr, RING, K)
        ck = _conv(mixed_ptr, conv_ring_ptr, w_ptr, t, s, p, kc, own_k, stride_mt, stride_cs, stride_cr, RING, K)
        q = cq * tl.rsqrt(tl.sum(cq * cq, 0) + eps) * q_scale
        k = ck * tl.rsqrt(tl.sum(ck * ck, 0) + eps)
        if GATED:       # g_ptr / beta_ptr hold the projections a and b: the decay and beta from them here
            a = tl.load(g_ptr + t * NV + j) + tl.load(dtb_ptr + j)
            decay = tl.exp(tl.where(a > 20.0, a, tl.log(1.0 + tl.exp(tl.minimum(a, 20.0)))) * tl.load(A_ptr + j))
            beta = 1.0 / (1.0 + tl.exp(-tl.load(beta_ptr + t * NV + j)))
        else:
            decay = tl.exp(tl.load(g_ptr + t * NV + j))
            beta = tl.load(beta_ptr + t * NV + j)
        ss = 0.0
        prev = state_ring_ptr + s * stride_ss + ((p - 1 + RING) % RING) * stride_sr + j * stride_sh
        here = state_ring_ptr + s * stride_ss + (p % RING) * stride_sr + j * stride_sh
        for jb in tl.static_range(HD // BJ):    # columns of S in blocks: each column is independent
            col = jb * BJ + e
            v = _conv(mixed_ptr, conv_ring_ptr, w_ptr, t, s, p, 2 * kd + j * HD + col, 2 * kd + j * HD + col,
                      stride_mt, stride_cs, stride_cr, RING, K)
            S = tl.load(prev + d[:, None] * HD + col[None, :], mask=d[:, None] * 0 + col[None, :] * 0 + p > 0,
                        other=0.0) * decay
            delta = (v - tl.sum(S * k[:, None], 0)) * beta
            S = S + k[:, None] * delta[None, :]
            tl.store(here + d[:, None] * HD + col[None, :], S)
            o = tl.sum(S * q[:, None], 0)
            tl.store(out_ptr + (t * NV + j) * HD + col, o)
            if GATED:
                ss += tl.sum(o * o, 0)
        tl.debug_barrier()          # the next row reads this one's ring rows (and the gate its outputs)
        if GATED:                   # the gated RMSNorm of the head's output: weight * norm(o) * silu(z)
            r = tl.rsqrt(ss / HD + norm_eps)
            for jb in tl.static_range(HD // BJ):
                at_o = (t * NV + j) * HD + jb * BJ + e
                z = tl.load(z_ptr + at_o)
                y = tl.load(out_ptr + at_o) * r * tl.load(nw_ptr + jb * BJ + e) * (z / (1.0 + tl.exp(-z)))
                tl.store(y_ptr + at_o, y.to(y_ptr.dtype.element_ty))


def gdn_rows(mixed: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, conv_w: torch.Tensor, slot: torch.Tensor,
             pos: torch.Tensor, n_real: int, conv_ring: torch.Tensor, state_ring: torch.Tensor, nk: int, nv: int,
             hd: int, tiled: bool, eps: float, n_dev: torch.Tensor | None = None) -> torch.Tensor:
    """mixed [T, channels], g / beta [T, nv] (float32); rings as engine.gdn.state_buffers -> out [T, nv, hd]
    (rows from n_real on: zeros). n_dev: the count of real rows as a device scalar, read by the kernel
    (inside a CUDA graph, where n_real is the tile's size; padding rows then cost nothing)."""
    out = torch.zeros((mixed.shape[0], nv, hd), dtype=torch.float32, device=mixed.device)
    _launch(mixed, g, beta, conv_w, slot, pos, n_real, conv_ring, state_ring, nk, nv, hd, tiled, eps, n_dev, out)
    return out


def gdn_gated(mixed: torch.Tensor, z: torch.Tensor, b: torch.Tensor, a: torch.Tensor, w, slot: torch.Tensor,
              pos: torch.Tensor, n_real: int, conv_ring: torch.Tensor, state_ring: torch.Tensor, nk: int, nv: int,
              hd: int, tiled: bool, eps: float, norm_eps: float, dtype: torch.dtype,
              n_dev: torch.Tensor | None = None) -> torch.Tensor:
    """The mixer from its projections to the out matrix's input in one launch: mixed [T, channels], z
    [T, nv, hd], b and a [T, nv] (float32), w the block's DeltaNetWeights -> weight * rmsnorm(o) * silu(z),
    [T, nv * hd] in dtype (padding rows: zeros), as engine.gdn.delta_net computes it in torch ops."""
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
    mixed, g, beta = mixed.contiguous(), g.contiguous(), beta.contiguous()
    dtb, A, z, nw, y, norm_eps = gated if gated is not None else (g, g, out, g, out, 0.0)
    _gdn_rows_kernel[(nv,)](mixed, g, beta, conv_w.contiguous(), conv_ring, state_ring, out, slot, pos, n_dev,
                            mixed.stride(0), conv_ring.stride(0), conv_ring.stride(1), state_ring.stride(0),
                            state_ring.stride(1), state_ring.stride(2), nk, nv, conv_ring.shape[1], eps,
                            hd ** -0.5, dtb, A, z, nw, y, norm_eps, HD=hd, K=conv_w.shape[1], TILED=tiled,
                            BJ=min(BJ, hd), GATED=gated is not None, num_warps=WARPS)
