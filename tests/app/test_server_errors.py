"""The server's error paths over raw HTTP (httpx), against a real engine worker on the default model:
malformed requests (400 naming the field, in OpenAI's error shape), 401 with an API key, 404/405,
context overflow (400 with the engine's message), the queue bound (503), loading and a dead engine."""
from __future__ import annotations

import os
import signal
import threading

import httpx
import openai
import pytest

from app.engine_client import connect_worker
from app.server import ServerThread
from engine.messages import RequestDone
from tests.app.conftest import SERVER_CONFIG as CONFIG
from tests.app.test_server import all_idle, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
CHAT = "/v1/chat/completions"
MSG = [{"role": "user", "content": "hi"}]


def error_of(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    return body["error"]


def test_malformed_json(server):
    e = error_of(httpx.post(server.url + CHAT, content=b'{"messages": [', headers={"content-type": "application/json"}),
                 400)
    assert e["type"] == "invalid_request_error" and "not valid JSON" in e["message"]


@pytest.mark.parametrize("body, param, words", [
    ({}, "messages", "Field required"),
    ({"messages": "hello"}, "messages", "valid list"),
    ({"messages": []}, "messages", "at least 1"),
    ({"messages": [{"role": "bot", "content": "x"}]}, "messages.0.role", "'user'"),
    ({"messages": [{"content": "x"}]}, "messages.0.role", "Field required"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages.0.content", "valid string"),
    ({"messages": MSG, "temperature": "hot"}, "temperature", "valid number"),
    ({"messages": MSG, "temperature": "0.5"}, "temperature", "valid number"),
    ({"messages": MSG, "temperature": 7}, "temperature", "less than or equal to 2"),
    ({"messages": MSG, "max_tokens": "ten"}, "max_tokens", "valid integer"),
    ({"messages": MSG, "max_tokens": 0}, "max_tokens", "greater than or equal to 1"),
    ({"messages": MSG, "top_p": 1.5}, "top_p", "less than or equal to 1"),
    ({"messages": MSG, "seed": 1.5}, "seed", "valid integer"),
    ({"messages": MSG, "stop": 5}, "stop", "valid string"),
    ({"messages": MSG, "stop": ["a", 3]}, "stop.1", "valid string"),
    ({"messages": MSG, "stream": "yes"}, "stream", "valid boolean"),
    ({"messages": MSG, "n": 2}, "n", "less than or equal to 1"),
    ({"messages": MSG, "strata": {"spec": 0}}, "strata.spec", "greater than or equal to 1"),
    ({"messages": MSG, "tools": [{"type": "function", "function": {"name": "f"}}] * 2}, "tools", "two functions"),
    ({"messages": MSG, "tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools.0.function.name",
     "pattern"),
    ({"messages": MSG, "tools": [{"type": "retrieval"}]}, "tools.0.type", "'function'"),
    ({"messages": MSG, "tool_choice": "required"}, "tool_choice", "needs tools"),
    ({"messages": MSG, "tools": [{"type": "function", "function": {"name": "f"}}],
      "tool_choice": {"type": "function", "function": {"name": "g"}}}, "tool_choice", "no function named 'g'"),
    ({"messages": MSG, "tool_choice": "sometimes"}, "tool_choice", "'none'"),
    ({"messages": MSG, "functions": [{"name": "f"}]}, "functions", "send tools"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f"}}]}]},
     "messages.0.tool_calls.0.function.arguments", "Field required"),
    ({"messages": MSG, "logprobs": True}, "logprobs", "not supported"),
])
def test_bad_fields_are_400_naming_the_field(server, body, param, words):
    e = error_of(httpx.post(server.url + CHAT, json=body), 400)
    assert e["param"] == param and words in e["message"] and e["message"].startswith(param), e


def test_bad_completion_requests(server):
    url = server.url + "/v1/completions"
    assert error_of(httpx.post(url, json={"max_tokens": 3}), 400)["param"] == "prompt"
    assert error_of(httpx.post(url, json={"prompt": ["a", "b"]}), 400)["param"] == "prompt"
    assert error_of(httpx.post(url, json={"prompt": "a", "echo": True}), 400)["param"] == "echo"
    assert error_of(httpx.post(url, json={"prompt": [5, -1]}), 400)["param"] == "prompt"
    e = error_of(httpx.post(url, json={"prompt": [5, 10 ** 9], "max_tokens": 2}, timeout=30), 400)   # engine's check
    assert "vocabulary" in e["message"]


def test_body_that_is_not_an_object(server):
    assert "missing" in error_of(httpx.post(server.url + CHAT), 400)["message"]
    assert "JSON object" in error_of(httpx.post(server.url + CHAT, json=[1, 2]), 400)["message"]


def test_unknown_route_and_wrong_method(server):
    e = error_of(httpx.get(server.url + "/v1/nothing"), 404)
    assert e["type"] == "not_found_error" and "/v1/nothing" in e["message"]
    error_of(httpx.get(server.url + CHAT), 405)


@pytest.mark.parametrize("stream", [False, True])
def test_context_overflow_is_a_clear_400(server, engine, stream):
    ctx = engine.ready.config.ctx
    long = "hello " * (ctx + 200)
    e = error_of(httpx.post(server.url + CHAT, json={"messages": [{"role": "user", "content": long}],
                                                     "max_tokens": 8, "stream": stream}, timeout=60), 400)
    assert e["code"] == "context_length_exceeded" and str(ctx) in e["message"], e
    e = error_of(httpx.post(server.url + "/v1/completions", json={"prompt": long, "stream": stream}, timeout=60), 400)
    assert e["code"] == "context_length_exceeded"
    wait_until(lambda: all_idle(server))
    ok = httpx.post(server.url + CHAT, json={"messages": MSG, "max_tokens": 2}, timeout=60)   # still serving
    assert ok.status_code == 200


def test_api_key(engine):
    s = ServerThread(engine, "127.0.0.1", 0, api_key="s3cret")
    s.start()
    try:
        good, bad = {"Authorization": "Bearer s3cret"}, {"Authorization": "Bearer nope"}
        assert httpx.get(s.url + "/health").status_code == 200                  # /health needs no key
        for method, path in [("GET", "/v1/models"), ("GET", "/slots"), ("GET", "/metrics"), ("GET", "/openapi.json"),
                             ("POST", CHAT), ("POST", "/v1/completions"), ("GET", "/nowhere")]:
            for headers in ({}, bad, {"Authorization": "s3cret"}):
                e = error_of(httpx.request(method, s.url + path, headers=headers, json={}), 401)
                assert e["type"] == "authentication_error"
        assert httpx.get(s.url + "/v1/models", headers=good).status_code == 200
        spec = httpx.get(s.url + "/openapi.json", headers=good).json()
        assert spec["security"] == [{"bearer": []}] and spec["paths"]["/health"]["get"]["security"] == []
        assert "401" in spec["paths"]["/v1/chat/completions"]["post"]["responses"]
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=s.url + "/v1", api_key="nope", max_retries=0).models.list()
        r = openai.OpenAI(base_url=s.url + "/v1", api_key="s3cret").chat.completions.create(
            model="m", messages=MSG, max_tokens=2, extra_body={"ignore_eos": True})
        assert r.usage.completion_tokens == 2 and r.choices[0].finish_reason == "length"
    finally:
        s.stop()


def test_queue_bound_gives_503(engine):
    """2 slots + a queue of 0: the third request at once gets 503; the first two are untouched."""
    s = ServerThread(engine, "127.0.0.1", 0, max_queue=0)
    s.start()
    body = {"messages": MSG, "max_tokens": 1000, "ignore_eos": True, "stream": True}
    try:
        with httpx.stream("POST", s.url + CHAT, json=body, timeout=60) as a, \
                httpx.stream("POST", s.url + CHAT, json=body, timeout=60) as b:
            assert a.status_code == b.status_code == 200
            e = error_of(httpx.post(s.url + CHAT, json=body, timeout=60), 503)
            assert e["code"] == "queue_full" and "2 slots" in e["message"]
            assert httpx.post(s.url + CHAT, json=body).headers["retry-after"] == "1"
            assert "strata_http_rejected_total 2.0" in httpx.get(s.url + "/metrics").text
        wait_until(lambda: all_idle(s))                                           # both cancelled on close
        assert httpx.post(s.url + CHAT, json={"messages": MSG, "max_tokens": 2}, timeout=60).status_code == 200
    finally:
        s.stop()


def test_disconnect_while_queued_cancels_before_any_slot(server, engine):
    aborted = []
    engine.add_listener(lambda m: isinstance(m, RequestDone) and m.finish_reason == "abort" and aborted.append(m))
    body = {"messages": MSG, "max_tokens": 1000, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", server.url + CHAT, json=body, timeout=60) as a, \
            httpx.stream("POST", server.url + CHAT, json=body, timeout=60) as b:
        assert a.status_code == b.status_code == 200                             # both slots taken
        with pytest.raises(httpx.ReadTimeout):                                    # waits in the queue, gives up
            httpx.post(server.url + CHAT, json={"messages": MSG, "max_tokens": 4}, timeout=1.0)
        wait_until(lambda: len(aborted) == 1, timeout=3)
        assert aborted[0].completion_tokens == 0                                  # it never ran
        assert httpx.get(server.url + "/slots").json()["in_flight"] == 2
    wait_until(lambda: all_idle(server))


def test_loading_then_ready_then_dead_engine():
    client = connect_worker()                       # a worker with no model yet
    s = ServerThread(client, "127.0.0.1", 0)
    s.start()
    try:
        h = httpx.get(s.url + "/health")
        assert h.status_code == 503 and h.json()["status"] == "loading"
        assert error_of(httpx.post(s.url + CHAT, json={"messages": MSG}), 503)["code"] == "loading"
        error_of(httpx.get(s.url + "/v1/models"), 503)
        loader = threading.Thread(target=client.load, args=(CONFIG,), kwargs={"timeout": 120})
        loader.start()
        wait_until(lambda: httpx.get(s.url + "/health").status_code == 200, timeout=120, step=0.05)
        loader.join()
        assert httpx.post(s.url + CHAT, json={"messages": MSG, "max_tokens": 2}, timeout=60).status_code == 200
        os.kill(client.transport.pid, signal.SIGKILL)
        wait_until(lambda: httpx.get(s.url + "/health").status_code == 503, timeout=10)
        assert httpx.get(s.url + "/health").json()["status"] == "error"
        e = error_of(httpx.post(s.url + CHAT, json={"messages": MSG, "max_tokens": 2}, timeout=10), 503)
        assert e["type"] == "server_error"
    finally:
        s.stop()
        client.close()
