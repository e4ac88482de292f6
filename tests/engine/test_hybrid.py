"""Hybrid models (qwen35, qwen35moe, qwen3next: gated delta net blocks between attention blocks) in the engine's
own mechanisms: the per-slot state rings across windows, rejected proposals and prefix reuse.
(Their numerics against transformers: test_reference_decode.py.)"""
from __future__ import annotations

import pytest

from app.local_engine import local_client
from app.run_requests import run_together
from engine.config import STATE_RING
from engine.messages import AddRequest, EngineConfig, SamplingParams

PROMPT = "The first turn of a conversation about rivers and the bridges across them"


def req(rid, ids, n, **kw) -> AddRequest:
    return AddRequest(request_id=rid, token_ids=ids, sampling=SamplingParams(max_tokens=n, ignore_eos=True, **kw))


def alone(model: str, r: AddRequest) -> list[int]:
    with local_client(EngineConfig(model=model)) as eng:
        return run_together(eng, [r])[r.request_id].tokens


@pytest.mark.parametrize("arch", ["qwen35", "qwen35moe", "qwen3next"])
def test_follow_up_reuses_the_state_while_the_ring_holds_it(synthetic, arch):
    """A follow-up turn keeps the first turn's prompt when the state ring still holds the state there,
    reads it all again when later rows have overwritten that ring row, and gives a fresh engine's
    tokens either way."""
    model = str(synthetic(arch, mtp=1))
    with local_client(EngineConfig(model=model)) as eng:
        ids = eng.transport.core.model.tokenizer.encode(PROMPT)
        for n_first, reused in ((4, True), (STATE_RING, False)):
            o1 = run_together(eng, [req("t1", ids, n_first)])["t1"]
            follow = req("t2", ids + o1.tokens + [11, 12, 13], 10)
            o2 = run_together(eng, [follow])["t2"]
            # on CPU stages only prompt rows are reused, the last of them read again for its logits
            assert o2.done.cached_tokens == (len(ids) - 1 if reused else 0), (n_first, o2.done.cached_tokens)
            assert o2.tokens == alone(model, follow)


def test_rejected_proposals_leave_the_state_as_if_they_never_ran(synthetic, counting):
    """Random weights reject nearly every proposal (the rings roll back on every window); the counting
    model accepts nearly all: drafts on must give the tokens of drafts off."""
    for model, expect_accepted in ((str(synthetic("qwen35", mtp=1)), False), (str(counting("qwen35")), True)):
        with local_client(EngineConfig(model=model)) as eng:
            ids = eng.transport.core.model.tokenizer.encode(PROMPT)
        r = req("a", ids, 24)
        off = alone(model, r)
        with local_client(EngineConfig(model=model, draft="mtp", spec=4)) as eng:
            on = run_together(eng, [r])["a"]
        assert on.tokens == off
        d = on.done
        assert d.drafts_offered > 10
        assert (d.drafts_accepted / d.drafts_offered > 0.9) == expect_accepted, (d.drafts_accepted, d.drafts_offered)
