"""The gated delta net mixer of hybrid blocks (qwen35 / qwen35moe / qwen3next), row by row on a tile.

Each slot keeps, per delta net layer, a ring of STATE_RING rows indexed by position: the conv's input
at that position and the recurrent state after it (one [head size x head size] matrix per value head).
A row at position p reads the ring at p-1 (and the conv inputs back to p-kernel+1) and writes p, so the
ring behaves like the KV cache: a window's rejected rows are overwritten by the next window's rows at
the same positions, and nothing needs committing after a verdict. The ring holds a window's rows as
long as a slot is offered at most STATE_RING - kernel proposals (engine.drafts caps the depth).

Rows run one after another in tile order (a slot's rows are in position order), each from its own
slot's ring and its own projections, so a row's result does not depend on the other rows of its
tile. Conventions follow llama.cpp's qwen35 and qwen3next graphs: value heads in tiled order (qwen35:
value head j reads key head j mod key heads) or grouped (qwen3next), l2-normalised q and k, q scaled
by 1/sqrt(head size), decay g = a * softplus(alpha + dt_bias), then the gated RMSNorm
(weight * norm(o) * silu(z)) of each value head.
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F

from engine.config import STATE_RING, ModelConfig
from engine.weights import DeltaNetWeights, linears

L2_EPS = 1e-6
# GPU stages run the recurrence as Triton kernels (engine.kernels.gdn_rows: no host sync, so hybrid
# stages replay CUDA graphs); STRATA_GPU_GDN=0 keeps the torch rows (eager, one row at a time)
GPU_ROWS = os.environ.get("STRATA_GPU_GDN", "1") != "0"


def state_buffers(cfg: ModelConfig, n_slots: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(conv ring [slots, STATE_RING, conv channels], state ring [slots, STATE_RING, v heads, hd, hd]),
    zeros."""
    hd = cfg.ssm_head_dim
    conv = torch.zeros((n_slots, STATE_RING, cfg.ssm_conv_dim), dtype=torch.float32, device=device)
    state = torch.zeros((n_slots, STATE_RING, cfg.ssm_v_heads, hd, hd), dtype=torch.float32, device=device)
    return conv, state


def _l2norm(x: torch.Tensor, eps: float = L2_EPS) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def _per_value_head(x: torch.Tensor, nv: int, tiled: bool) -> torch.Tensor:
    """[key heads, hd] -> [value heads, hd]: value head j reads key head j mod key heads (tiled, qwen35)
    or j // (value heads / key heads) (grouped, qwen3next)."""
    r = nv // x.shape[0]
    return x.repeat(r, 1) if tiled else x.repeat_interleave(r, 0)


def _projections(w: DeltaNetWeights, cfg: ModelConfig, h: torch.Tensor):
    """(conv input [T, channels], z [T, nv, hd], b [T, nv], a [T, nv]) in float32."""
    T, nk, nv, hd = h.shape[0], cfg.ssm_k_heads, cfg.ssm_v_heads, cfg.ssm_head_dim
    if w.qkvz is not None:                     # per key head: q, k, then its value heads' v and z
        x = w.qkvz.linear(h, T).float().view(T, nk, 2 * hd + 2 * (nv // nk) * hd)
        q, k, v, z = x.split([hd, hd, (nv // nk) * hd, (nv // nk) * hd], dim=-1)
        mixed = torch.cat((q.reshape(T, -1), k.reshape(T, -1), v.reshape(T, -1)), dim=-1)
        z = z.reshape(T, nv, hd)
    else:
        mixed, z = (y.float() for y in linears([w.qkv, w.gate], w.qkv_gate, h, T))
        z = z.reshape(T, nv, hd)
    if w.ba is not None:                       # per key head: its value heads' b, then their a
        b, a = w.ba.linear(h, T).float().view(T, nk, 2 * (nv // nk)).chunk(2, dim=-1)
        return mixed, z, b.reshape(T, nv), a.reshape(T, nv)
    b, a = linears([w.beta, w.alpha], w.beta_alpha, h, T)
    return mixed, z, b.float(), a.float()


def rows(mixed: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, conv_w: torch.Tensor, slot: torch.Tensor,
         pos: torch.Tensor, n_real: int, conv_ring: torch.Tensor, state_ring: torch.Tensor, nk: int, nv: int,
         hd: int, tiled: bool, eps: float = L2_EPS) -> torch.Tensor:
    """The recurrence row by row (torch; engine.kernels.gdn_rows on a GPU): conv inputs mixed [T, channels],
    log decays g and betas [T, nv] -> out [T, nv, hd] (rows from n_real on: zeros); writes the rings."""
    T, K, kd, C = mixed.shape[0], conv_w.shape[1], nk * hd, mixed.shape[1]
    out = torch.zeros((T, nv, hd), dtype=torch.float32, device=mixed.device)
    slots, poss = slot.tolist(), pos.tolist()
    for t in range(n_real):
        s, p = slots[t], poss[t]
        conv_ring[s, p % STATE_RING, :C] = mixed[t]
        back = torch.tensor([(p - K + 1 + i) % STATE_RING for i in range(K)], device=mixed.device)
        window = conv_ring[s, back, :C]                                 # [K, channels], oldest first
        if p < K - 1:                                                   # positions before 0 read zeros
            window = torch.cat((torch.zeros_like(window[: K - 1 - p]), window[K - 1 - p:]))
        c = F.silu((window.t() * conv_w).sum(-1))                       # [channels]
        q = _per_value_head(_l2norm(c[:kd].view(nk, hd), eps), nv, tiled) * hd ** -0.5
        k = _per_value_head(_l2norm(c[kd:2 * kd].view(nk, hd), eps), nv, tiled)
        v = c[2 * kd:].view(nv, hd)
        S = state_ring[s, (p - 1) % STATE_RING] if p > 0 else torch.zeros_like(state_ring[s, 0])
        S = S * g[t].exp()[:, None, None]
        delta = (v - (S * k[:, :, None]).sum(-2)) * beta[t][:, None]
        S = S + k[:, :, None] * delta[:, None, :]
        state_ring[s, p % STATE_RING] = S
        out[t] = (S * q[:, :, None]).sum(-2)
    return out


def delta_net(w: DeltaNetWeights, cfg: ModelConfig, h: torch.Tensor, slot: torch.Tensor, pos: torch.Tensor,
              n_real: int, conv_ring: torch.Tensor, state_ring: torch.Tensor,
              n_dev: torch.Tensor | None = None) -> torch.Tensor:
    """The mixer's output for a tile's normed rows h [T, d] (padding rows give zeros; n_dev: the real
    rows' count on the device, for the GPU kernel)."""
    T = h.shape[0]
    hd, nk, nv = cfg.ssm_head_dim, cfg.ssm_k_heads, cfg.ssm_v_heads
    mixed, z, b, a = _projections(w, cfg, h)
    if h.is_cuda and GPU_ROWS:           # the decay, beta, recurrence and gated norm in three kernels
        from engine.kernels.gdn_rows import gdn_gated

        o = gdn_gated(mixed, z, b, a, w, slot, pos, n_real, conv_ring, state_ring, nk, nv, hd, cfg.ssm_tiled,
                      L2_EPS, cfg.norm_eps, h.dtype, n_dev)
        return w.out.linear(o, T)
    beta = torch.sigmoid(b)                                             # [T, nv]
    g = F.softplus(a + w.dt_bias) * w.a                                 # [T, nv], log of the decay
    out = rows(mixed, g, beta, w.conv, slot, pos, n_real, conv_ring, state_ring, nk, nv, hd, cfg.ssm_tiled, L2_EPS)
    o = out * torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + cfg.norm_eps) * w.norm * F.silu(z)
    return w.out.linear(o.reshape(T, nv * hd).to(h.dtype), T)
