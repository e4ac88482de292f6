"""The CPU fast mode's prompt-tile attention on a kernel of the project's own (engine/native/prompt_attention.c,
built and loaded with the other CPU kernels by engine.cpu_gemm).

torch's blocked path (engine.layers.attention) spent ~45 of the ~157 ms of a 128-row Gemma 3 270M prompt tile
at position 256 (2 cores, 2026-12-05): float32 copies of each key block, products over whole blocks (masked
keys too), a dozen torch calls a block for the mask and the online softmax. The kernel reads the bfloat16
cache in place, puts 16 (row, head) query vectors of one slot and KV head in a register's lanes so every
key and value load serves them all, and skips the keys a row does not attend.

Every tile with a bfloat16 cache runs it, prompt and decode rows alike; the float32 reference mode and
STRATA_CPU_ATTN=0 (or STRATA_CPU_GEMM=0, or no kernel) keep torch's path. A row's bits depend only on that
row (its query, slot, position, window): not on the other rows, the tile's size or start, or the thread
count, so a decode row gets the bits the same row gets in a prompt tile. Decode rows ran torch's one-row
path until 2026-12-05: a float32 copy of the slot's cache and two small products a row and layer, a third
of a one-row window and half of a --spec 4 window on the default model; with the kernel, `strata bench
--model default --devices cpu --streams 1 --max-tokens 256 --prompt-kind code` decodes at 67-68 tok/s
against 43-51 (--spec 4: 71-74 against 55; 2 cores, two runs each).
"""
from __future__ import annotations

import os

import torch

from engine import cpu_gemm

ENABLED = os.environ.get("STRATA_CPU_ATTN", "1") != "0"


def usable(q: torch.Tensor, k_cache: torch.Tensor) -> bool:
    """Whether a tile with these q and cache runs the kernel (any tile: prompt or decode rows)."""
    return (ENABLED and not q.is_cuda and k_cache.dtype == torch.bfloat16
            and q.dtype in (torch.float32, torch.bfloat16) and q.shape[-1] % 16 == 0 and k_cache.is_contiguous()
            and q.shape[1] % k_cache.shape[2] == 0 and q.stride(-1) == 1 and cpu_gemm.available())


def attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slot: torch.Tensor,
              pos: torch.Tensor, window: int, scale: float) -> torch.Tensor:
    """q [T, H, hd] (float32 or bfloat16, last dim contiguous); k_cache/v_cache [slots, ctx, kvh, hd]
    bfloat16 contiguous; slot/pos [T]. Returns [T, H, hd] in q's dtype (engine.layers.attention's contract)."""
    T, H, hd = q.shape
    _, ctx, kvh, _ = k_cache.shape
    if not (v_cache.shape == k_cache.shape and v_cache.dtype == k_cache.dtype and v_cache.is_contiguous()):
        raise ValueError("the CPU attention kernel needs k and v caches of one shape and dtype, contiguous")
    slot = slot.to(torch.int64).contiguous()
    pos = pos.to(torch.int64).contiguous()
    out = torch.empty((T, H, hd), dtype=q.dtype)
    if T and cpu_gemm._load().strata_prompt_attention(
            q.data_ptr(), T, H, hd, q.stride(0), q.stride(1), int(q.dtype == torch.float32), k_cache.data_ptr(),
            v_cache.data_ptr(), ctx, kvh, slot.data_ptr(), pos.data_ptr(), window, scale, out.data_ptr()) != 0:
        raise MemoryError("the CPU attention kernel could not allocate its scratch")
    return out
