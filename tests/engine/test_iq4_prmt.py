"""The PTX of engine.kernels.iq4.kvalues8, run instruction by instruction on every half word of codes.

On the GPU the 4-bit codes become their int8 values through three `prmt` byte permutes over the table's
four words (the Triton interpreter, and so every other CPU test, takes the `kvalue` branch instead). This
test reads the asm string and each table's four words out of the module's source, executes the asm with
the PTX semantics of the five instructions it uses (`prmt.b32` in its default mode: four 4-bit selectors in
the low 16 bits, bit 3 asks for sign fill), and compares the result with each table (IQ4_NL's and the grid
i-quants' value sets) for all 65,536 four-code halves in either half of the word (the other half a
different code each time). A selector that keeps the codes' bit 3 (sign fill), takes the wrong half or a
table word out of place fails here.
"""
from __future__ import annotations

import ast
import inspect
import itertools
import re

from gguf.quants import IQ4_NL

import engine.kernels.iq4 as iq4

MASK = 0xFFFFFFFF


def kvalues8_ptx() -> str:
    for node in ast.walk(ast.parse(inspect.getsource(iq4))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "inline_asm_elementwise":
            return node.args[0].value
    raise AssertionError("no inline_asm_elementwise in engine.kernels.iq4")


def table_registers() -> list[tuple[int, ...]]:
    """The four words kvalues8 hands the asm for each TAB, in the order of its branches."""
    out = []
    for node in ast.walk(ast.parse(inspect.getsource(iq4.kvalues8.fn))):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) \
                and [t.id for t in node.targets[0].elts] == ["t0", "t1", "t2", "t3"]:
            out.append(tuple(ast.literal_eval(e) for e in node.value.elts))
    return out


def prmt(a: int, b: int, c: int) -> int:
    src = [(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)]
    out = 0
    for i in range(4):
        sel = (c >> (4 * i)) & 0xF
        byte = src[sel & 7]
        if sel & 8:
            byte = 0xFF if byte & 0x80 else 0
        out |= byte << (8 * i)
    return out


def run_ptx(asm: str, x: int, table: tuple[int, ...]) -> tuple[int, int]:
    regs = {"$2": x, **{f"${3 + i}": t & MASK for i, t in enumerate(table)}}
    val = lambda t: int(t, 0) if t[0].isdigit() else regs[t]  # noqa: E731
    body = asm.strip().strip("{}")
    for stmt in filter(None, (s.strip() for s in body.split(";"))):
        op, args = stmt.split(None, 1)
        args = [a.strip() for a in args.split(",")]
        if op == ".reg":
            continue
        d, *src = args
        if op == "mov.b32":
            r = val(src[0])
        elif op == "shr.b32":
            r = val(src[0]) >> val(src[1])
        elif op == "or.b32":
            r = val(src[0]) | val(src[1])
        elif op == "and.b32":
            r = val(src[0]) & val(src[1])
        elif op == "prmt.b32":
            r = prmt(*(val(s) for s in src))
        else:
            raise AssertionError(f"instruction the test does not know: {op}")
        regs[d] = r & MASK
    return regs["$0"], regs["$1"]


def test_kvalues8_ptx_matches_each_table_on_every_half_word():
    asm = kvalues8_ptx()
    assert re.search(r"prmt\.b32", asm)
    assert list(iq4.TABLE_VALUES[0]) == [int(v) for v in IQ4_NL.kvalues]
    assert [b - 256 * (b > 127) for w in iq4.WORDS for b in w.to_bytes(4, "little")] == list(iq4.TABLE_VALUES[0])
    registers = table_registers()
    assert registers == [iq4.words(t) for t in range(len(iq4.TABLE_VALUES))]
    values = lambda w: [b - 256 * (b > 127) for b in w.to_bytes(4, "little")]  # noqa: E731
    for tab, words in enumerate(registers):
        table = iq4.TABLE_VALUES[tab]
        for codes in itertools.product(range(16), repeat=4):
            half = sum(c << (4 * i) for i, c in enumerate(codes))
            other = (half * 40503 + 12345) & 0xFFFF          # a bijection: the other half sees every value too
            lo, hi = run_ptx(asm, half | other << 16, words)
            assert values(lo) == [table[c] for c in codes], (tab, codes)
            assert values(hi) == [table[(other >> (4 * i)) & 15] for i in range(4)], (tab, codes)
