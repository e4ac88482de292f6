"""The CPU prompt kernel (engine.cpu_gemm) beside torch's int4 kernel and a dense bfloat16 matmul, on the
shapes of Gemma 3 270M's and SmolLM2's matrices: time, GFLOP/s, and the largest difference from torch's
int4 kernel relative to its largest value; at decode tiles' row counts (below cpu_gemm.MIN_TILE) also the
decode-row kernel (engine/native/int4_rows.c): time and GB/s over the weights' bytes (codes, scales, zeros).

    .venv/bin/python tests/cpu/bench_prompt_gemm.py [ROWS ...]      # default 128 (a prompt tile) and 8
    .venv/bin/python tests/cpu/bench_prompt_gemm.py 1 2 4 8          # decode tiles

Run it on a quiet machine (another process on the cores halves the figures). The peak to compare with:
cores x clock x 64 (one 512-bit vdpbf16ps a cycle: 32 multiply-adds).
"""
from __future__ import annotations

import sys
import time

import torch

from engine import cpu_gemm

SHAPES = [  # (what, N, K, int4 parts)
    ("gemma gate|up, Q5_0", 4096, 640, 2), ("gemma q, Q5_0", 1024, 640, 2), ("gemma o, Q4_K", 640, 1024, 1),
    ("gemma down, Q4_K", 640, 2048, 1), ("smollm2 gate|up, Q4_1", 3072, 576, 1), ("smollm2 down, Q4_1", 576, 1536, 1),
]


def timed(fn, n: int = 20) -> float:
    fn()
    fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n


def main() -> int:
    rows = [int(a) for a in sys.argv[1:]] or [128, 8]
    print(f"threads {torch.get_num_threads()}; {cpu_gemm.describe()}")
    g = torch.Generator().manual_seed(0)
    for m in rows:
        for what, n, k, parts in SHAPES:
            packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(
                torch.randint(0, 16, (n, k * parts), dtype=torch.int32, generator=g), 1)
            sz = (torch.rand(k * parts // 32, n, 2, generator=g) - 0.5).to(torch.bfloat16)
            x = torch.randn(m, k, generator=g).to(torch.bfloat16)
            xx = torch.cat((x, x), 1) if parts == 2 else x
            dense = torch.randn(n, k, generator=g).to(torch.bfloat16)
            t_int4 = timed(lambda: torch.ops.aten._weight_int4pack_mm_for_cpu(xx, packed, 32, sz))
            t_dense = timed(lambda: torch.mm(x, dense.T))
            line = f"{m:4d} rows  {what:24s} N {n:5d} K {k:5d}: int4 {t_int4 * 1e3:7.3f} ms " \
                   f"({2 * m * n * k / t_int4 / 1e9:4.0f} GFLOP/s), dense bf16 {t_dense * 1e3:7.3f} " \
                   f"({2 * m * n * k / t_dense / 1e9:4.0f})"
            if cpu_gemm.available():
                t_own = timed(lambda: cpu_gemm.matmul(x, packed, sz, n, parts))
                ref = torch.ops.aten._weight_int4pack_mm_for_cpu(xx, packed, 32, sz).float()
                diff = (cpu_gemm.matmul(x, packed, sz, n, parts).float() - ref).abs().max() / ref.abs().max()
                line += f", this kernel {t_own * 1e3:7.3f} ({2 * m * n * k / t_own / 1e9:4.0f}), " \
                        f"max diff {diff.item():.1e}"
                if m < cpu_gemm.MIN_TILE:
                    t_rows = timed(lambda: cpu_gemm.rows_matmul(x, packed, sz, n, parts))
                    got = cpu_gemm.rows_matmul(x, packed, sz, n, parts).float()
                    weights = packed.numel() * packed.element_size() + sz.numel() * sz.element_size()
                    line += f"; decode rows {t_rows * 1e3:7.3f} ms ({weights / t_rows / 1e9:5.1f} GB/s, torch's " \
                            f"{weights / t_int4 / 1e9:5.1f}), max diff {((got - ref).abs().max() / ref.abs().max()).item():.1e}"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
