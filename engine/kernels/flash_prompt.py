"""Flash attention for prompt tiles (issue 14): engine.kernels.attention.tile_attention's path for tiles of
more than SPLIT_ROWS rows. H200, one 512-row prompt tile (tests/gpu/run_flash.sh, 2026-12-04): llama-3-8b's
32 layers 13.7 ms -> 0.80 ms of attention (the tile 30.3 -> 18.0 ms; strata bench prompt 512 / 4,096 tokens
14,711 / 5,364 -> 21,907 / 24,294 tok/s), qwen3-30b-a3b 20.5 -> 1.1 ms.
"""
from __future__ import annotations

import os

import triton
import triton.language as tl

from engine.kernels import pdl

# Prompt tiles on the tensor cores (STRATA_ATTN_FLASH=0: engine.kernels.attention's program per (row, head),
# for comparing). One program per (block of BR tile rows, KV head) holds the block's rows times the KV head's
# query heads as the BR * GP rows of its matrix products (GP: the group rounded up to a power of two), so each
# key block it loads serves every row and head of the group. A row's arithmetic is its own: its scores and its
# P @ V row come from its own q and p rows, its softmax state is its own, and key blocks lie on the absolute
# grid of BN keys. Blocks outside a row's keys (past its position, before its window, or of another slot)
# leave its state exactly as it was: its running max starts at -1e30, not -inf, so such a block gives p = 0
# and a rescale of exactly 1. So a row's bits do not depend on the rows beside it or where its tile starts.
# The block's rows of one slot go together; a block that holds rows of several slots (where one slot's prompt
# rows end and the next one's begin) takes them slot by slot. q and p enter the products in bfloat16 (as flash
# attention does); sums in float32.
FLASH = os.environ.get("STRATA_ATTN_FLASH", "1") == "1"
FLASH_ROWS = 128            # matrix rows a program (tile rows x padded group); 64 for heads of 256 values
# the products' input type: Triton's interpreter has no bfloat16 product, so the CPU tests run float32
FLASH_DTYPE = tl.float32 if os.environ.get("TRITON_INTERPRET") == "1" else tl.bfloat16


def key_block_n(hd: int) -> int:
    """Keys per key_block step for a head size (a [BN, hd] block of K and of V in bfloat16): the flash
    kernel's and the tensor-core split kernel's default."""
    return 64 if hd <= 128 else 32


def flash_config(group: int, hd: int) -> tuple[int, int, int, int]:
    """(GP, BR, BN, warps) of the flash kernel for a query group size and head size: fixed per model."""
    gp = triton.next_power_of_2(group)
    m = FLASH_ROWS if hd <= 128 else FLASH_ROWS // 2
    return gp, max(1, m // gp), key_block_n(hd), 8 if hd >= 128 else 4


@triton.jit
def key_block(q, k_ptr, v_ptr, kv_off, load_ok, ok, m, l, acc, scale, DT: tl.constexpr):
    """One key block of the online softmax on the tensor cores: the block's keys and values at kv_off
    [BN, HD] (rows where load_ok [BN] is false read as zeros), q [M, HD] in DT, ok [M, BN] (or [1, BN]) the
    keys each matrix row takes; the float32 state (max m, sum l, weighted values acc) after the block."""
    k = tl.load(k_ptr + kv_off, mask=load_ok[:, None], other=0.0).to(DT)
    sc = tl.where(ok, tl.dot(q, tl.trans(k)) * scale, float("-inf"))
    m_new = tl.maximum(m, tl.max(sc, axis=1))
    p = tl.exp(sc - m_new[:, None])
    alpha = tl.exp(m - m_new)
    v = tl.load(v_ptr + kv_off, mask=load_ok[:, None], other=0.0).to(DT)
    l = l * alpha + tl.sum(p, axis=1)
    acc = acc * alpha[:, None] + tl.dot(p.to(DT), v)
    return m_new, l, acc


@triton.jit
def _flash_kernel(q_ptr, k_ptr, v_ptr, o_ptr, slot_ptr, pos_ptr, nreal_ptr, T, stride_qt, stride_qh, stride_ks,
                  stride_kc, stride_kh, stride_ot, stride_oh, window, scale, G: tl.constexpr, GP: tl.constexpr,
                  BR: tl.constexpr, HD: tl.constexpr, BN: tl.constexpr, HAS_N: tl.constexpr, DT: tl.constexpr,
                  PDL: tl.constexpr):
    pdl.enter(PDL)
    kvh = tl.program_id(1)
    i = tl.arange(0, BR * GP)
    r = tl.program_id(0) * BR + i // GP                 # the matrix row's tile row and query head
    hh = i % GP
    h = kvh * G + hh
    d = tl.arange(0, HD)
    n_real = T
    if HAS_N:
        n_real = tl.minimum(tl.load(nreal_ptr), T)
    live = (r < n_real) & (hh < G)
    rr = tl.where(r < T, r, 0)
    slot = tl.load(slot_ptr + rr).to(tl.int64)
    pos = tl.load(pos_ptr + rr).to(tl.int32)
    lo = tl.where(window > 0, tl.maximum(pos - window + 1, 0), 0)
    q = tl.load(q_ptr + rr.to(tl.int64)[:, None] * stride_qt + h[:, None] * stride_qh + d[None, :],
                mask=live[:, None], other=0.0).to(DT)
    o_off = rr.to(tl.int64)[:, None] * stride_ot + h[:, None] * stride_oh + d[None, :]
    tl.store(o_ptr + o_off, tl.zeros((BR * GP, HD), tl.float32).to(o_ptr.dtype.element_ty),
             mask=((r < T) & (hh < G) & ~live)[:, None])          # padding rows: zeros, no keys read
    done = ~live
    while tl.sum((~done).to(tl.int32)) > 0:
        first = tl.min(tl.where(done, BR * GP, i))
        s = tl.sum(tl.where(i == first, slot, 0))                   # the first row left: its slot's rows go now
        act = ~done & (slot == s)
        hi = tl.max(tl.where(act, pos, -1))
        start = (tl.min(tl.where(act, lo, 1 << 30)) // BN) * BN
        base = s * stride_ks + kvh * stride_kh
        m = tl.full((BR * GP,), -1e30, tl.float32)
        l = tl.zeros((BR * GP,), tl.float32)
        acc = tl.zeros((BR * GP, HD), tl.float32)
        for k0 in range(start, hi + 1, BN):
            n = k0 + tl.arange(0, BN)
            kv_off = base + n.to(tl.int64)[:, None] * stride_kc + d[None, :]
            ok = act[:, None] & (n[None, :] <= pos[:, None]) & (n[None, :] >= lo[:, None])
            m, l, acc = key_block(q, k_ptr, v_ptr, kv_off, n <= hi, ok, m, l, acc, scale, DT)
        y = acc / tl.where(act, l, 1.0)[:, None]
        tl.store(o_ptr + o_off, y.to(o_ptr.dtype.element_ty), mask=act[:, None])
        done = done | act


def attention(q, k_cache, v_cache, slot, pos, window, scale, out, n_real) -> None:
    """tile_attention's prompt-tile path: q [T, H, hd] over the caches [slots, ctx, kvh, hd] into out."""
    T, H, hd = q.shape
    g = H // k_cache.shape[2]
    gp, br, bn, warps = flash_config(g, hd)
    _flash_kernel[(triton.cdiv(T, br), k_cache.shape[2])](
        q, k_cache, v_cache, out, slot, pos, n_real if n_real is not None else slot, T, q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), out.stride(0), out.stride(1), int(window),
        float(scale), G=g, GP=gp, BR=br, HD=hd, BN=bn, HAS_N=n_real is not None, DT=FLASH_DTYPE, num_warps=warps,
        **pdl.launch(q.device))
