"""One decode run under torch.profiler on the GPU: where a window's time goes (kernels, gaps, host syncs).
Usage: python3 tests/gpu/profile_decode.py MODEL [DEVICES] [MAX_TOKENS]"""
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from app.cli import main

model = sys.argv[1]
devices = sys.argv[2] if len(sys.argv) > 2 else "cuda:0"
n = sys.argv[3] if len(sys.argv) > 3 else "32"
args = ["generate", "--model", model, "--devices", devices, "--prompt", "Hello there, how are", "--max-tokens", n,
        "--json", "--ctx", "1024"]
main(args)                                   # warm-up: load, compile, capture
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    t0 = time.perf_counter()
    main(args)
    wall = time.perf_counter() - t0
ka = prof.key_averages()
print(ka.table(sort_by="self_cuda_time_total", row_limit=18, max_name_column_width=60))
syncs = {e.key: e.count for e in ka if "Synchronize" in e.key or "Memcpy" in e.key or "cudaGraphLaunch" in e.key}
print("host sync / copy / graph calls:", syncs)
cuda_total = sum(e.self_device_time_total for e in ka) / 1e6
print(f"wall {wall:.2f} s (load included), GPU kernel time {cuda_total:.3f} s")
