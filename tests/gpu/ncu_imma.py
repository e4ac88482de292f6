"""One decode matmul call under Nsight Compute (issue 11): the llama-3-8b gate|up matrix
(28672x4096 Q4_K; SHAPE=NxK for another, QTYPE=IQ4_XS for another type) at ROWS rows (default 16) with KERNEL=imma (default), bf16, dp4a
or q4k (engine.kernels.q4k_mma), NREAL of them real (default all: a decode tile of 16 rows with 8 real is what eight
streams run), launched 5 times; profile the last with
    ncu --clock-control none -k regex:"imma|bf16|dp4a|q4k" --launch-skip 4 --launch-count 1 --section SpeedOfLight \
        --section WarpStateStats --section MemoryWorkloadAnalysis python3 tests/gpu/ncu_imma.py
"""
import os

import torch
from gguf.constants import GGMLQuantizationType as QT

from engine.kernels import bf16_decode as bf
from engine.kernels import dp4a_gemv as dg
from engine.kernels import imma_matmul as im
from engine.kernels import q4k_mma as qm
from engine.kernels.packed import pack
from tests.gpu.bench_matmul import weights

rows = int(os.environ.get("ROWS", "16"))
n, k = (int(v) for v in os.environ.get("SHAPE", "28672x4096").split("x"))
qt = QT[os.environ.get("QTYPE", "Q4_K")]
p = pack(weights(qt, n, k), qt, k, mma=os.environ.get("KERNEL") == "q4k")
x = torch.randn(rows, k, device="cuda").to(torch.bfloat16)
nreal = torch.full((1,), int(os.environ.get("NREAL", rows)), dtype=torch.int32, device="cuda")
call = {"bf16": bf.matmul_parts, "dp4a": dg.matmul_parts, "q4k": qm.matmul_parts}.get(os.environ.get("KERNEL", "imma"), im.matmul_parts)
for _ in range(5):
    call(x, p, nreal)
torch.cuda.synchronize()
