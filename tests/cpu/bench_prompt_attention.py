"""The CPU prompt attention kernel (engine/native/prompt_attention.c) beside torch's blocked path, alone, on a
Gemma 3 270M-shaped tile (128 rows, 4 heads, 1 KV head, head_dim 256) at positions 256 and 1,024, rounds
interleaved (this machine's speed drifts):

    PYTHONPATH=$PWD .venv/bin/python tests/cpu/bench_prompt_attention.py [ROUNDS]

GFLOP/s count the attended keys' products only (q.k and p.v, 2 flops a multiply-add)."""
import sys
import time

import torch

from engine import cpu_attention
from engine.layers import attention

T, H, KVH, HD = 128, 4, 1, 256


def torch_path(*args):
    cpu_attention.ENABLED = False
    try:
        return attention(*args)
    finally:
        cpu_attention.ENABLED = True


def main(rounds: int = 3) -> None:
    gen = torch.Generator().manual_seed(0)
    kc, vc = (torch.randn(2, 2048, KVH, HD, generator=gen).to(torch.bfloat16) for _ in range(2))
    q = torch.randn(T, H, HD, generator=gen)
    print(f"threads {torch.get_num_threads()}")
    for _ in range(rounds):
        for p0 in (256, 1024):
            slot, pos = torch.full((T,), 1), torch.arange(p0, p0 + T)
            flops = sum(p + 1 for p in range(p0, p0 + T)) * H * HD * 4
            for name, f in (("torch", torch_path), ("kernel", cpu_attention.attention)):
                f(q, kc, vc, slot, pos, 0, 1 / 16)
                t = time.perf_counter()
                for _ in range(10):
                    f(q, kc, vc, slot, pos, 0, 1 / 16)
                dt = (time.perf_counter() - t) / 10
                print(f"position {p0} {name:6s} {dt * 1e3:6.2f} ms {flops / dt / 1e9:5.0f} GFLOP/s")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:]))
