"""Quantized matmul microbenchmark and checks on the GPU (issue 11, item 7).

For each weight type and the matrix shapes of the three reference models at 1, 4 and 16 rows: time
(median of CUDA-graph replays), GB/s over the bytes a call must move (weights + x + partials) and % of
the measured device-copy bandwidth; the old GGUF-layout kernel and cuBLAS bf16 beside it. Also checks,
before timing, that every kernel is right (bf16 relative error against float64) and row-invariant
(each row of a 16-row call bit-identical to the same row alone), and exits 1 if any check fails.

    python3 tests/gpu/bench_matmul.py [--sweep] [--json OUT.json]     (dmma: engine.kernels.dp4a_mma)
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import torch
import triton
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as QT
from triton.testing import do_bench_cudagraph

from engine.kernels import bf16_decode as bf
from engine.kernels import dp4a_gemv as dg
from engine.kernels import dp4a_mma as dm
from engine.kernels import imma_matmul as im
from engine.kernels import quant_matmul as old
from engine.kernels import stream_matmul as sm
from engine.kernels.packed import pack, unpack
from engine.synthetic import _random_blocks

SHAPES = {   # (name, N, K)
    "llama-3-8b": [("qkv", 6144, 4096), ("wo", 4096, 4096), ("gate|up", 28672, 4096), ("up", 14336, 4096),
                   ("down", 4096, 14336), ("head", 49152, 4096)],
    "smollm2-135m": [("qkv", 960, 576), ("wo", 576, 576), ("gate|up", 3072, 576), ("down", 576, 1536),
                     ("head", 49152, 576)],
    "qwen3-30b-a3b": [("qkv", 5120, 2048), ("wo", 2048, 4096), ("expert gate|up", 1536, 2048),
                      ("expert down", 2048, 768)],
}
ROWS = (1, 4, 8, 16)
SWEPT = {("llama-3-8b", "gate|up"), ("llama-3-8b", "up"), ("llama-3-8b", "down"), ("llama-3-8b", "qkv"), ("llama-3-8b", "wo"), ("smollm2-135m", "gate|up"),
         ("smollm2-135m", "head")}


def copy_bandwidth() -> float:
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    ms = triton.testing.do_bench(lambda: b.copy_(a), warmup=50, rep=200, return_mode="median")
    return 2 * a.numel() / ms / 1e6      # GB/s, bytes read + written


def weights(qt, n, k, seed=0):
    block, _ = GGML_QUANT_SIZES[qt]
    data = torch.from_numpy(_random_blocks(qt, n * k // block, np.random.default_rng(seed), 0.02)).reshape(n, -1)
    return data.cuda()


def check(qt, n, k) -> list[str]:
    """Bit-exact unpack, bf16 error, row invariance of the new kernel; returns failures."""
    fails = []
    data = weights(qt, n, k, seed=1)
    p = pack(data, qt, k)
    ref = unpack(p)
    from engine.quant import dequantize
    if not torch.equal(ref, dequantize(data, qt, n * k).reshape(n, k)):
        fails.append(f"{qt.name} {n}x{k}: unpack differs from engine.quant")
    x = torch.randn(16, k, device="cuda").to(torch.bfloat16)
    y = sm.linear(x, p)                     # 16 rows: the decode kernel
    yr = x.double() @ ref.double().T
    err = ((y.double() - yr).norm() / yr.norm()).item()
    if not err < 1e-2:
        fails.append(f"{qt.name} {n}x{k}: bf16 rel err {err:.2e}")
    xq, xds = dg.quantize(x)               # the decode kernel's own x: its error beyond that is arithmetic
    xd = (xq.float().reshape(16, -1, 32) * xds[..., :1]).reshape(16, k)
    full = dg.matmul_parts(x, p, torch.tensor([16], device="cuda"))[0][0]
    errq = ((full.double() - xd.double() @ ref.double().T).norm() / yr.norm()).item()
    if not errq < 1e-5:
        fails.append(f"{qt.name} {n}x{k}: decode kernel vs its int8 x: rel err {errq:.2e}")
    part, _ = dg.matmul_parts(x, p, torch.tensor([5], device="cuda"))
    if part[0, 5:].any() or not torch.equal(part[0, :5], full[:5]):
        fails.append(f"{qt.name} {n}x{k}: decode kernel with 5 real rows of 16")
    for m in (1, 3, 7, 12):
        ys = sm.linear(x[m:m + 1].contiguous(), p)
        if not torch.equal(ys[0], y[m]):
            fails.append(f"{qt.name} {n}x{k}: row {m} alone differs from the 16-row call")
    if p.kind > 4:                                                  # IQ4: no tensor-core decode kernel
        print(f"check {qt.name:5} {n:6}x{k:<6} decode bf16 rel err {err:.1e} (vs its int8 x {errq:.1e})  row-invariant "
              f"{'yes' if not any('row' in f for f in fails) else 'NO'}")
        return fails
    xr = xd.double() @ ref.double().T                               # the int8 kernels' own x
    erri = tensor_core_check(f"{qt.name} {n}x{k}: imma", lambda xs, c: im.matmul_parts(xs, p, c), x, xr, yr.norm(),
                             1e-5, fails)
    errb = float("nan")
    if p.kind in bf.KINDS:                                          # x unrounded: against the bf16 x
        errb = tensor_core_check(f"{qt.name} {n}x{k}: bf16", lambda xs, c: bf.matmul_parts(xs, p, c), x, yr,
                                 yr.norm(), 1e-2, fails)
        for pk in {2, 4} - {bf.PACK}:                               # the other asm width, bit for bit
            if not torch.equal(*(sm.sum_parts(*bf.matmul_parts(x, p, torch.tensor([16], device="cuda"), pack=v))
                                 for v in (pk, bf.PACK))):
                fails.append(f"{qt.name} {n}x{k}: bf16 with {pk} codes per asm call differs from {bf.PACK}")
    xp = torch.randn(128, k, device="cuda").to(torch.bfloat16)      # a prompt tile: the tensor-core kernel
    yp = sm.linear(xp, p)
    ypr = xp.double() @ ref.double().T
    errp = ((yp.double() - ypr).norm() / ypr.norm()).item()
    if not errp < 1e-2:
        fails.append(f"{qt.name} {n}x{k}: prompt tile bf16 rel err {errp:.2e}")
    yf = sm.linear(x.float(), p)
    errf = ((yf.double() - yr).norm() / yr.norm()).item()
    print(f"check {qt.name:5} {n:6}x{k:<6} decode bf16 rel err {err:.1e} (vs its int8 x {errq:.1e})  "
          f"f32 {errf:.1e}  prompt tile {errp:.1e}  imma vs its int8 x {erri:.1e}  bf16 {errb:.1e}  row-invariant "
          f"{'yes' if not any('row' in f for f in fails) else 'NO'}")
    return fails


def tensor_core_check(name, parts, x, ref, norm, tol, fails) -> float:
    """A 16-row tensor-core decode kernel (parts(x, n_real) -> (part, S)) against ref within tol, zeros past
    5 real rows, and rows 1, 3, 7, 12 alone bit-identical to the 16-row call; returns the error."""
    part, s = parts(x, torch.tensor([16], device="cuda"))
    y = sm.sum_parts(part, s)
    err = ((y.double() - ref).norm() / norm).item()
    if not err < tol:
        fails.append(f"{name} kernel rel err {err:.2e}")
    part5, _ = parts(x, torch.tensor([5], device="cuda"))
    if part5[:, 5:].any() or not torch.equal(part5[:, :5], part[:, :5]):
        fails.append(f"{name} kernel with 5 real rows of 16")
    for m in (1, 3, 7, 12):
        if not torch.equal(sm.sum_parts(*parts(x[m:m + 1].contiguous(), torch.tensor([1], device="cuda")))[0], y[m]):
            fails.append(f"{name} row {m} alone differs from the 16-row call")
    return err


def check_gguf_kernel(qt, n, k) -> list[str]:
    """The GGUF-layout kernel (types without a packed layout) in bfloat16: its tl.dot branch runs only here."""
    from engine.quant import dequantize

    data = weights(qt, n, k, seed=2)
    x = torch.randn(16, k, device="cuda").to(torch.bfloat16)
    y = old.quant_linear(x, data, qt)
    ref = x.double() @ dequantize(data, qt, n * k).reshape(n, k).double().T
    err = ((y.double() - ref).norm() / ref.norm()).item()
    print(f"check {qt.name:5} {n:6}x{k:<6} GGUF-layout kernel bf16 rel err {err:.1e}")
    return [] if err < 1e-2 else [f"{qt.name} {n}x{k}: GGUF-layout kernel bf16 rel err {err:.2e}"]


def time_call(fn) -> float:
    return do_bench_cudagraph(fn, rep=100, return_mode="median") * 1e3     # us


def bench(qt, name, n, k, bw, rows=ROWS, configs=None) -> list[dict]:
    """Decode rows (1, 4, 16: the CUDA-core kernel) and a 128-row prompt tile (the tensor-core kernel)."""
    data = weights(qt, n, k)
    p = pack(data, qt, k)
    dense = unpack(p).to(torch.bfloat16)
    out = []
    for m in (*rows, 128):
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        nreal = torch.full((1,), m, dtype=torch.int32, device="cuda")
        if m <= sm.DECODE_ROWS:
            bn, s, cps = sm.gemv_plan(n, k)
            gpart = torch.empty((s, m, n), dtype=torch.float32, device="cuda")
            gemv = lambda: sm.launch_gemv(x, nreal, p, gpart, bn, s, cps)  # noqa: E731
            fn = lambda: dg.matmul_parts(x, p, nreal)  # noqa: E731
            imma = lambda: im.matmul_parts(x, p, nreal)  # noqa: E731
            bn, lanes = dg.plan(p.kind, n, k)
            s, cps = 1, lanes
            part = gpart[:1]
        else:
            bn, s, cps = sm.plan(n, k)
            part = torch.empty((s, m, n), dtype=torch.float32, device="cuda")
            fn = lambda: sm.launch(x, p, part, bn, s, cps)  # noqa: E731
            gemv = imma = None
        moved = p.nbytes + x.numel() * 2 + part.numel() * 4 * 2
        row = {"type": qt.name, "model": name[0], "matrix": name[1], "N": n, "K": k, "rows": m, "bytes": moved,
               "plan": [bn, s, cps], "us": time_call(fn)}
        if gemv is not None and p.kind <= 4:          # (IQ4: the int8 kernel only)
            row["imma_us"] = time_call(imma)
            row["dmma_us"] = time_call(lambda: dm.matmul_parts(x, p, nreal))
            if p.kind in bf.KINDS:
                row["bf16_us"] = time_call(lambda: bf.matmul_parts(x, p, nreal))
            row["gemv_us"] = time_call(gemv)
            mpart = torch.empty((sm.plan(n, k)[1], m, n), dtype=torch.float32, device="cuda")
            row["mma_us"] = time_call(lambda: sm.launch(x, p, mpart, *sm.plan(n, k)))
        row["cublas_bf16_us"] = time_call(lambda: x @ dense.T)
        for cfg in (configs or []) if m in (1, 8, 16) and m <= sm.DECODE_ROWS else []:
            try:
                if cfg[0] == "xs":
                    call = lambda: dg.matmul_parts(x, p, nreal, None, rb=cfg[2], xs=cfg[1])  # noqa: E731
                    key = f"cfg xs{cfg[1]}/rb{cfg[2]}"
                elif cfg[0] == "dmma":
                    call = lambda: dm.matmul_parts(x, p, nreal, None, cfg[1], cfg[2])  # noqa: E731
                    key = f"cfg d{cfg[1]}/{cfg[2]}w"
                elif cfg[0] == "rb":
                    call = lambda: dg.matmul_parts(x, p, nreal, None, rb=cfg[1])  # noqa: E731
                    key = f"cfg rb{cfg[1]}"
                elif cfg[0] == "bf16":
                    _, ibn, iw, ist, itg, ipk = cfg
                    call = lambda: bf.matmul_parts(x, p, nreal, itg, ibn, iw, ist, ipk)  # noqa: E731
                    key = f"cfg b{ibn}/{iw}w/{ist}s/{itg}/p{ipk}"
                elif cfg[0] == "imma":
                    _, ibn, iw, ist, itg = cfg
                    call = lambda: im.matmul_parts(x, p, nreal, None, itg, ibn, iw, ist)  # noqa: E731
                    key = f"cfg i{ibn}/{iw}w/{ist}s/{itg}"
                else:
                    warps, nr = cfg
                    call = lambda: dg.matmul_parts(x, p, nreal, None, warps, nr)  # noqa: E731
                    key = f"cfg {warps}w/{nr}r"
                row[key] = time_call(call)
            except Exception as e:  # noqa: BLE001 - a config that does not compile is reported, not fatal
                row[key] = f"error {type(e).__name__}"
        row["GB/s"] = moved / row["us"] / 1e3
        row["%bw"] = 100 * row["GB/s"] / bw
        out.append(row)
        extra = "  ".join(f"{key[4:]}={v:.1f}" if isinstance(v, float) else f"{key[4:]}={v}"
                          for key, v in row.items() if key.startswith("cfg "))
        print(f"{qt.name:5} {name[0]:14} {name[1]:15} {n:6}x{k:<6} rows {m:3}  {row['us']:7.1f} us  "
              f"{row['GB/s']:6.0f} GB/s {row['%bw']:5.1f}%  dmma {row.get('dmma_us', float('nan')):7.1f}  imma {row.get('imma_us', float('nan')):7.1f}  bf16 {row.get('bf16_us', float('nan')):7.1f}  gemv {row.get('gemv_us', float('nan')):7.1f}  "
              f"mma {row.get('mma_us', float('nan')):7.1f}  "
              f"cublas-bf16 {row['cublas_bf16_us']:7.1f}  plan {bn}/{s}/{cps}  {extra}", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweep", action="store_true", help="also time the decode kernel's other (warps, rows per thread)")
    ap.add_argument("--sweep-imma", action="store_true", help="also time the imma kernel's other (BN, warps, stages, target)")
    ap.add_argument("--sweep-bf16", action="store_true", help="also time the bf16 kernel at 528 and 1056 programs with 4 and 2 codes per asm call")
    ap.add_argument("--sweep-rb", action="store_true", help="also time the decode kernel at 1, 2, 4 and 8 x rows per pass")
    ap.add_argument("--sweep-dmma", action="store_true", help="also time the int8 kernel's tensor-core twin "
                    "(engine.kernels.dp4a_mma) at some weight rows a program and warps")
    ap.add_argument("--sweep-xs", action="store_true", help="also time the decode kernel with 1 and 2 weight rows per x load")
    ap.add_argument("--iq4", action="store_true", help="time IQ4_XS and IQ4_NL on the llama-3-8b shapes instead")
    ap.add_argument("--types", help="time these types on the llama-3-8b shapes instead (comma-separated, e.g. Q2_K,Q5_K)")
    ap.add_argument("--json")
    ap.add_argument("--no-checks", action="store_true", help="time only (the checks compile every type first)")
    ap.add_argument("--check-types", help="check only these types (comma-separated, e.g. Q4_K)")
    ap.add_argument("--matrices", help="time only these matrices (comma-separated names, e.g. gate|up,down)")
    ap.add_argument("--only", help="time only this model's shapes (e.g. llama-3-8b)")
    args = ap.parse_args()
    bw = copy_bandwidth()
    print(f"device copy bandwidth {bw:.0f} GB/s ({torch.cuda.get_device_name()})")
    fails = []
    types = (QT.Q4_K, QT.Q4_1, QT.Q4_0, QT.Q8_0, QT.IQ4_NL, QT.IQ4_XS)
    if args.check_types:
        types = tuple(QT[name] for name in args.check_types.split(","))
    for qt in () if args.no_checks else types:
        for n, k in ((1024, 4096), (576, 1536), (960, 576), (4096, 14336)):
            if k % GGML_QUANT_SIZES[qt][0] == 0:
                fails += check(qt, n, k)
    for qt in () if args.no_checks or args.check_types else (QT.Q6_K, QT.Q5_0):
        fails += check_gguf_kernel(qt, 1024, 4096)
    configs = None
    if args.sweep:
        configs = [(w, nr) for w in (4, 8) for nr in (1, 2, 4, 8)]
    if args.sweep_imma:
        configs = [("imma", bn, w, st, 528) for bn in (64, 128) for w in (4, 8) for st in (2, 3, 4)]
        configs += [("imma", 64, 4, 3, 264), ("imma", 64, 4, 3, 1056), ("imma", 64, 4, 4, 1056)]
    if args.sweep_bf16:
        # (2026-12-02 sweeps: BN 64/128/256, 4/8 warps, 2/3/4 stages, target 264..2112: 128/4/2 best on every
        # 8B matrix, target 1056 ~8% ahead of 528 in one call); now the two asm widths (codes per call)
        configs = [("bf16", 128, 4, 2, tg, pk) for tg in (528, 1056) for pk in (4, 2)]
    if args.sweep_xs:
        configs = [("xs", 1, 4), ("xs", 2, 4), ("xs", 2, 2)]
    if args.sweep_dmma:
        configs = [("dmma", bn, w) for bn, w in ((16, 4), (32, 8), (64, 8), (128, 8), (64, 4))]
    if args.sweep_rb:
        configs = [("rb", 1), ("rb", 2), ("rb", 4), ("rb", 8)]
    rows = []
    plan = [(QT.Q4_K, "llama-3-8b"), (QT.Q4_1, "smollm2-135m"), (QT.Q8_0, "smollm2-135m")]
    if args.iq4:
        plan = [(QT.IQ4_XS, "llama-3-8b"), (QT.IQ4_NL, "llama-3-8b")]
    if args.types:
        plan = [(QT[name], "llama-3-8b") for name in args.types.split(",")]
    for qt, model in plan:
        if args.only and model != args.only:
            continue
        for matrix, n, k in SHAPES[model]:
            if k % GGML_QUANT_SIZES[qt][0] or (args.matrices and matrix not in args.matrices.split(",")):
                continue
            sweep = configs if (configs and (model, matrix) in SWEPT) else None
            rows += bench(qt, (model, matrix), n, k, bw, configs=sweep)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"copy_GBps": bw, "rows": rows, "fails": fails}, f, indent=1)
    print("FAIL" if fails else "PASS", "bench_matmul:", "; ".join(fails) or "all checks passed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
