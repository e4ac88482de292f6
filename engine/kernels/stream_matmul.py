"""Triton matmul of activations by weights in the streaming layout (engine.kernels.packed).

part[s, M, N] = x[M, K-range s] @ W[N, K-range s].T. One program owns MMA_BM rows x BN weight rows and
one fixed range of K (split-K in S parts), walked in chunks of 256 values in a fixed order: for each
chunk it loads the BN rows' codes as one aligned run per row (128 bytes of nibbles, or 256 of int8),
their compact scales, dequantizes in float32 with engine.quant's formulas, rounds to the activation
dtype and multiplies on the tensor cores with float32 accumulation. 4-bit codes keep GGUF's order
(the low nibbles of a run of G bytes are values 0..G-1, the high ones G..2G-1), so instead of
interleaving the nibbles the kernel loads x in that order.

Row invariance by construction: the configuration (BN, S, warps, pipelining depth) is a function of
N, K and the type only (`plan`), the row tile is always MMA_BM, a row's sums read only that row of x, and
the K order is fixed; so a row's result is bit-identical whatever the other rows are and however
many there are. No atomics. Partial sums are added in order by the consumer (engine.kernels.fused).
Importing this module imports triton: import it lazily.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from engine.kernels.iq4 import kvalue, kvalues8
from engine.kernels.packed import Packed
from engine.kernels.scale16_chunk import scale16_values

CHUNK = 256
INTERP = tl.constexpr(os.environ.get("TRITON_INTERPRET") == "1")
# the prompt kernels' IQ4_NL / IQ4_XS values: by byte permutes, four codes a word (1), or a select tree per
# code (0); the same values either way. H200, 2026-12-07 (tests/gpu/run_iq4_prmt.sh): GLM-4.5-Air's prompt
# tile of 512 rows (IQ4_XS gate|up, IQ4_NL down experts) 4,422 -> 3,025 us in the grouped expert kernel
IQ4_PRMT = tl.constexpr(os.environ.get("STRATA_IQ4_PRMT", "1") == "1")
# rows per program of the prompt (tensor-core) kernel: each program dequantizes its BN weight rows once for
# this many x rows, so larger is less dequantizing per row; fixed for the run (a prompt row is always in
# such a block; a row's tensor-core sums do not depend on the block's other rows). H200, llama-3-8b Q4_K,
# 512-token prompt: 2,899 tok/s at 64, 1,581 at 16
MMA_BM = int(os.environ.get("STRATA_MMA_BM", "64"))
# the values of kinds 8, 10 and 12 (a scale per 16) built as [BN, 8, 32] with each 32's two scales selected
# (1: engine.kernels.scale16_chunk), or as [BN, 16, 16] and reshaped (0); the same values. H100, 2026-12-07
# (tests/gpu/run_tables_w32.sh), the 8B's 128-row gate|up tile: Q6_K / Q3_K int8 codes (kind 8) 694 -> 323
# us, Q6_K's planes (10) 882 -> 516, Q2_K's (12) 759 -> 359; the 8B Q6_K 512-token prompt 10,971 -> 11,123
# tok/s. Q3_K's planes (13) stay [BN, 16, 16]: 582 -> 1,417 us so (the 8B prompt 12,060 -> 7,429)
PROMPT_W32 = tl.constexpr(os.environ.get("STRATA_PROMPT_W32", "1") == "1")


@triton.jit
def _q4k_values(scales, sub, sb, g, ok, lo, hi):
    """Q4_K values of pair g's low and high nibbles (lo, hi as float32) in super-block sb (row * K/256 + c):
    engine.quant's (d * sc) * q - dmin * mn."""
    d = tl.load(scales + sb * 2, mask=ok, other=0.0).to(tl.float32)
    dmin = tl.load(scales + sb * 2 + 1, mask=ok, other=0.0).to(tl.float32)
    sc_lo = tl.load(sub + sb * 16 + 2 * g, mask=ok, other=0).to(tl.float32)
    sc_hi = tl.load(sub + sb * 16 + 2 * g + 1, mask=ok, other=0).to(tl.float32)
    mn_lo = tl.load(sub + sb * 16 + 8 + 2 * g, mask=ok, other=0).to(tl.float32)
    mn_hi = tl.load(sub + sb * 16 + 9 + 2 * g, mask=ok, other=0).to(tl.float32)
    return (d * sc_lo) * lo - dmin * mn_lo, (d * sc_hi) * hi - dmin * mn_hi


@triton.jit
def _chunk_weights(codes, scales, sub, n, n_ok, c, K, KIND: tl.constexpr, TAB: tl.constexpr = 0):
    """Weight rows n's values in 256-value chunk c, float32 with engine.quant's formulas: Q8_0 w [BN, 8, 32]
    (value c*256 + 32 g + j); 4-bit types (w_lo, w_hi) [BN, NG, G], byte j of group g's low nibble
    the value c*256 + 2 G g + j and its high nibble that + G (GGUF's order; the IQ4 types' words are read
    whole and their nibbles put in that order; TAB: the table kind 6's codes index, iq4.TABLE_VALUES). Masked
    rows and values past K read as zeros."""
    nn = n.to(tl.int64)[:, None, None]
    okn = n_ok[:, None, None]
    if KIND == 1 or (KIND >= 8 and KIND != 11 and KIND != 14):   # values as [BN, 8, 32]: int8 codes, planes but Q5_K's
        g = tl.arange(0, 8)[None, :, None]
        j = tl.arange(0, 32)[None, None, :]
        kk = c * 256 + g * 32 + j
        ok = okn & (kk < K)
        bok = okn & (c * 8 + g < K // 32)
        if (KIND == 8 or KIND == 10 or KIND == 12) and PROMPT_W32:
            w_lo = scale16_values(codes, scales, sub, nn, okn, c, K, KIND)
        elif KIND == 8 or KIND >= 10:                # (d * sc) per 16 values, times q (- Q2_K's m), as [BN, 16, 16]
            g16 = tl.arange(0, 16)[None, :, None]    # (a scale per value would be a [BN, 8, 32] load: the
            j16 = tl.arange(0, 16)[None, None, :]    # pipelined prompt kernel's shared memory overflows)
            ml = 0.0                                 # (Q2_K's minimum: dmin * m per 16 values)
            if KIND == 8:
                k16 = c * 256 + g16 * 16 + j16
                q16 = tl.load(codes + nn * K + k16, mask=okn & (k16 < K), other=0).to(tl.float32)
                d = tl.load(scales + nn * (K // 16) + c * 16 + g16, mask=okn & (c * 16 + g16 < K // 16), other=0.0)
            elif KIND == 13:                         # Q3_K's 3-bit planes (packed.three_bit_planes): d sc q
                # (the third bits a byte load per value: as two words and a select, as Q5_K's fifth bits
                # below, the 128-row tiles measured 2-11% slower on an H100)
                cb = tl.load(codes + nn * (K // 4) + (c * 4 + g16 // 4) * 16 + j16, mask=okn, other=0).to(tl.int32)
                unit = sub.to(tl.pointer_type(tl.int8), bitcast=True) + (nn * (K // 64) + c * 4 + g16 // 4) * 12
                hb = tl.load(unit + 4 + 4 * (j16 // 8) + j16 % 4, mask=okn, other=0).to(tl.int32)
                u = ((cb >> (2 * (g16 % 4))) & 3) | (((hb >> (2 * (g16 % 4) + (j16 // 4) % 2)) & 1) << 2)
                q16 = ((u ^ 4) - 4).to(tl.float32)
                d = tl.load(scales + nn * (K // 256) + c, mask=okn, other=0.0).to(tl.float32) \
                    * tl.load(unit + g16 % 4, mask=okn, other=0).to(tl.float32)
            elif KIND == 12:                         # Q2_K's 2-bit planes (packed.two_bit_planes): d sc q - dmin m
                cb = tl.load(codes + nn * (K // 4) + (c * 4 + g16 // 4) * 16 + j16, mask=okn, other=0).to(tl.int32)
                q16 = ((cb >> (2 * (g16 % 4))) & 3).to(tl.float32)
                sm = tl.load(sub.to(tl.pointer_type(tl.uint8), bitcast=True) + nn * (K // 16) + c * 16 + g16,
                             mask=okn, other=0).to(tl.int32)
                sb = nn * (K // 256) + c
                d = tl.load(scales + sb * 2, mask=okn, other=0.0).to(tl.float32) * (sm & 15).to(tl.float32)
                ml = tl.load(scales + sb * 2 + 1, mask=okn, other=0.0).to(tl.float32) * (sm >> 4).to(tl.float32)
            else:                                    # Q6_K's 6-bit planes (packed.six_bit_planes): 48 bytes
                unit = codes + nn * (K // 64 * 48) + (c * 4 + g16 // 4) * 48      # per 64 values
                lo = tl.load(unit + (g16 % 2) * 16 + j16, mask=okn, other=0).to(tl.int32)
                hi = tl.load(unit + 32 + j16, mask=okn, other=0).to(tl.int32)
                u = ((lo >> (4 * ((g16 % 4) // 2))) & 15) | (((hi >> (2 * (g16 % 4))) & 3) << 4)
                q16 = ((u ^ 32) - 32).to(tl.float32)
                sc = tl.load(sub.to(tl.pointer_type(tl.int8), bitcast=True) + nn * (K // 16) + c * 16 + g16,
                             mask=okn, other=0)
                d = tl.load(scales + nn * (K // 256) + c, mask=okn, other=0.0).to(tl.float32) * sc.to(tl.float32)
            w_lo = tl.reshape(d * q16 - ml, (n.shape[0], 8, 32))
        elif KIND == 9:                              # Q5_K / Q5_1: d q + m per 32
            q = tl.load(codes + nn * K + kk, mask=ok, other=0).to(tl.float32)
            blk = nn * (K // 32) + c * 8 + g
            d = tl.load(scales + blk * 2, mask=bok, other=0.0)
            mm = tl.load(scales + blk * 2 + 1, mask=bok, other=0.0)
            w_lo = d * q + mm
        else:
            q = tl.load(codes + nn * K + kk, mask=ok, other=0).to(tl.float32)
            d = tl.load(scales + nn * (K // 32) + c * 8 + g, mask=bok, other=0.0)
            w_lo = q * d.to(tl.float32)
        w_hi = w_lo
    else:
        if KIND == 4 or KIND == 7 or KIND == 11:
            G: tl.constexpr = 32                      # Q4_K (and Q5_K's planes): 64-value groups, 32 bytes each
        else:
            G: tl.constexpr = 16                      # Q4_0 / Q4_1: 32-value blocks, 16 bytes each
        NG: tl.constexpr = 128 // G
        g = tl.arange(0, NG)[None, :, None]
        j = tl.arange(0, G)[None, None, :]
        if KIND < 5 or KIND == 7 or KIND == 11:
            kb = c * 128 + g * G + j                  # byte index in the row
            ok = okn & (kb < K // 2)
            if KIND == 7:                             # Q4_K in the tensor-core order (packed.mma_order)
                at = ((((nn // 16) * (K // 256) + c) * 4 + g) * 512 + ((nn % 8) * 4 + j // 8) * 16
                      + ((nn % 16) // 8) * 8 + j % 8)
            else:
                at = nn * (K // 2) + kb
            b = tl.load(codes + at, mask=ok, other=0).to(tl.int32)
            lo = (b & 0xF).to(tl.float32)
            hi = (b >> 4).to(tl.float32)
        if KIND == 4 or KIND == 7:
            w_lo, w_hi = _q4k_values(scales, sub, nn * (K // 256) + c, g, okn, lo, hi)
        elif KIND == 11:                              # Q5_K's planes (packed.five_bit_planes): the fifth bits
            unit = sub + (nn * (K // 64) + c * 4 + g) * 3       # three words a unit: (sc, sc', m, m') bytes,
            sw = tl.load(unit, mask=okn, other=0)                 # then the fifth bits: two words and a select,
            fb = tl.where((j % 16) // 8 == 0, tl.load(unit + 1, mask=okn, other=0),   # not a byte gather per
                          tl.load(unit + 2, mask=okn, other=0))   # value (H100, 128-row gate|up 801 -> 324 us)
            t = 8 * (j % 4) + 2 * (j // 16) + ((j % 16) // 4) % 2   # value j's bit; value 32 + j's is 4 higher
            sb = nn * (K // 256) + c
            d = tl.load(scales + sb * 2, mask=okn, other=0.0).to(tl.float32)
            dmin = tl.load(scales + sb * 2 + 1, mask=okn, other=0.0).to(tl.float32)
            sc = (sw & 255).to(tl.float32)
            sc2 = ((sw >> 8) & 255).to(tl.float32)
            mn = ((sw >> 16) & 255).to(tl.float32)
            mn2 = ((sw >> 24) & 255).to(tl.float32)
            w_lo = (d * sc) * (lo + ((fb >> t) & 1).to(tl.float32) * 16.0) - dmin * mn
            w_hi = (d * sc2) * (hi + ((fb >> (t + 4)) & 1).to(tl.float32) * 16.0) - dmin * mn2
        elif KIND == 5 or KIND == 6 or KIND == 14:    # IQ4_NL (d per 32) / IQ4_XS (d per 256 x scale per 32),
            # the table codes (kind 6, or 14: a scale per 16)
            # (packed.iq4_words: a run's word w holds values 4 w .. 4 w + 3, then 16 on, a nibble each)
            words = codes.to(tl.pointer_type(tl.int32), bitcast=True)
            w4 = tl.arange(0, 4)[None, None, :]
            wd = tl.load(words + nn * (K // 8) + c * 32 + g * 4 + w4, mask=okn & (c * 128 + g * G + 4 * w4 < K // 2),
                         other=0)
            if IQ4_PRMT:        # four codes' int8 values a word by byte permutes (kvalues8), then each byte
                va, vb = kvalues8(wd, INTERP, TAB)
                sh8 = 24 - 8 * tl.arange(0, 4)[None, None, None, :]
                v_lo = tl.reshape((va[:, :, :, None] << sh8) >> 24, (n.shape[0], NG, G)).to(tl.float32)
                v_hi = tl.reshape((vb[:, :, :, None] << sh8) >> 24, (n.shape[0], NG, G)).to(tl.float32)
            else:               # each code by a tree of selects
                sh = 4 * tl.arange(0, 4)[None, None, None, :]
                v_lo = kvalue(tl.reshape((wd[:, :, :, None] >> sh) & 0xF, (n.shape[0], NG, G)), TAB).to(tl.float32)
                v_hi = kvalue(tl.reshape((wd[:, :, :, None] >> (sh + 16)) & 0xF, (n.shape[0], NG, G)),
                               TAB).to(tl.float32)
            if KIND == 5:
                blk = nn * (K // 32) + c * 8 + g
                d_lo = tl.load(scales + blk, mask=okn & (c * 8 + g < K // 32), other=0.0).to(tl.float32)
                d_hi = d_lo
            else:
                sb = nn * (K // 256) + c
                d = tl.load(scales + sb, mask=okn, other=0.0).to(tl.float32)
                if KIND == 6:
                    d_lo = d * tl.load(sub + sb * 8 + g, mask=okn, other=0).to(tl.float32)
                    d_hi = d_lo
                else:           # the run's two 16s: bytes 2 g and 2 g + 1 of the block's 16 scales
                    s16 = sub.to(tl.pointer_type(tl.int8), bitcast=True) + sb * 16 + 2 * g
                    d_lo = d * tl.load(s16, mask=okn, other=0).to(tl.float32)
                    d_hi = d * tl.load(s16 + 1, mask=okn, other=0).to(tl.float32)
            w_lo = d_lo * v_lo
            w_hi = d_hi * v_hi
        else:
            blk = nn * (K // 32) + c * 8 + g
            bok = okn & (c * 8 + g < K // 32)
            if KIND == 2:
                d = tl.load(scales + blk, mask=bok, other=0.0).to(tl.float32)
                w_lo = d * (lo - 8.0)
                w_hi = d * (hi - 8.0)
            else:
                d = tl.load(scales + blk * 2, mask=bok, other=0.0).to(tl.float32)
                mm = tl.load(scales + blk * 2 + 1, mask=bok, other=0.0).to(tl.float32)
                w_lo = d * lo + mm
                w_hi = d * hi + mm
    return w_lo, w_hi


@triton.jit
def _chunk_dot(acc, x_ptr, stride_xm, m, m_ok, codes, scales, sub, n, n_ok, c, K,
               KIND: tl.constexpr, BN: tl.constexpr, IEEE: tl.constexpr, TAB: tl.constexpr = 0):
    """acc += x[m, chunk c] @ W[n, chunk c].T for one 256-value chunk c."""
    w_lo, w_hi = _chunk_weights(codes, scales, sub, n, n_ok, c, K, KIND, TAB)
    if KIND == 1 or (KIND >= 8 and KIND != 11 and KIND != 14):
        w = tl.reshape(w_lo, (BN, 256))
        kx = c * 256 + tl.arange(0, 256)
        xt = tl.load(x_ptr + m[:, None] * stride_xm + kx[None, :], mask=m_ok[:, None] & (kx < K)[None, :],
                     other=0.0)
        wt = tl.trans(w.to(xt.dtype))
        if IEEE:
            acc = tl.dot(xt, wt, acc, input_precision="ieee")
        else:
            acc = tl.dot(xt, wt, acc)
    else:
        if KIND == 4 or KIND == 7 or KIND == 11:
            G: tl.constexpr = 32
        else:
            G: tl.constexpr = 16
        i = tl.arange(0, 128)
        kx = c * 256 + (i // G) * (2 * G) + i % G     # the value of byte i's low nibble
        xm = x_ptr + m[:, None] * stride_xm
        okx = m_ok[:, None] & (kx < K)[None, :]
        x_lo = tl.load(xm + kx[None, :], mask=okx, other=0.0)
        x_hi = tl.load(xm + (kx + G)[None, :], mask=okx, other=0.0)
        wl = tl.trans(tl.reshape(w_lo, (BN, 128)).to(x_lo.dtype))
        wh = tl.trans(tl.reshape(w_hi, (BN, 128)).to(x_lo.dtype))
        if IEEE:
            acc = tl.dot(x_lo, wl, acc, input_precision="ieee")
            acc = tl.dot(x_hi, wh, acc, input_precision="ieee")
        else:
            acc = tl.dot(x_lo, wl, acc)
            acc = tl.dot(x_hi, wh, acc)
    return acc


@triton.jit
def _dequant_kernel(codes, scales, sub, out_ptr, N, K, KIND: tl.constexpr, BN: tl.constexpr, TAB: tl.constexpr):
    """Program (j, c): weight rows j*BN.. of chunk c written to out [N, K] in out's dtype."""
    c = tl.program_id(1)
    if KIND == 7:       # Q4_K in the tensor-core order (BN 16): the rows' super-block is one run of 2048 bytes,
        # read 16 bytes a lane as q4k_mma reads it: lane u = 32 pair + 4 g + c holds bytes 8 c .. 8 c + 7 of the
        # pair's 32 of row g, then of row g + 8 (packed.mma_order), so the scales take [u, r] alone
        u = tl.arange(0, 128)[:, None, None]
        r = tl.arange(0, 2)[None, :, None]
        i = tl.arange(0, 8)[None, None, :]
        q = tl.load(codes + (tl.program_id(0).to(tl.int64) * (K // 256) + c) * 2048 + u * 16 + r * 8 + i)
        pair = u // 32
        nr = tl.program_id(0).to(tl.int64) * 16 + (u % 32) // 4 + 8 * r
        kk = c * 256 + pair * 64 + 8 * (u % 4) + i
        w_lo, w_hi = _q4k_values(scales, sub, nr * (K // 256) + c, pair, nr < N, (q & 0xF).to(tl.float32),
                                 (q >> 4).to(tl.float32))
        tl.store(out_ptr + nr * K + kk, w_lo.to(out_ptr.dtype.element_ty))
        tl.store(out_ptr + nr * K + kk + 32, w_hi.to(out_ptr.dtype.element_ty))
    else:
        n = tl.program_id(0) * BN + tl.arange(0, BN)
        n_ok = n < N
        w_lo, w_hi = _chunk_weights(codes, scales, sub, n, n_ok, c, K, KIND, TAB)
        nn = n.to(tl.int64)[:, None, None]
        if KIND == 1 or (KIND >= 8 and KIND != 11 and KIND != 14):
            g = tl.arange(0, 8)[None, :, None]
            j = tl.arange(0, 32)[None, None, :]
            kk = c * 256 + g * 32 + j
            tl.store(out_ptr + nn * K + kk, w_lo.to(out_ptr.dtype.element_ty), mask=n_ok[:, None, None] & (kk < K))
        else:
            if KIND == 4 or KIND == 11:
                G: tl.constexpr = 32
            else:
                G: tl.constexpr = 16
            NG: tl.constexpr = 128 // G
            g = tl.arange(0, NG)[None, :, None]
            j = tl.arange(0, G)[None, None, :]
            kk = c * 256 + g * (2 * G) + j
            ok = n_ok[:, None, None] & (kk < K)
            tl.store(out_ptr + nn * K + kk, w_lo.to(out_ptr.dtype.element_ty), mask=ok)
            tl.store(out_ptr + nn * K + kk + G, w_hi.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _mm_kernel(x_ptr, codes, scales, sub, part_ptr, M, N, K, stride_xm, stride_ps, stride_pm, CPS,
               KIND: tl.constexpr, BN: tl.constexpr, IEEE: tl.constexpr, BM: tl.constexpr, TAB: tl.constexpr):
    """Program (i, j, s): rows i*BM.., weight rows j*BN.., chunks [s*CPS, s*CPS + CPS) in order."""
    m = tl.program_id(0) * BM + tl.arange(0, BM)
    n = tl.program_id(1) * BN + tl.arange(0, BN)
    s = tl.program_id(2)
    m_ok = m < M
    n_ok = n < N
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    c_hi = tl.minimum(s * CPS + CPS, tl.cdiv(K, 256))
    for c in range(s * CPS, c_hi):
        acc = _chunk_dot(acc, x_ptr, stride_xm, m.to(tl.int64), m_ok, codes, scales, sub, n, n_ok, c, K,
                         KIND, BN, IEEE, TAB)
    out = part_ptr + s * stride_ps + m.to(tl.int64)[:, None] * stride_pm + n[None, :]
    tl.store(out, acc, mask=m_ok[:, None] & n_ok[None, :])


@triton.jit
def _gemv_chunk(acc, x_ptr, stride_xm, M, rows, codes, scales, sub, n, c, K,
                KIND: tl.constexpr, EVEN_K: tl.constexpr):
    """Decode rows: acc[r] += x[r, chunk c] @ W[n, chunk c].T for the real rows r < M, on CUDA cores.
    The chunk's codes are decoded once into float32 and reused by every row; a row sums
    code * x per 32-value block, then scale * sum (- min * sum(x)) per block, in a fixed order."""
    nn = n.to(tl.int64)[:, None, None]
    if KIND == 1:
        G: tl.constexpr = 32
        NG: tl.constexpr = 8
    elif KIND == 4:
        G: tl.constexpr = 32
        NG: tl.constexpr = 4
    else:
        G: tl.constexpr = 16
        NG: tl.constexpr = 8
    g = tl.arange(0, NG)
    j = tl.arange(0, G)
    if KIND == 1:
        kk = c * 256 + g[:, None] * 32 + j[None, :]
        if EVEN_K:
            q = tl.load(codes + nn * K + kk[None]).to(tl.float32)
        else:
            q = tl.load(codes + nn * K + kk[None], mask=(kk < K)[None], other=0).to(tl.float32)
        blk = c * 8 + g
        d = tl.load(scales + n.to(tl.int64)[:, None] * (K // 32) + blk[None, :], mask=(blk < K // 32)[None, :],
                    other=0.0).to(tl.float32)
        for r in tl.static_range(16):
            if r < M:
                xo = x_ptr + r * stride_xm + kk
                if EVEN_K:
                    x = tl.load(xo).to(tl.float32)
                else:
                    x = tl.load(xo, mask=kk < K, other=0.0).to(tl.float32)
                p = tl.sum(d * tl.sum(q * x[None], axis=2), axis=1)
                acc = tl.where(rows[:, None] == r, acc + p[None, :], acc)
    else:
        kb = c * 128 + g[:, None] * G + j[None, :]               # byte index in the row
        if EVEN_K:
            b = tl.load(codes + nn * (K // 2) + kb[None]).to(tl.int32)
        else:
            b = tl.load(codes + nn * (K // 2) + kb[None], mask=(kb < K // 2)[None], other=0).to(tl.int32)
        lo = (b & 0xF).to(tl.float32)
        hi = (b >> 4).to(tl.float32)
        n2 = n.to(tl.int64)[:, None]
        if KIND == 4:
            sb = n2 * (K // 256) + c
            d = tl.load(scales + sb * 2).to(tl.float32)
            dmin = tl.load(scales + sb * 2 + 1).to(tl.float32)
            s_lo = d * tl.load(sub + sb * 16 + 2 * g[None, :]).to(tl.float32)
            s_hi = d * tl.load(sub + sb * 16 + 2 * g[None, :] + 1).to(tl.float32)
            m_lo = dmin * tl.load(sub + sb * 16 + 8 + 2 * g[None, :]).to(tl.float32)
            m_hi = dmin * tl.load(sub + sb * 16 + 9 + 2 * g[None, :]).to(tl.float32)
        else:
            blk = c * 8 + g[None, :]
            bok = blk < K // 32
            if KIND == 2:
                s_lo = tl.load(scales + n2 * (K // 32) + blk, mask=bok, other=0.0).to(tl.float32)
                m_lo = 8.0 * s_lo
            else:
                s_lo = tl.load(scales + (n2 * (K // 32) + blk) * 2, mask=bok, other=0.0).to(tl.float32)
                m_lo = -tl.load(scales + (n2 * (K // 32) + blk) * 2 + 1, mask=bok, other=0.0).to(tl.float32)
            s_hi = s_lo
            m_hi = m_lo
        kx = c * 256 + g[:, None] * (2 * G) + j[None, :]         # the value of each byte's low nibble
        for r in tl.static_range(16):
            if r < M:
                xo = x_ptr + r * stride_xm + kx
                if EVEN_K:
                    x_lo = tl.load(xo).to(tl.float32)
                    x_hi = tl.load(xo + G).to(tl.float32)
                else:
                    x_lo = tl.load(xo, mask=kx < K, other=0.0).to(tl.float32)
                    x_hi = tl.load(xo + G, mask=kx + G < K, other=0.0).to(tl.float32)
                p_lo = tl.sum(lo * x_lo[None], axis=2)             # [BN, NG]
                p_hi = tl.sum(hi * x_hi[None], axis=2)
                t = s_lo * p_lo - m_lo * tl.sum(x_lo, axis=1)[None, :]
                t += s_hi * p_hi - m_hi * tl.sum(x_hi, axis=1)[None, :]
                p = tl.sum(t, axis=1)
                acc = tl.where(rows[:, None] == r, acc + p[None, :], acc)
    return acc


@triton.jit
def _gemv_kernel(x_ptr, nreal_ptr, T, codes, scales, sub, part_ptr, N, K, stride_xm, stride_ps, stride_pm, CPS,
                 KIND: tl.constexpr, BN: tl.constexpr, EVEN_K: tl.constexpr):
    """Program (j, s): weight rows j*BN.., chunks [s*CPS, s*CPS + CPS) in order, for the real rows
    (their count read on the device, so one captured graph serves any number of them) of a tile of
    T <= 16 rows; the other rows get zeros."""
    n_raw = tl.program_id(0) * BN + tl.arange(0, BN)
    n = tl.minimum(n_raw, N - 1)
    s = tl.program_id(1)
    M = tl.load(nreal_ptr)
    rows = tl.arange(0, 16)
    acc = tl.zeros((16, BN), dtype=tl.float32)
    c_hi = tl.minimum(s * CPS + CPS, tl.cdiv(K, 256))
    for c in range(s * CPS, c_hi):
        acc = _gemv_chunk(acc, x_ptr, stride_xm, M, rows, codes, scales, sub, n, c, K, KIND, EVEN_K)
    out = part_ptr + s * stride_ps + rows.to(tl.int64)[:, None] * stride_pm + n_raw[None, :]
    tl.store(out, acc, mask=(rows < T)[:, None] & (n_raw < N)[None, :])


# Tuning: functions of (N, K, type) only. Env overrides exist for measuring and must be set the same
# everywhere a run compares results.
TARGET_PROGRAMS = int(os.environ.get("STRATA_SMM_TARGET", "528"))     # 4 per SM on an H200
WARPS = int(os.environ.get("STRATA_SMM_WARPS", "4"))
STAGES = int(os.environ.get("STRATA_SMM_STAGES", "3"))
BN_FORCE = int(os.environ.get("STRATA_SMM_BN", "0"))
DECODE_ROWS = 16                                                       # tiles up to this size: decode kernel
# decode tiles: "dp4a" (int8 activations, CUDA-core int8 dot products: engine.kernels.dp4a_gemv), "imma"
# (the same int8 activations on int8 tensor cores, 16 rows for the cost of one: engine.kernels.imma_matmul), "bf16"
# (Q4_K dequantized to bfloat16 on tensor cores: engine.kernels.bf16_decode; other types dp4a), "gemv"
# (CUDA cores in float32), "mma" (tensor cores, the prompt tiles' kernel) or "q4k-mma" (Q4_K on int8 tensor
# cores, every row count: engine.kernels.q4k_mma, on weights repacked in its order; other types dp4a). One
# choice for the whole run:
# every decode row is then computed by the same kernel. Measured in tests/gpu/bench_matmul.py.
DECODE_KERNEL = os.environ.get("STRATA_DECODE_KERNEL", "dp4a")
# prompt tiles (more than DECODE_ROWS rows, bfloat16 x): "mma" (the tensor-core kernel above: each program
# dequantizes its weight tile for its MMA_BM rows) or "cublas" (each weight dequantized once per tile to
# x's dtype by one kernel, then torch.mm with float32 results: the tile's rows share one dequantization)
# H200, llama-3-8b Q4_K, 512-token prompt (tests/gpu/run_prompt_cublas.sh): mma 3,696 tok/s at 128-row
# tiles; cublas 7,198 at 128 and 14,151 at 512 (4,096 tokens: 2,746 / 3,956 / 5,297)
PROMPT_KERNEL = os.environ.get("STRATA_PROMPT_KERNEL", "cublas")
GEMV_BN = int(os.environ.get("STRATA_GEMV_BN", "32"))
GEMV_TARGET = int(os.environ.get("STRATA_GEMV_TARGET", "528"))
GEMV_WARPS = int(os.environ.get("STRATA_GEMV_WARPS", "4"))


def plan(n: int, k: int) -> tuple[int, int, int]:
    """(BN, S, chunks per split) of the tensor-core kernel for an N x K weight; never depends on M."""
    bn = BN_FORCE or (64 if n >= 8192 else 32)
    chunks = triton.cdiv(k, CHUNK)
    tiles = triton.cdiv(n, bn)
    s = max(1, min(chunks, round(TARGET_PROGRAMS / tiles)))
    cps = triton.cdiv(chunks, s)
    return bn, triton.cdiv(chunks, cps), cps


def _check_x(x: torch.Tensor, k: int) -> None:
    if x.dtype not in (torch.float32, torch.bfloat16):
        raise TypeError(f"activations must be float32 or bfloat16, got {x.dtype}")
    if x.dim() != 2 or x.shape[1] != k or x.stride(1) != 1:
        raise ValueError(f"expected x of shape (M, {k}) with contiguous rows, got {tuple(x.shape)}")


def all_rows(n_real, t: int, device) -> torch.Tensor:
    """The device count of real rows: n_real, or all t rows where None."""
    return n_real if n_real is not None else torch.full((1,), t, dtype=torch.int32, device=device)


def takes_q8(rows: int) -> bool:
    """Whether a tile of this many rows runs the int8 decode kernel (its x can come quantized)."""
    return rows <= DECODE_ROWS and DECODE_KERNEL in ("dp4a", "imma", "bf16", "q4k-mma")


def matmul_parts(x: torch.Tensor, w: Packed, n_real: torch.Tensor | None = None, xq=None) -> tuple[torch.Tensor, int]:
    """Partial sums of x @ W.T: (part [S, M, N] float32, S); rows sum as part[0] + ... + part[S-1].

    Tiles of up to 16 rows (decode and verify rows) run the decode kernel (DECODE_KERNEL) over the
    first `n_real` rows (an int32 device scalar; default all), others (prompt tiles) the tensor-core
    kernel: a row kind always comes in tiles of one size, so each row is always computed by the same
    kernel. xq: the decode kernel's int8 x (dp4a_gemv.buffers) where the kernel that made x wrote it."""
    _check_x(x, w.k)
    kernel = None                                 # prompt tiles (and STRATA_DECODE_KERNEL=mma)
    if x.shape[0] <= DECODE_ROWS and w.mma:       # Q4_K in the tensor-core order: every decode row there
        from engine.kernels import q4k_mma
        return q4k_mma.matmul_parts(x, w, all_rows(n_real, x.shape[0], x.device), xq)
    if x.shape[0] <= DECODE_ROWS and DECODE_KERNEL in ("dp4a", "imma", "gemv", "bf16", "q4k-mma"):
        n_real = all_rows(n_real, x.shape[0], x.device)
        kernel = DECODE_KERNEL if w.kind <= 4 and DECODE_KERNEL != "q4k-mma" else "dp4a"   # IQ4: int8 kernel only
    if kernel == "bf16":
        from engine.kernels import bf16_decode
        if w.kind in bf16_decode.KINDS:
            return bf16_decode.matmul_parts(x, w, n_real)
        kernel = "dp4a"                                         # its other types' decode rows
    if kernel == "imma":
        from engine.kernels import imma_matmul
        return imma_matmul.matmul_parts(x, w, n_real, xq)
    if kernel == "dp4a":
        from engine.kernels import dp4a_gemv, dp4a_mma
        if x.shape[0] > 1 and dp4a_mma.ROWS and dp4a_mma.supports(w):     # the same bits on tensor cores
            return dp4a_mma.matmul_parts(x, w, n_real, xq)
        return dp4a_gemv.matmul_parts(x, w, n_real, xq)
    if kernel == "gemv":
        bn, s, cps = gemv_plan(w.n, w.k)
        part = torch.empty((s, x.shape[0], w.n), dtype=torch.float32, device=x.device)
        if x.shape[0]:
            launch_gemv(x, n_real, w, part, bn, s, cps)
        return part, s
    if PROMPT_KERNEL == "cublas" and x.dtype != torch.float32:
        return dense_product(x, w)[None], 1
    bn, s, cps = plan(w.n, w.k)
    part = torch.empty((s, x.shape[0], w.n), dtype=torch.float32, device=x.device)
    launch(x, w, part, bn, s, cps)
    return part, s


def dequantize(w: Packed, dtype) -> torch.Tensor:
    """W as a dense [N, K] tensor of `dtype` (engine.quant's float32 values, then rounded to dtype)."""
    out = torch.empty((w.n, w.k), dtype=dtype, device=w.codes.device)
    bn = 16
    _dequant_kernel[(triton.cdiv(w.n, bn), triton.cdiv(w.k, CHUNK))](
        w.codes, w.scales, w.sub if w.sub is not None else w.scales, out, w.n, w.k, KIND=w.kind, BN=bn, TAB=w.table,
        num_warps=4)
    return out


def dense_product(x: torch.Tensor, w: Packed) -> torch.Tensor:
    """x @ W.T in float32 (accumulated in float32) over W dequantized to x's dtype: the prompt tiles'
    "cublas" path. A row's result depends only on that row at a fixed tile shape (cuBLAS picks its
    kernel by the shape: prompt tiles always have the same row count)."""
    wd = dequantize(w, x.dtype)
    if x.is_cuda:
        try:
            return torch.mm(x, wd.T, out_dtype=torch.float32)
        except (TypeError, RuntimeError, NotImplementedError):   # a torch without mm's out_dtype
            return torch.mm(x, wd.T).float()
    return torch.mm(x.float(), wd.float().T)      # CPU (the Triton interpreter's tests): float32


def gemv_plan(n: int, k: int) -> tuple[int, int, int]:
    """(BN, S, chunks per split) of the decode kernel for an N x K weight; never depends on M."""
    bn = GEMV_BN
    chunks = triton.cdiv(k, CHUNK)
    s = max(1, min(chunks, round(GEMV_TARGET / triton.cdiv(n, bn))))
    cps = triton.cdiv(chunks, s)
    return bn, triton.cdiv(chunks, cps), cps


def launch_gemv(x: torch.Tensor, n_real: torch.Tensor, w: Packed, part: torch.Tensor, bn: int, s: int, cps: int,
                warps: int | None = None) -> None:
    grid = (triton.cdiv(w.n, bn), s)
    _gemv_kernel[grid](x, n_real, x.shape[0], w.codes, w.scales, w.sub if w.sub is not None else w.scales, part,
                       w.n, w.k, x.stride(0), part.stride(0), part.stride(1), cps, KIND=w.kind, BN=bn,
                       EVEN_K=w.k % CHUNK == 0, num_warps=warps or GEMV_WARPS)


def launch(x: torch.Tensor, w: Packed, part: torch.Tensor, bn: int, s: int, cps: int, warps: int = WARPS,
           stages: int = STAGES) -> None:
    grid = (triton.cdiv(x.shape[0], MMA_BM), triton.cdiv(w.n, bn), s)
    _mm_kernel[grid](x, w.codes, w.scales, w.sub if w.sub is not None else w.scales, part, x.shape[0], w.n, w.k,
                     x.stride(0), part.stride(0), part.stride(1), cps, KIND=w.kind, BN=bn,
                     IEEE=x.dtype == torch.float32, BM=MMA_BM, TAB=w.table, num_warps=warps, num_stages=stages)


def sum_parts(part: torch.Tensor, s: int) -> torch.Tensor:
    """part[0] + part[1] + ... + part[s-1], in that order (float32)."""
    acc = part[0]
    for i in range(1, s):
        acc = acc + part[i]
    return acc


def linear(x: torch.Tensor, w: Packed, n_real: torch.Tensor | None = None) -> torch.Tensor:
    """x (M, K) f32/bf16 @ W.T -> (M, N) in x.dtype, the partials added in order (n_real: see matmul_parts)."""
    return sum_parts(*matmul_parts(x, w, n_real)).to(x.dtype)


def unpack_values(w: Packed) -> torch.Tensor:
    """float32 [N, K] as the kernel dequantizes it: the identity times W.T (exact in float32), so the
    interpreter can check that the kernel reads the layout like engine.quant."""
    eye = torch.eye(w.k, dtype=torch.float32, device=w.codes.device)
    return linear(eye, w).T
