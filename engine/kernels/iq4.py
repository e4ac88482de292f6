"""IQ4_NL's 16 values (IQ4_NL and IQ4_XS codes index them) inside the Triton kernels.

`kvalue(q)`: a code tensor -> its value (int32), by a tree of selects on the code's bits (the
dequantizing kernels: engine.kernels.stream_matmul). `kvalues8(w)`: an int32 word of eight codes in the
repacked nibble order -> the two words of their int8 values, for dp4a (engine.kernels.dp4a_gemv). On the
GPU that is llama.cpp's table trick, byte permutes (`prmt`) over the table in four registers. A `prmt`
selector is four 4-bit fields in its low 16 bits (bit 3 of a field asks for sign fill); the repacked
word's halves are such selectors as they stand: codes 0..7 come from the table's first two words,
8..15 from the last two (each by the code's low 3 bits: the word masked once), and each byte is picked
by the code's bit 3 (moved to bit 2 of a 0x3210 selector). Eleven instructions for eight values, where
codes stored one per byte took 23. Under the Triton interpreter the same bytes come from `kvalue`;
tests/engine/test_iq4_prmt.py checks the PTX steps against the table on every half word. Importing this
module imports triton.
"""
from __future__ import annotations

import triton
import triton.language as tl

# the 16 values as int8 bytes, four per little-endian word
WORDS = (0xBFAD9881, 0xF6EADDCF, 0x26190D01, 0x71594535)


@triton.jit
def kvalue(q):
    """Codes (integers 0..15) -> -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113."""
    b0 = (q & 1) != 0
    b1 = (q & 2) != 0
    b2 = (q & 4) != 0
    lo = tl.where(b2, tl.where(b1, tl.where(b0, -10, -22), tl.where(b0, -35, -49)),
                  tl.where(b1, tl.where(b0, -65, -83), tl.where(b0, -104, -127)))
    hi = tl.where(b2, tl.where(b1, tl.where(b0, 113, 89), tl.where(b0, 69, 53)),
                  tl.where(b1, tl.where(b0, 38, 25), tl.where(b0, 13, 1)))
    return tl.where((q & 8) != 0, hi, lo).to(tl.int32)


@triton.jit
def kvalues8(w, INTERP: tl.constexpr):
    """int32 words of eight codes in the repacked order (engine.kernels.packed.iq4_words: nibbles 0..3
    the codes of one x word, nibbles 4..7 those of the x word 16 values on) -> the two words of their
    int8 values, for dp4a."""
    if INTERP:
        a = tl.zeros_like(w)
        b = tl.zeros_like(w)
        for i in tl.static_range(4):
            a = a | ((kvalue((w >> (4 * i)) & 15) & 0xFF) << (8 * i))
            b = b | ((kvalue((w >> (16 + 4 * i)) & 15) & 0xFF) << (8 * i))
        return a, b
    else:
        return tl.inline_asm_elementwise(
            "{ .reg .b32 t0, t1, t2, t3, c, m, ch, mh, lo, hi;\n"
            "mov.b32 t0, 0xBFAD9881; mov.b32 t1, 0xF6EADDCF; mov.b32 t2, 0x26190D01; mov.b32 t3, 0x71594535;\n"
            "and.b32 c, $2, 0x77777777;\n"
            "shr.b32 m, $2, 1;\n"
            "and.b32 m, m, 0x44444444;\n"
            "or.b32 m, m, 0x32103210;\n"
            "shr.b32 ch, c, 16;\n"
            "shr.b32 mh, m, 16;\n"
            "prmt.b32 lo, t0, t1, c;\n"
            "prmt.b32 hi, t2, t3, c;\n"
            "prmt.b32 $0, lo, hi, m;\n"
            "prmt.b32 lo, t0, t1, ch;\n"
            "prmt.b32 hi, t2, t3, ch;\n"
            "prmt.b32 $1, lo, hi, mh; }",
            "=r,=r,r", [w], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
