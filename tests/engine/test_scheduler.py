"""Slots, queueing, cancellation, prompt chunks beside decoding, prefix reuse and stop conditions,
on a real (tiny synthetic) GGUF through the in-process engine."""
from __future__ import annotations

import pytest

from app.local_engine import LocalEngine
from app.run_requests import run_together
from engine.messages import (Abort, AddRequest, EngineConfig, ErrorReply, PromptProgress, RequestDone,
                             SamplingParams, TokenDelta)


def req(rid, prompt, n=12, **kw):
    return AddRequest(request_id=rid, prompt=prompt, sampling=SamplingParams(max_tokens=n, ignore_eos=True, **kw))


@pytest.fixture(scope="module")
def model(synthetic):
    return str(synthetic("llama", mtp=1))


def alone(model, r: AddRequest) -> list[int]:
    with LocalEngine(EngineConfig(model=model)) as eng:
        return run_together(eng, [r])[r.request_id].tokens


def test_more_requests_than_slots_all_complete_and_match_alone(model):
    reqs = [req(f"r{i}", f"request number {i} says", n=8 + i, temperature=0.9, seed=i) for i in range(5)]
    with LocalEngine(EngineConfig(model=model, parallel=2, devices="cpu,cpu", piped_mtp=2)) as eng:
        out = run_together(eng, reqs)
    for r in reqs:
        o = out[r.request_id]
        assert o.done.finish_reason == "length" and len(o.tokens) == r.sampling.max_tokens
        assert o.tokens == alone(model, r), r.request_id


def test_abort_mid_stream_frees_the_slot(model):
    with LocalEngine(EngineConfig(model=model, parallel=1)) as eng:
        eng.submit(req("long", "tell me everything", n=2000))
        eng.submit(req("next", "a short one", n=4))
        seen = 0
        done = {}
        for msg in eng.events():
            if isinstance(msg, TokenDelta) and msg.request_id == "long":
                seen += len(msg.token_ids)
                if seen >= 3 and "abort_sent" not in done:
                    eng.engine.send(Abort(request_id="long"))
                    done["abort_sent"] = True
            elif isinstance(msg, RequestDone):
                done[msg.request_id] = msg
                if "next" in done:
                    break
    assert done["long"].finish_reason == "abort" and 3 <= done["long"].completion_tokens < 2000
    assert done["next"].finish_reason == "length" and done["next"].completion_tokens == 4


def test_long_prompt_is_read_in_chunks_beside_a_decoding_slot(model):
    long_prompt = " ".join(f"word{i}" for i in range(150))
    with LocalEngine(EngineConfig(model=model, parallel=2)) as eng:
        eng.submit(req("dec", "hello", n=40))
        order = []
        for msg in eng.events():
            if isinstance(msg, TokenDelta) and msg.request_id == "dec" and not order:
                eng.submit(req("read", long_prompt, n=2))
                order.append("start")
            elif isinstance(msg, PromptProgress) and msg.request_id == "read":
                order.append(("chunk", msg.read, msg.total))
            elif isinstance(msg, TokenDelta) and msg.request_id == "dec":
                order.append("tok")
            elif isinstance(msg, RequestDone) and msg.request_id == "read":
                break
    chunks = [o for o in order if isinstance(o, tuple)]
    assert len(chunks) >= 3 and chunks[-1][1] >= chunks[-1][2] - 1
    # the decoding slot kept producing tokens between the prompt's chunks
    first, last = order.index(chunks[0]), order.index(chunks[-1])
    assert "tok" in order[first:last]


def test_follow_up_turn_reuses_the_prefix_and_changes_nothing(model):
    first = req("t1", "The first turn of a conversation about rivers", n=10)
    with LocalEngine(EngineConfig(model=model, parallel=2)) as eng:
        o1 = run_together(eng, [first])["t1"]
        ids = eng.engine.core.model.tokenizer.encode(first.prompt) + o1.tokens
        follow = AddRequest(request_id="t2", token_ids=ids + [11, 12, 13],
                            sampling=SamplingParams(max_tokens=10, ignore_eos=True))
        o2 = run_together(eng, [follow])["t2"]
    assert o2.done.cached_tokens >= len(ids) - len(o1.tokens) - 1 > 0
    assert o2.tokens == alone(model, follow)


def test_stop_string_and_max_tokens(model):
    with LocalEngine(EngineConfig(model=model)) as eng:
        base = run_together(eng, [req("a", "stop test", n=16)])["a"]
        stop = base.text[len(base.text) // 2:][:3]
        o = run_together(eng, [req("b", "stop test", n=16, stop=[stop])])["b"]
    assert o.done.finish_reason == "stop" and stop not in o.text
    assert base.text.startswith(o.text) and len(o.text) < len(base.text)


def test_context_overflow_is_a_request_error(model):
    with LocalEngine(EngineConfig(model=model, ctx=64)) as eng:
        eng.submit(req("big", "x " * 200))
        msgs = list(m for m, _ in zip(eng.events(timeout=10), range(50)) if not hasattr(m, "stage_busy"))
    err = next(m for m in msgs if isinstance(m, ErrorReply))
    assert err.kind == "request" and "context holds 64" in err.message
    assert any(isinstance(m, RequestDone) and m.finish_reason == "error" for m in msgs)


def test_reload_while_busy_ends_requests_instead_of_losing_them(model):
    from engine.messages import LoadModel, Ready

    with LocalEngine(EngineConfig(model=model, parallel=2)) as eng:
        eng.submit(req("a", "first", n=5000))
        eng.submit(req("b", "second", n=5000))
        eng.submit(req("c", "third", n=5000))          # waits in the queue
        ends, ready = {}, False
        for msg in eng.events():
            if isinstance(msg, TokenDelta) and not ends.get("sent"):
                eng.engine.send(LoadModel(config=EngineConfig(model=model, parallel=1)))
                ends["sent"] = True
            elif isinstance(msg, RequestDone):
                ends[msg.request_id] = msg.finish_reason
            elif isinstance(msg, Ready):
                ready = True
                break
    assert ready and {ends[k] for k in "abc"} == {"abort"}


def test_window_failure_ends_its_requests_with_the_reason(model, monkeypatch):
    from engine import block

    with LocalEngine(EngineConfig(model=model)) as eng:
        def boom(*a, **k):
            raise MemoryError("simulated out of memory in a window")
        monkeypatch.setattr(block, "ffn_part", boom)
        d = run_together(eng, [req("x", "hi", n=4)])["x"].done
        monkeypatch.undo()
        ok = run_together(eng, [req("y", "hi", n=4)])["y"].done
    assert d.finish_reason == "error" and "simulated out of memory" in d.error
    assert ok.finish_reason == "length"
