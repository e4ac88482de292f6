"""One pass over what `bench_matmul.py --sweep-xs` runs for one table-code type and matrix shape, each step
synchronized and named, for compute-sanitizer to say which kernel reads out of bounds (session 46: the sweep
died with an illegal address after IQ2_XS gate|up, before down's first timing; memcheck of the decode kernel
alone was clean). QTYPE (IQ2_XS), SHAPE (4096x14336). Run: compute-sanitizer --tool memcheck python3 this."""
import os
import sys

import torch
from gguf.constants import GGMLQuantizationType as QT

sys.path.insert(0, os.path.dirname(__file__))
from bench_matmul import weights  # noqa: E402
from engine.kernels import dp4a_gemv as dg  # noqa: E402
from engine.kernels import stream_matmul as sm  # noqa: E402
from engine.kernels.packed import pack, unpack  # noqa: E402

qt = QT[os.environ.get("QTYPE", "IQ2_XS")]
n, k = (int(v) for v in os.environ.get("SHAPE", "4096x14336").split("x"))


def step(name, fn):
    fn()
    torch.cuda.synchronize()
    print("ok", name, flush=True)


p = pack(weights(qt, n, k), qt, k)
torch.cuda.synchronize()
print("ok pack", flush=True)
step("unpack", lambda: unpack(p))
for m in (1, 8, 16, 128):
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    nreal = torch.full((1,), m, dtype=torch.int32, device="cuda")
    if m <= sm.DECODE_ROWS:
        step(f"dp4a {m} rows", lambda: dg.matmul_parts(x, p, nreal))
        for xs, rb in ((1, 4), (2, 4), (2, 2)):
            step(f"dp4a {m} rows xs{xs}/rb{rb}", lambda: dg.matmul_parts(x, p, nreal, None, rb=rb, xs=xs))
    else:
        bn, s, cps = sm.plan(n, k)
        part = torch.empty((s, m, n), dtype=torch.float32, device="cuda")
        step(f"prompt tile {m} rows", lambda: sm.launch(x, p, part, bn, s, cps))
