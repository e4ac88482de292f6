"""Function calling over the OpenAI-compatible API, end to end: the official `openai` client, a real server,
a real engine worker on the bundled model (SmolLM2-135M, whose template knows no functions: the generic format
of engine.tool_format).

The model is too small to call functions well, so these tests check what the server promises whatever the
model writes: the prompt the engine reads (its exact token count, against the tokenizer here), a forced call
named as asked, calls and text the same streamed or not, the OpenAI shapes, and at most one call when asked.
"""
from __future__ import annotations

import json

import httpx
import openai
import pytest

from app import openai_types as T
from engine.gguf_file import read_gguf
from engine.messages import ChatMessage, ToolCall
from engine.model_files import default_model_path
from engine.tokenizer import Tokenizer
from engine.tool_format import call_opening, template_inputs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                      "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                     "required": ["city"]}}},
    {"type": "function", "function": {"name": "add", "description": "Add two numbers", "parameters": {
        "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}},
]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER = {"type": "function", "function": {"name": "get_weather"}}
CALL = {"id": "call_abc", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
ANSWERED = ASK + [{"role": "assistant", "content": None, "tool_calls": [CALL]},
                  {"role": "tool", "tool_call_id": "call_abc", "content": '{"temp_c": 18, "sky": "clear"}'}]


@pytest.fixture(scope="module")
def oai(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return Tokenizer.from_gguf(read_gguf(default_model_path()), cache_dir=tmp_path_factory.mktemp("tokenizers"))


def prompt_tokens(tok, messages: list[ChatMessage], tools: list[dict], opening: str = "") -> int:
    msgs, template_tools = template_inputs(messages, tools, tok.tool_format)
    return len(tok.apply_chat(msgs, prefix=opening, tools=template_tools))


def calls_of(message) -> list[tuple[str, str]]:
    return [(c.function.name, c.function.arguments) for c in message.tool_calls or []]


def test_the_model_card_names_its_call_format(server):
    assert httpx.get(server.url + "/v1/models").json()["data"][0]["meta"]["tool_format"] == "generic"


def test_the_engine_reads_the_functions_the_results_and_a_forced_opening(oai, tok):
    """usage.prompt_tokens is exactly the prompt engine.tool_format builds: the functions listed (or not, with
    tool_choice none), the earlier call and its result as text, a forced call's opening at the end."""
    user = [ChatMessage(role="user", content=ASK[0]["content"])]
    answered = user + [ChatMessage(role="assistant", content="", tool_calls=[
        ToolCall(id="call_abc", name="get_weather", arguments='{"city": "Paris"}')]),
        ChatMessage(role="tool", content=ANSWERED[-1]["content"], tool_call_id="call_abc")]

    def used(**kw) -> int:
        return oai.chat.completions.create(model="m", max_tokens=1, temperature=0, **kw).usage.prompt_tokens

    plain = used(messages=ASK)
    assert plain == prompt_tokens(tok, user, [])
    assert used(messages=ASK, tools=TOOLS, tool_choice="none") == plain
    assert used(messages=ASK, tools=TOOLS) == prompt_tokens(tok, user, TOOLS) > plain + 60
    assert used(messages=ASK, tools=TOOLS, tool_choice=WEATHER) == \
        prompt_tokens(tok, user, TOOLS, call_opening("generic", "get_weather"))
    assert used(messages=ASK, tools=TOOLS, tool_choice="required") == \
        prompt_tokens(tok, user, TOOLS, call_opening("generic"))
    assert used(messages=ANSWERED, tools=TOOLS) == prompt_tokens(tok, answered, TOOLS) > prompt_tokens(tok, user, TOOLS)


def test_a_named_tool_choice_calls_that_function_once(oai):
    r = oai.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice=WEATHER, max_tokens=60,
                                    temperature=0, parallel_tool_calls=False)
    T.ChatCompletion.model_validate(r.model_dump(exclude_unset=True))
    c = r.choices[0]
    assert [name for name, _ in calls_of(c.message)] == ["get_weather"] and c.message.content is None
    assert c.finish_reason == "tool_calls" and c.message.tool_calls[0].id.startswith("call_")
    args = json.loads(c.message.tool_calls[0].function.arguments)     # held to the function's schema (closed)
    assert c.message.tool_calls[0].type == "function" and set(args) == {"city"} and isinstance(args["city"], str)


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_required_calls_one_of_the_functions_with_its_arguments(oai, temperature):
    r = oai.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice="required", max_tokens=60,
                                    temperature=temperature, seed=5)
    c = r.choices[0]
    (name, args), = calls_of(c.message)
    props = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}[name]
    assert c.finish_reason == "tool_calls" and set(json.loads(args)) <= set(props["properties"])
    assert set(props.get("required", [])) <= set(json.loads(args))


PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0},
                                           "city": {"enum": ["Paris", "Rome", "Oslo"]}},
          "required": ["name", "age", "city"], "additionalProperties": False}


def test_a_json_schema_response_format_holds_the_reply_to_it(oai):
    kw = dict(model="m", messages=[{"role": "user", "content": "Describe a person as JSON."}], max_tokens=120,
              temperature=0, response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}})
    r = oai.chat.completions.create(**kw)
    data = json.loads(r.choices[0].message.content)
    assert r.choices[0].finish_reason == "stop" and set(data) == {"name", "age", "city"}
    assert isinstance(data["name"], str) and type(data["age"]) is int and data["age"] >= 0 and data["city"] in (
        "Paris", "Rome", "Oslo")
    chunks = list(oai.chat.completions.create(**kw, stream=True))
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == r.choices[0].message.content


@pytest.fixture(scope="module")
def drafting():
    """A worker on the bundled model with its MTP drafts on (windows of 4), and a server on it."""
    from app.engine_client import connect_worker
    from app.server import ServerThread
    from engine.messages import EngineConfig

    client = connect_worker(EngineConfig(model="default", draft="mtp", spec=4, parallel=1, ctx=1024), timeout=120)
    server = ServerThread(client, "127.0.0.1", 0)
    server.start()
    yield openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0, timeout=120)
    server.stop()
    client.close()


@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_drafts_do_not_change_a_constrained_reply(drafting, temperature):
    """The bundled model's MTP drafts (4-token windows) against none: row i of a window is masked as if the
    proposals before it had been accepted, so the reply is the same token for token."""
    oai = drafting
    kw = dict(model="m", messages=[{"role": "user", "content": "Describe a person as JSON."}], max_tokens=80,
              temperature=temperature, seed=11,
              response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}})
    one = oai.chat.completions.create(**kw, extra_body={"strata": {"spec": 1}})
    four = oai.chat.completions.create(**kw, extra_body={"strata": {"spec": 4}})
    assert four.choices[0].message.content == one.choices[0].message.content
    assert four.usage.completion_tokens == one.usage.completion_tokens and four.strata["drafts_accepted"] > 0


def test_bad_output_forms_are_400(server):
    url = server.url + "/v1/chat/completions"
    bad_schema = httpx.post(url, json={"messages": ASK, "max_tokens": 4, "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "objec"}}}}, timeout=60)
    assert bad_schema.status_code == 400 and "grammar" in bad_schema.json()["error"]["message"]
    assert "objec" in bad_schema.json()["error"]["message"]
    for form, param in [({"type": "xml"}, "response_format.type"),
                        ({"type": "json_schema", "json_schema": {"schema": 5}}, "response_format.json_schema")]:
        r = httpx.post(url, json={"messages": ASK, "response_format": form}, timeout=60)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
    r = httpx.post(url, json={"messages": ASK, "tools": TOOLS, "tool_choice": "required",
                              "response_format": {"type": "json_object"}}, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["param"] == "response_format"


@pytest.mark.parametrize("choice", ["auto", "required", WEATHER])
def test_streamed_calls_and_text_are_the_unstreamed_ones(oai, choice):
    kw = dict(model="m", messages=ANSWERED if choice == "auto" else ASK, tools=TOOLS, tool_choice=choice,
              max_tokens=48, temperature=0)
    whole = oai.chat.completions.create(**kw).choices[0]
    chunks = list(oai.chat.completions.create(**kw, stream=True))
    for ch in chunks:
        T.ChatCompletionChunk.model_validate(ch.model_dump(exclude_unset=True))
    deltas = [ch.choices[0].delta for ch in chunks if ch.choices]
    text = "".join(d.content or "" for d in deltas)
    streamed = [c for d in deltas for c in d.tool_calls or []]
    assert [c.index for c in streamed] == list(range(len(streamed)))
    assert [(c.function.name, c.function.arguments) for c in streamed] == calls_of(whole.message)
    assert len({c.id for c in streamed}) == len(streamed)
    assert (text.strip() or None) == (whole.message.content.strip() if whole.message.content else None)
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == whole.finish_reason
    if choice != "auto":
        assert streamed and whole.finish_reason in ("tool_calls", "length")


def test_a_reply_without_calls_is_plain_text(oai):
    """tool_choice none: no call is read out of the reply, even one it writes; the finish is the engine's."""
    r = oai.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice="none", max_tokens=12,
                                    temperature=0, extra_body={"ignore_eos": True})
    assert r.choices[0].message.tool_calls is None and r.choices[0].finish_reason == "length"
    assert isinstance(r.choices[0].message.content, str) and r.choices[0].message.content


def test_a_tool_message_names_its_function_from_the_call(oai):
    """A result message may leave out `name`; the call it answers gives it (some templates show it), and a
    result for an unknown call still renders."""
    msgs = ANSWERED[:-1] + [{"role": "tool", "tool_call_id": "call_unknown", "content": "18"}]
    r = oai.chat.completions.create(model="m", messages=msgs, tools=TOOLS, max_tokens=2, temperature=0)
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert T.chat_messages(T.ChatCompletionRequest.model_validate({"messages": ANSWERED}))[-1].name == "get_weather"
    assert json.loads(T.chat_messages(T.ChatCompletionRequest.model_validate(
        {"messages": ANSWERED}))[1].tool_calls[0].arguments) == {"city": "Paris"}


@pytest.fixture(scope="module")
def thinking(tmp_path_factory):
    """The bundled model with a template of the hermes format whose generation prompt opens the thinking
    (Qwen 3.5's way): a worker, a server on it, and its tokenizer."""
    from app.engine_client import connect_worker
    from app.server import ServerThread
    from engine.messages import EngineConfig
    from tests.engine import gguf_mutate as gm
    from tests.engine.tool_templates import THINKING_HERMES

    src = default_model_path().read_bytes()
    path = tmp_path_factory.mktemp("thinking") / "smollm2-thinking.gguf"
    path.write_bytes(gm.replace_kv(src, gm.walk(src), "tokenizer.chat_template", gm.STRING, THINKING_HERMES))
    client = connect_worker(EngineConfig(model=str(path), ctx=1024, parallel=1), timeout=120)
    server = ServerThread(client, "127.0.0.1", 0)
    server.start()
    yield (openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0, timeout=120), server,
           Tokenizer.from_gguf(read_gguf(path), cache_dir=path.parent))
    server.stop()
    client.close()


def test_a_thinking_models_reasoning_comes_apart(thinking):
    """The reply starts inside <think>: what comes before </think> is reasoning_content, the rest the content,
    exactly the raw text (reasoning_format none) cut there; the same streamed."""
    oai, server, _ = thinking
    meta = httpx.get(server.url + "/v1/models").json()["data"][0]["meta"]
    assert (meta["tool_format"], meta["reasoning"]) == ("hermes", "open")
    kw = dict(model="m", messages=ASK, max_tokens=40, temperature=0, extra_body={"ignore_eos": True})
    raw = oai.chat.completions.create(**{**kw, "extra_body": {"ignore_eos": True, "reasoning_format": "none"}}) \
        .choices[0].message
    assert raw.content and getattr(raw, "reasoning_content", None) is None
    think, sep, answer = raw.content.partition("</think>")
    whole = oai.chat.completions.create(**kw).choices[0].message
    assert (getattr(whole, "reasoning_content", None) or "") == think.strip()
    assert whole.content == (answer.lstrip() if sep else "")
    chunks = list(oai.chat.completions.create(**kw, stream=True))
    for ch in chunks:
        T.ChatCompletionChunk.model_validate(ch.model_dump(exclude_unset=True))
    deltas = [ch.choices[0].delta for ch in chunks if ch.choices]
    assert "".join(getattr(d, "reasoning_content", None) or "" for d in deltas) == think.strip()
    assert "".join(d.content or "" for d in deltas) == whole.content


def test_a_native_template_gets_the_functions_and_a_forced_call_skips_the_thinking(thinking):
    oai, _, tok = thinking
    user = [ChatMessage(role="user", content=ASK[0]["content"])]
    r = oai.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice=WEATHER, max_tokens=40,
                                    temperature=0)
    msgs, tools = template_inputs(user, TOOLS, "hermes")
    assert tools == TOOLS
    ids = tok.apply_chat(msgs, prefix=call_opening("hermes", "get_weather"), tools=tools, enable_thinking=False)
    assert r.usage.prompt_tokens == len(ids) and "</think>" in tok.decode(ids)[-80:]
    m = r.choices[0].message
    assert [name for name, _ in calls_of(m)] == ["get_weather"] and getattr(m, "reasoning_content", None) is None
