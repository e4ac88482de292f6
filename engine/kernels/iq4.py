"""Tables of 16 int8 values inside the Triton kernels: IQ4_NL's (IQ4_NL and IQ4_XS codes index them), and
the value sets of the grid i-quants that engine.kernels.packed stores as 4-bit codes in IQ4_XS's layout
(TABLE_VALUES: each grid value with its sign, IQ1_S's 8 g +- 1; see packed.TABLE_TYPES).

`kvalue(q, TAB)`: a code tensor -> its value (int32), by a tree of selects on the code's bits (the
dequantizing kernels: engine.kernels.stream_matmul). `kvalues8(w, INTERP, TAB)`: an int32 word of eight
codes in the repacked nibble order -> the two words of their int8 values, for dp4a
(engine.kernels.dp4a_gemv). On the GPU that is llama.cpp's table trick, byte permutes (`prmt`) over the
table in four registers. A `prmt` selector is four 4-bit fields in its low 16 bits (bit 3 of a field asks
for sign fill); the repacked word's halves are such selectors as they stand: codes 0..7 come from the
table's first two words, 8..15 from the last two (each by the code's low 3 bits: the word masked once), and
each byte is picked by the code's bit 3 (moved to bit 2 of a 0x3210 selector). Eleven instructions for eight
values, where codes stored one per byte took 23. Under the Triton interpreter the same bytes come from
`kvalue`; tests/engine/test_iq4_prmt.py checks the PTX steps against every table on every half word.
Importing this module imports triton.
"""
from __future__ import annotations

import triton
import triton.language as tl

# each table's 16 values (TAB 0: IQ4_NL's; 1: IQ3_XXS's grid values +-; 2: IQ3_S's; 3: the IQ2 grids'
# (8, 25, 43) +-, the rest 0; 4: IQ1_S's 8 g +- 1 for g in -1, 0, 1, the rest 0)
TABLE_VALUES = (
    (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113),
    (-62, -52, -44, -36, -28, -20, -12, -4, 4, 12, 20, 28, 36, 44, 52, 62),
    (-15, -13, -11, -9, -7, -5, -3, -1, 1, 3, 5, 7, 9, 11, 13, 15),
    (-43, -25, -8, 8, 25, 43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
    (-9, -7, -1, 1, 7, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
)


def words(tab: int) -> tuple[int, ...]:
    """A table's 16 values as four little-endian int32 words (signed), the registers the permutes read."""
    b = bytes(v & 0xFF for v in TABLE_VALUES[tab])
    return tuple(int.from_bytes(b[i:i + 4], "little", signed=True) for i in range(0, 16, 4))


WORDS = tuple(w & 0xFFFFFFFF for w in words(0))      # IQ4_NL's, unsigned


@triton.jit
def _tree(q, v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15):
    """Codes (0..15) -> v[q] by selects on the code's bits."""
    b0 = (q & 1) != 0
    b1 = (q & 2) != 0
    b2 = (q & 4) != 0
    lo = tl.where(b2, tl.where(b1, tl.where(b0, v7, v6), tl.where(b0, v5, v4)),
                  tl.where(b1, tl.where(b0, v3, v2), tl.where(b0, v1, v0)))
    hi = tl.where(b2, tl.where(b1, tl.where(b0, v15, v14), tl.where(b0, v13, v12)),
                  tl.where(b1, tl.where(b0, v11, v10), tl.where(b0, v9, v8)))
    return tl.where((q & 8) != 0, hi, lo).to(tl.int32)


@triton.jit
def kvalue(q, TAB: tl.constexpr = 0):
    """Codes (integers 0..15) -> table TAB's values (TABLE_VALUES)."""
    if TAB == 0:
        return _tree(q, -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)
    elif TAB == 1:
        return _tree(q, -62, -52, -44, -36, -28, -20, -12, -4, 4, 12, 20, 28, 36, 44, 52, 62)
    elif TAB == 2:
        return _tree(q, -15, -13, -11, -9, -7, -5, -3, -1, 1, 3, 5, 7, 9, 11, 13, 15)
    elif TAB == 3:
        return _tree(q, -43, -25, -8, 8, 25, 43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    else:
        return _tree(q, -9, -7, -1, 1, 7, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)


@triton.jit
def kvalues8(w, INTERP: tl.constexpr, TAB: tl.constexpr = 0):
    """int32 words of eight codes in the repacked order (engine.kernels.packed.iq4_words: nibbles 0..3
    the codes of one x word, nibbles 4..7 those of the x word 16 values on) -> the two words of their
    int8 values in table TAB, for dp4a."""
    if INTERP:
        a = tl.zeros_like(w)
        b = tl.zeros_like(w)
        for i in tl.static_range(4):
            a = a | ((kvalue((w >> (4 * i)) & 15, TAB) & 0xFF) << (8 * i))
            b = b | ((kvalue((w >> (16 + 4 * i)) & 15, TAB) & 0xFF) << (8 * i))
        return a, b
    else:
        if TAB == 0:
            t0, t1, t2, t3 = -1079142271, -152379953, 639175937, 1901675829
        elif TAB == 1:
            t0, t1, t2, t3 = -590033726, -51057436, 471075844, 1043606564
        elif TAB == 2:
            t0, t1, t2, t3 = -134876175, -132103, 117768961, 252513033
        elif TAB == 3:
            t0, t1, t2, t3 = 150530005, 11033, 0, 0
        else:
            t0, t1, t2, t3 = 33552887, 2311, 0, 0
        z = w * 0
        return tl.inline_asm_elementwise(
            "{ .reg .b32 c, m, ch, mh, lo, hi;\n"
            "and.b32 c, $2, 0x77777777;\n"
            "shr.b32 m, $2, 1;\n"
            "and.b32 m, m, 0x44444444;\n"
            "or.b32 m, m, 0x32103210;\n"
            "shr.b32 ch, c, 16;\n"
            "shr.b32 mh, m, 16;\n"
            "prmt.b32 lo, $3, $4, c;\n"
            "prmt.b32 hi, $5, $6, c;\n"
            "prmt.b32 $0, lo, hi, m;\n"
            "prmt.b32 lo, $3, $4, ch;\n"
            "prmt.b32 hi, $5, $6, ch;\n"
            "prmt.b32 $1, lo, hi, mh; }",
            "=r,=r,r,r,r,r,r", [w, z + t0, z + t1, z + t2, z + t3], dtype=(tl.int32, tl.int32), is_pure=True,
            pack=1)
