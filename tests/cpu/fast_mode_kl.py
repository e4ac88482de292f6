"""The CPU fast mode's KL against the float32 reference on a 64-token text (README's figures):

    PYTHONPATH=$PWD .venv/bin/python tests/cpu/fast_mode_kl.py [MODEL]      # default: the default model

Both modes score the same tokens in one prompt (a prompt tile); prints the mean KL(ref || fast) over the
positions and how often the two argmaxes agree. STRATA_CPU_ATTN=0 / STRATA_CPU_GEMM=0 compare kernels."""
import sys

import torch

from engine.loader import load_model
from engine.messages import EngineConfig

TEXT = ("The quick brown fox jumps over the lazy dog. Rivers carry water from the hills to the sea, and the "
        "sea gives it back as rain. In the old town, the baker opens at six; by seven the queue reaches the "
        "corner, and by eight the bread is gone. Nobody minds.")


def main(model: str = "default") -> None:
    got = {}
    for dtype in ("float32", "auto"):
        m = load_model(EngineConfig(model=model, dtype=dtype, ctx=256))
        try:
            ids = m.tokenizer.encode(TEXT)[:64]
            got[dtype] = m.pipeline.score(ids).float()
        finally:
            m.pipeline.close()
    p, q = torch.log_softmax(got["float32"], -1), torch.log_softmax(got["auto"], -1)
    kl = (p.exp() * (p - q)).sum(-1)
    agree = (p.argmax(-1) == q.argmax(-1)).float().mean()
    print(f"{model}: {len(ids)} tokens, KL {kl.mean().item():.5f}, argmax agrees {agree.item():.3f}")


if __name__ == "__main__":
    main(*sys.argv[1:])
