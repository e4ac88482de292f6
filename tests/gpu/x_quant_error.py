"""Issue 11's route to fewer instructions in the Q4_K decode kernel's per-element scaling: what quantizing x
coarser costs. Real activations (the inputs of the Q4_K matrices while Gemma 3 270M Q4_K_M reads a prompt on
this CPU, through the engine's plain torch layers), quantized to int8 per 32 values (as
engine.kernels.dp4a_gemv.quantize does now), per 32 with scales a power of two below their 256-value
block's, and per 256 (llama.cpp's q8_K); prints the relative error of x_q @ W.T against x @ W.T (float64, W
as engine.quant reads it), median and worst over every seventh product.

    python3 tests/gpu/x_quant_error.py
    (2026-12-06: per 32 median 6.8e-3, worst 1.3e-2; power-of-two scales 7.8e-3 / 1.5e-2; per 256 1.5e-2 / 3.4e-2)
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

os.environ["STRATA_CPU_LAYERS"] = "0"          # (before the engine loads: the plain layers call QuantTensor.linear)
os.environ["STRATA_CPU_GEMM"] = "0"
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gguf.constants import GGMLQuantizationType as QT  # noqa: E402

from app.local_engine import local_client  # noqa: E402
from app.run_requests import run_together  # noqa: E402
from engine import quant  # noqa: E402
from engine.messages import AddRequest, EngineConfig, SamplingParams  # noqa: E402
from engine.model_files import gemma_path  # noqa: E402


def _safe(d: torch.Tensor) -> torch.Tensor:
    return torch.where(d > 0, d, torch.ones_like(d))


def per_block(x: torch.Tensor, n: int) -> torch.Tensor:
    """x rounded to int8 with one scale per n values (max / 127)."""
    b = x.reshape(x.shape[0], -1, n)
    d = b.abs().amax(-1, keepdim=True) / 127
    return (torch.round(b / _safe(d)) * d).reshape(x.shape)


def power_of_two(x: torch.Tensor) -> torch.Tensor:
    """x rounded to int8 per 32 values with a scale of its 256-value block's divided by a power of two (0-7)."""
    b = x.reshape(x.shape[0], -1, 8, 32)
    d = b.abs().amax(-1, keepdim=True) / 127
    top = d.amax(-2, keepdim=True)
    d = top / 2 ** torch.floor(torch.log2(_safe(top / _safe(d)))).clamp(0, 7)
    return (torch.round(b / _safe(d)).clamp(-127, 127) * d).reshape(x.shape)


def activations() -> list[tuple[torch.Tensor, quant.QuantTensor]]:
    """(x, W) of every Q4_K product while the model reads a 1,500-character prompt."""
    seen = []
    linear = quant.QuantTensor.linear

    def record(self, x, *args, **kw):
        if self.qtype == QT.Q4_K:
            seen.append((x.detach().float().reshape(-1, x.shape[-1]).clone(), self))
        return linear(self, x, *args, **kw)

    quant.QuantTensor.linear = record
    try:
        with local_client(EngineConfig(model=str(gemma_path()), devices="cpu", parallel=1, ctx=512)) as eng:
            prompt = Path(__file__).resolve().parents[2].joinpath("engine", "draft_guard.py").read_text()[:1500]
            run_together(eng, [AddRequest(request_id="x", prompt=prompt, sampling=SamplingParams(max_tokens=4))])
    finally:
        quant.QuantTensor.linear = linear
    return seen


def main() -> int:
    errors: dict[str, list[float]] = {"per 32": [], "power-of-two": [], "per 256": []}
    for x, w in activations()[::7]:
        weight = w.dequantize().reshape(w.shape).double()
        ref = x.double() @ weight.T
        for name, rounded in (("per 32", per_block(x, 32)), ("power-of-two", power_of_two(x)),
                              ("per 256", per_block(x, 256))):
            errors[name].append(((rounded.double() @ weight.T - ref).norm() / ref.norm()).item())
    for name, v in errors.items():
        v.sort()
        print(f"{name:13s} median {v[len(v) // 2]:.2e}  worst {v[-1]:.2e}  ({len(v)} products)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
