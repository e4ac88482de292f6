"""Crash drills (issue 18, item 3): kill -9 the engine worker at the worst moments, on real worker
processes. Each time the client says what happened (EngineDead naming SIGKILL, state "crashed"), the
process that hosts it stays up, and one action (restart) brings back the same configuration, which
then answers. Mid-reply on the default model is tests/app/test_worker.py::test_kill9_mid_reply_then_restart;
the app's side (the cut reply kept as "interrupted", one restart button) is tests/ui/test_errors.py; a
load too large for the device is the last drill here; two apps on one data folder: tests/ui/test_instances.py."""
from __future__ import annotations

import os
import signal

import pytest

from app.engine_client import EngineDead, connect_worker
from engine.messages import AddRequest, EngineConfig, PromptProgress, SamplingParams, TokenDelta
from tests.app.test_worker import gone, req

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def killed(c, old: int, e) -> None:
    assert "SIGKILL" in e.value.reply.message and c.state == "crashed" and gone(old)


def recovers(c, old: int, **expect):
    ready = c.restart(timeout=120)
    assert c.transport.pid != old and c.state == "ready"
    for key, value in expect.items():
        assert getattr(ready.config, key) == value, (key, ready.config)
    text, done = c.submit(req("after", n=5)).result(120)
    assert done.completion_tokens == 5 and done.finish_reason == "length"
    return ready


def test_kill9_during_a_model_load():
    c = connect_worker(timeout=60)
    try:
        old = c.transport.pid

        def on_progress(msg):
            if old and not gone(old):
                os.kill(old, signal.SIGKILL)
        with pytest.raises(EngineDead) as e:
            c.load(EngineConfig(model="default", parallel=2), on_progress, timeout=120)
        killed(c, old, e)
        recovers(c, old, parallel=2)          # the configuration being loaded is the one restored
    finally:
        c.close()


def test_kill9_during_a_long_prompt_read():
    c = connect_worker(EngineConfig(model="default"), timeout=120)
    try:
        old = c.transport.pid
        words = " ".join(f"word{i % 50}" for i in range(500))          # ~1,400 tokens: seconds to read
        h = c.submit(AddRequest(request_id="long", prompt=words, sampling=SamplingParams(max_tokens=4)))
        with pytest.raises(EngineDead) as e:
            for ev in h:
                assert not isinstance(ev, TokenDelta), "the prompt was read before the kill"
                if isinstance(ev, PromptProgress) and 0 < ev.read:
                    os.kill(old, signal.SIGKILL)
        killed(c, old, e)
        recovers(c, old)
    finally:
        c.close()


def test_kill9_during_a_reply_with_piped_drafts(synthetic):
    cfg = EngineConfig(model=str(synthetic("llama", mtp=1)), devices="cpu,cpu", parallel=2, batch_groups="2",
                       piped_mtp=2)
    c = connect_worker(cfg, timeout=120)
    try:
        old = c.transport.pid
        a, b = c.submit(req("a", n=400)), c.submit(req("b", n=400))
        it = iter(a)
        while not isinstance(next(it), TokenDelta):
            pass
        os.kill(old, signal.SIGKILL)
        for h in (it, b):
            with pytest.raises(EngineDead) as e:
                for _ in h:
                    pass
        killed(c, old, e)
        ready = recovers(c, old, piped_mtp=2, parallel=2)
        assert [s.device for s in ready.config.stages] == ["cpu", "cpu"]
    finally:
        c.close()


def test_a_load_too_large_for_the_device_is_a_clear_error_and_the_worker_stays():
    """Too large for the device (here the KV cache of a huge context on the CPU): one error naming the
    stage, the device and the bytes, before anything is allocated; the same worker then loads a model
    that fits."""
    from app.engine_client import EngineFailure

    c = connect_worker(timeout=60)
    try:
        pid = c.transport.pid
        with pytest.raises(EngineFailure) as e:
            c.load(EngineConfig(model="default", ctx=1_000_000, parallel=64), timeout=120)
        msg = e.value.reply.message
        assert e.value.reply.kind == "oom" and "stage 0 (cpu) needs" in msg and "GiB is free" in msg, msg
        assert c.state == "stopped" and c.transport.pid == pid and not gone(pid)
        ready = c.load(EngineConfig(model="default"), timeout=120)
        assert ready.config.ctx == 2048 and c.transport.pid == pid
    finally:
        c.close()
