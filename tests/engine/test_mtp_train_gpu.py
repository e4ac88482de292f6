"""`strata mtp-train` on a GPU (skipped without one; tests/gpu/run_final11.sh runs it there). It lives
here rather than in tests/app, whose module set-up starts the server (FastAPI is not on the GPU machine)."""
from __future__ import annotations

import pytest
import torch

from app.cli import main


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_trains_on_a_gpu(tmp_path):
    """On a GPU the engine's norms are Triton kernels autograd cannot see through: the layer trains with
    the torch forms (it once failed at its first backward there), its steps move its weights."""
    from engine.synthetic import make_model

    src = make_model("llama", "tiny", tmp_path / "m.gguf")
    out = tmp_path / "m-mtp.gguf"
    assert main(["mtp-train", "--model", str(src), "--out", str(out), "--tokens", "160", "--seq-tokens", "40",
                 "--qtype", "F32", "--device", "cuda:0", "--steps", "3"]) == 0
    state = torch.load(out.with_name(out.name + ".ckpt"), weights_only=True, map_location="cpu")
    d = state["layer"]["eh_proj"].shape[0]
    assert state["step"] == 3 and not torch.equal(state["layer"]["eh_proj"], torch.cat((torch.zeros(d, d), torch.eye(d)), 1))
