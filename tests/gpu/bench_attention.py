"""Decode-tile attention microbenchmark (issue 11): the split kernel's chunking against the positions
and tile sizes a decode step sees, per layer, on the head shapes of the reference models.

    python3 tests/gpu/bench_attention.py [--shapes gemma3-270m,llama-3-8b]

For each (shape, cache length, position, tile rows / real rows) prints the time of one layer's
tile_attention (split + merge kernels, CUDA-graph replay median) for each (key block, fewest blocks per
chunk, most chunks, tensor-core programs per KV head or not, their key block) setting, the first the
CUDA-core split kernel (attention.use_tc picks one per head shape); and the bytes of K/V the real rows
read over that time.
"""
from __future__ import annotations

import sys

import torch
from triton.runtime.errors import OutOfResources
from triton.testing import do_bench_cudagraph

from engine.kernels import attention as at

SHAPES = {"llama-3-8b": (32, 8, 128), "smollm2-135m": (9, 3, 64), "qwen3-30b-a3b": (32, 4, 128),
          "gemma3-270m": (4, 1, 256)}
CASES = [(2048, 300, 1, 1), (2048, 300, 16, 8), (2048, 1500, 1, 1), (8192, 6000, 1, 1), (8192, 6000, 16, 4),
         (8192, 6000, 16, 8)]
# (key block, fewest blocks a chunk, most chunks, tensor-core programs per KV head: STRATA_ATTN_TC, their
# key block: STRATA_ATTN_TC_BN, 0 = the default)
SETTINGS = [(0, 1, 16, False, 0), (0, 1, 16, True, 0), (0, 1, 32, True, 0), (0, 1, 64, True, 0),
            (0, 1, 16, True, 128), (0, 1, 32, True, 128), (0, 1, 64, True, 32)]


def main() -> None:
    dev = "cuda"
    names = sys.argv[sys.argv.index("--shapes") + 1].split(",") if "--shapes" in sys.argv else list(SHAPES)
    for name in names:
        h, kvh, hd = SHAPES[name]
        for ctx, pos, rows, real in CASES:
            kc = torch.randn(16, ctx, kvh, hd, device=dev).to(torch.bfloat16)
            vc = torch.randn_like(kc)
            q = torch.randn(rows, h, hd, device=dev).to(torch.bfloat16)
            slot = torch.arange(rows, device=dev)
            p = torch.full((rows,), pos, device=dev)
            n_real = torch.tensor([real], dtype=torch.int32, device=dev)
            kv_bytes = 2 * real * (pos + 1) * kvh * hd * 2
            line = []
            ref = None
            for bn, cb, mc, tc, tc_bn in SETTINGS:
                at.BLOCK_N, at.CHUNK_BLOCKS, at.MAX_CHUNKS, at.TC, at.TC_BN = bn, cb, mc, str(int(tc)), tc_bn
                fn = lambda: at.tile_attention(q, kc, vc, slot, p, 0, hd ** -0.5, n_real=n_real)  # noqa: E731
                try:
                    out = fn()
                except OutOfResources:          # a key block too large for shared memory at this head size
                    line.append(f"tc{tc_bn}/cb{cb}/mc{mc}    n/a")
                    continue
                err = 0.0 if ref is None else ((out[:real] - ref[:real]).norm() / ref[:real].norm()).item()
                ref = out if ref is None else ref
                us = do_bench_cudagraph(fn, rep=50, return_mode="median") * 1e3
                label = f"tc{tc_bn or 'd'}" if tc else f"bn{bn or at.block_n(hd)}"
                line.append(f"{label}/cb{cb}/mc{mc} {us:6.1f}" + (f" ({err:.0e})" if err > 1e-5 else ""))
            print(f"{name:14} ctx {ctx:5} pos {pos:5} rows {rows:2}/{real:<2} K/V {kv_bytes / 1e6:6.2f} MB "
                  f"({kv_bytes / 1e3 / float(line[0].split()[-1]):5.0f} GB/s at the first setting) | "
                  + "  ".join(line), flush=True)


if __name__ == "__main__":
    main()
