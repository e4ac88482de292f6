"""The engine against an independent implementation of the same GGUF: HF transformers (test-only),
which dequantizes the file to float32 and runs its own llama / gemma3 code. Here: prompts scored
through prompt-row tiles. The decode path (generated tokens, drafts off and on, every architecture,
the MTP layer) is checked against the same reference in test_reference_decode.py."""
from __future__ import annotations

import pytest
import torch

from engine.loader import load_model
from engine.messages import EngineConfig

pytestmark = pytest.mark.slow

PROMPTS = ["The capital of France is", "def add(a, b):\n    return", "Water boils at a temperature of"]
# float32 both sides; measured max |diff| over PROMPTS: SmolLM2 4.6e-5 (logits up to ~30), Gemma 3 4.7e-5
LOGIT_ATOL = 1.5e-4


def our_greedy(m, ids: list[int], n: int) -> list[int]:
    out = []
    lg = m.pipeline.score(ids)[-1]
    for i in range(n):
        out.append(int(lg.argmax()))
        lg = m.pipeline.score([out[-1]], start=len(ids) + i)[-1]
    return out


@pytest.fixture(scope="module", params=["smollm2", "gemma3"])
def pair(request, smol_path, gemma_file, hf_reference):
    path = smol_path if request.param == "smollm2" else gemma_file
    ours = load_model(EngineConfig(model=str(path), ctx=256, dtype="float32"))   # the reference mode
    yield request.param, ours, hf_reference(path)
    ours.pipeline.close()


def test_logits_match_transformers(pair):
    name, ours, hf = pair
    for prompt in PROMPTS:
        ids = ours.tokenizer.encode(prompt)
        mine = ours.pipeline.score(ids)
        with torch.no_grad():
            theirs = hf(torch.tensor([ids])).logits[0].float()
        diff = (mine - theirs).abs().max().item()
        print(f"MEASURED {name} {prompt!r} {diff:.2e}")
        assert diff < LOGIT_ATOL, f"{name} {prompt!r}: max |logit diff| {diff:.2e}"
        assert torch.equal(mine.argmax(-1), theirs.argmax(-1))


def test_smollm2_says_paris(smol_path):
    m = load_model(EngineConfig(model=str(smol_path), ctx=128))        # the default (fast) CPU mode
    try:
        ids = m.tokenizer.encode("The capital of France is")
        assert m.tokenizer.decode(our_greedy(m, ids, 3)).strip().startswith("Paris")
    finally:
        m.pipeline.close()
