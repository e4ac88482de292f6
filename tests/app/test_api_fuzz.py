"""API fuzzing: schemathesis against the server's own OpenAPI schema (/openapi.json, made by FastAPI from
app/openai_types.py), on loopback, with the real server over a real engine worker on a tiny synthetic
model (ctx 64, so no reply is longer than 64 tokens).

Every operation gets schema-valid and schema-invalid requests (bodies, query strings, headers). Each
response must: not be a 5xx (a 503 only where the schema documents it, with an OpenAI-shaped error body),
have a status code and content type the schema documents for that operation, and match the documented
schema. Invalid data must be refused with a 4xx. Budget: EXAMPLES per operation (about 40 s in all);
STRATA_FUZZ_SCALE=10 for a longer run.
"""
from __future__ import annotations

import collections
import os
import re

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.specs.openapi.checks import (content_type_conformance, negative_data_rejection,
                                               response_schema_conformance, status_code_conformance)

from app.engine_client import connect_worker
from app.server import ServerThread
from engine.messages import EngineConfig

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
EXAMPLES = max(1, int(25 * float(os.environ.get("STRATA_FUZZ_SCALE", "1"))))
ALLOWED_503 = {"loading", "queue_full", "engine_unavailable"}
SEEN: collections.Counter = collections.Counter()      # (operation, status) -> responses (pytest -s prints it)


@pytest.fixture(scope="module")
def fuzz_server(synthetic):
    client = connect_worker(EngineConfig(model=str(synthetic("llama")), ctx=64, parallel=2), timeout=120)
    s = ServerThread(client, "127.0.0.1", 0)
    s.start()
    yield s
    s.stop()
    client.close()


def served_schema() -> dict:
    """The schema the server serves (create_app builds it without touching the engine); loaded here at
    import so each operation is its own test (test_schema_is_the_served_one holds the two equal)."""
    from app.server import create_app

    return create_app(None).openapi()


schema = schemathesis.openapi.from_dict(served_schema())


def no_server_error(ctx, response, case):
    """No 5xx, except a 503 the operation documents, with an error code saying why (loading, queue full)."""
    status = response.status_code
    if status < 500:
        return None
    documented = str(status) in case.operation.definition.raw.get("responses", {})
    code = None
    try:
        code = response.json()["error"]["code"]
    except Exception:  # noqa: BLE001 - a 5xx without our error body is a failure either way
        pass
    if status == 503 and documented and code in ALLOWED_503:
        return None
    raise AssertionError(f"{case.operation.label} answered {status} ({code}): {response.text[:300]}")


CHECKS = [no_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          negative_data_rejection]


def fuzz_operation(method: str, path: str):
    """The fuzz test of one operation. Each is its own test function, so its node id is its own: under
    pytest 9, `schema.parametrize()`'s items all share the id `test_api`, and pytest-xdist (make test)
    runs one item per id, which left five of the six operations unfuzzed."""
    @schema.include(method=method, path=path).parametrize()
    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck),
              phases=[Phase.explicit, Phase.generate, Phase.shrink])
    def test(case, fuzz_server):
        r = case.call_and_validate(base_url=fuzz_server.url, checks=CHECKS, timeout=60)
        SEEN[(case.operation.label, r.status_code)] += 1
    return test


for _op in (op.ok() for op in schema.get_all_operations()):
    globals()["test_api_" + re.sub(r"\W+", "_", f"{_op.method} {_op.path}").strip("_").lower()] = \
        fuzz_operation(_op.method.upper(), _op.path)


def test_schema_is_the_served_one(fuzz_server):
    assert httpx.get(fuzz_server.url + "/openapi.json").json() == served_schema()


def test_server_is_sound_after_the_fuzz(fuzz_server):
    """Run after the test_api_* (file order): every slot idle, nothing in flight, and a request still works."""
    print("\napi fuzz responses: " + ", ".join(f"{op} {st} x{n}" for (op, st), n in sorted(SEEN.items())))
    slots = httpx.get(fuzz_server.url + "/slots").json()
    assert slots["in_flight"] == 0 and all(s["state"] == "idle" for s in slots["slots"]), slots
    r = httpx.post(fuzz_server.url + "/v1/completions", json={"prompt": "a b", "max_tokens": 3, "ignore_eos": True},
                   timeout=60)
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 3
