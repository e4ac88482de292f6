"""IQ4_NL's 16 values (IQ4_NL and IQ4_XS codes index them) inside the Triton kernels.

`kvalue(q)`: a code tensor -> its value (int32), by a tree of selects on the code's bits (the
dequantizing kernels: engine.kernels.stream_matmul). `kvalues4(w)`: an int32 word of four codes, one
per byte (0..15) -> the word of their four int8 values, for dp4a (engine.kernels.dp4a_gemv). On the GPU
that is llama.cpp's table trick, three byte permutes (`prmt`) over the table in four registers. A `prmt`
selector is four 4-bit fields in its low 16 bits (bit 3 of a field asks for sign fill), so the four byte
codes are first packed into nibbles; then codes 0..7 come from the first two words, 8..15 from the last
two (each by the code's low 3 bits), and each byte is picked by the code's bit 3. Under the Triton
interpreter the same bytes come from `kvalue`; tests/engine/test_iq4_prmt.py checks the PTX steps
against the table on every four-code word. Importing this module imports triton.
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
def kvalues4(w, INTERP: tl.constexpr):
    """int32 words of four codes (one per byte) -> words of their four int8 values."""
    if INTERP:
        out = tl.zeros_like(w)
        for i in tl.static_range(4):
            out = out | ((kvalue((w >> (8 * i)) & 15) & 0xFF) << (8 * i))
        return out
    else:
        return tl.inline_asm_elementwise(
            "{ .reg .b32 t0, t1, t2, t3, s, c, lo, hi, m;\n"
            "mov.b32 t0, 0xBFAD9881; mov.b32 t1, 0xF6EADDCF; mov.b32 t2, 0x26190D01; mov.b32 t3, 0x71594535;\n"
            "shr.b32 s, $1, 4;\n"
            "or.b32 s, s, $1;\n"
            "prmt.b32 s, s, s, 0x0020;\n"
            "and.b32 c, s, 0x7777;\n"
            "prmt.b32 lo, t0, t1, c;\n"
            "prmt.b32 hi, t2, t3, c;\n"
            "and.b32 m, s, 0x8888;\n"
            "shr.b32 m, m, 1;\n"
            "or.b32 m, m, 0x3210;\n"
            "prmt.b32 $0, lo, hi, m; }",
            "=r,r", [w], dtype=tl.int32, is_pure=True, pack=1)
