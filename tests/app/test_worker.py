"""The engine worker process end to end: real `strata engine` processes on the default model (CPU)."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
import zmq

from app.engine_client import EngineClient, EngineDead, EngineFailure, connect_worker
from app.engine_process import WorkerTransport
from engine.messages import (PROTOCOL_VERSION, AddRequest, Configure, EngineConfig, ErrorReply, Hello, Ping,
                             PromptProgress, SamplingParams, Telemetry, TokenDelta, decode_out, encode)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
DEFAULT = EngineConfig(model="default", parallel=2)


def req(rid: str, n: int = 16, prompt: str = "The capital of France is") -> AddRequest:
    return AddRequest(request_id=rid, prompt=prompt, sampling=SamplingParams(max_tokens=n, ignore_eos=True))


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    progress, trace = [], tmp_path_factory.mktemp("trace") / "emit.txt"
    c = connect_worker(DEFAULT, on_progress=progress.append, timeout=60,
                       env=dict(os.environ, STRATA_TRACE_EMIT=str(trace)))   # the worker stamps each TokenDelta
    c.load_progress, c.trace = progress, trace
    yield c
    c.close()


def test_handshake_protocol_and_secret(client):
    t = client.transport
    assert t.hello.protocol == PROTOCOL_VERSION and t.hello.pid == t.pid and "stream" in t.hello.capabilities
    assert t.endpoint.startswith("ipc://")
    sock_dir = t.endpoint[len("ipc://"):].rsplit("/", 1)[0]
    assert os.stat(sock_dir).st_mode & 0o077 == 0          # other users cannot reach the socket at all
    assert not any(t._launch.secret in a for a in psutil.Process(t.pid).cmdline())   # never on argv
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(t.endpoint)
    try:
        def ask(msg):
            s.send(encode(msg))
            assert s.poll(5000), "no answer from the worker"
            return decode_out(s.recv())
        for msg in (Ping(nonce=7), req("intruder")):       # nothing before Hello
            r = ask(msg)
            assert isinstance(r, ErrorReply) and r.kind == "protocol" and "Hello" in r.message
        r = ask(Hello(secret="wrong", client="intruder"))
        assert isinstance(r, ErrorReply) and r.kind == "protocol" and "secret" in r.message
        r = ask(Ping(nonce=8))                             # still not attached
        assert isinstance(r, ErrorReply) and r.kind == "protocol"
        r = ask(Hello(secret=t._launch.secret, protocol=PROTOCOL_VERSION + 1))
        assert isinstance(r, ErrorReply) and "protocol" in r.message
    finally:
        ctx.destroy(linger=0)
    assert client.ping() < 1.0                             # the real client is unaffected


def test_load_progress_then_ready(client):
    fractions = [p.fraction for p in client.load_progress]
    assert fractions and fractions == sorted(fractions) and 0.0 <= fractions[0] and fractions[-1] <= 1.0
    ready = client.ready
    assert client.state == "ready"
    assert ready.config.parallel == 2 and ready.config.stages and ready.config.stages[0].device == "cpu"
    assert ready.config.n_layers == ready.model.n_layers == 30
    assert ready.model.arch == "llama" and ready.model.vocab_size == 49152


def test_stream_reply(client):
    h = client.submit(req("stream-1", n=12))
    kinds = [type(m) for m in h]
    deltas = [m for m in kinds if m is TokenDelta]
    assert deltas and set(kinds) <= {PromptProgress, TokenDelta}
    assert h.done.finish_reason == "length" and h.done.completion_tokens == 12
    assert client.state == "ready" and client.latest_telemetry is not None


def test_stream_asyncio(client):
    async def run():
        h = client.submit(req("async-1", n=8))
        return [m async for m in h.aiter()], h.done
    msgs, done = asyncio.run(run())
    assert sum(len(m.token_ids) for m in msgs if isinstance(m, TokenDelta)) == 8
    assert done.finish_reason == "length"


def test_two_requests_at_once(client):
    order = []
    client.add_listener(lambda m: order.append((type(m).__name__, getattr(m, "request_id", ""))))
    a, b = client.submit(req("two-a", n=24)), client.submit(req("two-b", n=24, prompt="Once upon a time"))
    assert client.state == "busy"
    (ta, da), (tb, db) = a.result(60), b.result(60)
    assert da.completion_tokens == db.completion_tokens == 24 and ta and tb
    first_done = min(order.index(("RequestDone", "two-a")), order.index(("RequestDone", "two-b")))
    streamed = {rid for name, rid in order[:first_done] if name == "TokenDelta"}
    assert streamed == {"two-a", "two-b"}                  # both were streaming before either finished


def test_abort_one_mid_stream(client):
    a, b = client.submit(req("abort-a", n=200)), client.submit(req("abort-b", n=20))
    got = 0
    for m in a:
        got += isinstance(m, TokenDelta)
        if got == 3:
            a.cancel()
    assert a.done.finish_reason == "abort" and a.done.completion_tokens < 200
    _, done_b = b.result(60)
    assert done_b.finish_reason == "length" and done_b.completion_tokens == 20
    client.configure(Configure(spec=1))
    assert client.ping() < 1.0


def test_bad_request_is_a_typed_error(client):
    with pytest.raises(EngineFailure) as e:
        list(client.submit(AddRequest(request_id="empty", prompt="")))
    assert e.value.reply.kind == "request" and e.value.reply.request_id == "empty"
    assert client.state == "ready"


def test_window_costs_from_the_worker_process(client):
    """MeasureWindows / WindowCosts across the worker's pipe (what `strata bench --window-costs` asks in process):
    one figure a row count and part; a bad row count is refused in one line and the worker stays ready."""
    c = client.measure_windows([1, 3])
    assert c.rows == [1, 3] and len(c.trunk_ms) == len(c.pick_ms) == 2 and min(c.trunk_ms + c.pick_ms) > 0
    with pytest.raises(EngineFailure, match="at least 1"):
        client.measure_windows([0])
    assert client.state == "ready" and client.ping() < 1.0


def test_telemetry_about_10hz_when_idle(client):
    seen = []
    client.add_listener(lambda m: isinstance(m, Telemetry) and seen.append(m))
    time.sleep(1.0)
    assert 6 <= len(seen) <= 14 and seen[-1].state == "idle"
    assert len({(t.tokens_total, t.requests_total, t.windows_total) for t in seen}) == 1   # idle: totals stand still
    assert seen[-1].memory


def test_inprocess_engine_behind_the_same_client():
    from engine.inproc import InProcessEngine

    with EngineClient(InProcessEngine()) as c:
        assert c.load(EngineConfig(model="default"), timeout=60).model.n_layers == 30
        text, done = c.submit(req("inproc", n=4)).result(60)
        assert text and done.completion_tokens == 4 and c.ping() < 1.0


def test_bad_model_path_is_a_typed_error(tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file at all" * 100)
    with connect_worker() as c:
        for bad in (str(tmp_path / "missing.gguf"), str(junk)):
            with pytest.raises(EngineFailure) as e:
                c.load(EngineConfig(model=bad), timeout=30)
            assert not isinstance(e.value, EngineDead)
            assert e.value.reply.kind == "model_file" and bad in e.value.reply.message
            assert c.state == "stopped" and c.ping() < 1.0  # the worker lives on


def test_kill9_mid_reply_then_restart():
    c = connect_worker(EngineConfig(model="default"), timeout=60)
    states = []
    c.add_state_listener(states.append)
    try:
        old = c.transport.pid
        h = c.submit(req("doomed", n=500))
        it = iter(h)
        while not isinstance(next(it), TokenDelta):
            pass
        t0 = time.monotonic()
        os.kill(old, signal.SIGKILL)
        with pytest.raises(EngineDead) as e:
            for _ in it:
                pass
        assert time.monotonic() - t0 < 5.0
        assert "SIGKILL" in e.value.reply.message and isinstance(e.value.stderr_tail, str)
        assert c.state == "crashed"
        with pytest.raises(EngineDead):
            c.submit(req("after-death"))
        ready = c.restart(timeout=60)
        assert ready.config.model_name == c.ready.config.model_name and c.transport.pid != old
        text, done = c.submit(req("reborn", n=6)).result(60)
        assert done.completion_tokens == 6 and text
        assert states[:3] == ["busy", "crashed", "starting"] and states[-1] == "ready"
    finally:
        c.close()
    assert gone(old) and gone(c.transport.pid)


def test_hung_worker_becomes_engine_dead():
    with connect_worker(dead_after_s=2.0) as c:
        pid = c.transport.pid
        t0 = time.monotonic()
        os.kill(pid, signal.SIGSTOP)                       # alive but silent
        with pytest.raises(EngineDead) as e:
            while True:
                try:
                    c.ping(timeout=1.0)
                except TimeoutError:
                    pass
        assert time.monotonic() - t0 < 5.0 and "no heartbeat" in e.value.reply.message
        assert c.state == "crashed"
    psutil.wait_procs([psutil.Process(pid)] if not gone(pid) else [], timeout=3)
    assert gone(pid)


def test_startup_failure_carries_stderr():
    with pytest.raises(EngineDead) as e:
        WorkerTransport(extra_args=("--telemetry-hz", "not-a-number"))
    assert "exited with code 2" in e.value.reply.message and "invalid float value" in e.value.stderr_tail


def test_clean_shutdown_leaves_no_process():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    c = connect_worker(EngineConfig(model="default"), timeout=60)
    pid, sock_dir = c.transport.pid, c.transport.endpoint[len("ipc://"):].rsplit("/", 1)[0]
    assert psutil.Process(pid).ppid() == os.getpid()
    c.close()
    assert gone(pid) and not os.path.exists(sock_dir) and c.state == "stopped"
    assert {p.pid for p in psutil.Process().children(recursive=True)} - before == set()


def test_worker_exits_when_parent_dies():
    code = ("from app.engine_client import connect_worker; c = connect_worker(); "
            "print(c.transport.pid, c.transport.endpoint, flush=True); import time; time.sleep(120)")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    try:
        pid, endpoint = parent.stdout.readline().split()
        pid, sock_dir = int(pid), endpoint[len("ipc://"):].rsplit("/", 1)[0]
        parent.kill()                                      # no atexit, no close(): the worker must notice
        parent.wait()
        deadline = time.monotonic() + 5
        while not gone(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert gone(pid)
        assert not os.path.exists(sock_dir)                # the worker removed its socket and private dir
    finally:
        parent.kill()


def test_token_latency(client):
    """Token emitted by the engine (worker side, time.monotonic) -> client reader thread -> consumer."""
    reader_t, consumer_t = [], []
    client.add_listener(lambda m: isinstance(m, TokenDelta) and m.request_id == "latency"
                        and reader_t.append(time.monotonic()))
    for m in client.submit(req("latency", n=32)):
        if isinstance(m, TokenDelta):
            consumer_t.append(time.monotonic())
    pings = sorted(client.ping() for _ in range(200))
    emitted = [float(t) for rid, t in (line.split() for line in client.trace.read_text().splitlines())
               if rid == "latency"]
    assert len(emitted) == len(reader_t) == len(consumer_t) == 32
    to_reader = sorted(r - e for e, r in zip(emitted, reader_t))
    to_consumer = sorted(r - e for e, r in zip(emitted, consumer_t))
    ms = lambda xs, q: 1000 * xs[min(len(xs) - 1, int(q * len(xs)))]  # noqa: E731
    print(f"\ntoken emit -> client reader: median {ms(to_reader, .5):.3f} ms, p90 {ms(to_reader, .9):.3f} ms; "
          f"-> consumer: median {ms(to_consumer, .5):.3f} ms, p90 {ms(to_consumer, .9):.3f} ms "
          f"({len(emitted)} tokens); ping round trip median {ms(pings, .5):.3f} ms, p90 {ms(pings, .9):.3f} ms")
    # causality on the one system-wide monotonic clock: emitted, then read, then consumed, in order (the
    # latency itself is printed above, not asserted: speed figures belong to `strata bench`)
    assert all(e <= r <= c for e, r, c in zip(emitted, reader_t, consumer_t))
    assert emitted == sorted(emitted) and reader_t == sorted(reader_t) and consumer_t == sorted(consumer_t)


def test_tcp_loopback_transport_as_on_windows(monkeypatch):
    """Where ipc:// sockets do not exist (Windows), the worker listens on loopback TCP (any free port),
    still behind the per-launch secret: the same handshake, replies and shutdown."""
    import app.engine_process as ep

    monkeypatch.setattr(ep, "_default_endpoint", lambda: ("tcp://127.0.0.1:0", None))
    c = connect_worker(EngineConfig(model="default"), timeout=60)
    try:
        assert c.transport._launch.endpoint.startswith("tcp://127.0.0.1:")
        text, done = c.submit(req("tcp", n=4)).result(60)
        assert done.completion_tokens == 4 and text
        pid = c.transport.pid
    finally:
        c.close()
    assert gone(pid)
