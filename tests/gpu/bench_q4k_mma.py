"""Issue 11: the Q4_K tensor-core decode kernel (engine.kernels.q4k_mma) beside the int8 kernel
(engine.kernels.dp4a_gemv) on the llama-3-8b matrices at 1, 2, 4, 8 and 16 rows: time (median of CUDA
graph replays of calls over enough copies of the matrix to pass 256 MB, so the weights come from memory
as in a model's step; --warm: one copy), GB/s over the weight bytes, and a sweep of the warps a program
(W) and 16-row groups a warp (TM). A row spec T:M is a T-row tile with M real rows.

    python3 tests/gpu/bench_q4k_mma.py [--sweep] [--warm] [--rows 1,8,16:8,16] [--shapes gate,down]
"""
from __future__ import annotations

import sys

import torch
from gguf.constants import GGMLQuantizationType as QT
from triton.testing import do_bench_cudagraph

from engine.kernels import dp4a_gemv as dg
from engine.kernels import q4k_mma as qm
from engine.kernels.packed import pack
from tests.gpu.bench_matmul import weights

SHAPES = [("qkv", 6144, 4096), ("wo", 4096, 4096), ("gate", 14336, 4096), ("gate|up", 28672, 4096),
          ("down", 4096, 14336)]


def _rows(spec: str) -> tuple[int, int]:
    """"T" or "T:M": a T-row tile with M real rows (decode tiles are 1 or 16 rows; 8 streams fill 8 of 16)."""
    t, _, m = spec.partition(":")
    return int(t), int(m or t)


def main() -> int:
    sweep = "--sweep" in sys.argv
    warm = "--warm" in sys.argv         # one copy of each matrix (the smaller ones then stay in L2)
    specs = sys.argv[sys.argv.index("--rows") + 1].split(",") if "--rows" in sys.argv else "1,2,4,8,16".split(",")
    configs = [(None, None)] + ([(w, tm) for tm in (1, 2, 4) for w in (2, 4, 8)] if sweep else [])
    names = sys.argv[sys.argv.index("--shapes") + 1].split(",") if "--shapes" in sys.argv else [s[0] for s in SHAPES]
    for name, n, k in (s for s in SHAPES if s[0] in names):
        data = weights(QT.Q4_K, n, k)
        w, wm = pack(data, QT.Q4_K, k), pack(data, QT.Q4_K, k, mma=True)
        nbytes = w.nbytes
        # copies enough to pass 256 MB, used in turn, so every call streams its weights from memory (as in a
        # model's decode step) and not from the 60 MB L2
        copies = 1 if warm else -(-256 * 2**20 // nbytes)
        ws = [w] + [pack(data, QT.Q4_K, k) for _ in range(copies - 1)]
        wms = [wm] + [pack(data, QT.Q4_K, k, mma=True) for _ in range(copies - 1)]
        for spec in specs:
            rows, real = _rows(spec)
            x = torch.randn(rows, k, device="cuda").to(torch.bfloat16)
            nreal = torch.full((1,), real, dtype=torch.int32, device="cuda")
            xq = dg.quantize(x)
            t_d = do_bench_cudagraph(lambda: [dg.matmul_parts(x, v, nreal, xq) for v in ws], rep=200) * 1e3 / copies
            line = f"{name:8s} {n}x{k} rows {spec:>5s}  dp4a {t_d:6.1f} us {nbytes / t_d / 1e3:5.0f} GB/s"
            for nw, tm in configs:
                if (n // 16) % (tm or 1):
                    continue
                t_m = do_bench_cudagraph(lambda: [qm.matmul_parts(x, v, nreal, xq, nw, tm) for v in wms],
                                         rep=200) * 1e3 / copies
                line += (f" | w{nw or qm.warps(n, k)} tm{tm or qm.groups(n, k, rows)} {t_m:5.1f} us"
                         f" {nbytes / t_m / 1e3:4.0f}")
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
