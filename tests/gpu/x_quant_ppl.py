"""Issue 11: what rounding x coarser for the Q4_K matrices costs a real model, as perplexity. Gemma 3 270M
Q4_K_M on this CPU (float32, the engine's plain torch layers) scores a real English text (the GPL-3 from
/usr/share/common-licenses, or --text) with the input of every Q4_K product left in float, rounded to int8 per
32 values (what engine.kernels.dp4a_gemv.quantize gives the GPU kernels now, and llama.cpp's q8_1), and per
256 (branch issue11-x256's form; llama.cpp's q8_K for its CPU k-quant dot products).

    python3 tests/gpu/x_quant_ppl.py [--tokens 1024] [--text FILE]
    (2026-12-06, float / per 32 / per 256: GPL-3, 1,024 tokens 14.412 / 14.444 / 14.367; --tokens 2048
    --text /usr/share/common-licenses/Apache-2.0: 8.762 / 8.766 / 8.780)
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import torch

os.environ["STRATA_CPU_LAYERS"] = "0"          # (before the engine loads: the plain layers call QuantTensor.linear)
os.environ["STRATA_CPU_GEMM"] = "0"
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gguf.constants import GGMLQuantizationType as QT  # noqa: E402

from engine import quant  # noqa: E402
from engine.loader import load_model  # noqa: E402
from engine.messages import EngineConfig  # noqa: E402
from engine.model_files import gemma_path  # noqa: E402
from x_quant_error import per_block  # noqa: E402

FORMS = {"float": None, "per 32": 32, "per 256": 256}


def perplexity(model, tokens: list[int]) -> float:
    _, logits = model.pipeline.score_hidden(tokens)
    lp = torch.log_softmax(logits[:-1].double(), -1)
    nll = -lp.gather(1, torch.tensor(tokens[1:]).unsqueeze(1)).mean().item()
    return math.exp(nll)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    args = ap.parse_args()
    model = load_model(EngineConfig(model=str(gemma_path()), devices="cpu", dtype="float32", ctx=args.tokens + 16))
    tokens = model.tokenizer.encode(Path(args.text).read_text())[:args.tokens]
    linear = quant.QuantTensor.linear
    try:
        for name, n in FORMS.items():
            def rounded(self, x, *a, _n=n, **kw):
                if _n and self.qtype == QT.Q4_K:
                    x = per_block(x.reshape(-1, x.shape[-1]).float(), _n).to(x.dtype).reshape(x.shape)
                return linear(self, x, *a, **kw)
            quant.QuantTensor.linear = rounded
            print(f"{name:8s} perplexity {perplexity(model, tokens):.4f}  ({len(tokens)} tokens of {args.text})",
                  flush=True)
    finally:
        quant.QuantTensor.linear = linear
        model.pipeline.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
