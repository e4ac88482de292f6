"""The engine against an independent implementation of the same GGUF: HF transformers (test-only),
which dequantizes the file to float32 and runs its own llama / gemma3 code."""
from __future__ import annotations

import pytest
import torch

from engine.loader import load_model
from engine.messages import EngineConfig

pytestmark = pytest.mark.slow

PROMPTS = ["The capital of France is", "def add(a, b):\n    return", "Water boils at a temperature of"]
LOGIT_ATOL = 2e-3        # float32 both sides; measured max |diff| 4e-5 (SmolLM2) on logits up to ~30
GREEDY_TOKENS = 12


def hf_model(path):
    transformers = pytest.importorskip("transformers")
    return transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                             torch_dtype=torch.float32).eval()


def hf_greedy(model, ids: list[int], n: int) -> list[int]:
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False, num_beams=1,
                             attention_mask=torch.ones(1, len(ids), dtype=torch.long), pad_token_id=0)
    return out[0, len(ids):].tolist()


def our_greedy(m, ids: list[int], n: int) -> list[int]:
    out = []
    lg = m.pipeline.score(ids)[-1]
    for i in range(n):
        out.append(int(lg.argmax()))
        lg = m.pipeline.score([out[-1]], start=len(ids) + i)[-1]
    return out


@pytest.fixture(scope="module", params=["smollm2", "gemma3"])
def pair(request, smol_path, gemma_file):
    path = smol_path if request.param == "smollm2" else gemma_file
    ours = load_model(EngineConfig(model=str(path), ctx=256))
    yield request.param, ours, hf_model(path)
    ours.pipeline.close()


def test_logits_match_transformers(pair):
    name, ours, hf = pair
    for prompt in PROMPTS:
        ids = ours.tokenizer.encode(prompt)
        mine = ours.pipeline.score(ids)
        with torch.no_grad():
            theirs = hf(torch.tensor([ids])).logits[0].float()
        diff = (mine - theirs).abs().max().item()
        assert diff < LOGIT_ATOL, f"{name} {prompt!r}: max |logit diff| {diff:.2e}"
        assert torch.equal(mine.argmax(-1), theirs.argmax(-1))


def test_greedy_continuations_agree(pair):
    name, ours, hf = pair
    for prompt in PROMPTS:
        ids = ours.tokenizer.encode(prompt)
        assert our_greedy(ours, ids, GREEDY_TOKENS) == hf_greedy(hf, ids, GREEDY_TOKENS), f"{name} {prompt!r}"


def test_smollm2_says_paris(smol_path):
    m = load_model(EngineConfig(model=str(smol_path), ctx=128))
    try:
        ids = m.tokenizer.encode("The capital of France is")
        assert m.tokenizer.decode(our_greedy(m, ids, 3)).strip().startswith("Paris")
    finally:
        m.pipeline.close()
