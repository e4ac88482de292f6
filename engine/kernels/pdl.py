"""Programmatic dependent launch (Hopper and later): a kernel of the decode graph starts while the
kernel before it finishes, instead of after.

Why: a decode token of a small model is ~300 kernels of 1-6 us each, and between two kernels of a
CUDA graph the GPU idles about 0.7 us while the next grid launches (H200, SmolLM2 shape, one row: 195 of
962 us a token, tests/gpu/profile_stage.py). A kernel launched with the programmatic-serialization
attribute may start once every program of the kernel before it has passed `launch_dependents` (here:
right after its own wait), so its launch and its prologue overlap that kernel's tail. It must not read
what the kernel before wrote, nor write anything that kernel may still read, before `wait`
(griddepcontrol.wait: returns when the kernel before has finished and its writes are visible). What
may come before the wait: loads of the weights (they never change), here as L2 prefetches.

A kernel takes `PDL: tl.constexpr` and calls `enter(PDL)` before its first read of earlier results;
the launch passes `**launch(device)`. Off (no instruction, no launch attribute) under the Triton
interpreter, on GPUs before compute capability 9.0, and with STRATA_PDL=0. The arithmetic is the same
either way: only when a kernel starts changes.
"""
from __future__ import annotations

import os
from functools import lru_cache

import torch
import triton
import triton.language as tl

ENABLED = os.environ.get("STRATA_PDL", "1") == "1" and os.environ.get("TRITON_INTERPRET") != "1"
# bytes of each weight row an int8 matmul program prefetches before its wait (0: none). H200, 2026-12-02,
# llama-3-8b Q4_K decode tile replay (tests/gpu/run_pdl2.sh; PDL off 2,258 / 2,294 us at one real row,
# 5,373 / 5,528 at eight): whole rows 2,302 / 5,557, 1024 bytes 2,083 / 5,722, none 2,195 / 5,614;
# strata bench one stream 450 (off) -> 428 / 474 / 471 tok/s; SmolLM2 one stream 935-1,000 -> 1,122-1,185
PREFETCH = int(os.environ.get("STRATA_PDL_PREFETCH", "1024"))


# the instructions, one definition for these Triton helpers and their Gluon twins (engine.kernels.q4k_mma)
WAIT = tl.constexpr("griddepcontrol.wait; // $0")
LAUNCH_DEPENDENTS = tl.constexpr("griddepcontrol.launch_dependents; // $0")
PREFETCH_L2 = tl.constexpr("{ .reg .pred p; setp.ne.b32 p, $2, 0; @p prefetch.global.L2 [$1]; } // $0")

_ON = {"PDL": True, "launch_pdl": True}
_OFF = {"PDL": False}


@lru_cache(maxsize=None)
def _capable(index: int) -> bool:
    return torch.cuda.get_device_capability(index)[0] >= 9


def on(device: torch.device) -> bool:
    """Whether kernels on this device (a tensor's .device) launch as programmatic dependents."""
    return ENABLED and device.type == "cuda" and _capable(device.index if device.index is not None
                                                           else torch.cuda.current_device())


def launch(device: torch.device) -> dict:
    """Keyword arguments for a kernel launch on device: the constexpr PDL and Triton's launch flag."""
    return _ON if on(device) else _OFF


@triton.jit
def enter(PDL: tl.constexpr):
    """Wait for the kernel before (its writes visible), then let the next kernel launch."""
    if PDL:
        tl.inline_asm_elementwise(WAIT, "=r", [], dtype=tl.int32, is_pure=False, pack=1)
        tl.inline_asm_elementwise(LAUNCH_DEPENDENTS, "=r", [], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def prefetch_l2(ptrs, mask, PDL: tl.constexpr):
    """Pull the lines at ptrs (where mask) into L2: weights a kernel reads after its wait."""
    if PDL:
        tl.inline_asm_elementwise(PREFETCH_L2, "=r,l,r", [ptrs, mask.to(tl.int32)], dtype=tl.int32, is_pure=False,
                                  pack=1)


@triton.jit
def prefetch_run(ptr, nbytes, PDL: tl.constexpr):
    """Pull nbytes from ptr on (any pointer type) into L2, one prefetch per 128-byte line."""
    prefetch_rows(ptr, 1, nbytes, nbytes, PDL)


@triton.jit
def prefetch_rows(ptr, rows, row_bytes, cap, PDL: tl.constexpr):
    """Pull the first min(row_bytes, cap) bytes of `rows` rows row_bytes apart from ptr on into L2, one
    prefetch per 128-byte line (a row that starts inside a line: its last partial line left out)."""
    if PDL:
        base = ptr.to(tl.pointer_type(tl.int8))
        per = (tl.minimum(row_bytes, cap) + 127) // 128        # lines a row
        total = rows * per
        idx = tl.arange(0, 128)
        for i in range(0, total, 128):
            j = i + idx
            at = (j // per).to(tl.int64) * row_bytes + (j % per) * 128
            prefetch_l2(base + at, j < total, PDL)
