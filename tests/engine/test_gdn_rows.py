"""The gated delta net's recurrence as Triton kernels (engine.kernels.gdn_rows) against its torch form
(engine.gdn.rows), under TRITON_INTERPRET=1 here: a tile holding two slots' rows interleaved (each row
needs what its slot's earlier rows in the tile wrote), a slot continuing from an earlier window, a row
at position 0, padding rows; tiled and grouped value heads; the rings and outputs agree."""
from __future__ import annotations

import pytest
import torch

from engine.config import STATE_RING
from engine.gdn import L2_EPS, rows
from tests.engine.test_packed import DEV, kernel_module


@pytest.fixture(scope="module")
def gr():
    return kernel_module("gdn_rows")


def rings(gen, nk, nv, hd, slots):
    channels = 2 * nk * hd + nv * hd
    conv = torch.randn(slots, STATE_RING, channels, generator=gen).to(DEV)
    state = (torch.randn(slots, STATE_RING, nv, hd, hd, generator=gen) * 0.1).to(DEV)
    return channels, conv, state


def row_inputs(gen, T: int, channels: int, nv: int):
    """A tile's conv inputs [T, channels], log decays and betas [T, nv]."""
    mixed = torch.randn(T, channels, generator=gen).to(DEV)
    return mixed, -torch.rand(T, nv, generator=gen).to(DEV), torch.rand(T, nv, generator=gen).to(DEV)


@pytest.mark.parametrize("tiled", [True, False], ids=["tiled", "grouped"])
def test_the_kernel_walks_rows_like_the_torch_recurrence(gr, tiled):
    nk, nv, hd, K, slots = 2, 4, 64, 4, 3                # 64: two programs of state columns per value head
    gen = torch.Generator().manual_seed(7 + tiled)
    channels, conv, state = rings(gen, nk, nv, hd, slots)
    conv_w = (torch.randn(channels, K, generator=gen) * 0.5).to(DEV)
    # slot 1 continues at 9..11 from an earlier window; slot 0 starts a prompt at 0..2; then padding
    slot = torch.tensor([1, 0, 1, 0, 1, 0, 2, 2], device=DEV)
    pos = torch.tensor([9, 0, 10, 1, 11, 2, 0, 0], device=DEV)
    n_real, T = 6, 8
    mixed, g, beta = row_inputs(gen, T, channels, nv)
    args = (mixed, g, beta, conv_w, slot, pos, n_real)
    ref_conv, ref_state = conv.clone(), state.clone()
    ref = rows(*args, ref_conv, ref_state, nk, nv, hd, tiled, L2_EPS)
    # the real rows' count as a device scalar (as inside a CUDA graph, where n_real is the tile's size)
    twin_conv, twin_state = conv.clone(), state.clone()
    twin = gr.gdn_rows(*args[:-1], T, twin_conv, twin_state, nk, nv, hd, tiled, L2_EPS,
                       n_dev=torch.tensor([n_real], device=DEV))
    out = gr.gdn_rows(*args, conv, state, nk, nv, hd, tiled, L2_EPS)
    assert torch.equal(twin, out) and torch.equal(twin_conv, conv) and torch.equal(twin_state, state)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    assert not out[n_real:].any()
    assert torch.equal(conv, ref_conv)
    torch.testing.assert_close(state, ref_state, rtol=1e-4, atol=1e-5)
    assert not torch.equal(state[1, 11 % STATE_RING], ref_state[1, 8 % STATE_RING])      # it did write


def test_a_prompt_longer_than_the_ring(gr):
    """A tile with more rows of one slot than the ring holds (a prompt tile): each row still gets its
    slot's conv inputs at p-3..p-1 (the first rows from the ring an earlier window wrote, the others from
    the tile), and each ring row ends with the last row that maps to it (the finishing programs run last
    row first under the interpreter: a row STATE_RING positions earlier writing too would show)."""
    nk, nv, hd, K, T = 1, 2, 32, 4, STATE_RING + 12
    gen = torch.Generator().manual_seed(3)
    channels, conv, state = rings(gen, nk, nv, hd, 1)
    conv_w = (torch.randn(channels, K, generator=gen) * 0.5).to(DEV)
    slot = torch.zeros(T, dtype=torch.long, device=DEV)
    pos = torch.arange(20, 20 + T, device=DEV)                   # continues a slot from an earlier window
    mixed, g, beta = row_inputs(gen, T, channels, nv)
    args = (mixed, g, beta, conv_w, slot, pos, T)
    ref_conv, ref_state = conv.clone(), state.clone()
    ref = rows(*args, ref_conv, ref_state, nk, nv, hd, True, L2_EPS)
    out = gr.gdn_rows(*args, conv, state, nk, nv, hd, True, L2_EPS)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(state, ref_state, rtol=1e-4, atol=1e-5)
    assert torch.equal(conv, ref_conv)


def test_the_gated_kernel_is_the_mixer_from_its_projections(gr):
    """gdn_gated: the decay and beta from the projections a and b, the recurrence, and the gated RMSNorm
    (weight * norm(o) * silu(z)) in the kernel: what engine.gdn.delta_net computes in torch ops."""
    from types import SimpleNamespace

    import torch.nn.functional as F

    nk, nv, hd, K, slots, T, n_real, norm_eps = 2, 4, 64, 4, 3, 6, 5, 1e-6
    gen = torch.Generator().manual_seed(11)
    channels, conv, state = rings(gen, nk, nv, hd, slots)
    w = SimpleNamespace(conv=(torch.randn(channels, K, generator=gen) * 0.5).to(DEV),
                        dt_bias=torch.randn(nv, generator=gen).to(DEV), a=-torch.rand(nv, generator=gen).to(DEV) * 4,
                        norm=torch.randn(hd, generator=gen).to(DEV))
    slot = torch.tensor([1, 0, 1, 0, 1, 2], device=DEV)
    pos = torch.tensor([9, 0, 10, 1, 11, 0], device=DEV)
    mixed = torch.randn(T, channels, generator=gen).to(DEV)
    z = torch.randn(T, nv, hd, generator=gen).to(DEV)
    b, a = torch.randn(T, nv, generator=gen).to(DEV), (torch.randn(T, nv, generator=gen) * 8).to(DEV)
    ref_conv, ref_state = conv.clone(), state.clone()
    g = F.softplus(a + w.dt_bias) * w.a
    out = rows(mixed, g, torch.sigmoid(b), w.conv, slot, pos, n_real, ref_conv, ref_state, nk, nv, hd, True, L2_EPS)
    ref = (out * torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + norm_eps) * w.norm * F.silu(z)).reshape(T, -1)
    y = gr.gdn_gated(mixed, z, b, a, w, slot, pos, n_real, conv, state, nk, nv, hd, True, L2_EPS, norm_eps,
                     torch.float32)
    ref[n_real:] = 0
    torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(state, ref_state, rtol=1e-4, atol=1e-5)
    assert not y[n_real:].any() and y[:n_real].abs().min(dim=-1).values.gt(0).all()
