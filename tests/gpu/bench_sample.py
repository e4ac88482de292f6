"""The device sampler (engine.kernels.sample) alone: time for 1, 8 and 32 rows of a 49,152 and a 151,936
token vocabulary (SmolLM2's, Qwen3's), peaked (logits * 4) and flat (* 0.3) rows, temperature 0.8 with and
without top-p 0.95 and top-k 40: median of CUDA graph replays.

    python3 tests/gpu/bench_sample.py
"""
from __future__ import annotations

import torch
from triton.testing import do_bench_cudagraph

from engine.kernels import sample


def main() -> None:
    for vocab in (49152, 151936):
        for spread in (4.0, 0.3):
            for name, top_k, top_p in (("t0.8", 0, 1.0), ("top-p 0.95", 0, 0.95), ("top-k 40", 40, 1.0)):
                line = f"vocab {vocab:6d} spread {spread:3.1f} {name:10s}"
                for rows in (1, 8, 32):
                    logits = torch.randn(rows, vocab, device="cuda") * spread
                    params = torch.tensor([[i, 1 / 0.8, top_k, top_p, 0.0, (i * 0.37) % 1] for i in range(rows)],
                                          dtype=torch.float32, device="cuda")
                    t = do_bench_cudagraph(lambda: sample.sample(logits, params), rep=100) * 1e3
                    line += f" | {rows:2d} rows {t:7.1f} us"
                print(line, flush=True)


if __name__ == "__main__":
    main()
