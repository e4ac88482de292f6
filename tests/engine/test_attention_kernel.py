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


def bf16(t):
    return t.to(torch.bfloat16).to(torch.float32)


def checked(attn, heads, kv, hd, window, seed, positions, bf16_products=False):
    """Six rows over three slots of an 80-position cache: the kernel's output, checked against torch
    and with the last two rows as padding; returns (out, the call's arguments). bf16_products: q, k, v
    and p enter bfloat16 products (a tensor-core kernel on a GPU): against torch on rounded inputs, to 3e-2."""
    gen = torch.Generator().manual_seed(seed)
    kc = torch.randn(3, 80, kv, hd, generator=gen).to(DEV)
    vc = torch.randn(3, 80, kv, hd, generator=gen).to(DEV)
    q = torch.randn(6, heads, hd, generator=gen).to(DEV)
    slot = torch.tensor([0, 1, 2, 0, 2, 2], device=DEV)
    pos = torch.tensor(positions, device=DEV)
    scale = 1 / math.sqrt(hd)
    out = attn.tile_attention(q, kc, vc, slot, pos, window, scale)
    r = bf16 if bf16_products else (lambda t: t)
    ref = reference(r(q.cpu()), r(kc.cpu()), r(vc.cpu()), slot.cpu(), pos.cpu(), window, scale)
    assert torch.allclose(out.cpu().double(), ref, atol=3e-2 if bf16_products else 1e-5)
    part = attn.tile_attention(q, kc, vc, slot, pos, window, scale, n_real=torch.tensor([4], device=DEV))
    assert torch.equal(part[:4], out[:4]) and not part[4:].any()
    return out, (q, kc, vc, slot, pos, window, scale)


@pytest.mark.parametrize("heads,kv,hd,window", [(9, 3, 64, 0), (8, 2, 32, 0), (4, 4, 16, 5)])
def test_tile_attention_matches_torch_and_zeroes_padding_rows(attn, monkeypatch, heads, kv, hd, window):
    """One program per (row, head): prompt tiles, and decode tiles under STRATA_ATTN_SPLIT=0."""
    monkeypatch.setattr(attn, "SPLIT", False)
    checked(attn, heads, kv, hd, window, heads * 7 + hd, [0, 17, 79, 40, 3, 0])


@pytest.mark.parametrize("tc", [False, True])
@pytest.mark.parametrize("heads,kv,hd,window", [(9, 3, 64, 0), (4, 4, 16, 5), (8, 2, 32, 30)])
def test_split_attention_for_decode_tiles_matches_torch_and_is_row_invariant(attn, monkeypatch, heads, kv, hd,
                                                                               window, tc):
    """The decode tiles' default: keys in chunks walked by separate programs, merged per row in chunk order
    (8-key blocks here, so an 80-position cache has ten chunks of one block and rows span one to ten).
    tc (STRATA_ATTN_TC=1): a program per KV head with matrix products, in 16-key chunks (a GPU's products
    need 16)."""
    monkeypatch.setattr(attn, "SPLIT", True)
    monkeypatch.setattr(attn, "TC", "1" if tc else "0")
    monkeypatch.setattr(attn, "BLOCK_N", 8)
    monkeypatch.setattr(attn, "TC_BN", 16)
    assert attn.chunk_keys(80, 8) == 8 and attn.chunk_keys(4096, 8) == 256
    gpu_tc = tc and attn.flash_prompt.FLASH_DTYPE == attn.tl.bfloat16
    out, (q, kc, vc, slot, pos, window, scale) = checked(attn, heads, kv, hd, window, heads * 5 + hd,
                                                         [0, 33, 79, 40, 3, 64], gpu_tc)
    for t in (2, 5):                                    # a row alone: the same bits
        alone = attn.tile_attention(q[t:t + 1], kc, vc, slot[t:t + 1], pos[t:t + 1], window, scale)
        assert torch.equal(alone[0], out[t])


def test_decode_tiles_take_the_tensor_core_split_kernel_by_head_shape(attn, monkeypatch):
    """STRATA_ATTN_TC unset: KV groups of 4+ query heads take the tensor-core split kernel (the llama-3-8b,
    qwen3-30b-a3b and gemma3-270m heads, where an H200 measured it faster), smaller groups the split kernel
    (smollm2-135m's 3, measured slower); 1 / 0 force it, a function of the shape alone either way."""
    monkeypatch.setattr(attn, "TC", "auto")
    assert attn.use_tc(4, 128) and attn.use_tc(8, 128) and attn.use_tc(4, 256)
    assert not attn.use_tc(3, 64) and not attn.use_tc(1, 64) and not attn.use_tc(2, 256)
    monkeypatch.setattr(attn, "TC", "1")
    assert attn.use_tc(3, 64) and attn.use_tc(4, 256) and not attn.use_tc(4, 8)
    monkeypatch.setattr(attn, "TC", "0")
    assert not attn.use_tc(8, 128)


@pytest.mark.parametrize("tc", [False, True])
def test_fused_split_attention_merges_in_its_last_chunk_program(attn, monkeypatch, tc):
    """STRATA_ATTN_FUSED=1: the split kernel's last chunk program of each (row, head) (tc: of each row and
    KV head) merges the chunks itself (no merge kernel): the same bits as split + merge, also in the int8
    form of the output and for padding rows (zeros), and every ticket counter back at 0 for the next
    launch."""
    from engine.kernels.dp4a_gemv import buffers

    monkeypatch.setattr(attn, "SPLIT", True)
    monkeypatch.setattr(attn, "TC", "1" if tc else "0")
    monkeypatch.setattr(attn, "BLOCK_N", 8)
    monkeypatch.setattr(attn, "TC_BN", 16)
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


@pytest.mark.parametrize("heads,kv,hd,window", [(9, 3, 64, 0), (8, 2, 32, 0), (4, 4, 16, 5), (4, 1, 32, 20)])
def test_flash_attention_for_prompt_tiles_matches_torch_and_is_row_invariant(attn, monkeypatch, heads, kv, hd,
                                                                               window):
    """Prompt tiles (more than SPLIT_ROWS rows): the flash kernel (engine.kernels.flash_prompt) against torch
    (to 3e-2 with q, k, v and p in bfloat16 on a GPU; to 1e-5 in float32 under the interpreter), padding
    rows zero; a block of rows that spans two slots; and each row's bits the same in a tile of other rows,
    at another place in it, and beside other rows (the tile's blocks start elsewhere)."""
    fl = attn.flash_prompt
    monkeypatch.setattr(fl, "FLASH", True)
    monkeypatch.setattr(fl, "FLASH_ROWS", 32)
    gp, br, bn, _ = fl.flash_config(heads // kv, hd)
    monkeypatch.setattr(fl, "flash_config", lambda g, d: (gp, br, 16, 4))   # 16-key blocks: several a row
    gen = torch.Generator().manual_seed(heads * 11 + hd + window)
    kc = torch.randn(3, 96, kv, hd, generator=gen).to(DEV)
    vc = torch.randn(3, 96, kv, hd, generator=gen).to(DEV)
    # slot 0 reads positions 0-19, slot 2 positions 50-69 (its earlier keys in the cache), 4 padding rows
    slot = torch.tensor([0] * 20 + [2] * 20 + [1] * 4, device=DEV)
    pos = torch.tensor(list(range(20)) + list(range(50, 70)) + [0] * 4, device=DEV)
    q = torch.randn(44, heads, hd, generator=gen).to(DEV)
    n_real = torch.tensor([40], device=DEV)
    scale = 1 / math.sqrt(hd)
    out = attn.tile_attention(q, kc, vc, slot, pos, window, scale, n_real=n_real)
    gpu = fl.FLASH_DTYPE == fl.tl.bfloat16
    rounded = bf16 if gpu else (lambda t: t)
    ref = reference(rounded(q.cpu()), rounded(kc.cpu()), rounded(vc.cpu()), slot.cpu(), pos.cpu(), window, scale)
    assert (out[:40].cpu().double() - ref[:40]).abs().max() < (3e-2 if gpu else 1e-5)
    assert not out[40:].any()
    # slot 2's rows 5-24 of a tile of 30 behind other rows (slot 1, positions 0-4) and before slot 0's
    order = [40, 41, 42, 43, 40] + list(range(20, 40)) + list(range(0, 5))
    slot2 = slot[order].clone()
    slot2[:5] = 1
    pos2 = pos[order].clone()
    pos2[:5] = torch.arange(5)
    moved = attn.tile_attention(q[order], kc, vc, slot2, pos2, window, scale)
    assert torch.equal(moved[5:25], out[20:40]) and torch.equal(moved[25:30], out[0:5])


def test_flash_attention_is_the_prompt_tiles_default(attn, monkeypatch):
    """Above SPLIT_ROWS rows without an int8 output, tile_attention runs the flash kernel (a planted fault
    in its dispatch would leave prompt tiles on the program per (row, head), which matches torch too)."""
    calls = []
    monkeypatch.setattr(attn.flash_prompt, "attention", lambda *a: calls.append(a[0].shape[0]))
    q = torch.zeros(attn.SPLIT_ROWS + 1, 4, 16, device=DEV)
    kc = torch.zeros(2, 40, 2, 16, device=DEV)
    attn.tile_attention(q, kc, kc, torch.zeros(q.shape[0], dtype=torch.long, device=DEV),
                        torch.arange(q.shape[0], device=DEV), 0, 0.25)
    assert calls == [attn.SPLIT_ROWS + 1] and attn.flash_prompt.FLASH
