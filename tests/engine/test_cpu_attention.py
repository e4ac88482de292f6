"""The CPU attention of a tile of rows (engine.layers.attention): each key block is multiplied with all
the tile's rows per slot, and a row keeps its own slot's products. A row's result must not depend on
which slots the other rows of its tile read (one slot, several, padding rows), and must be attention.
The fast mode's prompt tiles run engine.cpu_attention's kernel (engine/native/prompt_attention.c), its decode
tiles engine/native/decode_attention.c, under the same rules: close to attention, a row's bits alone or in
any tile at any start and thread count."""
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


@pytest.mark.parametrize("kernel", [False, True], ids=["torch", "kernel"])
def test_a_row_gets_the_same_bits_whatever_slots_share_its_tile(kernel, monkeypatch):
    from engine import cpu_attention

    monkeypatch.setattr(cpu_attention, "ENABLED", kernel)
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


# engine.cpu_attention: the fast mode's prompt tiles on engine/native/prompt_attention.c
from engine import cpu_attention, cpu_gemm  # noqa: E402

needs_kernel = pytest.mark.skipif(not cpu_gemm.available(), reason=f"the CPU kernels: {cpu_gemm.describe()}")


def torch_path(*args):
    """engine.layers.attention's torch blocked path (the kernel switched off)."""
    was, cpu_attention.ENABLED = cpu_attention.ENABLED, False
    try:
        return attention(*args)
    finally:
        cpu_attention.ENABLED = was


def kv(slots, ctx, kvh, hd, seed):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(slots, ctx, kvh, hd, generator=gen).to(torch.bfloat16) for _ in range(2)]


@needs_kernel
@pytest.mark.parametrize("h,kvh,hd,dtype,window", [
    (4, 1, 256, torch.float32, 0),         # Gemma 3 270M: float32 q (q_norm), one KV head
    (4, 1, 256, torch.float32, 40),        # its sliding-window layers
    (9, 3, 64, torch.bfloat16, 0),         # SmolLM2: bfloat16 q, groups of 3
    (32, 2, 16, torch.float32, 0),         # groups of 16 heads: one row a work item
    (40, 2, 32, torch.bfloat16, 25),       # groups of 20: two head groups a KV head
    (4, 4, 48, torch.float32, 0)],         # no grouping: 16 rows a work item
    ids=str)
def test_kernel_is_attention_and_close_to_torchs_path(h, kvh, hd, dtype, window):
    ctx = 300                                  # not a multiple of the 16-key chunks: the last one is short
    kc, vc = kv(3, ctx, kvh, hd, 1)
    t = 70
    q = torch.randn(t, h, hd, generator=torch.Generator().manual_seed(2)).to(dtype)
    slot, pos = torch.full((t,), 2), torch.arange(ctx - t, ctx)
    scale = 1 / math.sqrt(hd)
    assert cpu_attention.usable(q, kc)
    got = cpu_attention.attention(q, kc, vc, slot, pos, window, scale)
    assert got.dtype == dtype and got.shape == q.shape
    assert torch.equal(attention(q, kc, vc, slot, pos, window, scale), got)       # the fast mode's dispatch
    ref = reference64(q, kc, vc, slot, pos, window, scale)
    err = lambda x: ((x.double() - ref).norm() / ref.norm()).item()              # noqa: E731
    assert err(got) < 5e-3 and err(torch_path(q, kc, vc, slot, pos, window, scale)) < 5e-3, err(got)


def reference64(q, kc, vc, slot, pos, window, scale):
    h, kvh = q.shape[1], kc.shape[2]
    out = torch.zeros(q.shape, dtype=torch.float64)
    for t in range(q.shape[0]):
        lo = max(0, int(pos[t]) - window + 1) if window else 0
        k = kc[int(slot[t]), lo:int(pos[t]) + 1].double()
        v = vc[int(slot[t]), lo:int(pos[t]) + 1].double()
        for j in range(h):
            out[t, j] = torch.softmax(k[:, j // (h // kvh)] @ q[t, j].double() * scale, 0) @ v[:, j // (h // kvh)]
    return out


@needs_kernel
@pytest.mark.parametrize("window", [0, 100])
def test_kernel_rows_stand_alone_at_any_tile_start_row_count_and_thread_count(window):
    """Prefix reuse re-reads a prompt from another tile boundary: a row's bits must not depend on the tile's
    start, its row count, the rows beside it (their slots included), its own slot or the thread count."""
    kc, vc = kv(4, 700, 1, 256, 3)
    q = torch.randn(600, 4, 256, generator=torch.Generator().manual_seed(4))
    slot, pos = torch.full((600,), 1), torch.arange(600)

    def run(a, b, s=slot, p=pos):
        return cpu_attention.attention(q[a:b], kc, vc, s[a:b], p[a:b], window, 1 / 16)

    full = torch.cat([run(a, a + 128) for a in range(0, 600, 128)])          # tiles of 128 from 0
    for a, b in ((0, 1), (3, 4), (129, 130), (250, 251), (101, 229), (37, 165), (500, 600), (511, 513)):
        assert torch.equal(run(a, b), full[a:b]), (a, b)
    mixed = torch.tensor([1 if i % 3 else 3 for i in range(600)])             # every third row another slot
    got = run(0, 600, mixed)
    keep = mixed == 1
    assert torch.equal(got[keep], full[keep])
    alone3 = cpu_attention.attention(q[~keep], kc, vc, mixed[~keep], pos[~keep], window, 1 / 16)
    assert torch.equal(got[~keep], alone3)
    kc[0], vc[0] = kc[1], vc[1]                                               # the same keys in another slot
    assert torch.equal(run(101, 229, torch.zeros(600, dtype=torch.long)), full[101:229])
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = torch.cat([run(a, a + 128) for a in range(0, 600, 128)])
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, full)


@needs_kernel
def test_every_fast_mode_tile_runs_a_kernel():
    """Prompt tiles (a tile's real rows get the whole tile's bits) and any other tile on the prompt kernel,
    decode tiles (per_row) on the decode kernel; float32 caches (the reference mode) and STRATA_CPU_ATTN=0
    keep torch's path."""
    kc, vc = kv(2, 260, 1, 256, 5)
    q = torch.randn(128, 4, 256, generator=torch.Generator().manual_seed(6))
    slot, pos = torch.full((128,), 1), torch.arange(100, 228)
    whole = attention(q, kc, vc, slot, pos, 0, 1 / 16)
    assert torch.equal(whole, cpu_attention.attention(q, kc, vc, slot, pos, 0, 1 / 16))
    assert torch.equal(attention(q[:50], kc, vc, slot[:50], pos[:50], 0, 1 / 16, rows=128), whole[:50])
    assert not torch.equal(whole, torch_path(q, kc, vc, slot, pos, 0, 1 / 16))
    assert cpu_attention.usable(q[:8], kc) and not cpu_attention.usable(q, kc.float())
    assert torch.equal(attention(q[7:8], kc, vc, slot[7:8], pos[7:8], 0, 1 / 16, at=(1, 107)), whole[7:8])
    decode = cpu_attention.attention(q[:4], kc, vc, slot[:4], pos[:4], 0, 1 / 16, decode=True)
    assert torch.equal(attention(q[:4], kc, vc, slot[:4], pos[:4], 0, 1 / 16, per_row=True), decode)  # decode rows
    assert not torch.equal(decode, whole[:4])                                      # their own kernel
    f32 = attention(q[:4], kc.float(), vc.float(), slot[:4], pos[:4], 0, 1 / 16, per_row=True)
    assert torch.equal(f32, torch_path(q[:4], kc.float(), vc.float(), slot[:4], pos[:4], 0, 1 / 16, None, 0, True))


def test_kernel_switch_off():
    import os
    import subprocess
    import sys
    code = ("from engine import cpu_attention as a; import torch; print(a.usable(torch.zeros(128, 4, 256), "
            "torch.zeros(1, 8, 1, 256, dtype=torch.bfloat16)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "STRATA_CPU_ATTN": "0"}).stdout.strip()
    assert out == "False"


@needs_kernel
@pytest.mark.parametrize("h,kvh,hd,dtype,window", [
    (9, 3, 64, torch.bfloat16, 0),         # SmolLM2
    (4, 1, 256, torch.float32, 0),         # Gemma 3 270M
    (4, 1, 256, torch.float32, 300),       # its sliding-window layers: a window across a 256-key block
    (32, 2, 128, torch.bfloat16, 0),       # groups of 16 heads
    (8, 8, 32, torch.float32, 0)],         # no grouping, the smallest head
    ids=str)
def test_decode_kernel_is_attention_and_rows_stand_alone(h, kvh, hd, dtype, window):
    """engine/native/decode_attention.c: decode rows (a draft window's rows of one slot, other slots' rows,
    rows whose keys span several 256-key blocks or lie in one): close to attention in float64 as the prompt
    kernel is, each row the bits it gets alone or beside any rows, on 1 thread and on 2."""
    kc, vc = kv(3, 1200, kvh, hd, 21)
    q = torch.randn(7, h, hd, generator=torch.Generator().manual_seed(22)).to(dtype)
    slot, pos = torch.tensor([2, 2, 2, 0, 1, 2, 1]), torch.tensor([700, 701, 702, 5, 1100, 255, 256])
    scale = 1 / math.sqrt(hd)
    assert cpu_attention.decodes(q, kc)
    got = cpu_attention.attention(q, kc, vc, slot, pos, window, scale, decode=True)
    assert got.dtype == dtype and got.shape == q.shape
    exact = torch.zeros(q.shape, dtype=torch.float64)
    g = h // kvh
    for t in range(7):
        lo = max(0, int(pos[t]) - window + 1) if window else 0
        k, v = kc[int(slot[t]), lo:int(pos[t]) + 1].double(), vc[int(slot[t]), lo:int(pos[t]) + 1].double()
        for j in range(h):
            exact[t, j] = torch.softmax(k[:, j // g] @ q[t, j].double() * scale, 0) @ v[:, j // g]
    prompt = cpu_attention.attention(q, kc, vc, slot, pos, window, scale)
    err = lambda x: ((x.double() - exact).norm() / exact.norm()).item()         # noqa: E731
    assert err(got) < 4e-3 and err(got) < 1.5 * err(prompt) + 1e-4
    for a in range(7):
        assert torch.equal(cpu_attention.attention(q[a:a + 1], kc, vc, slot[a:a + 1], pos[a:a + 1], window, scale,
                                                   decode=True), got[a:a + 1]), a
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert torch.equal(cpu_attention.attention(q, kc, vc, slot, pos, window, scale, decode=True), got)
    finally:
        torch.set_num_threads(threads)
