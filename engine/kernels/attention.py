"""Triton attention for one tile of rows over the slot KV cache (GPU path of engine.layers.attention).

Each row walks its own slot's keys from the window start to its own position in fixed blocks with an
online softmax in float32. Decode tiles (up to SPLIT_ROWS rows) cut the keys into chunks walked by
separate programs and merged in chunk order: a program per (query head, chunk, row) on CUDA cores, or,
for KV groups of 4+ query heads (use_tc), a program per (KV head, chunk, row) on the tensor cores; prompt
tiles take engine.kernels.flash_prompt; _attn_kernel (a program per row and head) is the fallback. Padding
rows past the tile's real count (a device scalar) write zeros and read no keys. Nothing depends on the other
rows, so the result is row-invariant by construction, and nothing needs the host: the loop bounds are read
on the device, which keeps the stage forward free of host syncs (and capturable in a CUDA graph).
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from engine.kernels import flash_prompt, pdl
from engine.kernels.dp4a_gemv import q8_store
from engine.kernels.fused import _q8
from engine.kernels.stream_matmul import all_rows

# keys per loop step (by head size: a 128-key block of 256-value heads would not fit in registers) and
# warps per program; the same for every tile, so a row's sums are blocked the same way whatever tile it is
# in. H200, one real row of a decode tile at position 100 (tests/gpu/run_row_kernels.sh): 128 keys per
# step against 64, llama-3-8b 271 -> 238 us per tile, smollm2-135m 199 -> 143 (32: 388 and 274)
BLOCK_N = int(os.environ.get("STRATA_ATTN_BN", "0"))
WARPS = int(os.environ.get("STRATA_ATTN_WARPS", "4"))


def block_n(head_dim: int) -> int:
    return BLOCK_N or (128 if head_dim <= 128 else 64)


@triton.jit
def _walk(q, k_ptr, v_ptr, base, start, end, lo, pos, stride_kc, HD: tl.constexpr, BN: tl.constexpr):
    """Keys [start, end) (BN at a time; those in [lo, pos] count) against q [HD] (scaled): the online
    softmax state (max, sum of weights, weighted sum of values) in float32."""
    d = tl.arange(0, HD)
    m = tl.full((), float("-inf"), tl.float32)
    l = tl.zeros((), tl.float32)
    acc = tl.zeros((HD,), tl.float32)
    for s in range(start, end, BN):
        n = s + tl.arange(0, BN)
        ok = (n <= pos) & (n >= lo)
        off = base + n.to(tl.int64)[:, None] * stride_kc + d[None, :]
        k = tl.load(k_ptr + off, mask=ok[:, None], other=0.0).to(tl.float32)
        sc = tl.where(ok, tl.sum(k * q[None, :], axis=1), float("-inf"))
        m_new = tl.maximum(m, tl.max(sc, axis=0))
        p = tl.exp(sc - m_new)
        alpha = tl.exp(m - m_new)
        v = tl.load(v_ptr + off, mask=ok[:, None], other=0.0).to(tl.float32)
        l = l * alpha + tl.sum(p, axis=0)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        m = m_new
    return m, l, acc


@triton.jit
def _attn_kernel(q_ptr, k_ptr, v_ptr, o_ptr, slot_ptr, pos_ptr, nreal_ptr, stride_qt, stride_qh, stride_ks,
                 stride_kc, stride_kh, stride_ot, stride_oh, window, scale, q8_ptr, ds_ptr, G: tl.constexpr,
                 HD: tl.constexpr, BN: tl.constexpr, HAS_N: tl.constexpr, Q8: tl.constexpr, PDL: tl.constexpr):
    pdl.enter(PDL)
    t = tl.program_id(0)
    h = tl.program_id(1)
    kvh = h // G
    d = tl.arange(0, HD)
    o_off = t * stride_ot + h * stride_oh + d
    real = True
    if HAS_N:
        real = t < tl.load(nreal_ptr)
    if real:
        slot = tl.load(slot_ptr + t).to(tl.int64)
        pos = tl.load(pos_ptr + t).to(tl.int32)
        q = tl.load(q_ptr + t * stride_qt + h * stride_qh + d).to(tl.float32) * scale
        lo = tl.where(window > 0, tl.maximum(pos - window + 1, 0), 0)
        base = slot * stride_ks + kvh * stride_kh
        m, l, acc = _walk(q, k_ptr, v_ptr, base, (lo // BN) * BN, pos + 1, lo, pos, stride_kc, HD, BN)
        y = acc / l
    else:                               # a padding row of a tile: zeros, no keys read
        y = tl.zeros((HD,), tl.float32)
    tl.store(o_ptr + o_off, y.to(o_ptr.dtype.element_ty))
    if Q8:                              # the int8 form of this head's part of the row (out contiguous)
        _q8(y, o_ptr, q8_ptr, ds_ptr, t, tl.num_programs(1) * HD, h * HD, HD)


# Decode tiles (up to SPLIT_ROWS rows) over long contexts: one program per (row, head) walks every key
# alone, so a row at 6K keys keeps 32 programs busy for the whole walk. So (STRATA_ATTN_SPLIT=0 turns it
# off, for comparing) the keys are cut into chunks of chunk_keys(ctx) keys, one program per (head,
# chunk, row) walks its chunk (programs past a row's keys or on padding rows stop at once: a short
# context costs one program per row and head, as before), and a second kernel merges each row's chunks
# in chunk order. A row's chunks follow from its own position and the cache length only: row-invariant.
# A chunk is as short as one key block, so a short context still spreads over several programs per head
# (H200, tests/gpu/bench_attention.py, one layer, one row at position 300 of 2,048: llama-3-8b heads
# 12.2 us with chunks of at least four blocks, 7.7 with one; smollm2-135m 8.3 -> 5.6; equal at 6,000)
SPLIT = os.environ.get("STRATA_ATTN_SPLIT", "1") == "1"
SPLIT_ROWS = 16
MAX_CHUNKS = int(os.environ.get("STRATA_ATTN_MAX_CHUNKS", "16"))
CHUNK_BLOCKS = int(os.environ.get("STRATA_ATTN_CHUNK_BLOCKS", "1"))     # the fewest key blocks per chunk


def chunk_keys(ctx: int, bn: int) -> int:
    """Keys per chunk: at most MAX_CHUNKS chunks over the cache, at least CHUNK_BLOCKS key blocks each."""
    return max(CHUNK_BLOCKS * bn, triton.next_power_of_2(triton.cdiv(ctx, MAX_CHUNKS)))


@triton.jit
def _row_chunk(nreal_ptr, pos_ptr, t, T, c, CH, window):
    """Decode tile row t (t < T) and key chunk c: (is the row real, its position, its first key, do its
    keys reach into the chunk)."""
    pos = tl.load(pos_ptr + t).to(tl.int32)
    lo = tl.where(window > 0, tl.maximum(pos - window + 1, 0), 0)
    return t < tl.minimum(tl.load(nreal_ptr), T), pos, lo, (c >= lo // CH) & (c <= pos // CH)


@triton.jit
def _split_kernel(q_ptr, k_ptr, v_ptr, part_ptr, ml_ptr, slot_ptr, pos_ptr, nreal_ptr, T, stride_qt, stride_qh,
                  stride_ks, stride_kc, stride_kh, window, scale, NC, CH, cnt_ptr, o_ptr, stride_ot, stride_oh,
                  q8_ptr, ds_ptr, G: tl.constexpr, HD: tl.constexpr, BN: tl.constexpr, FUSED: tl.constexpr,
                  Q8: tl.constexpr, PDL: tl.constexpr):
    """Program (h, c, t): keys [c*CH, c*CH + CH) of head h for row t, if it is real and its keys reach
    into them: the online-softmax state (max, sum, weighted values) at part/ml[t, h, c]. FUSED: the row's
    last chunk program to finish (a ticket counter per row and head, back at 0 after it) merges the
    chunks into the output itself (_merge_row, in chunk order), and program (h, 0, t) of a padding row
    writes its zeros: no merge kernel."""
    pdl.enter(PDL)
    h = tl.program_id(0)
    c = tl.program_id(1)
    t = tl.program_id(2)
    H = tl.num_programs(0)
    kvh = h // G
    d = tl.arange(0, HD)
    real, pos, lo, in_chunk = _row_chunk(nreal_ptr, pos_ptr, t, T, c, CH, window)
    if real:
        if in_chunk:
            slot = tl.load(slot_ptr + t).to(tl.int64)
            q = tl.load(q_ptr + t * stride_qt + h * stride_qh + d).to(tl.float32) * scale
            base = slot * stride_ks + kvh * stride_kh
            m, l, acc = _walk(q, k_ptr, v_ptr, base, tl.maximum(c * CH, (lo // BN) * BN),
                              tl.minimum(c * CH + CH, pos + 1), lo, pos, stride_kc, HD, BN)
            at = (t * H + h) * NC + c
            tl.store(part_ptr + at * HD + d, acc)
            tl.store(ml_ptr + at * 2, m)
            tl.store(ml_ptr + at * 2 + 1, l)
            if FUSED:
                # release this chunk's state, acquire the others' (GPU scope)
                ticket = tl.atomic_add(cnt_ptr + t * H + h, 1, sem="acq_rel")
                if ticket == pos // CH - lo // CH:
                    tl.store(cnt_ptr + t * H + h, 0)
                    _merge_row(part_ptr, ml_ptr, o_ptr, q8_ptr, ds_ptr, t, h, H, pos, lo, stride_ot, stride_oh,
                               NC, CH, HD, Q8)
    elif FUSED:
        if c == 0:
            _zero_row(o_ptr, q8_ptr, ds_ptr, t, h, H, stride_ot, stride_oh, HD, Q8)


# The split kernel on the tensor cores, a program per KV head: program (kvh, c, t) holds the group's query
# heads as the first G of GP >= 16 matrix rows, so each key block it loads serves all of them and its scores
# and P @ V are matrix products (q and p in bfloat16, as in engine.kernels.flash_prompt; sums in float32). A
# head's arithmetic depends on its own q row and its keys only, so a row's bits depend on nothing beside it;
# its chunks merge as the split kernel's do, the G heads side by side (_merge_heads). Why: the split kernel
# loads each key block once per query head and reads K/V at about 1 TB/s (the same with CUDA-core products,
# [G, BN, HD] sums, was 2-4x slower). H200, 2026-12-04, one layer (tests/gpu/bench_attention.py, us, split
# kernel -> this; run_attn_tc2.sh): llama-3-8b heads 1 row at position 300 7.6 -> 6.1, 1,500 10.6 -> 10.1,
# 6,000 29.0 -> 17.9; 8 rows of 16 at 300 17.7 -> 9.0, at 6,000 193.6 -> 57.7; qwen3-30b-a3b (G 8) 6,000 one
# row 28.3 -> 14.7, 8 rows 186.4 -> 33.5; but smollm2-135m (G 3, 64 values) one row at 1,500 5.9 -> 7.7.
# strata bench, 8B shape Q4_K: one stream 455.5 -> 453.9 tok/s, eight 2,189 -> 2,457; four at 6,000
# positions 739 -> 1,046, one 364 -> 398; gemma3-270m shape (G 4, 256 values; run_attn_tc3.sh) one stream
# 1,182 -> 1,258, eight 8,638 -> 9,079. So it runs where G >= 4; STRATA_ATTN_TC=1 / 0 forces it on / off.
# The choice follows the model's shape alone.
TC = os.environ.get("STRATA_ATTN_TC", "auto")


def use_tc(group: int, head_dim: int) -> bool:
    """Whether decode tiles of this head shape take the tensor-core split kernel (TC: "auto", "1", "0")."""
    if TC in ("0", "1"):
        return TC == "1" and head_dim >= 16
    return group >= 4 and 16 <= head_dim <= 256


TC_BN = int(os.environ.get("STRATA_ATTN_TC_BN", "0"))        # keys per step (0: flash_prompt.key_block_n)


@triton.jit
def _split_tc_kernel(q_ptr, k_ptr, v_ptr, part_ptr, ml_ptr, slot_ptr, pos_ptr, nreal_ptr, T, stride_qt, stride_qh,
                     stride_ks, stride_kc, stride_kh, window, scale, NC, CH, cnt_ptr, o_ptr, stride_ot, stride_oh,
                     q8_ptr, ds_ptr, G: tl.constexpr, GP: tl.constexpr, HD: tl.constexpr, BN: tl.constexpr,
                     DT: tl.constexpr, FUSED: tl.constexpr, Q8: tl.constexpr, PDL: tl.constexpr):
    """Program (kvh, c, t): _split_kernel's work for the G query heads of KV head kvh; FUSED: the row's last
    chunk program of the KV head (a ticket counter per row and KV head) merges each of its heads."""
    pdl.enter(PDL)
    kvh = tl.program_id(0)
    c = tl.program_id(1)
    t = tl.program_id(2)
    KVH = tl.num_programs(0)
    H = KVH * G
    g = tl.arange(0, GP)
    h = kvh * G + g
    d = tl.arange(0, HD)
    real, pos, lo, in_chunk = _row_chunk(nreal_ptr, pos_ptr, t, T, c, CH, window)
    if real:
        if in_chunk:
            slot = tl.load(slot_ptr + t).to(tl.int64)
            q = tl.load(q_ptr + t * stride_qt + h[:, None] * stride_qh + d[None, :], mask=(g < G)[:, None],
                        other=0.0).to(DT)
            base = slot * stride_ks + kvh * stride_kh
            m = tl.full((GP,), float("-inf"), tl.float32)       # the first block holds a key of the row
            l = tl.zeros((GP,), tl.float32)
            acc = tl.zeros((GP, HD), tl.float32)
            for s in range(tl.maximum(c * CH, (lo // BN) * BN), tl.minimum(c * CH + CH, pos + 1), BN):
                n = s + tl.arange(0, BN)
                ok = (n <= pos) & (n >= lo)
                off = base + n.to(tl.int64)[:, None] * stride_kc + d[None, :]
                m, l, acc = flash_prompt.key_block(q, k_ptr, v_ptr, off, ok, ok[None, :], m, l, acc, scale, DT)
            at = (t * H + h) * NC + c
            tl.store(part_ptr + at[:, None] * HD + d[None, :], acc, mask=(g < G)[:, None])
            tl.store(ml_ptr + at * 2, m, mask=g < G)
            tl.store(ml_ptr + at * 2 + 1, l, mask=g < G)
            if FUSED:
                ticket = tl.atomic_add(cnt_ptr + t * KVH + kvh, 1, sem="acq_rel")
                if ticket == pos // CH - lo // CH:
                    tl.store(cnt_ptr + t * KVH + kvh, 0)
                    _merge_heads(part_ptr, ml_ptr, o_ptr, q8_ptr, ds_ptr, t, h, g < G, H, pos, lo, stride_ot,
                                 stride_oh, NC, CH, HD, Q8)
    elif FUSED:
        if c == 0:
            for gi in range(G):
                _zero_row(o_ptr, q8_ptr, ds_ptr, t, kvh * G + gi, H, stride_ot, stride_oh, HD, Q8)


@triton.jit
def _merge_row(part_ptr, ml_ptr, o_ptr, q8_ptr, ds_ptr, t, h, H, pos, lo, stride_ot, stride_oh, NC, CH,
               HD: tl.constexpr, Q8: tl.constexpr):
    """Row t, head h: its chunks' states merged in chunk order into the output (and its int8 form):
    _merge_heads for the one head."""
    hv = h + tl.arange(0, 1)
    _merge_heads(part_ptr, ml_ptr, o_ptr, q8_ptr, ds_ptr, t, hv, hv >= 0, H, pos, lo, stride_ot, stride_oh, NC, CH,
                 HD, Q8)


@triton.jit
def _merge_heads(part_ptr, ml_ptr, o_ptr, q8_ptr, ds_ptr, t, h, live, H, pos, lo, stride_ot, stride_oh, NC, CH,
                 HD: tl.constexpr, Q8: tl.constexpr):
    """Row t, heads h [GP] (those where live): each head's chunks' states merged in chunk order into the
    output (and its int8 form), the heads side by side rather than one after another (a program per KV
    head merging its G heads in a loop took G times one merge: at 1,500 positions the tensor-core split
    kernel lost 7 us a layer to it on the 30B shape). The states are read from L2 (.cg): in the fused
    kernels other programs wrote them."""
    d = tl.arange(0, HD)
    first = (t * H + h) * NC
    m = tl.full(h.shape, float("-inf"), tl.float32)
    for c in range(lo // CH, pos // CH + 1):
        m = tl.maximum(m, tl.load(ml_ptr + (first + c) * 2, mask=live, other=0.0, cache_modifier=".cg"))
    l = tl.zeros(h.shape, tl.float32)
    acc = tl.zeros((h.shape[0], HD), tl.float32)
    for c in range(lo // CH, pos // CH + 1):
        w = tl.exp(tl.load(ml_ptr + (first + c) * 2, mask=live, other=0.0, cache_modifier=".cg") - m)
        l = l + tl.load(ml_ptr + (first + c) * 2 + 1, mask=live, other=1.0, cache_modifier=".cg") * w
        acc = acc + tl.load(part_ptr + (first + c)[:, None] * HD + d[None, :], mask=live[:, None], other=0.0,
                            cache_modifier=".cg") * w[:, None]
    y = acc / l[:, None]
    tl.store(o_ptr + t * stride_ot + h[:, None] * stride_oh + d[None, :], y.to(o_ptr.dtype.element_ty),
             mask=live[:, None])
    if Q8:      # a head that is not live names blocks past the row's end, which q8_store leaves out
        b = tl.reshape(tl.where(live, h, H)[:, None] * (HD // 32) + tl.arange(0, HD // 32)[None, :],
                       (h.shape[0] * (HD // 32),))
        yq = tl.reshape(y.to(o_ptr.dtype.element_ty).to(tl.float32), (h.shape[0] * (HD // 32), 32))
        q8_store(yq, b, q8_ptr + t * H * HD, ds_ptr + t * H * (HD // 32) * 2, H * HD)


@triton.jit
def _zero_row(o_ptr, q8_ptr, ds_ptr, t, h, H, stride_ot, stride_oh, HD: tl.constexpr, Q8: tl.constexpr):
    """A padding row's output for head h: zeros (and their int8 form)."""
    y = tl.zeros((HD,), tl.float32)
    tl.store(o_ptr + t * stride_ot + h * stride_oh + tl.arange(0, HD), y.to(o_ptr.dtype.element_ty))
    if Q8:
        _q8(y, o_ptr, q8_ptr, ds_ptr, t, H * HD, h * HD, HD)


@triton.jit
def _merge_kernel(part_ptr, ml_ptr, o_ptr, pos_ptr, nreal_ptr, stride_ot, stride_oh, window, NC, CH, q8_ptr, ds_ptr,
                  HD: tl.constexpr, Q8: tl.constexpr, PDL: tl.constexpr):
    """Row t, head h: its chunks' states merged in chunk order; padding rows get zeros."""
    pdl.enter(PDL)
    t = tl.program_id(0)
    h = tl.program_id(1)
    H = tl.num_programs(1)
    if t < tl.load(nreal_ptr):
        pos = tl.load(pos_ptr + t).to(tl.int32)
        lo = tl.where(window > 0, tl.maximum(pos - window + 1, 0), 0)
        _merge_row(part_ptr, ml_ptr, o_ptr, q8_ptr, ds_ptr, t, h, H, pos, lo, stride_ot, stride_oh, NC, CH, HD, Q8)
    else:
        _zero_row(o_ptr, q8_ptr, ds_ptr, t, h, H, stride_ot, stride_oh, HD, Q8)


# the split kernel merges each row's chunks itself (its last chunk program; no merge kernel: one launch
# a layer less; STRATA_ATTN_FUSED=0 keeps the merge kernel). H200, 2026-12-02 (tests/gpu/run_attn_fused.sh,
# strata bench 512-token prompt, 128 tokens): SmolLM2 shape one stream 994 -> 1,066 tok/s, eight 3,032 ->
# 4,875; llama-3-8b Q4_K 415 -> 439 / 1,209 -> 1,393; batch-test IDENTICAL with it
FUSED = os.environ.get("STRATA_ATTN_FUSED", "1") == "1"
_tickets: dict[tuple, torch.Tensor] = {}


def tickets(device, n: int) -> torch.Tensor:
    """The fused kernel's ticket counters (int32 zeros, at least n), one buffer per device and stream: a
    CUDA graph keeps the buffer of the stream it was captured on (its warm-up run makes it, outside the
    capture), and each launch leaves its counters at 0 again."""
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (str(device), stream)
    buf = _tickets.get(key)
    if buf is None or buf.numel() < n:
        buf = _tickets[key] = torch.zeros(max(n, 1024), dtype=torch.int32, device=device)
    return buf


def _split_attention(q, k_cache, v_cache, slot, pos, window, scale, out, n_real, q8) -> None:
    T, H, hd = q.shape
    tc = use_tc(H // k_cache.shape[2], hd)
    bn = (TC_BN or flash_prompt.key_block_n(hd)) if tc else block_n(hd)
    ch = chunk_keys(k_cache.shape[1], bn)
    nc = triton.cdiv(k_cache.shape[1], ch)
    part = torch.empty((T, H, nc, hd), dtype=torch.float32, device=q.device)
    ml = torch.empty((T, H, nc, 2), dtype=torch.float32, device=q.device)
    count = all_rows(n_real, T, q.device)
    q8a, q8b = (q8[0], q8[1]) if q8 is not None else (out, out)
    kvh, g = k_cache.shape[2], H // k_cache.shape[2]
    if tc:
        _split_tc_kernel[(kvh, nc, T)](
            q, k_cache, v_cache, part, ml, slot, pos, count, T, q.stride(0), q.stride(1), k_cache.stride(0),
            k_cache.stride(1), k_cache.stride(2), int(window), float(scale), nc, ch,
            tickets(q.device, T * kvh) if FUSED else count, out, out.stride(0), out.stride(1), q8a, q8b, G=g,
            GP=max(16, triton.next_power_of_2(g)), HD=hd, BN=bn,
            DT=flash_prompt.FLASH_DTYPE, FUSED=FUSED, Q8=q8 is not None, num_warps=WARPS, **pdl.launch(q.device))
    else:
        _split_kernel[(H, nc, T)](q, k_cache, v_cache, part, ml, slot, pos, count, T, q.stride(0), q.stride(1),
                                  k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), int(window), float(scale),
                                  nc, ch, tickets(q.device, T * H) if FUSED else count, out, out.stride(0),
                                  out.stride(1), q8a, q8b, G=g, HD=hd, BN=bn, FUSED=FUSED, Q8=q8 is not None,
                                  num_warps=WARPS, **pdl.launch(q.device))
    if not FUSED:
        _merge_kernel[(T, H)](part, ml, out, pos, count, out.stride(0), out.stride(1), int(window), nc, ch, q8a, q8b,
                              HD=hd, Q8=q8 is not None, num_warps=WARPS, **pdl.launch(q.device))


def tile_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slot: torch.Tensor,
                   pos: torch.Tensor, window: int, scale: float, out_dtype=torch.float32,
                   n_real: torch.Tensor | None = None, q8=None) -> torch.Tensor:
    """q [T, H, hd]; caches [slots, ctx, kvh, hd]; slot/pos [T] -> [T, H, hd] in out_dtype (float32).
    n_real (a device scalar): rows from there on are padding and get zeros. q8: (q, ds) buffers
    (engine.kernels.dp4a_gemv.buffers for [T, H * hd]) that also get the output's int8 form (hd a
    multiple of 32), the input of the int8 decode matmul."""
    T, H, hd = q.shape
    kvh = k_cache.shape[2]
    q = q.contiguous()
    out = torch.empty((T, H, hd), dtype=out_dtype, device=q.device)
    if SPLIT and T <= SPLIT_ROWS:
        _split_attention(q, k_cache, v_cache, slot, pos, window, scale, out, n_real, q8)
        return out
    if flash_prompt.FLASH and T > SPLIT_ROWS and q8 is None and hd >= 16:
        flash_prompt.attention(q, k_cache, v_cache, slot, pos, window, scale, out, n_real)
        return out
    _attn_kernel[(T, H)](q, k_cache, v_cache, out, slot, pos, n_real if n_real is not None else slot,
                         q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
                         out.stride(0), out.stride(1), int(window), float(scale),
                         q8[0] if q8 is not None else out, q8[1] if q8 is not None else out, G=H // kvh, HD=hd,
                         BN=block_n(hd), HAS_N=n_real is not None, Q8=q8 is not None, num_warps=WARPS,
                         **pdl.launch(q.device))
    return out
