"""Issue 11: the prompt tiles' dequantizing kernel (engine.kernels.stream_matmul.dequantize) on the llama-3-8b
Q4_K matrices in GGUF's code order and in the tensor-core decode kernel's (packed.mma_order): time (median of
CUDA graph replays), GB/s over bytes read and written, and the two outputs compared bit for bit.

    python3 tests/gpu/bench_dequant.py
"""
from __future__ import annotations

import sys

import torch
from gguf.constants import GGMLQuantizationType as QT
from triton.testing import do_bench_cudagraph

from engine.kernels import stream_matmul as sm
from engine.kernels.packed import pack
from tests.gpu.bench_matmul import weights
from tests.gpu.bench_q4k_mma import SHAPES


def main() -> int:
    bad = 0
    for name, n, k in SHAPES:
        data = weights(QT.Q4_K, n, k)
        line = f"{name:8s} {n}x{k}"
        outs = []
        for mma in (False, True):
            w = pack(data, QT.Q4_K, k, mma=mma)
            outs.append(sm.dequantize(w, torch.bfloat16))
            t = do_bench_cudagraph(lambda: sm.dequantize(w, torch.bfloat16), rep=200) * 1e3
            line += f" | {'mma order' if mma else 'gguf order'} {t:7.1f} us {(w.nbytes + 2 * n * k) / t / 1e3:6.0f} GB/s"
        same = torch.equal(outs[0], outs[1])
        bad += not same
        print(line + f" | {'same bits' if same else 'DIFFERENT'}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
