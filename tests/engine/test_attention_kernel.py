"""The GPU tile attention (engine.kernels.attention) against plain torch, under TRITON_INTERPRET=1 here:
query heads sharing a KV head (a group of 3 too), a sliding window, and
padding rows past the tile's real count (zeros, no keys read)."""
from __future__ import annotations

import math

import pytest
import torch

from tests.engine.test_packed import DEV, kernel_module


@pytest.fixture(scope="module")
def attn():
    return kernel_module("attention")


def reference(q, kc, vc, slot, pos, window, scale):
    T, H, hd = q.shape
    g = H // kc.shape[2]
    out = torch.zeros(T, H, hd, dtype=torch.float64)
    for t in range(T):
        lo = max(0, int(pos[t]) - window + 1) if window > 0 else 0
        k = kc[int(slot[t]), lo:int(pos[t]) + 1].double()
        v = vc[int(slot[t]), lo:int(pos[t]) + 1].double()
        for h in range(H):
            w = torch.softmax(k[:, h // g] @ q[t, h].double() * scale, 0)
            out[t, h] = w @ v[:, h // g]
    return out


def checked(attn, heads, kv, hd, window, seed, positions):
    """Six rows over three slots of an 80-position cache: the kernel's output, checked against torch
    and with the last two rows as padding; returns (out, the call's arguments)."""
    gen = torch.Generator().manual_seed(seed)
    kc = torch.randn(3, 80, kv, hd, generator=gen).to(DEV)
    vc = torch.randn(3, 80, kv, hd, generator=gen).to(DEV)
    q = torch.randn(6, heads, hd, generator=gen).to(DEV)
    slot = torch.tensor([0, 1, 2, 0, 2, 2], device=DEV)
    pos = torch.tensor(positions, device=DEV)
    scale = 1 / math.sqrt(hd)
    out = attn.tile_attention(q, kc, vc, slot, pos, window, scale)
    ref = reference(q.cpu(), kc.cpu(), vc.cpu(), slot.cpu(), pos.cpu(), window, scale)
    assert torch.allclose(out.cpu().double(), ref, atol=1e-5)
    part = attn.tile_attention(q, kc, vc, slot, pos, window, scale, n_real=torch.tensor([4], device=DEV))
    assert torch.equal(part[:4], out[:4]) and not part[4:].any()
    return out, (q, kc, vc, slot, pos, window, scale)


@pytest.mark.parametrize("heads,kv,hd,window", [(9, 3, 64, 0), (8, 2, 32, 0), (4, 4, 16, 5)])
def test_tile_attention_matches_torch_and_zeroes_padding_rows(attn, monkeypatch, heads, kv, hd, window):
    """One program per (row, head): prompt tiles, and decode tiles under STRATA_ATTN_SPLIT=0."""
    monkeypatch.setattr(attn, "SPLIT", False)
    checked(attn, heads, kv, hd, window, heads * 7 + hd, [0, 17, 79, 40, 3, 0])


@pytest.mark.parametrize("heads,kv,hd,window", [(9, 3, 64, 0), (4, 4, 16, 5), (8, 2, 32, 30)])
def test_split_attention_for_decode_tiles_matches_torch_and_is_row_invariant(attn, monkeypatch, heads, kv, hd,
                                                                               window):
    """The decode tiles' default: keys in chunks walked by separate programs, merged per row in chunk order
    (8-key blocks here, so an 80-position cache has ten chunks of one block and rows span one to ten)."""
    monkeypatch.setattr(attn, "SPLIT", True)
    monkeypatch.setattr(attn, "BLOCK_N", 8)
    assert attn.chunk_keys(80, 8) == 8 and attn.chunk_keys(4096, 8) == 256
    out, (q, kc, vc, slot, pos, window, scale) = checked(attn, heads, kv, hd, window, heads * 5 + hd,
                                                         [0, 33, 79, 40, 3, 64])
    for t in (2, 5):                                    # a row alone: the same bits
        alone = attn.tile_attention(q[t:t + 1], kc, vc, slot[t:t + 1], pos[t:t + 1], window, scale)
        assert torch.equal(alone[0], out[t])


def test_fused_split_attention_merges_in_its_last_chunk_program(attn, monkeypatch):
    """STRATA_ATTN_FUSED=1: the split kernel's last chunk program of each (row, head) merges the chunks
    itself (no merge kernel): the same bits as split + merge, also in the int8 form of the output and for
    padding rows (zeros), and every ticket counter back at 0 for the next launch."""
    from engine.kernels.dp4a_gemv import buffers

    monkeypatch.setattr(attn, "SPLIT", True)
    monkeypatch.setattr(attn, "BLOCK_N", 8)
    gen = torch.Generator().manual_seed(21)
    heads, kv, hd = 4, 2, 32
    kc = torch.randn(3, 80, kv, hd, generator=gen).to(DEV)
    vc = torch.randn(3, 80, kv, hd, generator=gen).to(DEV)
    q = torch.randn(5, heads, hd, generator=gen).to(DEV)
    slot = torch.tensor([0, 1, 2, 0, 2], device=DEV)
    pos = torch.tensor([0, 33, 79, 40, 7], device=DEV)
    n_real = torch.tensor([4], device=DEV)
    real_empty = torch.empty

    def poisoned(*a, **k):          # memory nobody wrote reads as NaN (or 77): a merge before the last
        t = real_empty(*a, **k)     # chunk's state exists cannot pass for a right one
        return t.fill_(float("nan") if t.is_floating_point() else 77)

    got = []
    for fused in (False, True):
        monkeypatch.setattr(attn, "FUSED", fused)
        monkeypatch.setattr(torch, "empty", poisoned)
        q8 = buffers(5, heads * hd, DEV)
        out = attn.tile_attention(q, kc, vc, slot, pos, 0, 1 / math.sqrt(hd), n_real=n_real, q8=q8)
        monkeypatch.setattr(torch, "empty", real_empty)
        got.append((out, *q8))
    assert all(torch.equal(a, b) for a, b in zip(*got))
    assert got[1][0][:4].any() and not got[1][0][4:].any()
    assert not attn.tickets(q.device, 5 * heads)[:5 * heads].any()
