"""Q4_K decode rows on int8 tensor cores (mma.sync m16n8k32, written in Gluon), one kernel for every row
count of a decode tile.

Why: the int8 decode kernel (engine.kernels.dp4a_gemv) gives each x row its own dp4a instructions and
its own x loads, so eight rows cost about three times one (H200, llama-3-8b gate|up 28672x4096: 24 us at
one row, 71 at eight; Nsight Compute at eight rows: 33 M warp instructions, occupancy 25% by
registers, L1 74% busy). Here one MMA multiplies 16 weight rows by 8 x rows over 32 values, so the
rows of a pass share every weight and x load and the integer work; what stays per (weight row, x row)
is the float scaling of each 32-value sub-block.

Arithmetic (the same for every element whatever the row count, so a row's bits do not depend on the
rows beside it): x quantized per 32 values as for the int8 kernel (d, d * sum(q)); per 256-value
super-block of a weight row, for each of its eight sub-blocks j in order
    t = fma(float(sc_j * P_j), d_j, t)        (P_j: the exact int32 dot product of the codes and x's q)
    m = fma(mn_j, s_j, m)
then acc = fma(d, t, acc); acc = fma(-dmin, m, acc), super-blocks in order within each warp's share of K,
the warps' sums added in a fixed tree (`gl.sum`). fp fusion off: the FMAs are the ones spelled.

Layout: a program is TM groups of 16 weight rows and W warps (`warps`: a function of the weight's shape
only), each warp over 1/W of K's super-blocks of every group; the real rows run in passes of 8 (the MMA's
N), a 16-row tile's two passes in one sweep of the weights when it has more than 8 real rows; rows past
the real count get zeros. Each x fragment is loaded once for the warp's TM groups (`groups`: 2, or 1 for
1-row tiles of many groups; it may depend on the tile because it does not touch the arithmetic). The codes
come in the order the A fragments load (packed.mma_order: the loader repacks Q4_K so when this is the
decode kernel), one 16-byte load per lane per 64 values; x's int8 words are read as they lie (two words
per lane and k-step). A 1-row tile (ONE) reads row 0 in every column and scales only the even columns.
The first super-block's weights (the first two in 1-row tiles of fewer than 1,024 groups: AHEAD) are
loaded before the kernel waits for the one before it (programmatic dependent launch, engine.kernels.pdl).

Measured on an H200 (2026-12-04, llama-3-8b shape Q4_K, `strata bench --prompt-tokens 512 --max-tokens
128 --ctx 2048`; tests/gpu/run_q4k_tm.sh, run_q4k_tm_final.sh, run_q4k_ahead.sh, run_q4k_ahead2.sh): one
stream 455 tok/s, eight 2,241-2,260 (the int8 kernel 473.6 / 1,336.7 in the same call; before TM and AHEAD
422-427 / 1,692-1,808). Per matrix with its weights from memory (tests/gpu/bench_q4k_mma.py, us at 1 row
/ 16-row tile with 2, 4, 8 real rows / 16 rows; the int8 kernel's in brackets):
    qkv 6144x4096        7.7 (6.4) / 10.8, 10.8, 10.7 (10.7, 12.8, 22.1) / 15.8 (40.2)
    wo 4096x4096         6.7 (6.3) /  8.5,  8.2,  8.3 ( 5.9,  7.1, 11.8) / 11.8 (20.9)
    gate 14336x4096     12.9 (12.1) / 17.0, 17.0, 17.1 (19.4, 23.1, 40.7) / 23.7 (75.6)
    gate|up 28672x4096  24.1 (22.9) / 32.4, 32.3, 32.4 (33.8, 39.0, 70.9) / 46.6 (133.9)
    down 4096x14336     13.2 (16.3) / 16.7, 16.4, 16.4 (13.4, 17.6, 32.6) / 23.9 (63.8)
i.e. 2.0-2.8 TB/s over the weight bytes up to 8 rows and 1.4-1.5 TB/s at 16 (3 TB/s would be 11 us for
the 33 MB matrices). Before TM (one group a warp) it was bound by x's B-fragment loads through L1 (Nsight
Compute, gate|up at 8 rows: L1/TEX 82.6% busy, DRAM 27.5%; tests/gpu/run_q4k_profile.sh); at 16 rows
with TM 2 the kernel holds 252 registers (a program of 2 warps: 4 resident per SM), so fewer loads are
in flight; TM 4 spills there and is slower. Loading the weights past L1 so that x's fragments stay there
(ld.global.cg, or L1::evict_first; 2026-12-04, tests/gpu/run_q4k_cache.sh) changed nothing beyond noise:
gate at 1 / 16:8 / 16 rows 12.8, 17.1, 23.6 us as now, 13.6, 16.9, 23.9 with .cg, 13.3, 16.8, 24.0 with
evict_first; the kernel waits on its weights, not on x (it was left out).
At 9-16 rows the time follows the instructions (H100, 2026-12-06, Nsight Compute on gate 14336x4096,
tests/gpu/run_q4k_stalls.sh): 16 rows 30.8 us and 7.27 M warp instructions, 16 with 8 real 21.7 us and 4.71 M,
issue slots 27% busy in both, the warps waiting on loads (long scoreboard, 3.2 cycles an issued
instruction), the L1 data pipe 53-60% busy; the second pass adds its x loads and its per-element scaling.
Tried there and reverted (us at 16:8 / 16 rows, weights from memory, gate|up 28672x4096 33.9 / 49.9 as is):
the two passes in warps of their own (252 -> 128 registers, twice the warps resident; 50.2 / 50.1: commit
02156a9, run_q4k_pw.sh); each step pulling the code lines of the next one or two super-blocks into L1
(ptxas sinks the next super-block's loads to the end of the loop body; 32.5-34.0 / 49.7-52.3, one row 28.0
-> 35.6: run_q4k_l1pf.sh); both passes sharing each sub-block's weight side (run_q4k_share.sh); x rounded per
256 values so the scaling sums in int32 (29% fewer instructions at 16 rows; branch issue11-x256, run_q4k_x256.sh,
H100: per 32 / per 256, gate|up 16:8 33.9 / 32.5, 16 49.4 / 46.9, down 16 26.2 / 23.6, but down at one row 15.4
/ 19.0; Gemma 3 270M's perplexity unchanged within noise, tests/gpu/x_quant_ppl.py). Fewer instructions gave
5-10% where they were 29% fewer: the 16-row tile waits on its loads, with 252 registers a warp and 8 warps an SM.
Importing this module imports triton; the kernel needs Gluon (triton 3.6+) and an sm_80+ GPU.
"""
from __future__ import annotations

import os

import torch
import triton

from engine.kernels import pdl

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
except ImportError:                                   # a triton without Gluon: the int8 kernel serves Q4_K
    gluon = None

# super-blocks after its first that each warp pulls into L2 before the kernel before it has finished (0-2;
# one 128-byte line a lane; with programmatic dependent launch only): STRATA_Q4K_PF. Off: H200, 8B shape
# (tests/gpu/run_q4k_pf.sh) one stream 405.9 / 406.0 tok/s with 2 against 427.7 with 0, eight 1,658 against 1,699
PREFETCH = int(os.environ.get("STRATA_Q4K_PF", "0"))
# for measuring: 16-row groups a warp where the shape allows (1, 2 or 4; 0: `groups` picks), warps a program
# (0: `warps` picks)
GROUPS = int(os.environ.get("STRATA_Q4K_TM", "0"))
WARPS = int(os.environ.get("STRATA_Q4K_W", "0"))
# super-blocks each warp holds loaded ahead of the one it multiplies (1 or 2), the first AHEAD of them loaded
# before the kernel waits for the one before it: STRATA_Q4K_AHEAD; 0: 2 in 1-row tiles of fewer than 1,024 groups
# of 16 rows, else 1 (H200, tests/gpu/run_q4k_ahead.sh: 8B one stream 414 -> 436 tok/s; llama-3-8b matrices at
# one row from memory, 1 / 2 ahead: qkv 8.5 / 7.7 us, gate 14336x4096 15.6 / 13.1, down 15.4 / 13.3, but
# gate|up 28672x4096 23.5 / 24.6: more registers, fewer programs resident)
AHEAD = int(os.environ.get("STRATA_Q4K_AHEAD", "0"))


def available(device) -> bool:
    """Whether this kernel can run on `device` (a CUDA device of compute capability 8.0+, Gluon present)."""
    return gluon is not None and device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 8


if gluon is not None:
    def _epi_asm(sub: int, one: bool) -> str:
        """t, m += sub-block `sub`'s share. Operands: t $0-3, m $4-7 (out); P $8-11, row g's and row g+8's
        sub words $12-15 / $16-19 (scales 0-3, 4-7, mins 0-3, 4-7), x's (d, s) of the pair's two sub-blocks
        for column 2c $20-23 and column 2c+1 $24-27, t $28-31, m $32-35 (in). float(sc * P) and float(mn)
        exactly by the 2^23 trick (|sc P| < 2^22). one: column 2c only (a 1-row tile: column 2c+1 is past
        its rows, its t and m left unset)."""
        w, off, sel, h = sub // 4, 8 * (sub % 4), 0x7540 + sub % 4, sub % 2
        lines = [f"bfe.u32 a, ${12 + w}, {off}, 8;", f"bfe.u32 b, ${16 + w}, {off}, 8;",
                 "mov.b32 k, 0x4B000000;", f"prmt.b32 ma, ${14 + w}, k, {sel};", f"prmt.b32 mb, ${18 + w}, k, {sel};",
                 "sub.rn.f32 ma, ma, 0f4B000000;", "sub.rn.f32 mb, mb, 0f4B000000;"]
        for e in ((0, 2) if one else range(4)):
            r, d = ("a", "b")[e // 2], 20 + 4 * (e % 2) + 2 * h
            lines += [f"mad.lo.s32 q{e}, ${8 + e}, {r}, 0x4B400000;", f"sub.rn.f32 q{e}, q{e}, 0f4B400000;",
                      f"fma.rn.f32 ${e}, q{e}, ${d}, ${28 + e};", f"fma.rn.f32 ${4 + e}, m{r}, ${d + 1}, ${32 + e};"]
        return "{\n.reg .b32 a, b, q0, q1, q2, q3, ma, mb, k;\n" + "\n".join(lines) + "\n}"

    _EPI = gl.constexpr(tuple(_epi_asm(s, False) for s in range(8)) + tuple(_epi_asm(s, True) for s in range(8)))
    _EPI_IO = gl.constexpr(",".join(["=f"] * 8 + ["r"] * 12 + ["f"] * 16))
    # P of 16 weight rows by 8 x rows over 32 values: A $4-7 (codes' nibbles: row g's two words, then row g + 8's,
    # so a0..a3 are $4, $6, $5, $7), B $8-9 (even k-step) or $10-11
    _MMA = gl.constexpr(tuple(
        "{ .reg .b32 z; mov.b32 z, 0; mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
        "{$0,$1,$2,$3}, {$4,$6,$5,$7}, {" + b + "}, {z,z,z,z}; }" for b in ("$8,$9", "$10,$11")))
    _FIN_IO = gl.constexpr(",".join(["=f"] * 4 + ["f"] * 16))
    # acc $0-3 from acc $4-7, t $8-11, m $12-15 and (d, dmin) of rows g, g+8 $16-19
    _FIN = gl.constexpr("""{
.reg .b32 n0, n1;
neg.f32 n0, $17;
neg.f32 n1, $19;
fma.rn.f32 $0, $16, $8, $4;
fma.rn.f32 $1, $16, $9, $5;
fma.rn.f32 $2, $18, $10, $6;
fma.rn.f32 $3, $18, $11, $7;
fma.rn.f32 $0, n0, $12, $0;
fma.rn.f32 $1, n0, $13, $1;
fma.rn.f32 $2, n1, $14, $2;
fma.rn.f32 $3, n1, $15, $3;
}""")

    @gluon.jit
    def _k_step(cw, xv, sg, sg8, x0, x1, t, m, HIGH: gl.constexpr, SUB: gl.constexpr, ONE: gl.constexpr):
        """One 32-value sub-block: the MMA of the codes' low (or high) nibbles with x, then its scaling."""
        if HIGH:
            a = (cw >> 4) & 0x0F0F0F0F
        else:
            a = cw & 0x0F0F0F0F
        p = gl.inline_asm_elementwise(_MMA[HIGH], "=r,=r,=r,=r,r,r,r,r,r,r,r,r", [a, xv], dtype=gl.int32,
                                      is_pure=True, pack=4)
        return gl.inline_asm_elementwise(_EPI[SUB + 8 * ONE], _EPI_IO, [p, sg, sg8, x0, x1, t, m],
                                         dtype=(gl.float32, gl.float32), is_pure=True, pack=4)

    @gluon.jit
    def _pair(cw, xp, xsp, KS, sg, sg8, t, m, J: gl.constexpr, ONE: gl.constexpr):
        """Sub-blocks 2J (the codes' low nibbles) and 2J + 1 (high) of a super-block."""
        xv = gl.load(xp + 16 * J)
        x0 = gl.load(xsp + 4 * J)                      # (d, s) of sub-blocks 2J, 2J + 1: column 2c
        if ONE:
            x1 = x0
        else:
            x1 = gl.load(xsp + KS + 4 * J)             # column 2c + 1
        t, m = _k_step(cw, xv, sg, sg8, x0, x1, t, m, 0, 2 * J, ONE)
        return _k_step(cw, xv, sg, sg8, x0, x1, t, m, 1, 2 * J + 1, ONE)

    @gluon.jit
    def pdl_enter(PDL: gl.constexpr):
        """engine.kernels.pdl.enter in Gluon: wait for the kernel before, then let the next one launch."""
        if PDL:
            gl.inline_asm_elementwise(pdl.WAIT, "=r", [], dtype=gl.int32, is_pure=False, pack=1)
            gl.inline_asm_elementwise(pdl.LAUNCH_DEPENDENTS, "=r", [], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit
    def prefetch_l2(ptrs, mask):
        """engine.kernels.pdl.prefetch_l2 in Gluon: pull the lines at ptrs (where mask) into L2."""
        gl.inline_asm_elementwise(pdl.PREFETCH_L2, "=r,l,r", [ptrs, mask.to(gl.int32)], dtype=gl.int32, is_pure=False,
                                  pack=1)

    @gluon.jit
    def _weights(cp, sp, dp, sb, SB):
        """The weights of each warp's sb-th super-block for each of its 16-row groups: codes of its four
        pairs, rows g's and g+8's sub words, (d, dmin) of rows g and g+8 in float32."""
        o = sb * 512
        return (gl.load(cp + o), gl.load(cp + o + 128), gl.load(cp + o + 256), gl.load(cp + o + 384),
                gl.load(sp + sb * 4), gl.load(sp + sb * 4 + 32 * SB), gl.load(dp + sb * 2).to(gl.float32))

    @gluon.jit
    def _step(acc, c0, c1, c2, c3, sg, sg8, dm, xq, xsq, KS, ONE: gl.constexpr):
        """acc + one super-block of each 16-row group times one pass of 8 x rows (its int8 words at xq,
        its (d, s) at xsq): the x fragments are loaded once for all the warp's groups."""
        t = gl.zeros_like(acc)
        m = gl.zeros_like(acc)
        t, m = _pair(c0, xq, xsq, KS, sg, sg8, t, m, 0, ONE)
        t, m = _pair(c1, xq, xsq, KS, sg, sg8, t, m, 1, ONE)
        t, m = _pair(c2, xq, xsq, KS, sg, sg8, t, m, 2, ONE)
        t, m = _pair(c3, xq, xsq, KS, sg, sg8, t, m, 3, ONE)
        return gl.inline_asm_elementwise(_FIN, _FIN_IO, [acc, t, m, dm], dtype=gl.float32, is_pure=True, pack=4)

    @gluon.jit
    def _x_ptrs(q, ds, r0, g, c, xe, e, sb0, KW, KS, ONE: gl.constexpr):
        """Where the pass of x rows from r0 starts for each lane: its int8 words (+ 64 i + 16 j words for
        super-block i, pair j) and its (d, s) pairs (+ 16 i + 2 sub)."""
        if ONE:                                        # a 1-row tile: every column reads row 0
            return q + 2 * c + xe + sb0 * 64, ds + e + 0 * c + sb0 * 16
        return (q + ((r0 + g).to(gl.int64) * KW + 2 * c) + xe + sb0 * 64,
                ds + ((r0 + 2 * c).to(gl.int64) * KS) + e + sb0 * 16)

    @gluon.jit
    def _store(out, acc, ng, r0, M, stride_om, L: gl.constexpr, TM: gl.constexpr):
        """The warps' sums of acc (a fixed tree: gl.sum) into out's rows r0..r0+7 below M."""
        O: gl.constexpr = gl.SliceLayout(0, L)
        tot = gl.sum(acc, axis=0)
        lo = gl.arange(0, 32, layout=gl.SliceLayout(1, gl.SliceLayout(2, O)))[:, None, None]
        to = gl.arange(0, TM, layout=gl.SliceLayout(0, gl.SliceLayout(2, O)))[None, :, None]
        eo = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, O)))[None, None, :]
        n = ng * (16 * TM) + to * 16 + lo // 4 + 8 * (eo // 2)
        col = r0 + 2 * (lo % 4) + eo % 2
        gl.store(out + col * stride_om + n, tot, mask=col < M)

    @gluon.jit
    def _q4k_kernel(q, ds, nreal_ptr, T, codes, scales, sub, out, N, K, KW, KS, stride_om, SPW,
                    W: gl.constexpr, TM: gl.constexpr, ONE: gl.constexpr, TWO: gl.constexpr, AHEAD: gl.constexpr,
                    PDL: gl.constexpr, PF: gl.constexpr):
        # a program: TM groups of 16 weight rows; warp w takes super-blocks [w SPW, (w + 1) SPW) of each,
        # its sum added to the other warps' in a fixed tree at the end. A thread: lane (g, c) of its warp,
        # one row of 4 words per group.
        L: gl.constexpr = gl.BlockedLayout([1, 1, TM, 4], [1, 32, 1, 1], [W, 1, 1, 1], [3, 2, 1, 0])
        Z: gl.constexpr = gl.BlockedLayout([1], [32], [W], [0])
        ng = gl.program_id(0)
        wv = gl.arange(0, W, layout=gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3, L))))[:, None, None, None]
        lane = gl.arange(0, 32, layout=gl.SliceLayout(0, gl.SliceLayout(2, gl.SliceLayout(3, L))))[None, :, None, None]
        tg = gl.arange(0, TM, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(3, L))))[None, None, :, None]
        e = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, L))))[None, None, None, :]
        g = lane // 4
        c = lane % 4
        SB = K // 256
        grp = ng.to(gl.int64) * TM + tg              # the lane's 16-row groups
        row = grp * 16 + g
        sb0 = wv * SPW                                # the warp's first super-block
        cp = codes + (grp * SB * 512 + lane * 4) + e + sb0 * 512  # pair j of its i-th: + (4 i + j) * 128
        sp = sub + row * SB * 4 + e + sb0 * 4          # row g's sub words: + 4 i; row g + 8's: + 32 SB
        dp = scales + row * SB * 2 + ((e // 2) * 16 * SB + e % 2) + sb0 * 2    # (d, dmin) of rows g, g + 8: + 2 i
        # the first super-block's weights are on their way before the kernel before has finished
        c0, c1, c2, c3, sg, sg8, dm = _weights(cp, sp, dp, 0, SB)
        if AHEAD == 2:                                 # (and the second's, where a pass keeps two ahead)
            p0, p1, p2, p3, psg, psg8, pdm = _weights(cp, sp, dp, gl.minimum(1, SPW - 1), SB)
        if PDL:                                        # and the next PF of each warp into L2 (lane: a line)
            if PF > 0:
                line = codes + (grp * SB * 512) + (sb0 + 1 + lane // 16) * 512 + (lane % 16) * 32 + e * 0
                prefetch_l2(line, (lane // 16 < PF) & (lane // 16 < SPW - 1) & (e == 0))
        pdl_enter(PDL)
        M = gl.minimum(gl.load(nreal_ptr), T)
        xe = (e % 2) + 8 * (e // 2)                    # x words: b0, b1 of the even k-step, then the odd one's
        zero = gl.zeros((W, 32, TM, 4), gl.float32, L)
        if TWO and M > 8:                              # 9-16 rows: both passes in one sweep of the weights
            xp, xsp = _x_ptrs(q, ds, 0, g, c, xe, e, sb0, KW, KS, False)
            yp, ysp = _x_ptrs(q, ds, 8, g, c, xe, e, sb0, KW, KS, False)
            acc = zero
            acc8 = zero
            for i in range(SPW):
                n0, n1, n2, n3, nsg, nsg8, ndm = _weights(cp, sp, dp, gl.minimum(i + 1, SPW - 1), SB)
                acc = _step(acc, c0, c1, c2, c3, sg, sg8, dm, xp + i * 64, xsp + i * 16, KS, False)
                acc8 = _step(acc8, c0, c1, c2, c3, sg, sg8, dm, yp + i * 64, ysp + i * 16, KS, False)
                c0, c1, c2, c3, sg, sg8, dm = n0, n1, n2, n3, nsg, nsg8, ndm
            _store(out, acc, ng, 0, M, stride_om, L, TM)
            _store(out, acc8, ng, 8, M, stride_om, L, TM)
        else:
            for r0 in range(0, M, 8):
                xp, xsp = _x_ptrs(q, ds, r0, g, c, xe, e, sb0, KW, KS, ONE)
                acc = zero
                if AHEAD == 2:
                    for i in range(SPW):
                        n0, n1, n2, n3, nsg, nsg8, ndm = _weights(cp, sp, dp, gl.minimum(i + 2, SPW - 1), SB)
                        acc = _step(acc, c0, c1, c2, c3, sg, sg8, dm, xp + i * 64, xsp + i * 16, KS, ONE)
                        c0, c1, c2, c3, sg, sg8, dm = p0, p1, p2, p3, psg, psg8, pdm
                        p0, p1, p2, p3, psg, psg8, pdm = n0, n1, n2, n3, nsg, nsg8, ndm
                else:
                    for i in range(SPW):
                        n0, n1, n2, n3, nsg, nsg8, ndm = _weights(cp, sp, dp, gl.minimum(i + 1, SPW - 1), SB)
                        acc = _step(acc, c0, c1, c2, c3, sg, sg8, dm, xp + i * 64, xsp + i * 16, KS, ONE)
                        c0, c1, c2, c3, sg, sg8, dm = n0, n1, n2, n3, nsg, nsg8, ndm
                _store(out, acc, ng, r0, M, stride_om, L, TM)
                if r0 + 8 < M:                         # another pass: its first super-blocks again
                    c0, c1, c2, c3, sg, sg8, dm = _weights(cp, sp, dp, 0, SB)
                    if AHEAD == 2:
                        p0, p1, p2, p3, psg, psg8, pdm = _weights(cp, sp, dp, gl.minimum(1, SPW - 1), SB)
        rows = ng * (16 * TM) + gl.arange(0, 16 * TM * W, layout=Z) % (16 * TM)
        zz = gl.zeros((16 * TM * W,), gl.float32, Z)
        for r in range(M, T):
            gl.store(out + r * stride_om + rows, zz)


def warps(n: int, k: int) -> int:
    """Warps a program (each over its share of K's super-blocks): the fewest of 2, 4 and 8 that make at
    least 1,536 warps over the shape's 16-row groups, halved until they divide the super-blocks. The
    shape's alone (STRATA_Q4K_W sets it, for measuring)."""
    blocks = k // 256
    w = WARPS or 2
    while not WARPS and w < 8 and (n // 16) * w < 1536:
        w *= 2
    while blocks % w:
        w //= 2
    return w


def groups(n: int, k: int, t: int) -> int:
    """16-row groups a warp (each x fragment loaded once for all of them) for a t-row tile: 2, or 1 for a
    1-row tile over more than 256 groups; halved until they divide the shape's groups. It may depend on
    the tile: the arithmetic per element does not (the warps' K shares do: `warps`). STRATA_Q4K_TM sets it."""
    tm = GROUPS or (2 if t > 1 or n // 16 <= 256 else 1)
    while (n // 16) % tm:
        tm //= 2
    return tm


def loaded_ahead(n: int, t: int) -> int:
    """Super-blocks each warp keeps loaded ahead in a t-row tile (AHEAD): 2 in 1-row tiles of fewer than
    1,024 groups of 16 rows, else 1 (the arithmetic does not depend on it). STRATA_Q4K_AHEAD sets it."""
    return AHEAD or (2 if t == 1 and n // 16 < 1024 else 1)


def supports(w) -> bool:
    """Whether w's decode rows can run here: Q4_K with its codes in this kernel's order (packed.mma_order,
    which needs N a multiple of 16; K is one of 256)."""
    return gluon is not None and w.mma


def matmul_parts(x: torch.Tensor, w, n_real: torch.Tensor, xq=None, nw: int | None = None,
                 tm: int | None = None, ahead: int | None = None) -> tuple[torch.Tensor, int]:
    """x [T, K] (T <= 16) @ W.T for the first n_real rows (an int32 device scalar), zeros for the other rows:
    (part [1, T, N], 1). xq: x already quantized (engine.kernels.dp4a_gemv's (q, ds)), else quantized here.
    nw, tm, ahead: warps a program, 16-row groups a warp, super-blocks loaded ahead, for measuring only.
    w: Q4_K in this kernel's code order (engine.kernels.packed.mma_order:
    for 16 weight rows, super-block sb and 64-value pair j, lane (g, c) of a warp loads one int32 x 4: bytes
    8c..8c+7 of the pair's 32 of row g, then of row g + 8, the MMA's A registers a0, a2, a1, a3 (k = 4c..4c+3
    and 16+4c..19+4c of rows g and g + 8), so its k runs over the sub-block's values in the order 8c..8c+7 by
    c: the order the B fragments take x in, two words at 8c; a dot product of integers does not depend on the
    order)."""
    if not supports(w):
        raise ValueError("engine.kernels.q4k_mma runs Q4_K weights packed in its code order (pack(..., mma=True))")
    from engine.kernels import dp4a_gemv
    t = x.shape[0]
    nw = nw or warps(w.n, w.k)
    tm = tm or groups(w.n, w.k, t)
    part = torch.empty((1, t, w.n), dtype=torch.float32, device=x.device)
    if t == 0:
        return part, 1
    q, ds = xq if xq is not None else dp4a_gemv.quantize(x)     # (buffers of whole passes of 8 rows)
    _q4k_kernel[(w.n // (16 * tm),)](
        q.view(torch.int32), ds, n_real, t, w.codes.view(torch.int32), w.scales, w.sub.view(torch.int32), part,
        w.n, w.k, w.k // 4, w.k // 16, part.stride(1), w.k // 256 // nw, W=nw, TM=tm, ONE=t == 1, TWO=t > 8,
        AHEAD=ahead or loaded_ahead(w.n, t), PF=PREFETCH, num_warps=nw,
        enable_fp_fusion=False, **pdl.launch(x.device))
    return part, 1
