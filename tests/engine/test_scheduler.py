"""Slots, queueing, cancellation, prompt chunks beside decoding, prefix reuse and stop conditions,
on a real (tiny synthetic) GGUF through the in-process engine."""
from __future__ import annotations

import pytest

from app.engine_client import EngineFailure
from app.local_engine import local_client
from app.run_requests import run_together
from engine.messages import AddRequest, EngineConfig, PromptProgress, SamplingParams, TokenDelta


def req(rid, prompt, n=12, **kw):
    return AddRequest(request_id=rid, prompt=prompt, sampling=SamplingParams(max_tokens=n, ignore_eos=True, **kw))


@pytest.fixture(scope="module")
def model(synthetic):
    return str(synthetic("llama", mtp=1))


def alone(model, r: AddRequest) -> list[int]:
    with local_client(EngineConfig(model=model)) as eng:
        return run_together(eng, [r])[r.request_id].tokens


def test_more_requests_than_slots_all_complete_and_match_alone(model):
    reqs = [req(f"r{i}", f"request number {i} says", n=8 + i, temperature=0.9, seed=i) for i in range(5)]
    with local_client(EngineConfig(model=model, parallel=2, devices="cpu,cpu", batch_groups="2", piped_mtp=2)) as eng:
        out = run_together(eng, reqs)
    for r in reqs:
        o = out[r.request_id]
        assert o.done.finish_reason == "length" and len(o.tokens) == r.sampling.max_tokens
        assert o.tokens == alone(model, r), r.request_id


@pytest.mark.parametrize("chain", ["0", "1"], ids=["plain", "chained"])
def test_abort_mid_stream_frees_the_slot(model, monkeypatch, chain):
    """Also with chained greedy windows (engine.scheduler; forced on this CPU stage): the window queued
    after the cancelled one is dropped and the slot still frees."""
    monkeypatch.setenv("STRATA_CHAIN", chain)
    with local_client(EngineConfig(model=model, parallel=1)) as eng:
        long, nxt = eng.submit(req("long", "tell me everything", n=2000)), eng.submit(req("next", "a short one", n=4))
        seen = 0
        for ev in long:
            seen += len(getattr(ev, "token_ids", []))
            if seen >= 3:
                long.cancel()
        _, done_next = nxt.result(timeout=60)
    assert long.done.finish_reason == "abort" and 3 <= long.done.completion_tokens < 2000
    assert done_next.finish_reason == "length" and done_next.completion_tokens == 4


def test_long_prompt_is_read_in_chunks_beside_a_decoding_slot(model):
    long_prompt = " ".join(f"word{i}" for i in range(150))
    order = []
    with local_client(EngineConfig(model=model, parallel=2)) as eng:
        eng.add_listener(order.append)            # every message, in the order the engine sent them
        dec = eng.submit(req("dec", "hello", n=40))
        next(ev for ev in dec if isinstance(ev, TokenDelta))
        eng.submit(req("read", long_prompt, n=2)).result(timeout=120)
        dec.result(timeout=120)
    chunks = [m for m in order if isinstance(m, PromptProgress) and m.request_id == "read"]
    assert len(chunks) >= 3 and chunks[-1].read == chunks[-1].total
    # the decoding slot kept producing tokens between the prompt's chunks
    between = order[order.index(chunks[0]):order.index(chunks[-1])]
    assert any(isinstance(m, TokenDelta) and m.request_id == "dec" for m in between)


def test_follow_up_turn_reuses_the_prefix_and_changes_nothing(model):
    first = req("t1", "The first turn of a conversation about rivers", n=10)
    with local_client(EngineConfig(model=model, parallel=2)) as eng:
        o1 = run_together(eng, [first])["t1"]
        ids = eng.transport.core.model.tokenizer.encode(first.prompt) + o1.tokens
        follow = AddRequest(request_id="t2", token_ids=ids + [11, 12, 13],
                            sampling=SamplingParams(max_tokens=10, ignore_eos=True))
        o2 = run_together(eng, [follow])["t2"]
    # on CPU stages only prompt rows are reused (decode rows run at another tile size), and the last of
    # them is read again for its logits: the first turn's prompt less one token
    assert o2.done.cached_tokens == len(ids) - len(o1.tokens) - 1 == o1.done.prompt_tokens - 1
    assert o2.tokens == alone(model, follow)


def test_stop_string_and_max_tokens(model):
    with local_client(EngineConfig(model=model)) as eng:
        base = run_together(eng, [req("a", "stop test", n=16)])["a"]
        stop = base.text[len(base.text) // 2:][:3]
        o = run_together(eng, [req("b", "stop test", n=16, stop=[stop])])["b"]
    assert o.done.finish_reason == "stop" and stop not in o.text
    assert base.text.startswith(o.text) and len(o.text) < len(base.text)


def test_context_overflow_is_a_request_error(model):
    with local_client(EngineConfig(model=model, ctx=64)) as eng:
        with pytest.raises(EngineFailure) as err:
            eng.submit(req("big", "x " * 200)).result(timeout=30)
    assert err.value.reply.kind == "request" and "context holds 64" in err.value.reply.message


def test_reload_while_busy_ends_requests_instead_of_losing_them(model):
    with local_client(EngineConfig(model=model, parallel=2)) as eng:
        handles = [eng.submit(req(r, r, n=5000)) for r in ("a", "b", "c")]    # c waits in the queue
        next(ev for ev in handles[0] if isinstance(ev, TokenDelta))
        ready = eng.load(EngineConfig(model=model, parallel=1), timeout=60)
        ends = [h.result(timeout=30)[1].finish_reason for h in handles]
    assert ready.config.parallel == 1 and ends == ["abort"] * 3


def test_window_failure_ends_its_requests_with_the_reason(model, monkeypatch):
    from engine import block

    with local_client(EngineConfig(model=model)) as eng:
        def boom(*a, **k):
            raise MemoryError("simulated out of memory in a window")
        monkeypatch.setattr(block, "ffn_part", boom)
        d = run_together(eng, [req("x", "hi", n=4)])["x"].done
        monkeypatch.undo()
        ok = run_together(eng, [req("y", "hi", n=4)])["y"].done
    assert d.finish_reason == "error" and "simulated out of memory" in d.error
    assert ok.finish_reason == "length"
