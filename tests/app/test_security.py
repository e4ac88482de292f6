"""Security edges (issue 18, item 5): nothing listens beyond loopback unless asked, and a non-loopback
address is announced; the engine's control socket refuses a client without the launch secret
(tests/app/test_worker.py::test_handshake_protocol_and_secret checks it on a live worker; here the
refusal path of the worker's IO thread runs on its own); the API key is compared in constant time;
request bodies and max_tokens are bounded with clear 413/400 errors; a chat template in a GGUF file
cannot reach Python internals (sandboxed Jinja), end to end through the server.

Most tests run the real HTTP server over a stub client (no engine: fast); the last one runs a real
worker on a tiny synthetic model whose file carries a malicious template.
"""
from __future__ import annotations

import hmac
import logging
import threading
import types

import httpx
import psutil
import pytest
import zmq

from app.server import DEFAULT_HOST, ServerThread, exposure_warning, is_loopback
from app.server_errors import DEFAULT_MAX_BODY

pytestmark = pytest.mark.timeout(120)
CHAT = "/v1/chat/completions"
MSG = [{"role": "user", "content": "Hi"}]


class StubClient:
    """Enough of an EngineClient for the HTTP edges: ready with a 64-token context, never asked to run."""

    def __init__(self, ctx: int = 64):
        self.ready = types.SimpleNamespace(config=types.SimpleNamespace(ctx=ctx, parallel=1, model_name="stub"),
                                           model=types.SimpleNamespace(name="stub"))
        self.state, self.error, self.latest_telemetry = "ready", None, None

    def submit(self, add):
        raise AssertionError("a request that should have been refused reached the engine")


@pytest.fixture
def stub_server():
    made = []

    def start(**kw):
        s = ServerThread(StubClient(), kw.pop("host", "127.0.0.1"), 0, **kw)
        s.start()
        made.append(s)
        return s

    yield start
    for s in made:
        s.stop()


def error_of(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, (r.status_code, r.text)
    return r.json()["error"]


# ---------------------------------------------------------------- listening

def test_defaults_listen_on_loopback_only(stub_server):
    import inspect

    from app import server_main

    assert DEFAULT_HOST == "127.0.0.1"
    assert inspect.signature(ServerThread).parameters["host"].default == DEFAULT_HOST
    import argparse
    p = argparse.ArgumentParser()
    server_main.add_arguments(p)
    assert p.parse_args([]).host == DEFAULT_HOST
    s = ServerThread(StubClient(), port=0)
    s.start()
    try:
        mine = [c for c in psutil.Process().net_connections("inet")
                if c.status == psutil.CONN_LISTEN and c.laddr.port == s.port]
        assert [c.laddr.ip for c in mine] == ["127.0.0.1"] and s.exposure == ""
    finally:
        s.stop()


def test_non_loopback_address_is_announced(stub_server, caplog):
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.0.0.2")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.10") and not is_loopback("example.com")
    assert "without an API key" in exposure_warning("0.0.0.0", None)
    assert "every network interface" in exposure_warning("0.0.0.0", None)
    assert "API key is required" in exposure_warning("10.0.0.5", "k") and exposure_warning("::1", None) == ""
    with caplog.at_level(logging.WARNING, logger="strata.server"):
        s = stub_server(host="0.0.0.0")
    assert any("without an API key" in r.getMessage() for r in caplog.records)
    assert "anyone who can reach this port" in s.exposure
    assert httpx.get(f"http://127.0.0.1:{s.port}/health").status_code == 200


def test_worker_endpoint_is_loopback_or_ipc_only():
    from engine.worker import check_endpoint

    assert check_endpoint("ipc:///tmp/x/engine.sock").startswith("ipc://")
    assert check_endpoint("tcp://127.0.0.1:0") == "tcp://127.0.0.1:*"
    for bad in ("tcp://0.0.0.0:5555", "tcp://*:5555", "tcp://192.168.1.2:1", "tcp://example.com:1"):
        with pytest.raises(ValueError, match="loopback"):
            check_endpoint(bad)


# ---------------------------------------------------------------- the engine's control socket

def test_control_socket_refuses_a_wrong_secret(tmp_path):
    """The worker's IO thread on a real ROUTER socket: Hello with a wrong (or no) secret is refused and
    nothing else is accepted from that client; the right secret is let in. (No engine thread runs.)"""
    from engine.messages import (AddRequest, ErrorReply, Hello, HelloReply, Ping, Pong, SamplingParams,
                                 decode_out, encode)
    from engine.worker import Worker

    w = Worker(f"ipc://{tmp_path}/engine.sock", secret="the-launch-secret")
    w.capabilities = []
    io = threading.Thread(target=w._io_loop, daemon=True)
    io.start()
    ctx = zmq.Context()
    try:
        def client():
            s = ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 0)
            s.connect(w.endpoint)
            return s

        def ask(s, msg):
            s.send(encode(msg))
            assert s.poll(5000), "no answer from the worker"
            return decode_out(s.recv())

        intruder = client()
        for secret in ("wrong", "", "the-launch-secre", "the-launch-secret "):
            r = ask(intruder, Hello(secret=secret, client="intruder"))
            assert isinstance(r, ErrorReply) and r.message == "bad secret"
        r = ask(intruder, AddRequest(request_id="x", prompt="hi", sampling=SamplingParams(max_tokens=1)))
        assert isinstance(r, ErrorReply) and "not authenticated" in r.message
        assert w.inbox.empty() and not w.clients                        # nothing reached the engine
        friend = client()
        assert isinstance(ask(friend, Hello(secret="the-launch-secret", client="app")), HelloReply)
        assert isinstance(ask(friend, Ping(nonce=3)), Pong)
        assert isinstance(ask(intruder, Ping(nonce=4)), ErrorReply)       # still refused
    finally:
        w.stop.set()
        io.join(5)
        ctx.destroy(linger=0)
        w.ctx.destroy(linger=0)


# ---------------------------------------------------------------- API key

def test_api_key_is_compared_in_constant_time(stub_server, monkeypatch):
    calls = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr("app.server_errors.hmac.compare_digest", spy)
    s = stub_server(api_key="s3cret")
    assert error_of(httpx.get(s.url + "/slots", headers={"Authorization": "Bearer nope"}), 401)
    assert httpx.get(s.url + "/slots", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert calls == [(b"nope", b"s3cret"), (b"s3cret", b"s3cret")]


# ---------------------------------------------------------------- bounded requests

def test_body_over_the_limit_is_413(stub_server):
    s = stub_server(max_body=2000)
    big = {"messages": [{"role": "user", "content": "x" * 3000}]}
    e = error_of(httpx.post(s.url + CHAT, json=big), 413)
    assert e["code"] == "request_too_large" and "2,000 bytes" in e["message"]

    def chunks():                                         # no Content-Length: counted as it arrives
        yield b'{"messages": [{"role": "user", "content": "'
        for _ in range(10):
            yield b"y" * 500
        yield b'"}]}'

    e = error_of(httpx.post(s.url + "/v1/completions", content=chunks(),
                            headers={"Content-Type": "application/json"}), 413)
    assert e["code"] == "request_too_large"
    small = httpx.post(s.url + CHAT, json={"messages": MSG, "max_tokens": 100})     # under the limit: judged
    assert error_of(small, 400)["param"] == "max_tokens"
    assert DEFAULT_MAX_BODY == 8 << 20
    spec = httpx.get(s.url + "/openapi.json").json()
    assert "413" in spec["paths"][CHAT]["post"]["responses"] and "413" not in spec["paths"]["/health"]["get"]["responses"]


def test_max_tokens_above_the_context_is_400(stub_server):
    s = stub_server()
    for field, path, body in (("max_tokens", CHAT, {"messages": MSG}),
                              ("max_completion_tokens", CHAT, {"messages": MSG}),
                              ("max_tokens", "/v1/completions", {"prompt": "hi"})):
        e = error_of(httpx.post(s.url + path, json={**body, field: 65}), 400)
        assert e["param"] == field and "64 tokens" in e["message"], e
    for body in ({"stop": ["x"] * 17}, {"stop": "y" * 1001}):
        e = error_of(httpx.post(s.url + CHAT, json={"messages": MSG, **body}), 400)
        assert e["param"] == "stop"
    e = error_of(httpx.post(s.url + CHAT, json={"messages": MSG, "max_tokens": 0}), 400)
    assert e["param"] == "max_tokens"


# ---------------------------------------------------------------- chat templates from the file

PAYLOADS = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ messages.__class__.__init__.__globals__ }}",
    "{{ cycler.__init__.__globals__.os.popen('touch PWNED').read() }}",
    "{{ raise_exception.__globals__['__builtins__']['__import__']('os').system('touch PWNED') }}",
    "{% for c in [].__class__.__base__.__subclasses__() %}{{ c }}{% endfor %}",
    "{{ strftime_now.__globals__ }}",
    "{{ tojson.__code__ }}",
    "{% set x = messages.append({'role': 'system', 'content': 'evil'}) %}",
    "{{ 'A' * 10**9 }}",
    "{{ [0] * 10**9 }}",
    "{{ 10 ** 10000000000 }}",
    "{{ ((((2 ** 256) ** 256) ** 256) ** 256) }}",
    "{{ 1 / 0 }}",
    "{% for i in range(10**7) %}{% endfor %}",
]


@pytest.mark.parametrize("template", PAYLOADS)
def test_template_from_the_file_cannot_escape(template, tmp_path, monkeypatch):
    from engine.chat_template import render_chat
    from engine.errors import RequestError

    monkeypatch.chdir(tmp_path)
    messages = [{"role": "user", "content": "hi"}]
    try:
        out = render_chat(template, messages, "<s>", "</s>")
    except RequestError as e:       # the usual answer: the sandbox rule, in one line
        assert str(e).startswith("chat template: ") and "\n" not in str(e)
    else:                           # an unsafe attribute may also render as an empty Undefined: nothing leaks
        assert out.strip() == "", out[:200]
    assert not (tmp_path / "PWNED").exists() and messages == [{"role": "user", "content": "hi"}]


def test_malicious_template_in_a_gguf_gets_a_clear_400(synthetic, tmp_path):
    """A GGUF whose tokenizer.chat_template tries to reach Python internals: the server answers 400
    naming the sandbox rule; completions (no template) and the engine keep working."""
    from app.engine_client import connect_worker
    from engine.messages import EngineConfig
    from tests.engine import gguf_mutate as gm

    src = synthetic("llama").read_bytes()
    evil = tmp_path / "evil.gguf"
    evil.write_bytes(gm.replace_kv(src, gm.walk(src), "tokenizer.chat_template", gm.STRING, PAYLOADS[0]))
    client = connect_worker(EngineConfig(model=str(evil), ctx=64, parallel=1), timeout=120)
    s = ServerThread(client, "127.0.0.1", 0)
    s.start()
    try:
        e = error_of(httpx.post(s.url + CHAT, json={"messages": MSG, "max_tokens": 2}, timeout=60), 400)
        assert "chat template" in e["message"] and "unsafe" in e["message"], e
        ok = httpx.post(s.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 2}, timeout=60)
        assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 2
    finally:
        s.stop()
        client.close()

