"""Compile the streaming matmul kernels for sm_90 on any machine (no GPU needed: triton's bundled
ptxas) and report registers, stack (spills) and the instruction mix of the SASS: the first look
before spending device time on a kernel change (../shared METHOD: "read what costs no device time").

    python3 tests/gpu/sass_report.py q4k [TM] [WARPS] [ROWS]   (engine.kernels.q4k_mma for a ROWS-row tile: 1, 8
    or 16; env AHEAD, MAXNREG; reports the instruction mix of its longest loop too: the
    inner K loop, or in an 8-row tile the pass loop around it)
    python3 tests/gpu/sass_report.py [mma|gemv|dp4a|imma] [KIND] [BN] [WARPS]     (mma: rows per program STRATA_MMA_BM)     (dp4a: env L = lanes, default 32; RB = x rows per pass; STRATA_DP4A_XS weight rows per x load;
    PDL=0 without the programmatic-dependent-launch wait and weight prefetch; TAB: kind 6's or 14's table,
    engine.kernels.iq4.TABLE_VALUES; SASS=1 prints the SASS)

KIND: 1 Q8_0, 2 Q4_0, 3 Q4_1, 4 Q4_K. Read 2026-11-30 off the committed kernels (KIND 4):
- mma BN 64 / 4 warps: 255 registers, 392 bytes of stack; BN 32 / 4 warps: 223, none; BN 64 / 8 warps:
  254, none. The spilling one was still the fastest measured (gate|up 112.9 us vs 161 and 132), so
  spills are not the limit: the loop is integer work (IMAD 471, PRMT 256, LOP3 234 against 32 HMMA
  and 128 FFMA): a 64-bit address per element of the 3-D code and scale tiles, and byte shuffles.
- gemv BN 32: 168 registers, no stack; its 16 unrolled rows hold 5312 SHFL and 4304 FADD against
  1056 FFMA: the layout puts K across lanes, so every row's sum is a shuffle tree (its time grows
  with the rows: 39.7 / 83 / 256 us at 1 / 4 / 16 rows for the 4096x14336 Q4_K down matrix).
"""
from __future__ import annotations

import collections
import os
import re
import subprocess
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from engine.kernels import bf16_decode as bf
from engine.kernels import dp4a_gemv as dg
from engine.kernels import imma_matmul as im
from engine.kernels import stream_matmul as sm

BIN = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
COMMON = {"codes": "*u8", "scales": "*fp16", "sub": "*u8", "part_ptr": "*fp32", "N": "i32", "K": "i32",
          "stride_xm": "i32", "stride_ps": "i32", "stride_pm": "i32", "CPS": "i32"}


def compile_kernel(which: str, kind: int, bn: int, warps: int):
    if which == "mma":
        sig = {"x_ptr": "*bf16", **COMMON, "M": "i32", "KIND": "constexpr", "BN": "constexpr",
               "IEEE": "constexpr", "BM": "constexpr", "TAB": "constexpr"}
        fn, const = sm._mm_kernel, {"KIND": kind, "BN": bn, "IEEE": False, "BM": sm.MMA_BM,
                                    "TAB": int(os.environ.get("TAB", "0"))}
    elif which == "dp4a":
        sig = {"xq": "*i32", "xds": "*fp32", "nreal_ptr": "*i32", "T": "i32", "codes": "*i32", "scales": "*fp16",
               "sub": "*u8", "part": "*fp32", "N": "i32", "K": "i32", "stride_pm": "i32", "row_c": "i32",
               "row_s": "i32", "row_g": "i32", "cap": "i32", "KIND": "constexpr", "BN": "constexpr", "L": "constexpr",
               "EVEN": "constexpr", "INTERP": "constexpr", "RB": "constexpr", "XS": "constexpr", "PF": "constexpr",
               "PDL": "constexpr", "ORD": "constexpr", "TAB": "constexpr"}
        if int(os.environ.get("TAB", "0")) or kind == 14:      # the table codes: float32 d, kind 14's scale words
            sig.update(scales="*fp32", sub="*i32" if kind == 14 else "*u8")
        fn, const = dg._dp4a_kernel, {"KIND": kind, "BN": bn, "L": int(os.environ.get("L", "32")), "EVEN": True,
                                      "INTERP": False, "RB": int(os.environ.get("RB", dg.ROWS_PER_PASS)),
                                      "XS": dg.X_SHARED or 1, "PF": dg.PREFETCH == "1",
                                      "PDL": os.environ.get("PDL", "1") == "1", "ORD": 0,
                                      "TAB": int(os.environ.get("TAB", "0"))}
    elif which == "imma":
        sig = {"xq": "*i8", "xds": "*fp32", "nreal_ptr": "*i32", "T": "i32", "codes": "*i8" if kind == 1 else "*u8",
               "scales": "*i32" if kind == 4 else "*fp16", "sub": "*i32" if kind == 4 else "*u8", "part": "*fp32", "N": "i32", "K": "i32", "stride_ps": "i32",
               "stride_pm": "i32", "CPS": "i32", "KIND": "constexpr", "BN": "constexpr", "RT": "constexpr", "NS": "constexpr",
               "INTERP": "constexpr"}
        fn, const = im._imma_kernel, {"KIND": kind, "BN": bn, "RT": im.RT, "INTERP": False, "NS": sm.STAGES}
    elif which == "bf16":
        sig = {"x": "*bf16", "nreal_ptr": "*i32", "T": "i32", "stride_xm": "i32", "codes": "*u8", "scales": "*i32",
               "sub": "*i32", "part": "*fp32", "N": "i32", "K": "i32", "stride_ps": "i32", "stride_pm": "i32",
               "CPS": "i32", "BN": "constexpr", "RT": "constexpr", "INTERP": "constexpr", "NS": "constexpr", "PACK": "constexpr"}
        fn, const = bf._bf16_kernel, {"BN": bn, "RT": bf.RT, "INTERP": False, "NS": bf.STAGES, "PACK": bf.PACK}
    else:
        sig = {"x_ptr": "*bf16", "nreal_ptr": "*i64", "T": "i32", **COMMON, "KIND": "constexpr",
               "BN": "constexpr", "EVEN_K": "constexpr"}
        fn, const = sm._gemv_kernel, {"KIND": kind, "BN": bn, "EVEN_K": True}
    order = list(fn.arg_names)
    sig = {name: sig[name] for name in order}
    attrs, options = {}, {"num_warps": warps, "num_stages": sm.STAGES}
    if which in ("dp4a", "imma", "bf16"):   # as launched: 16-byte aligned tensors (what the JIT sees at run time), no fp fusion
        attrs = {(order.index(a),): [["tt.divisibility", 16]] for a in order if sig[a].startswith("*") or a in ("K", "stride_xm")}
        options["enable_fp_fusion"] = False
    src = ASTSource(fn=fn, signature=sig, constexprs=const, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def compile_q4k(tm: int, warps: int, rows: int):
    """engine.kernels.q4k_mma's kernel as launched for a rows-row tile (Gluon: no interpreter, no GPU needed)."""
    from triton.experimental.gluon._runtime import GluonASTSource

    from engine.kernels import q4k_mma as qm
    fn = qm._q4k_kernel
    sig = {"q": "*i32", "ds": "*fp32", "nreal_ptr": "*i32", "T": "i32", "codes": "*i32", "scales": "*fp16",
           "sub": "*i32", "out": "*fp32", "N": "i32", "K": "i32", "KW": "i32", "KS": "i32", "stride_om": "i32",
           "SPW": "i32"}
    order = list(fn.arg_names)
    const = {"W": warps, "TM": tm, "ONE": rows == 1, "TWO": rows > 8, "AHEAD": int(os.environ.get("AHEAD", "1")),
             "PDL": True, "PF": 0}
    sig = {name: sig.get(name, "constexpr") for name in order}
    attrs = {(order.index(a),): [["tt.divisibility", 16]] for a in order if sig[a].startswith("*") or a in ("K", "KW", "KS")}
    options = {"num_warps": warps, "enable_fp_fusion": False}
    if os.environ.get("MAXNREG"):
        options["maxnreg"] = int(os.environ["MAXNREG"])
    return triton.compile(GluonASTSource(fn=fn, signature=sig, constexprs=const, attrs=attrs),
                          target=GPUTarget("cuda", 90, 32), options=options)


def longest_loop(sass: str) -> collections.Counter:
    """The instruction mix of the longest backward-branch loop in the SASS."""
    lines = sass.splitlines()
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := re.match(r"^(\.L_x_\d+):", line))}
    best = (0, 0)
    for i, line in enumerate(lines):
        m = re.search(r"BRA `\((\.L_x_\d+)\)", line)
        if m and labels.get(m.group(1), i) < i and i - labels[m.group(1)] > best[1] - best[0]:
            best = (labels[m.group(1)], i)
    return collections.Counter(m.group(1).split(".")[0] for line in lines[best[0]:best[1] + 1]
                               if (m := re.search(r"/\*[0-9a-f]+\*/\s+(?:@!?U?P[0-9T] )?([A-Z0-9_.]+)", line)))


def disassemble(k, path: str) -> tuple[str, str]:
    """A compiled kernel's cubin written to path: (its resource usage, its SASS)."""
    with open(path, "wb") as f:
        f.write(k.asm["cubin"])
    usage = subprocess.run([os.path.join(BIN, "cuobjdump"), "--dump-resource-usage", path], capture_output=True,
                           text=True).stdout
    return usage, subprocess.run([os.path.join(BIN, "nvdisasm"), "-c", path], capture_output=True, text=True).stdout


def main() -> int:
    which = sys.argv[1] if len(sys.argv) > 1 else "mma"
    if which == "q4k":
        tm, warps, rows = (int(sys.argv[i]) if len(sys.argv) > i else d for i, d in ((2, 2), (3, 2), (4, 16)))
        usage, sass = disassemble(compile_q4k(tm, warps, rows), f"/tmp/strata-q4k-{tm}-{warps}-{rows}.cubin")
        loop = longest_loop(sass)
        print(f"q4k TM {tm} warps {warps} rows {rows}: " + " ".join(re.findall(r"(REG:\d+|STACK:\d+)", usage)))
        print(f"longest loop, {sum(loop.values())} instructions: " + "  ".join(f"{op} {n}" for op, n in loop.most_common(16)))
        return 0
    kind = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    bn = int(sys.argv[3]) if len(sys.argv) > 3 else (64 if which == "mma" else sm.GEMV_BN)
    warps = int(sys.argv[4]) if len(sys.argv) > 4 else (sm.WARPS if which == "mma" else sm.GEMV_WARPS)
    usage, sass = disassemble(compile_kernel(which, kind, bn, warps), f"/tmp/strata-{which}-{kind}-{bn}-{warps}.cubin")
    ops = collections.Counter(m.group(1).split(".")[0] for m in re.finditer(r"/\*[0-9a-f]+\*/\s+([A-Z0-9_.]+)", sass))
    print(f"{which} KIND {kind} BN {bn} warps {warps}: " + " ".join(re.findall(r"(REG:\d+|STACK:\d+)", usage)))
    print("  ".join(f"{op} {n}" for op, n in ops.most_common(40)))
    if os.environ.get("SASS") == "1":
        print(sass)
    return 0


if __name__ == "__main__":
    sys.exit(main())
