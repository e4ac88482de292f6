"""The order in which the int8 decode kernel adds up a weight row's lanes, written out.

engine.kernels.dp4a_gemv gives each weight row L lanes (L = 8, 16 or 32); lane l sums the row's units
l, l + L, l + 2L, ... and the row's result is `tl.sum` over the lanes. On a GPU that sum is a tree whose
shape follows the register layout Triton picks for the [1, BN, L] accumulator: with BN * L = 32 * warps
(one weight row per thread and lane, nr = 1) the BN rows take the first min(BN, 32) lanes of a warp, the
L lanes the other 32 / BN lanes, and the warps the rest of L. The reduction then adds partners across
the warp's lane bits from the highest down (shuffle xor 16, 8, ...), then across the warps' bits from the
highest down (sm_90 TTGIR and SASS of the committed kernel, triton 3.6, 2026-12-02: L 32 / BN 4 lanes
bits 2, 1, 0 then warp bits 4, 3; L 8 / BN 16: 0 then 2, 1; L 16 / BN 8: 1, 0 then 3, 2).

`order(bn, lanes, warps)` gives that sequence of lane-index bits; `tree` adds [L, X] values in it
(`packed(order(...))` its constexpr): under the Triton interpreter (where `tl.sum` is numpy's) the int8
kernel adds its lanes so, giving the GPU's bits. The tensor-core kernel that must give the int8 kernel's
bits for many rows (engine.kernels.dp4a_mma) visits the lanes in the order `perm` packs, so that the
same tree is a plain pairwise sum; tests/engine/test_dp4a_mma.py compares the two kernels under the
interpreter and on a GPU, where `tl.sum` is the one the layout gives.
"""
from __future__ import annotations

import triton
import triton.language as tl

LEVELS = 5              # a tree over up to 32 lanes


def order(bn: int, lanes: int, warps: int) -> tuple[int, ...]:
    """The lane-index bits in the order the GPU's tl.sum over a [1, bn, lanes] accumulator combines them."""
    if bn * lanes != 32 * warps or lanes & (lanes - 1) or bn & (bn - 1):
        raise ValueError(f"no known lane order for {bn} weight rows x {lanes} lanes on {warps} warps")
    lane_bits = (32 // min(bn, 32)).bit_length() - 1
    bits = lanes.bit_length() - 1
    return tuple(range(lane_bits - 1, -1, -1)) + tuple(range(bits - 1, lane_bits - 1, -1))


def levels(bits: tuple[int, ...]) -> tuple[int, ...]:
    """`bits` as `tree` combines them: each bit as numbered once the bits combined before it are gone,
    padded with -1 to LEVELS entries."""
    out, gone = [], []
    for b in bits:
        out.append(b - sum(1 for g in gone if g < b))
        gone.append(b)
    return tuple(out) + (-1,) * (LEVELS - len(out))


@triton.jit
def _combine(v, LC: tl.constexpr, B: tl.constexpr, X: tl.constexpr):
    """v [LC, X]: each lane l added to its partner l ^ (1 << B) -> [LC // 2, X] (the lane with bit B clear
    keeps its place)."""
    v = tl.reshape(v, (LC // (2 << B), 2, 1 << B, X))
    a, b = tl.split(tl.permute(v, (0, 2, 3, 1)))
    return tl.reshape(a + b, (LC // 2, X))


@triton.jit
def tree(v, L: tl.constexpr, X: tl.constexpr, ORD: tl.constexpr):
    """v [L, X] summed over its first axis in the order `packed` gave as ORD: [X]."""
    if ORD & 7:
        v = _combine(v, L, (ORD & 7) - 1, X)
    if (ORD >> 3) & 7:
        v = _combine(v, L // 2, ((ORD >> 3) & 7) - 1, X)
    if (ORD >> 6) & 7:
        v = _combine(v, L // 4, ((ORD >> 6) & 7) - 1, X)
    if (ORD >> 9) & 7:
        v = _combine(v, L // 8, ((ORD >> 9) & 7) - 1, X)
    if (ORD >> 12) & 7:
        v = _combine(v, L // 16, ((ORD >> 12) & 7) - 1, X)
    return tl.reshape(v, (X,))


def packed(bits: tuple[int, ...]) -> int:
    """The ORD constexpr of `tree` for these bits (0: no order, the caller sums with tl.sum)."""
    return perm(tuple(b + 1 for b in levels(bits) if b >= 0))


def perm(bits: tuple[int, ...]) -> int:
    """bits packed three bits each, the first combined lowest: the visiting order of a kernel that adds
    lanes one by one (engine.kernels.dp4a_mma: visit t is lane sum(bit i of t << bits[i]))."""
    return sum(b << (3 * i) for i, b in enumerate(bits))
