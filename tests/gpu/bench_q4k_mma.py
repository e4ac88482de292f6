"""Issue 11: the Q4_K tensor-core decode kernel (engine.kernels.q4k_mma) beside the int8 kernel
(engine.kernels.dp4a_gemv) on the llama-3-8b matrices at 1, 2, 4, 8 and 16 rows: time (median of CUDA
graph replays), GB/s over the weight bytes, and a sweep of the warps a program.

    python3 tests/gpu/bench_q4k_mma.py [--sweep]
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

SHAPES = [("qkv", 6144, 4096), ("wo", 4096, 4096), ("gate|up", 28672, 4096), ("down", 4096, 14336)]


def main() -> int:
    sweep = "--sweep" in sys.argv
    configs = [None] + ([2, 4, 8] if sweep else [])
    for name, n, k in SHAPES:
        data = weights(QT.Q4_K, n, k)
        w, wm = pack(data, QT.Q4_K, k), pack(data, QT.Q4_K, k, mma=True)
        nbytes = w.nbytes
        for rows in (1, 2, 4, 8, 16):
            x = torch.randn(rows, k, device="cuda").to(torch.bfloat16)
            nreal = torch.full((1,), rows, dtype=torch.int32, device="cuda")
            xq = dg.quantize(x)
            t_d = do_bench_cudagraph(lambda: dg.matmul_parts(x, w, nreal, xq), rep=200) * 1e3
            line = f"{name:8s} {n}x{k} rows {rows:2d}  dp4a {t_d:7.1f} us {nbytes / t_d / 1e3:6.0f} GB/s"
            for nw in configs:
                t_m = do_bench_cudagraph(lambda: qm.matmul_parts(x, wm, nreal, xq, nw), rep=200) * 1e3
                line += f" | mma w{nw or qm.warps(n, k)} {t_m:7.1f} us {nbytes / t_m / 1e3:6.0f} GB/s"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
