"""The CPU attention of a tile of rows (engine.layers.attention): each key block is multiplied with all
the tile's rows per slot, and a row keeps its own slot's products. A row's result must not depend on
which slots the other rows of its tile read (one slot, several, padding rows), and must be attention."""
from __future__ import annotations

import math

import pytest
import torch

from engine.layers import attention

T, H, KVH, HD, CTX = 32, 6, 2, 16, 200


def case(seed=0):
    gen = torch.Generator().manual_seed(seed)
    kc = torch.randn(5, CTX, KVH, HD, generator=gen).to(torch.bfloat16)
    vc = torch.randn(5, CTX, KVH, HD, generator=gen).to(torch.bfloat16)
    q = torch.randn(T, H, HD, generator=gen).to(torch.bfloat16)
    return kc, vc, q


def reference(q, kc, vc, slot, pos, window, scale):
    out = torch.zeros(q.shape, dtype=torch.float64)
    g = H // KVH
    for t in range(q.shape[0]):
        lo = max(0, int(pos[t]) - window + 1) if window else 0
        k = kc[int(slot[t]), lo:int(pos[t]) + 1].double()
        v = vc[int(slot[t]), lo:int(pos[t]) + 1].double()
        for h in range(H):
            out[t, h] = torch.softmax(k[:, h // g] @ q[t, h].double() * scale, 0) @ v[:, h // g]
    return out


def test_a_row_gets_the_same_bits_whatever_slots_share_its_tile():
    kc, vc, q = case()
    scale = 1 / math.sqrt(HD)
    alone_slot = torch.full((T,), 1)                          # every row reads slot 1
    pos = torch.arange(T) * 5 + 3
    one = attention(q, kc, vc, alone_slot, pos, 0, scale)
    mixed = torch.tensor([1 if i % 4 == 0 else i % 3 + 2 for i in range(T)])   # slots 1..4, row 0, 4, .. in 1
    mixed[7] = 0                                              # and a padding-like row on another slot
    got = attention(q, kc, vc, mixed, pos, 0, scale)
    rows = [i for i in range(T) if int(mixed[i]) == 1]
    assert torch.equal(got[rows], one[rows])
    assert torch.allclose(got.double(), reference(q, kc, vc, mixed, pos, 0, scale), atol=1e-2)         # the output rounded to bfloat16
    win = attention(q, kc, vc, mixed, pos, 7, scale)           # a sliding window
    assert torch.allclose(win.double(), reference(q, kc, vc, mixed, pos, 7, scale), atol=1e-2)         # the output rounded to bfloat16


@pytest.mark.parametrize("neox", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("head_dim,rope_dim", [(64, 64), (128, 64)])
def test_rotate_gives_apply_ropes_bits(neox, dtype, head_dim, rope_dim):
    """CPU stages rotate q and k with two products on precomputed tables (engine.layers.rotate): the
    same bits as the pairwise formula, full and partial rotary, both pair layouts."""
    from engine.layers import apply_rope, rope_tables, rotate, rotation_tables

    cos, sin = rope_tables(10000.0, rope_dim, 300, "cpu")
    c, s = rotation_tables(cos, sin, neox)
    gen = torch.Generator().manual_seed(5)
    x = (torch.randn(9, 12, head_dim, generator=gen) * 3).to(dtype)
    pos = torch.randint(0, 300, (9,), generator=gen)
    assert torch.equal(rotate(x, c[pos], s[pos], neox), apply_rope(x, cos[pos], sin[pos], neox))
