"""The CPU fast mode's prompt-tile attention on a kernel of the project's own (engine/native/prompt_attention.c,
built and loaded with the other CPU kernels by engine.cpu_gemm).

torch's blocked path (engine.layers.attention) spent ~45 of the ~157 ms of a 128-row Gemma 3 270M prompt tile
at position 256 (2 cores, 2026-12-05): float32 copies of each key block, products over whole blocks (masked
keys too), a dozen torch calls a block for the mask and the online softmax. The kernel reads the bfloat16
cache in place, puts 16 (row, head) query vectors of one slot and KV head in a register's lanes so every
key and value load serves them all, and skips the keys a row does not attend.

Every tile with a bfloat16 cache runs a kernel of the project's own: decode tiles (Tile.per_row: every decode
row, in any layout) engine/native/decode_attention.c, any other tile this one; the float32 reference mode and
STRATA_CPU_ATTN=0 (or STRATA_CPU_GEMM=0, or no kernel) keep torch's path. A row's bits depend only on that
row (its query, slot, position, window): not on the other rows, the tile's size or start, or the thread
count. Decode rows ran torch's one-row path until 2026-12-05: a float32 copy of the slot's cache and two
small products a row and layer, a third of a one-row window and half of a --spec 4 window on the default
model; the prompt kernel then ran them (a decode row fills only its KV group's heads of its 16 lanes: 3 for
SmolLM2), and now the decode kernel (lanes along a key's values, a row's keys over the threads in 256-key
blocks).
"""
from __future__ import annotations

import os

import torch

from engine import cpu_gemm

ENABLED = os.environ.get("STRATA_CPU_ATTN", "1") != "0"
DECODE = os.environ.get("STRATA_CPU_DECODE_ATTN", "1") != "0"     # decode rows on decode_attention.c (0: the
                                                                    # prompt kernel runs them too)


def usable(q: torch.Tensor, k_cache: torch.Tensor) -> bool:
    """Whether a tile with these q and cache runs the kernel (any tile: prompt or decode rows)."""
    return (ENABLED and not q.is_cuda and k_cache.dtype == torch.bfloat16
            and q.dtype in (torch.float32, torch.bfloat16) and q.shape[-1] % 16 == 0 and k_cache.is_contiguous()
            and q.shape[1] % k_cache.shape[2] == 0 and q.stride(-1) == 1 and cpu_gemm.available())


def decodes(q: torch.Tensor, k_cache: torch.Tensor) -> bool:
    """Whether decode rows with these q and cache run decode_attention.c (a head size of 32..256 in 32s, KV
    groups of up to 16 heads)."""
    hd, g = q.shape[-1], q.shape[1] // k_cache.shape[2]
    return DECODE and hd % 32 == 0 and hd <= 256 and g <= 16


def attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slot: torch.Tensor,
              pos: torch.Tensor, window: int, scale: float, decode: bool = False) -> torch.Tensor:
    """q [T, H, hd] (float32 or bfloat16, last dim contiguous); k_cache/v_cache [slots, ctx, kvh, hd]
    bfloat16 contiguous; slot/pos [T]. Returns [T, H, hd] in q's dtype (engine.layers.attention's contract).
    decode: a decode tile's rows (Tile.per_row): on decode_attention.c where `decodes`, whose rows each
    spread their keys over the threads, and whose lanes run along a key's values, not along 16 queries."""
    T, H, hd = q.shape
    _, ctx, kvh, _ = k_cache.shape
    if not (v_cache.shape == k_cache.shape and v_cache.dtype == k_cache.dtype and v_cache.is_contiguous()):
        raise ValueError("the CPU attention kernel needs k and v caches of one shape and dtype, contiguous")
    slot = slot.to(torch.int64).contiguous()
    pos = pos.to(torch.int64).contiguous()
    out = torch.empty((T, H, hd), dtype=q.dtype)
    lib = cpu_gemm._load()
    kernel = lib.strata_decode_attention if decode and decodes(q, k_cache) else lib.strata_prompt_attention
    if T and kernel(
            q.data_ptr(), T, H, hd, q.stride(0), q.stride(1), int(q.dtype == torch.float32), k_cache.data_ptr(),
            v_cache.data_ptr(), ctx, kvh, slot.data_ptr(), pos.data_ptr(), window, scale, out.data_ptr()) != 0:
        raise MemoryError("the CPU attention kernel could not allocate its scratch")
    return out
