"""The i-quants end to end on CPU against HF transformers (test-only oracle; it dequantizes the GGUF
through `gguf.quants`, as the engine's decoders reproduce bit for bit): a small synthetic llama with
every i-quant beside Q4_K / Q6_K (tests/engine/test_quant_iq.py: ALL_IQ_MAP), and one made the way
`strata make-model --qtype IQ4_XS --mix` makes it. The engine scores the prompt, then generates
greedily one token at a time; transformers scores the whole sequence in one forward. At every
position: the same greedy pick, and logits within a tolerance set from measurement."""
from __future__ import annotations

import pytest
import torch

from engine.gguf_file import read_gguf
from engine.loader import load_model
from engine.messages import EngineConfig
from engine.synthetic import MIX, make_model
from engine.synthetic_iq import IQ_TYPES
from tests.engine.test_quant_iq import SMALL2, make_all_iq

pytestmark = pytest.mark.slow   # ~10 s per model, most of it transformers converting the tokenizer

N_NEW = 8
PROMPT = "The capital of France is"
# float32 both sides; measured max |diff| (random weights: logits below ~2): all-iq 8.9e-7,
# IQ4_XS + mix 8.3e-7; greedy 8/8 on both. Tolerance ~3x.
LOGIT_ATOL = 3e-6


@pytest.fixture(scope="module", params=["all-iq", "iq4_xs-mix"])
def pair(request, tmp_path_factory, hf_reference):
    path = tmp_path_factory.mktemp("iq-ref") / f"{request.param}.gguf"
    if request.param == "all-iq":
        make_all_iq(path)
    else:
        make_model("llama", SMALL2, path, qtype="IQ4_XS", qtype_map=MIX)
    ours = load_model(EngineConfig(model=str(path), ctx=256, dtype="float32"))   # the reference mode
    yield request.param, path, ours, hf_reference(path)
    ours.pipeline.close()


def test_greedy_tokens_and_logits_match_transformers(pair):
    name, path, ours, hf = pair
    types = {t.qtype for t in read_gguf(path).tensors.values()}
    assert types >= (set(IQ_TYPES) if name == "all-iq" else {IQ_TYPES[1]})
    ids = ours.tokenizer.encode(PROMPT)
    prompt_logits = ours.pipeline.score(ids)
    rows, seq = [prompt_logits[-1]], list(ids)
    for _ in range(N_NEW):
        seq.append(int(rows[-1].argmax()))
        rows.append(ours.pipeline.score([seq[-1]], start=len(seq) - 1)[-1])
    mine = torch.cat([prompt_logits[:-1], torch.stack(rows)])               # a row per position of seq
    with torch.no_grad():
        theirs = hf(torch.tensor([seq])).logits[0].float()
    diff = (mine - theirs).abs().max().item()
    agree = sum(a == b for a, b in zip(theirs[len(ids) - 1:-1].argmax(-1).tolist(), seq[len(ids):]))
    print(f"MEASURED {name}: max |logit diff| {diff:.2e} (|logits| up to {theirs.abs().max():.2f}), "
          f"greedy {agree}/{N_NEW}")
    assert agree == N_NEW
    assert torch.equal(mine.argmax(-1), theirs.argmax(-1))
    assert diff < LOGIT_ATOL, f"{name}: max |logit diff| {diff:.2e}"
