"""Decode rows on int8 dot products: the streaming-layout weights (engine.kernels.packed) times
activations quantized to int8, four multiply-adds per `dp4a` instruction.

Why: a decode row reads each weight once, so the matmul should run at memory speed, but with float
arithmetic every 4-bit code costs an extract, a conversion, a dequantizing FMA and a dot FMA: more
instructions per byte than an SM can issue at HBM speed (sass_report.py, 2026-11-30). Here the x
rows are first quantized per 32 values (`quantize`: d = max|x| / 127, q = round(x / d), and
s = d * sum(q) for the types with a minimum), and then one 32-bit word of codes gives four weights by
one mask (low nibbles) or a shift and a mask (high nibbles), multiplied with four x bytes in one dp4a;
the scales are applied once per 16 or 32 values in float32. This is the activation rounding llama.cpp
does in its quantized matmuls (q8_1); the kernel is not bit-equal to the float kernels, but a row's
result depends only on that row: each program owns BN weight rows and the whole of K, each thread one
16-byte vector of codes per step, and a row's partial sums are added in one fixed order (lanes, then
one shuffle tree) whatever the number of rows in the tile.

Rows: the real row count is read on the device (one captured graph serves 1..T rows); the real rows
run in passes of RB: each loaded weight vector serves the pass's rows one after another, each row by
the same code into its own accumulator (a row's arithmetic cannot depend on the others or on its
place in a pass); rows T' < T get zeros. A 1-row tile takes one row per pass (fewer registers).
IQ4_NL / IQ4_XS codes become their int8 values by a table lookup (engine.kernels.iq4), then the
dot products are Q8_0's.
Importing this module imports triton. Under the Triton interpreter dp4a is computed with shifts.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from engine.kernels import lane_tree, pdl
from engine.kernels.iq4 import kvalues8
from engine.kernels.packed import Packed

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
# every FMA is written out (tl.fma) and no other multiply-add is fused: the float arithmetic is the one
# this source spells, not a choice the compiler may make differently for another kernel shape
NO_FUSION = {} if INTERPRET else {"enable_fp_fusion": False}


@triton.jit
def q8_store(x, b, q_row, ds_row, K):
    """Quantize x [NB, 32] (float32: the values of one row's 32-value blocks b [NB]) and store the int8
    codes at q_row[k] and (d, d * sum(q)) at ds_row[2 b], blocks past K left out. Also called by the
    row kernels that make a decode matmul's input (engine.kernels.fused), so one formula rounds every x."""
    k = b[:, None] * 32 + tl.arange(0, 32)[None, :]
    d = tl.max(tl.abs(x), axis=1) / 127.0
    inv = tl.where(d > 0, 1.0 / tl.where(d > 0, d, 1.0), 0.0)
    v = x * inv[:, None]
    q = tl.floor(tl.abs(v) + 0.5)
    q = tl.minimum(q, 127.0)
    qi = tl.where(v < 0, -q, q).to(tl.int32)
    tl.store(q_row + k, qi.to(tl.int8), mask=k < K)
    bok = b < K // 32
    tl.store(ds_row + b * 2, d, mask=bok)
    tl.store(ds_row + b * 2 + 1, d * tl.sum(qi, axis=1).to(tl.float32), mask=bok)


@triton.jit
def _quant_kernel(x_ptr, q_ptr, ds_ptr, K, stride_x, NB: tl.constexpr, PDL: tl.constexpr):
    """Row r, 32-value blocks [c*NB, c*NB + NB)."""
    pdl.enter(PDL)
    r = tl.program_id(0).to(tl.int64)
    b = tl.program_id(1) * NB + tl.arange(0, NB)
    k = b[:, None] * 32 + tl.arange(0, 32)[None, :]
    x = tl.load(x_ptr + r * stride_x + k, mask=k < K, other=0.0).to(tl.float32)
    q8_store(x, b, q_ptr + r * K, ds_ptr + r * (K // 32) * 2, K)


def buffers(m: int, k: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Empty (q int8 [m, k], ds float32 [m, k/32, 2]) for m rows of x: views of the first m rows of buffers
    of m rounded up to 8 rows (engine.kernels.q4k_mma reads x in passes of 8 rows without masks; what it
    reads past row m lands only in results it does not store)."""
    mp = -(-m // 8) * 8
    return (torch.empty((mp, k), dtype=torch.int8, device=device)[:m],
            torch.empty((mp, k // 32, 2), dtype=torch.float32, device=device)[:m])


def quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] float -> (q int8 [M, K], ds float32 [M, K/32, 2]); K a multiple of 32."""
    m, k = x.shape
    q, ds = buffers(m, k, x.device)
    if m:
        nb = min(32, triton.next_power_of_2(k // 32))
        _quant_kernel[(m, triton.cdiv(k // 32, nb))](x, q, ds, k, x.stride(0), NB=nb, num_warps=4,
                                                   **pdl.launch(x.device))
    return q, ds


@triton.jit
def _dp4a(a, b, c, INTERP: tl.constexpr):
    """c + the dot product of a's and b's four signed bytes, elementwise on int32 tensors."""
    if INTERP:
        for sh in tl.static_range(4):
            c += ((a << (24 - 8 * sh)) >> 24) * ((b << (24 - 8 * sh)) >> 24)
        return c
    else:
        return tl.inline_asm_elementwise("dp4a.s32.s32 $0, $1, $2, $3;", "=r,r,r,r", [a, b, c],
                                         dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def _x_unit(xp, dp, ok, ok3, KIND: tl.constexpr, INTERP: tl.constexpr):
    """One x row's share of a unit step: its int8 words (four 16-byte vectors for the 64 values of Q4_K
    and IQ4_XS, two for the 32-value types) and its block scales (d, d * sum(q)) at the lanes' full shape."""
    x0 = tl.load(xp, mask=ok, other=0)
    x1 = tl.load(xp + 4, mask=ok, other=0)
    x2 = x0
    x3 = x1
    d0 = tl.load(dp, mask=ok3, other=0.0)
    s0 = d0
    if KIND == 4 or KIND == 11:
        x2 = tl.load(xp + 8, mask=ok, other=0)
        x3 = tl.load(xp + 12, mask=ok, other=0)
        s0 = tl.load(dp + 1, mask=ok3, other=0.0)
        d1 = tl.load(dp + 2, mask=ok3, other=0.0)
        s1 = tl.load(dp + 3, mask=ok3, other=0.0)
    elif KIND == 6 or KIND == 10 or KIND >= 12:     # (no minimums per 32: the sums of q unused)
        x2 = tl.load(xp + 8, mask=ok, other=0)
        x3 = tl.load(xp + 12, mask=ok, other=0)
        d1 = tl.load(dp + 2, mask=ok3, other=0.0)
        s1 = s0
    else:
        if KIND == 2 or KIND == 3 or KIND == 9:
            s0 = tl.load(dp + 1, mask=ok3, other=0.0)
        d1 = d0
        s1 = s0
    return x0, x1, x2, x3, d0, s0, d1, s1


@triton.jit
def _dot_unit(acc, x0, x1, x2, x3, d0, s0, d1, s1, ca, cb, dd, dmin, sc_lo, sc_hi, mn_lo, mn_hi,
              KIND: tl.constexpr, INTERP: tl.constexpr):
    """acc + one x row's share (_x_unit) of one weight unit (_w_unit). Q4_K: 64 nibbles, low ones
    sub-block 2g, high ones 2g + 1; IQ4_XS: two 32-value runs' looked-up values (ca, cb: run 2g's values
    0..15 and 16..31; mn_lo, mn_hi: run 2g + 1's); Q8_0 (and IQ4_NL's looked-up values): 32 int8 codes in
    two 16-byte halves; Q4_0 / Q4_1: 32 nibbles, values 0..15 low, 16..31 high; Q6_K: 32 int8 codes, each
    16-byte half its own scale (plo, phi); Q5_K / Q5_1: 32 int8 codes as Q8_0, a minimum as Q4_1; the bit
    planes: 64 values (ca, cb, mn_lo, mn_hi: 16 each, _w_values'); Q6_K's, Q3_K's and Q2_K's first 32 are
    scaled under x's d0 here, the second 32 under d1 in scale_unit."""
    zero = tl.zeros_like(ca)
    if KIND == 12:                  # Q2_K's planes: integer sums per 16 under the scale word's sc and m
        plo, phi = _q2k_half(ca, cb, x0, x1, sc_lo, INTERP)
        acc = tl.fma(d0, tl.fma(-dmin, phi.to(tl.float32), dd * plo.to(tl.float32)), acc)
        plo, phi = _q2k_half(mn_lo, mn_hi, x2, x3, sc_lo >> 16, INTERP)
    elif KIND == 8 or KIND == 10 or KIND == 13:
        plo = tl.sum(_dp4a(ca, x0, zero, INTERP), axis=3)
        phi = tl.sum(_dp4a(cb, x1, zero, INTERP), axis=3)
        if KIND != 8:                       # Q6_K's and Q3_K's planes: 64 values, a scale per 16
            acc = tl.fma(d0, tl.fma(dmin, phi.to(tl.float32), dd * plo.to(tl.float32)), acc)
            plo = tl.sum(_dp4a(mn_lo, x2, zero, INTERP), axis=3)
            phi = tl.sum(_dp4a(mn_hi, x3, zero, INTERP), axis=3)
    elif KIND == 4:
        plo = _dp4a(ca & 0x0F0F0F0F, x0, zero, INTERP)
        plo = tl.sum(_dp4a(cb & 0x0F0F0F0F, x1, plo, INTERP), axis=3)
        phi = _dp4a((ca >> 4) & 0x0F0F0F0F, x2, zero, INTERP)
        phi = tl.sum(_dp4a((cb >> 4) & 0x0F0F0F0F, x3, phi, INTERP), axis=3)
    elif KIND == 14:                # table codes, an integer scale per 16 (the four bytes of sc_lo): exact sums
        plo = (sc_lo & 255) * tl.sum(_dp4a(ca, x0, zero, INTERP), axis=3) \
            + ((sc_lo >> 8) & 255) * tl.sum(_dp4a(cb, x1, zero, INTERP), axis=3)
        phi = ((sc_lo >> 16) & 255) * tl.sum(_dp4a(mn_lo, x2, zero, INTERP), axis=3) \
            + ((sc_lo >> 24) & 255) * tl.sum(_dp4a(mn_hi, x3, zero, INTERP), axis=3)
    elif KIND == 1 or KIND >= 5:
        plo = _dp4a(ca, x0, zero, INTERP)
        plo = tl.sum(_dp4a(cb, x1, plo, INTERP), axis=3)
        phi = plo
        if KIND == 6 or KIND == 11:
            phi = _dp4a(mn_lo, x2, zero, INTERP)
            phi = tl.sum(_dp4a(mn_hi, x3, phi, INTERP), axis=3)
    else:
        plo = _dp4a(ca & 0x0F0F0F0F, x0, zero, INTERP)
        plo = tl.sum(_dp4a((ca >> 4) & 0x0F0F0F0F, x1, plo, INTERP), axis=3)
        phi = plo
    return scale_unit(acc, plo, phi, d0, s0, d1, s1, dd, dmin, sc_lo, sc_hi, mn_lo, mn_hi, KIND)


@triton.jit
def _x_sums(xa, xb, INTERP: tl.constexpr):
    """The integer sums of two 16-value x vectors (at most 16 * 127 in size each)."""
    zero = tl.zeros_like(xa)
    one = zero + 0x01010101
    return tl.sum(_dp4a(one, xa, zero, INTERP), axis=3), tl.sum(_dp4a(one, xb, zero, INTERP), axis=3)


@triton.jit
def _q2k_half(va, vb, xa, xb, w, INTERP: tl.constexpr):
    """One 32-value half of a Q2_K planes unit: (sum sc q x, sum m x) over its two 16s, exact integers; w's
    low two bytes are the 16s' (sc | m << 4)."""
    zero = tl.zeros_like(va)
    p0 = tl.sum(_dp4a(va, xa, zero, INTERP), axis=3)
    p1 = tl.sum(_dp4a(vb, xb, zero, INTERP), axis=3)
    n0, n1 = _x_sums(xa, xb, INTERP)
    return (w & 15) * p0 + ((w >> 8) & 15) * p1, ((w >> 4) & 15) * n0 + ((w >> 12) & 15) * n1


@triton.jit
def scale_unit(acc, plo, phi, d0, s0, d1, s1, dd, dmin, sc_lo, sc_hi, mn_lo, mn_hi, KIND: tl.constexpr):
    """acc + a unit's exact integer sums (plo, and phi for Q4_K's high sub-block or IQ4_XS's second run)
    scaled by the weight's and x's block scales: the float arithmetic of a unit, the one every int8
    decode kernel spells (engine.kernels.dp4a_mma computes the same integers on tensor cores and calls
    this too)."""
    if KIND == 4 or KIND == 6:      # two sub-blocks (runs), each its integer scale under the 256 values' d
        t = tl.fma((sc_hi * phi).to(tl.float32), d1, (sc_lo * plo).to(tl.float32) * d0)
        if KIND == 4:               # (IQ4_XS has no minimums)
            acc = tl.fma(-dmin, tl.fma(mn_hi, s1, mn_lo * s0), acc)
        acc = tl.fma(dd, t, acc)
    elif KIND == 14:                # table codes per 16: the runs' sums already carry their integer scales
        acc = tl.fma(dd, tl.fma(phi.to(tl.float32), d1, plo.to(tl.float32) * d0), acc)
    elif KIND == 8:                 # Q6_K: two 16-value halves, scales dd and dmin, under x's d0
        acc = tl.fma(d0, tl.fma(dmin, phi.to(tl.float32), dd * plo.to(tl.float32)), acc)
    elif KIND == 10 or KIND == 13:  # Q6_K's, Q3_K's planes, values 32..63: as kind 8's, scales sc_lo, sc_hi, x's d1
        acc = tl.fma(d1, tl.fma(sc_hi, phi.to(tl.float32), sc_lo * plo.to(tl.float32)), acc)
    elif KIND == 12:                # Q2_K's planes, values 32..63: sum sc q x, sum m x under x's d1
        acc = tl.fma(d1, tl.fma(-dmin, phi.to(tl.float32), dd * plo.to(tl.float32)), acc)
    elif KIND == 11:                # Q5_K's planes: two sub-blocks, scales dd, dmin and minimums sc_lo, sc_hi
        t = tl.fma(dmin, d1 * phi.to(tl.float32), dd * (d0 * plo.to(tl.float32)))
        acc = tl.fma(-sc_hi, s1, tl.fma(-sc_lo, s0, acc + t))
    else:
        p = plo.to(tl.float32)
        if KIND == 2:
            acc = tl.fma(dd, tl.fma(-8.0, s0, d0 * p), acc)
        elif KIND == 3 or KIND == 9:
            acc = tl.fma(dmin, s0, tl.fma(dd, d0 * p, acc))
        else:
            acc = tl.fma(dd, d0 * p, acc)
    return acc


@triton.jit
def _w_ptrs(n3, u3, codes, scales, sub, K, KIND: tl.constexpr):
    """Pointers of weight rows n3's first units (lanes u3): codes [.., 4] (one 16-byte vector a lane),
    scales, and sub-block bytes (Q4_K) or Q6-style run scales (IQ4_XS) or words (Q6_K's planes)."""
    j = tl.arange(0, 4)[None, None, None, :]
    if KIND == 10:
        WU: tl.constexpr = 12           # 48 bytes: 32 of low nibbles, 16 of high bits
        U = K // 64
    elif KIND == 12 or KIND == 13:
        WU: tl.constexpr = 4            # 16 bytes of 2-bit codes
        U = K // 64
    elif KIND == 4 or KIND == 6 or KIND == 11 or KIND == 14:
        WU: tl.constexpr = 8            # 32-bit code words per unit
        U = K // 64
    elif KIND == 1 or KIND >= 8:
        WU: tl.constexpr = 8
        U = K // 32
    else:
        WU: tl.constexpr = 4
        U = K // 32
    NB = K // 32
    cp = codes + (n3 * (U * WU) + u3 * WU)[:, :, :, None] + j
    gp = sub
    if KIND == 4 or KIND == 11 or KIND == 12:
        sb = n3 * (K // 256) + u3 // 4
        sp = scales + sb * 2
        if KIND == 4:
            gp = sub + sb * 16 + 2 * (u3 % 4)
        elif KIND == 11:            # three words a unit: scales and minimums, then the fifth bits
            gp = sub + (n3 * U + u3) * 3
        else:                       # Q2_K: a word of four (sc | m << 4) bytes a unit
            gp = sub + n3 * U + u3
    elif KIND == 3 or KIND == 8 or KIND == 9:     # two float32 a unit: Q6_K's halves' scales, (d, m)
        sp = scales + (n3 * NB + u3) * 2
    elif KIND == 6 or KIND == 14:   # d per 256 values, and each 32-value run's integer scale (two runs a unit),
        sp = scales + n3 * (K // 256) + u3 // 4
        if KIND == 6:
            gp = sub + n3 * NB + 2 * u3
        else:                       # or a word of four integer scales per 16 a unit
            gp = sub + n3 * U + u3
    elif KIND == 10 or KIND == 13:  # d per 256 values, a word of four int8 sub-block scales a unit
        sp = scales + n3 * (K // 256) + u3 // 4
        if KIND == 10:
            gp = sub + n3 * U + u3
        else:                       # (Q3_K: then two words of third bits)
            gp = sub + (n3 * U + u3) * 3
    else:
        sp = scales + n3 * NB + u3
    return cp, sp, gp


@triton.jit
def _w_unit(cp, sp, gp, wok, wok3, KIND: tl.constexpr, INTERP: tl.constexpr):
    """One unit step's weights at the lanes: codes (ca, cb: 16-byte vectors), d, dmin or m, and Q4_K's
    sub-block scales and minimums. IQ4_XS (two runs: their scales in sc_lo, sc_hi) has no minimums;
    its codes and IQ4_NL's are looked up by `_w_values` when the step runs (a prefetched step holds
    the codes, half the registers of their values)."""
    ca = tl.load(cp, mask=wok, other=0)
    cb = ca
    dmin = tl.zeros(wok3.shape, dtype=tl.float32)
    sc_lo = tl.zeros(wok3.shape, dtype=tl.int32)
    sc_hi = sc_lo
    mn_lo = dmin
    mn_hi = dmin
    if KIND == 1:
        cb = tl.load(cp + 4, mask=wok, other=0)
        dd = tl.load(sp, mask=wok3, other=0.0).to(tl.float32)
    elif KIND == 4:
        cb = tl.load(cp + 4, mask=wok, other=0)
        dd = tl.load(sp, mask=wok3, other=0.0).to(tl.float32)
        dmin = tl.load(sp + 1, mask=wok3, other=0.0).to(tl.float32)
        sc_lo = tl.load(gp, mask=wok3, other=0).to(tl.int32)
        sc_hi = tl.load(gp + 1, mask=wok3, other=0).to(tl.int32)
        mn_lo = tl.load(gp + 8, mask=wok3, other=0).to(tl.float32)
        mn_hi = tl.load(gp + 9, mask=wok3, other=0).to(tl.float32)
    elif KIND == 6 or KIND == 14:   # IQ4_XS and the table codes: 2 x 32 codes, d, the runs' two scales
        cb = tl.load(cp + 4, mask=wok, other=0)
        dd = tl.load(sp, mask=wok3, other=0.0).to(tl.float32)
        sc_lo = tl.load(gp, mask=wok3, other=0).to(tl.int32)
        if KIND == 6:               # (kind 14: sc_lo is the word of the four 16s' scales)
            sc_hi = tl.load(gp + 1, mask=wok3, other=0).to(tl.int32)
    elif KIND == 10:                # Q6_K's planes: low nibbles (ca, cb), high bits (mn_lo), d, scales' word
        cb = tl.load(cp + 4, mask=wok, other=0)
        mn_lo = tl.load(cp + 8, mask=wok, other=0)
        dd = tl.load(sp, mask=wok3, other=0.0).to(tl.float32)
        sc_lo = tl.load(gp, mask=wok3, other=0)
    elif KIND == 13:                # Q3_K's planes: 64 2-bit codes, d, the scales' word, the third bits
        dd = tl.load(sp, mask=wok3, other=0.0).to(tl.float32)
        sc_lo = tl.load(gp, mask=wok3, other=0)
        mn_lo = tl.load(gp + 1, mask=wok3, other=0)
        mn_hi = tl.load(gp + 2, mask=wok3, other=0)
    elif KIND == 12:                # Q2_K's planes: 64 2-bit codes, d, dmin, the scales' word
        dd = tl.load(sp, mask=wok3, other=0.0).to(tl.float32)
        dmin = tl.load(sp + 1, mask=wok3, other=0.0).to(tl.float32)
        sc_lo = tl.load(gp, mask=wok3, other=0)
    elif KIND == 11:                # Q5_K's planes: low nibbles, d, dmin, the scales' word, the fifth bits
        cb = tl.load(cp + 4, mask=wok, other=0)
        dd = tl.load(sp, mask=wok3, other=0.0).to(tl.float32)
        dmin = tl.load(sp + 1, mask=wok3, other=0.0).to(tl.float32)
        sc_lo = tl.load(gp, mask=wok3, other=0)
        mn_lo = tl.load(gp + 1, mask=wok3, other=0)
        mn_hi = tl.load(gp + 2, mask=wok3, other=0)
    elif KIND >= 8:                 # Q6_K (dd, dmin: the two halves' scales), Q5_K / Q5_1 (d, m)
        cb = tl.load(cp + 4, mask=wok, other=0)
        dd = tl.load(sp, mask=wok3, other=0.0)
        dmin = tl.load(sp + 1, mask=wok3, other=0.0)
    else:
        dd = tl.load(sp, mask=wok3, other=0.0).to(tl.float32)
        if KIND == 3:
            dmin = tl.load(sp + 1, mask=wok3, other=0.0).to(tl.float32)
    return ca, cb, dd, dmin, sc_lo, sc_hi, mn_lo, mn_hi


@triton.jit
def _w_values(ca, cb, dd, dmin, sc_lo, sc_hi, mn_lo, mn_hi, KIND: tl.constexpr, INTERP: tl.constexpr,
              TAB: tl.constexpr = 0):
    """A step's IQ4 codes -> their int8 values (ca: values 0..15 of the first run, cb: 16..31; IQ4_XS's
    second run's in mn_lo, mn_hi: it has no minimums), once per step, not per x row; the bit planes (kinds
    10-13) -> their 64 int8 values (ca, cb, mn_lo, mn_hi: 16 each) and, Q6_K's and Q3_K's, the four scales
    d * sc (dd, dmin, sc_lo, sc_hi), Q5_K's d * sc (dd, dmin) and dmin * m (sc_lo, sc_hi), all exact in
    float32 (Q2_K's scale word stays whole: _dot_unit takes its nibbles as integers); other kinds as they are.
    TAB: the table kind 6's codes index (engine.kernels.iq4.TABLE_VALUES: IQ4_XS's, or a grid i-quant's)."""
    if KIND == 6 or KIND == 14:
        mn_lo, mn_hi = kvalues8(cb, INTERP, TAB)
        ca, cb = kvalues8(ca, INTERP, TAB)
    elif KIND == 5:
        ca, cb = kvalues8(ca, INTERP)
    elif KIND == 10 or KIND == 13:
        if KIND == 10:
            hv = mn_lo
            ca, cb, mn_lo, mn_hi = (_six_bits(ca, hv, 0), _six_bits(cb, hv, 1), _six_bits(ca >> 4, hv, 2),
                                    _six_bits(cb >> 4, hv, 3))
        else:
            h = _unit_bits(mn_lo, mn_hi)
            c = ca
            ca, cb, mn_lo, mn_hi = (_three_bits(c, h, 0), _three_bits(c, h, 1), _three_bits(c, h, 2),
                                    _three_bits(c, h, 3))
        sc = sc_lo
        dmin = dd * ((sc << 16) >> 24).to(tl.float32)
        sc_lo = dd * ((sc << 8) >> 24).to(tl.float32)
        sc_hi = dd * (sc >> 24).to(tl.float32)
        dd = dd * ((sc << 24) >> 24).to(tl.float32)
    elif KIND == 12:                # -> values 0..15 (ca), 16..31 (cb), 32..47 (mn_lo), 48..63 (mn_hi)
        c = ca
        ca, cb, mn_lo, mn_hi = c & 0x03030303, (c >> 2) & 0x03030303, (c >> 4) & 0x03030303, (c >> 6) & 0x03030303
    elif KIND == 11:                # -> values (ca, cb, mn_lo, mn_hi), d * sc (dd, dmin), dmin * m (sc_lo, sc_hi)
        h = _unit_bits(mn_lo, mn_hi)
        ca, cb, mn_lo, mn_hi = (_five_bits(ca, h, 0), _five_bits(cb, h, 1), _five_bits(ca >> 4, h, 2),
                                _five_bits(cb >> 4, h, 3))
        sc = sc_lo
        sc_lo = dmin * ((sc >> 16) & 0xFF).to(tl.float32)
        sc_hi = dmin * ((sc >> 24) & 0xFF).to(tl.float32)
        dmin = dd * ((sc >> 8) & 0xFF).to(tl.float32)
        dd = dd * (sc & 0xFF).to(tl.float32)
    return ca, cb, dd, dmin, sc_lo, sc_hi, mn_lo, mn_hi


@triton.jit
def _unit_bits(h0, h1):
    """A unit's two words of one bit a value (value 16 g + 4 j + b: word j // 2, byte b, bit 2 g + j % 2) ->
    [.., 4] words (one per j), the value's bit at bit 2 g of byte b."""
    j = tl.arange(0, 4)[None, None, None, :]
    return tl.where(j < 2, h0[:, :, :, None], h1[:, :, :, None]) >> (j % 2)


@triton.jit
def _three_bits(c, h, G: tl.constexpr):
    """Words of four int8 values from 3-bit two's complement codes: bits 2 G, 2 G + 1 of each byte of c
    (two_bit_planes' codes) and bit 2 G of h (_unit_bits) as bit 2; bit 2 copied into bits 3..7."""
    u = ((c >> (2 * G)) & 0x03030303) | (((h >> (2 * G)) & 0x01010101) << 2)
    return u + (u & 0x04040404) * 62


@triton.jit
def _five_bits(lo, h, G: tl.constexpr):
    """Words of four 5-bit values: the low nibbles (lo & 0x0F0F0F0F) and bit 2 G of each byte of h as bit 4."""
    return (lo & 0x0F0F0F0F) | (((h >> (2 * G)) & 0x01010101) << 4)


@triton.jit
def _six_bits(lo, hv, G: tl.constexpr):
    """Words of four int8 values from 6-bit two's complement codes: the low nibbles (lo & 0x0F0F0F0F) and
    bits 2 G, 2 G + 1 of each byte of hv as bits 4, 5; bit 5 copied into bits 6 and 7 (within each byte)."""
    u = (lo & 0x0F0F0F0F) | (((hv >> (2 * G)) & 0x03030303) << 4)
    t = u & 0x20202020
    return u | (t << 1) | (t << 2)


@triton.jit
def _row(acc, acc_b, i, r3, M, xp, dp, rstride, dstride, wok3,
         ca, cb, dd, dmin, sc_lo, sc_hi, mn_lo, mn_hi,
         ca_b, cb_b, dd_b, dmin_b, sc_lo_b, sc_hi_b, mn_lo_b, mn_hi_b,
         XS: tl.constexpr, KIND: tl.constexpr, INTERP: tl.constexpr):
    """acc (and acc_b, XS == 2) + the share of x row r3 + i (r3: the pass's first row at full shape; real
    when < M) of the unit step whose weights are loaded: x loaded once for the XS weight rows."""
    ok3 = wok3 & (r3 + i < M)
    x0, x1, x2, x3, d0, s0, d1, s1 = _x_unit(xp + i * rstride, dp + i * dstride, ok3[:, :, :, None], ok3, KIND,
                                             INTERP)
    acc = _dot_unit(acc, x0, x1, x2, x3, d0, s0, d1, s1, ca, cb, dd, dmin, sc_lo, sc_hi, mn_lo, mn_hi,
                    KIND, INTERP)
    if XS == 2:
        acc_b = _dot_unit(acc_b, x0, x1, x2, x3, d0, s0, d1, s1, ca_b, cb_b, dd_b, dmin_b, sc_lo_b, sc_hi_b,
                          mn_lo_b, mn_hi_b, KIND, INTERP)
    return acc, acc_b


@triton.jit
def _store_row(acc, i, r0, M, part, stride_pm, n_raw, N, ORD: tl.constexpr):
    """Row r0 + i's sums over the lanes (ORD: in the GPU's order written out, for the interpreter)."""
    r = r0 + i + tl.zeros((1, 1), dtype=tl.int32)
    if ORD:
        BN: tl.constexpr = acc.shape[1]
        L: tl.constexpr = acc.shape[2]
        y = tl.reshape(lane_tree.tree(tl.permute(tl.reshape(acc, (BN, L)), (1, 0)), L, BN, ORD), (1, BN))
    else:
        y = tl.sum(acc, axis=2)
    tl.store(part + r * stride_pm + n_raw[None, :], y, mask=(r < M) & (n_raw < N)[None, :])


@triton.jit
def _pass(r0, M, xq, xds, codes, scales, sub, part, n_raw, N, K, stride_pm, KIND: tl.constexpr,
          BN: tl.constexpr, L: tl.constexpr, EVEN: tl.constexpr, INTERP: tl.constexpr, RB: tl.constexpr,
          XS: tl.constexpr, PF: tl.constexpr = False, ORD: tl.constexpr = 0, TAB: tl.constexpr = 0):
    """Rows r0 .. r0 + RB - 1 (those < M) times weight rows n_raw (and n_raw + BN, XS == 2), stored to part.

    A thread's unit: Q4_K 32 bytes (one 64-value group: two sub-blocks, low and high nibbles), IQ4_XS 32
    bytes (two 32-value runs), Q4_0 / Q4_1 16 bytes (one block), Q8_0 32 bytes (one block), IQ4_NL 16
    bytes (one block); IQ4 codes turned into their int8 values once for the pass's rows. L lanes walk a
    weight row's units in steps of L. Each step loads the weights
    once and gives them to the pass's RB rows (1, 2, 4 or 8) one after another, each row by the same code
    into its own accumulator, so a row's bits depend neither on its pass nor on the rows beside it.
    XS == 2: a thread holds two weight rows (n_raw and n_raw + BN) and each x load serves both (x is
    read from L1 once per two weight rows); each weight row runs the same code as with XS == 1.
    PF: each step loads the next step's weight units before its rows' dot products (two sets of weight
    registers), so the next loads are in flight while this step computes; the same arithmetic."""
    WIDE: tl.constexpr = KIND == 4 or KIND == 6 or KIND >= 10     # 64-value units
    if WIDE:
        U = K // 64                     # units per weight row
    else:
        U = K // 32
    NB = K // 32                        # 32-value x blocks per row
    full = tl.zeros((1, BN, L), dtype=tl.int32)       # every tensor at full shape: one layout
    r3 = r0 + full
    n3 = tl.minimum(n_raw, N - 1)[None, :, None] + full
    u3 = tl.arange(0, L)[None, None, :] + full
    j = tl.arange(0, 4)[None, None, None, :]            # a thread's 16-byte vector: 4 words
    cp, sp, gp = _w_ptrs(n3, u3, codes, scales, sub, K, KIND)
    cp_b, sp_b, gp_b = cp, sp, gp
    if XS == 2:
        cp_b, sp_b, gp_b = _w_ptrs(tl.minimum(n_raw + BN, N - 1)[None, :, None] + full, u3, codes, scales, sub, K,
                                   KIND)
    if WIDE:
        xp = xq + (r3 * (K // 4) + u3 * 16)[:, :, :, None] + j
        dp = xds + (r3 * NB + 2 * u3) * 2
    else:
        xp = xq + (r3 * (K // 4) + u3 * 8)[:, :, :, None] + j
        dp = xds + (r3 * NB + u3) * 2
    a0 = tl.zeros((1, BN, L), dtype=tl.float32)   # rows 0..3 of the pass (b0..b3: the second weight rows')
    a1, a2, a3, b0, b1, b2, b3 = a0, a0, a0, a0, a0, a0, a0
    e0, e1, e2, e3, f0, f1, f2, f3 = a0, a0, a0, a0, a0, a0, a0, a0   # rows 4..7 (RB == 8)
    if KIND == 4:
        step_w, step_s, step_g, step_x, step_d = 8 * L, L // 2, 4 * L, 16 * L, 4 * L
    elif KIND == 6:
        step_w, step_s, step_g, step_x, step_d = 8 * L, L // 4, 2 * L, 16 * L, 4 * L
    elif KIND == 14:
        step_w, step_s, step_g, step_x, step_d = 8 * L, L // 4, L, 16 * L, 4 * L
    elif KIND == 10:
        step_w, step_s, step_g, step_x, step_d = 12 * L, L // 4, L, 16 * L, 4 * L
    elif KIND == 11:
        step_w, step_s, step_g, step_x, step_d = 8 * L, L // 2, 3 * L, 16 * L, 4 * L
    elif KIND == 12:
        step_w, step_s, step_g, step_x, step_d = 4 * L, L // 2, L, 16 * L, 4 * L
    elif KIND == 13:
        step_w, step_s, step_g, step_x, step_d = 4 * L, L // 4, 3 * L, 16 * L, 4 * L
    else:
        step_w = (8 if KIND == 1 or KIND >= 8 else 4) * L
        step_s = 2 * L if KIND == 3 or KIND >= 8 else L
        step_g, step_x, step_d = L, 8 * L, 2 * L
    if EVEN:
        wok3 = full == 0
    else:
        wok3 = u3 < U
    if PF:      # the first unit step's weights, loaded before the loop (each step then loads the next's)
        na, nb, nd, nm, ns_lo, ns_hi, nm_lo, nm_hi = _w_unit(cp, sp, gp, wok3[:, :, :, None], wok3, KIND, INTERP)
        na_b, nb_b, nd_b, nm_b, ns_lo_b, ns_hi_b, nm_lo_b, nm_hi_b = na, nb, nd, nm, ns_lo, ns_hi, nm_lo, nm_hi
        if XS == 2:
            na_b, nb_b, nd_b, nm_b, ns_lo_b, ns_hi_b, nm_lo_b, nm_hi_b = _w_unit(
                cp_b, sp_b, gp_b, wok3[:, :, :, None], wok3, KIND, INTERP)
    for u0 in range(0, U, L):
        if PF:
            ca, cb, dd, dmin, sc_lo, sc_hi, mn_lo, mn_hi = na, nb, nd, nm, ns_lo, ns_hi, nm_lo, nm_hi
            ca_b, cb_b, dd_b, dmin_b, sc_lo_b, sc_hi_b, mn_lo_b, mn_hi_b = na_b, nb_b, nd_b, nm_b, ns_lo_b, ns_hi_b, \
                nm_lo_b, nm_hi_b
        else:
            if not EVEN:
                wok3 = u3 + u0 < U
            ca, cb, dd, dmin, sc_lo, sc_hi, mn_lo, mn_hi = _w_unit(cp, sp, gp, wok3[:, :, :, None], wok3, KIND, INTERP)
            ca_b, cb_b, dd_b, dmin_b, sc_lo_b, sc_hi_b, mn_lo_b, mn_hi_b = ca, cb, dd, dmin, sc_lo, sc_hi, mn_lo, mn_hi
            if XS == 2:
                ca_b, cb_b, dd_b, dmin_b, sc_lo_b, sc_hi_b, mn_lo_b, mn_hi_b = _w_unit(
                    cp_b, sp_b, gp_b, wok3[:, :, :, None], wok3, KIND, INTERP)
        cur3 = wok3
        cp += step_w
        sp += step_s
        gp += step_g
        cp_b += step_w
        sp_b += step_s
        gp_b += step_g
        if PF:
            wok3 = u3 + u0 + L < U          # the next step's units: in flight while this step's rows run
            na, nb, nd, nm, ns_lo, ns_hi, nm_lo, nm_hi = _w_unit(cp, sp, gp, wok3[:, :, :, None], wok3, KIND, INTERP)
            na_b, nb_b, nd_b, nm_b, ns_lo_b, ns_hi_b, nm_lo_b, nm_hi_b = na, nb, nd, nm, ns_lo, ns_hi, nm_lo, nm_hi
            if XS == 2:
                na_b, nb_b, nd_b, nm_b, ns_lo_b, ns_hi_b, nm_lo_b, nm_hi_b = _w_unit(
                    cp_b, sp_b, gp_b, wok3[:, :, :, None], wok3, KIND, INTERP)
        # (the codes looked up after the next step's loads are issued)
        ca, cb, dd, dmin, sc_lo, sc_hi, mn_lo, mn_hi = _w_values(ca, cb, dd, dmin, sc_lo, sc_hi, mn_lo, mn_hi, KIND,
                                                                 INTERP, TAB)
        if XS == 2:
            ca_b, cb_b, dd_b, dmin_b, sc_lo_b, sc_hi_b, mn_lo_b, mn_hi_b = _w_values(
                ca_b, cb_b, dd_b, dmin_b, sc_lo_b, sc_hi_b, mn_lo_b, mn_hi_b, KIND, INTERP, TAB)
        else:
            ca_b, cb_b, dd_b, dmin_b, sc_lo_b, sc_hi_b, mn_lo_b, mn_hi_b = ca, cb, dd, dmin, sc_lo, sc_hi, mn_lo, mn_hi
        a0, a1, a2, a3, b0, b1, b2, b3 = _quad(
            a0, a1, a2, a3, b0, b1, b2, b3, 0, r0, r3, M, xp, dp, K, cur3, ca, cb, dd, dmin, sc_lo, sc_hi, mn_lo,
            mn_hi, ca_b, cb_b, dd_b, dmin_b, sc_lo_b, sc_hi_b, mn_lo_b, mn_hi_b, RB, XS, KIND, INTERP)
        if RB > 4:                      # (its rows past the real count skipped inside, as the first quad's)
            e0, e1, e2, e3, f0, f1, f2, f3 = _quad(
                e0, e1, e2, e3, f0, f1, f2, f3, 4, r0, r3, M, xp, dp, K, cur3, ca, cb, dd, dmin, sc_lo, sc_hi,
                mn_lo, mn_hi, ca_b, cb_b, dd_b, dmin_b, sc_lo_b, sc_hi_b, mn_lo_b, mn_hi_b, RB, XS, KIND, INTERP)
        xp += step_x
        dp += step_d
    _store_quad(a0, a1, a2, a3, b0, b1, b2, b3, 0, r0, M, part, stride_pm, n_raw, N, BN, RB, XS, ORD)
    if RB > 4:
        _store_quad(e0, e1, e2, e3, f0, f1, f2, f3, 4, r0, M, part, stride_pm, n_raw, N, BN, RB, XS, ORD)


@triton.jit
def _quad(a0, a1, a2, a3, b0, b1, b2, b3, I0: tl.constexpr, r0, r3, M, xp, dp, K, wok3,
          ca, cb, dd, dmin, sc_lo, sc_hi, mn_lo, mn_hi, ca_b, cb_b, dd_b, dmin_b, sc_lo_b, sc_hi_b, mn_lo_b, mn_hi_b,
          RB: tl.constexpr, XS: tl.constexpr, KIND: tl.constexpr, INTERP: tl.constexpr):
    """The loaded unit step's share of the pass's rows I0 .. I0 + 3 (those below RB; a0..a3, and b0..b3 for
    the second weight rows). A pass's rows past the real count are skipped (the branch is the same for
    the whole program); each real row runs the same code."""
    rs = K // 4
    ds = (K // 32) * 2
    if r0 + I0 < M:
        a0, b0 = _row(a0, b0, I0, r3, M, xp, dp, rs, ds, wok3, ca, cb, dd, dmin, sc_lo, sc_hi, mn_lo, mn_hi,
                      ca_b, cb_b, dd_b, dmin_b, sc_lo_b, sc_hi_b, mn_lo_b, mn_hi_b, XS, KIND, INTERP)
    if RB > 1:
        if r0 + I0 + 1 < M:
            a1, b1 = _row(a1, b1, I0 + 1, r3, M, xp, dp, rs, ds, wok3, ca, cb, dd, dmin, sc_lo, sc_hi, mn_lo, mn_hi,
                          ca_b, cb_b, dd_b, dmin_b, sc_lo_b, sc_hi_b, mn_lo_b, mn_hi_b, XS, KIND, INTERP)
    if RB > 2:
        if r0 + I0 + 2 < M:
            a2, b2 = _row(a2, b2, I0 + 2, r3, M, xp, dp, rs, ds, wok3, ca, cb, dd, dmin, sc_lo, sc_hi, mn_lo, mn_hi,
                          ca_b, cb_b, dd_b, dmin_b, sc_lo_b, sc_hi_b, mn_lo_b, mn_hi_b, XS, KIND, INTERP)
        if r0 + I0 + 3 < M:
            a3, b3 = _row(a3, b3, I0 + 3, r3, M, xp, dp, rs, ds, wok3, ca, cb, dd, dmin, sc_lo, sc_hi, mn_lo, mn_hi,
                          ca_b, cb_b, dd_b, dmin_b, sc_lo_b, sc_hi_b, mn_lo_b, mn_hi_b, XS, KIND, INTERP)
    return a0, a1, a2, a3, b0, b1, b2, b3


@triton.jit
def _store_quad(a0, a1, a2, a3, b0, b1, b2, b3, I0: tl.constexpr, r0, M, part, stride_pm, n_raw, N,
                BN: tl.constexpr, RB: tl.constexpr, XS: tl.constexpr, ORD: tl.constexpr):
    _store_row(a0, I0, r0, M, part, stride_pm, n_raw, N, ORD)
    if RB > 1:
        _store_row(a1, I0 + 1, r0, M, part, stride_pm, n_raw, N, ORD)
    if RB > 2:
        _store_row(a2, I0 + 2, r0, M, part, stride_pm, n_raw, N, ORD)
        _store_row(a3, I0 + 3, r0, M, part, stride_pm, n_raw, N, ORD)
    if XS == 2:
        _store_row(b0, I0, r0, M, part, stride_pm, n_raw + BN, N, ORD)
        if RB > 1:
            _store_row(b1, I0 + 1, r0, M, part, stride_pm, n_raw + BN, N, ORD)
        if RB > 2:
            _store_row(b2, I0 + 2, r0, M, part, stride_pm, n_raw + BN, N, ORD)
            _store_row(b3, I0 + 3, r0, M, part, stride_pm, n_raw + BN, N, ORD)


@triton.jit
def _dp4a_kernel(xq, xds, nreal_ptr, T, codes, scales, sub, part, N, K, stride_pm, row_c, row_s, row_g, cap,
                 KIND: tl.constexpr, BN: tl.constexpr, L: tl.constexpr, EVEN: tl.constexpr,
                 INTERP: tl.constexpr, RB: tl.constexpr, XS: tl.constexpr, PF: tl.constexpr, PDL: tl.constexpr,
                 ORD: tl.constexpr, TAB: tl.constexpr):
    """BN * XS weight rows a program: n_raw, then (XS == 2) n_raw + BN. PDL: the first cap bytes of the
    program's weight rows (row_c, row_s, row_g bytes a row in codes, scales, sub) go to L2 while the kernel
    before finishes (engine.kernels.pdl); every read of x, the row count and every store come after the wait."""
    n_raw = tl.program_id(0) * (BN * XS) + tl.arange(0, BN)
    if PDL and cap > 0:
        n0 = tl.program_id(0).to(tl.int64) * (BN * XS)
        rows = tl.minimum(BN * XS, N - n0)
        pdl.prefetch_rows(codes.to(tl.pointer_type(tl.int8)) + n0 * row_c, rows, row_c, cap, PDL)
        pdl.prefetch_rows(scales.to(tl.pointer_type(tl.int8)) + n0 * row_s, rows, row_s, cap, PDL)
        if KIND == 4 or KIND == 6 or KIND >= 10:
            pdl.prefetch_rows(sub.to(tl.pointer_type(tl.int8)) + n0 * row_g, rows, row_g, cap, PDL)
    pdl.enter(PDL)
    M = tl.minimum(tl.load(nreal_ptr), T)
    for r in range(0, M, RB):       # RB rows per pass, every row by the same code
        _pass(r, M, xq, xds, codes, scales, sub, part, n_raw, N, K, stride_pm, KIND, BN, L, EVEN, INTERP, RB, XS, PF,
              ORD, TAB)
    zero = tl.zeros((BN * XS,), dtype=tl.float32)
    n_all = tl.program_id(0) * (BN * XS) + tl.arange(0, BN * XS)
    for r in range(M, T):
        tl.store(part + r * stride_pm + n_all, zero, mask=n_all < N)


WARPS = int(os.environ.get("STRATA_DP4A_WARPS", "4"))
# weight rows per thread; the interpreter runs programs one by one, so there fewer, larger ones (a
# weight row's arithmetic is the same in any program)
ROWS_PER_THREAD = int(os.environ.get("STRATA_DP4A_NR", "16" if INTERPRET else "1"))
# x rows per pass (1, 2, 4 or 8) in tiles of more than one row: each weight vector loaded once for them.
# A 1-row tile takes one (fewer registers, more programs per SM: H200, llama-3-8b shape, one stream
# 347 tok/s at 1, 261 at 4; eight streams 722 at 1, 1136 at 4). A row's bits are the same at any
# setting: each row of a pass runs the same code into its own accumulator. 8 (2026-12-02, H200): gate|up
# alone at 8 / 16 rows 69 -> 57 / 134 -> 113 us, but end to end slower (8B shape, 2 / 8 streams 655 ->
# 503 / 1,376 -> 1,343 tok/s), so 4 stays. 8 for tiles of 8+ rows only (4 below) was no better either
# (2026-12-02, H200, tests/gpu/run_embed_rb.sh: eight 8B streams 1,342 at 4, 1,319 so; window 5.96 / 6.06 ms).
ROWS_PER_PASS = int(os.environ.get("STRATA_DP4A_RB", "4"))
# ... but 8 where that measured faster now that Q4_K runs on q4k_mma (H200, 2026-12-07, llama-3-8b shape,
# 8 streams, 4 -> 8: Q8_0 1,003 -> 1,208 tok/s, Q4_1 1,290 -> 1,403, Q4_K with a Q6_K head, v and down
# 1,530 -> 1,696 (Q6_K's int8 codes) and 1,440 -> 1,621 (its 6-bit planes); Q5_K 1,025 / 1,013 and IQ4_XS
# 1,392 / 1,408 stay at 4; one stream the same at either). The planes (H100, 2026-12-07,
# tests/gpu/run_planes_kernels.sh, the 8B's qkv + gate|up + down at 8 / 16 rows): Q5_K 8 (149 -> 121 /
# 289 -> 243 us; eight 8B streams 1,268 -> 1,463 tok/s), Q2_K 2 (247 -> 218 / 474 -> 420 us), Q3_K 4 (115 /
# 211 us; 122 / 226 at 8). STRATA_DP4A_RB sets every kind's
PASS_ROWS = {1: 8, 3: 8, 8: 8, 10: 8, 11: 8, 12: 2} if "STRATA_DP4A_RB" not in os.environ else {}
# ... and the grid i-quants' table codes in IQ4_XS's layout (kind 6 with a table) at 8: H100, 2026-12-07,
# IQ3_S 8 / 16 rows at 4 -> 8 (tests/gpu/run_tables_w32.sh): gate|up 72 -> 61 / 143 -> 111 us, down 41 -> 26
# / 79 -> 49; eight 8B IQ3_S streams 1,324 -> 1,359 tok/s (run_tables_rb8.sh, batch-test IDENTICAL). Kind 14
# stays at 4: at 8 rows gate|up 97 / 96 us, down 44 -> 63; eight 8B IQ2_XS streams 1,032 -> 878 tok/s
TABLE_PASS_ROWS = {6: 8} if "STRATA_DP4A_RB" not in os.environ else {}
# weight rows that share each x load (1 or 2; STRATA_DP4A_XS, default: by shape, shared_x): a thread
# holds XS weight rows, so x (the same for every weight row, read through L1) is loaded once for XS of
# them. A row's bits are the same at either setting (the same code per weight row).
X_SHARED = int(os.environ.get("STRATA_DP4A_XS", "0"))
# load each step's next weight units before its dot products (STRATA_DP4A_PF=1; the same bits). H200,
# 2026-12-02, 8B shape: one stream 415 -> 427 tok/s (gate|up one row 24.7 -> 24.3 us), but many rows
# slower (gate|up 8 rows 69 -> 78 us; eight streams 1,382 -> 1,174). So by default only 1-row tiles
# prefetch ("solo"; "0" none, "1" all): one stream 415 -> 427, eight streams 1,382 -> 1,383, batch-test of
# lone (prefetching) against batched requests IDENTICAL (H200, 2026-12-02, tests/gpu/run_attn_fused.sh)
PREFETCH = os.environ.get("STRATA_DP4A_PF", "solo")
# the fewest programs a launch keeps with two weight rows a thread (below: one)
XS_MIN_PROGRAMS = 256


def shared_x(n: int, bn: int, lanes: int) -> int:
    """Weight rows per x load for n weight rows at plan's (bn, lanes): 2 where a row takes all 32 lanes and
    the launch keeps at least XS_MIN_PROGRAMS programs, else 1. H200, bench_matmul --sweep-xs (us, XS
    1 -> 2): llama-3-8b gate|up 28672x4096 one row 25.1 -> 25.5, 8 rows 82.9 -> 77.3, 16 rows 158.9 -> 145.9; down
    4096x14336 11.9 -> 10.6 / 46.9 -> 43.5; qkv 6144x4096 8.7 -> 6.4 / 22.8 -> 17.8; wo 5.8 -> 5.5;
    SmolLM2's gate|up 3072x576 (8 lanes, 96 programs at 2) 4.2 -> 4.4. End to end (strata bench, 8B
    Q4_K, 512-token prompt, 128 tokens): one stream 331 -> 360 tok/s, eight 1,060 -> 1,153. Nsight
    Compute at XS 1, gate|up one row: L1/TEX 81.5% busy (72.5% hits: x), DRAM 60%."""
    if X_SHARED:
        return X_SHARED
    return 2 if lanes == 32 and triton.cdiv(n, 2 * bn) >= XS_MIN_PROGRAMS else 1


def unit_values(kind: int) -> int:
    """Values of a weight row a thread's unit step covers: 64 for Q4_K, IQ4_XS and the planes, else 32."""
    return 64 if kind in (4, 6) or kind >= 10 else 32


def plan(kind: int, n: int, k: int, warps: int = WARPS, nr: int = ROWS_PER_THREAD) -> tuple[int, int]:
    """(BN, L): weight rows per program and lanes per weight row; a function of the shape only. L is
    the power of two in 8..32 that wastes fewest lanes on the row's units (more lanes on a tie)."""
    u = k // unit_values(kind)
    lanes = min((8, 16, 32), key=lambda l: (triton.cdiv(u, l) * l - u, -l))
    return nr * (32 // lanes) * warps, lanes


def matmul_parts(x: torch.Tensor, w: Packed, n_real: torch.Tensor, xq=None, warps: int = WARPS,
                 nr: int = ROWS_PER_THREAD, rb: int = 0, xs: int = 0,
                 pf: bool | None = None) -> tuple[torch.Tensor, int]:
    """x [T, K] (T <= 16) @ W.T for the first n_real rows (an integer device scalar), zeros for the
    other rows: (part [1, T, N], 1). xq: x already quantized (by the kernel that made x), else
    quantized here. warps, nr (weight rows per thread), rb (x rows per pass) and xs (weight rows per x
    load) and pf (prefetch the next weight units) are for measuring only."""
    if w.mma:
        raise ValueError("Q4_K in the tensor-core order runs engine.kernels.q4k_mma, not the int8 kernel")
    t = x.shape[0]
    part = torch.empty((1, t, w.n), dtype=torch.float32, device=x.device)
    if t == 0:
        return part, 1
    xq, xds = xq if xq is not None else quantize(x)
    bn, lanes = plan(w.kind, w.n, w.k, warps, nr)
    rb = 1 if t == 1 else rb or (TABLE_PASS_ROWS if w.table else PASS_ROWS).get(w.kind, ROWS_PER_PASS)
    if pf is None:
        pf = PREFETCH == "1" or (PREFETCH == "solo" and t == 1)
    xs = xs or shared_x(w.n, bn, lanes)
    words = w.codes.view(torch.int32)
    _dp4a_kernel[(triton.cdiv(w.n, bn * xs),)](
        xq.view(torch.int32), xds, n_real, t, words, w.scales, w.sub if w.sub is not None else w.scales, part,
        w.n, w.k, part.stride(1), *_row_bytes(w), pdl.PREFETCH, KIND=w.kind, BN=bn, L=lanes,
        EVEN=(w.k // unit_values(w.kind)) % lanes == 0, INTERP=INTERPRET, RB=rb, XS=xs, PF=pf,
        num_warps=warps, ORD=lane_order(w) if INTERPRET else 0, TAB=w.table, **NO_FUSION, **pdl.launch(x.device))
    return part, 1


def lane_order(w: Packed, warps: int = WARPS) -> int:
    """How the GPU's kernel (one weight row a thread and lane) adds up a row's lanes, as lane_tree.tree's
    constexpr: the interpreter writes that order out, so that its bits are the GPU's."""
    bn, lanes = plan(w.kind, w.n, w.k, warps, 1)
    return lane_tree.packed(lane_tree.order(bn, lanes, warps))


def _row_bytes(w: Packed) -> tuple[int, int, int]:
    """Bytes a weight row takes in codes, scales and sub (0 without sub): the planes are row-major."""
    return tuple(t.stride(0) * t.element_size() if t is not None else 0 for t in (w.codes, w.scales, w.sub))
