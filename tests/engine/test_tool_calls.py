"""Function calling in the engine: the format read from a chat template, what the template is given
(engine.tool_format) and the calls read back out of a reply, whole or streamed (engine.tool_parse).

The round trip is the check that matters: a template writes an assistant turn that made calls, and the parser
reads the same calls back from that turn's text, in every format, fed in one piece or one character at a time.
"""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from engine.chat_template import render_chat
from engine.gguf_file import read_gguf
from engine.messages import ChatMessage, ToolCall
from engine.model_files import default_model_path
from engine.reasoning import ReasoningSplitter, reasoning_mode
from engine.tokenizer import Tokenizer
from engine.tool_format import call_opening, generic_messages, template_inputs, tool_format
from engine.tool_parse import ToolCallParser
from tests.engine.tool_templates import TEMPLATES

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                         "note": {"type": ["string", "null"]}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}, "opts": {"type": "object"}}}}},
]
CALLS = [ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris", "days": 3, "note": "42"}'),
         ToolCall(id="call_2", name="search", arguments='{"q": "1 < 2\\nand \\"more\\"", "opts": {"a": [1, 2.5]}}')]
ASK = [ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content="Weather in Paris?")]


@pytest.fixture(scope="module")
def smol(tmp_path_factory):
    return Tokenizer.from_gguf(read_gguf(default_model_path()), cache_dir=tmp_path_factory.mktemp("tokenizers"))


def parse(fmt: str, text: str, step: int | None = None, opening: str = "") -> list:
    p = ToolCallParser(fmt, TOOLS, opening)
    step = step or max(len(text), 1)
    events = [e for i in range(0, len(text), step) for e in p.feed(text[i:i + step])] + p.finish()
    return events


def summary(events: list) -> tuple[str, list]:
    """(all the text, [(name, arguments as an object, or their text where it is not JSON)]) of a parser's
    events."""
    def value(text: str):
        try:
            return json.loads(text)
        except ValueError:
            return text      # as the model wrote it
    return ("".join(e for e in events if isinstance(e, str)),
            [(e.name, value(e.arguments)) for e in events if not isinstance(e, str)])


def assistant_turn(template: str, fmt: str, calls: list[ToolCall]) -> str:
    """The text a template writes for an assistant turn making `calls`: what the model would have written."""
    before, _ = template_inputs(ASK, TOOLS, fmt)
    after, tools = template_inputs(ASK + [ChatMessage(role="assistant", content="", tool_calls=calls)], TOOLS, fmt)
    prompt = render_chat(template, before, "<s>", "</s>", True, tools=tools)
    whole = render_chat(template, after, "<s>", "</s>", False, tools=tools)
    assert whole.startswith(prompt), (prompt, whole)
    turn = whole[len(prompt):]
    for end in ("<|im_end|>", "<|eot_id|>"):
        turn = turn.split(end)[0]
    return turn


def test_the_format_is_read_from_the_template():
    assert {fmt: tool_format(t) for fmt, t in TEMPLATES.items()} == {f: f for f in TEMPLATES}
    assert tool_format(None) == tool_format("{{ messages[0].content }}") == "generic"
    assert tool_format("{% if tools %}[TOOL_CALLS]{% endif %}") == "generic"       # a format not read here


@pytest.mark.parametrize("fmt", [*TEMPLATES, "generic"])
def test_a_templates_calls_read_back(fmt, smol):
    template = TEMPLATES.get(fmt, smol.chat_template)
    calls = CALLS[:1] if fmt == "llama3" else CALLS           # Llama 3.1 makes one call a turn
    turn = assistant_turn(template, fmt, calls)
    want = [(c.name, json.loads(c.arguments)) for c in calls]
    for step in (None, 1, 5):
        text, got = summary(parse(fmt, turn, step))
        assert got == want, (fmt, step, turn)
        assert "tool_call" not in text and "get_weather" not in text and not text.strip(" \n<>/think"), text


@pytest.mark.parametrize("fmt", [*TEMPLATES, "generic"])
def test_a_forced_calls_opening_is_read_as_the_replys_start(fmt):
    opening = call_opening(fmt, "get_weather")
    rest = {"glm": "<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n</tool_call>",
            "qwen-xml": "<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>",
            "llama3": '{"city": "Oslo"}}'}.get(fmt, '{"city": "Oslo"}}\n</tool_call>')
    assert summary(parse(fmt, rest, opening=opening)) == ("", [("get_weather", {"city": "Oslo"})])
    assert summary(parse(fmt, rest, 1, opening=opening))[1] == [("get_weather", {"city": "Oslo"})]
    any_call = call_opening(fmt)
    assert opening.startswith(any_call) and any_call.strip()


def test_text_around_calls_is_kept_in_order():
    reply = 'Let me look.\n<tool_call>\n{"name": "search", "arguments": {"q": "x"}}\n</tool_call>\nDone <tool'
    events = parse("hermes", reply, 1)
    at = next(i for i, e in enumerate(events) if not isinstance(e, str))
    assert "".join(events[:at]) == "Let me look.\n" and "".join(events[at + 1:]) == "\nDone <tool"
    assert summary(events) == ("Let me look.\n\nDone <tool", [("search", {"q": "x"})])


def test_a_block_without_a_function_name_is_given_back_unchanged():
    for fmt, reply in [("hermes", "a <tool_call>\n[1, 2]\n</tool_call> b"), ("hermes", "a <tool_call>{broken"),
                       ("qwen-xml", "a <tool_call>\n<parameter=x>\n1\n</parameter>\n</tool_call> b"),
                       ("glm", "a <tool_call>\n<arg_key>x</arg_key><arg_value>1</arg_value></tool_call> b")]:
        for step in (None, 1):
            assert summary(parse(fmt, reply, step)) == (reply, []), (fmt, step)


def test_odd_schemas_and_odd_names_do_not_break_the_reading():
    """A schema whose properties are not an object (the request's own), a name with an escape JSON does not
    know (the model's): read as far as they go, never an exception."""
    p = ToolCallParser("glm", [{"type": "function", "function": {"name": "f", "parameters": {"properties": 5}}},
                               {"type": "function", "function": {"name": "g", "parameters": {"properties": {
                                   "x": 3, "y": {"type": 7}}}}}])
    events = p.feed("<tool_call>f\n<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>") + p.finish()
    assert [(e.name, json.loads(e.arguments)) for e in events] == [("f", {"a": 1})]
    events = parse("hermes", '<tool_call>\n{"name": "a\\qb", "arguments": {}\n</tool_call>')
    assert [e.name for e in events] == ["a\\qb"]


def test_arguments_that_do_not_parse_are_kept_as_written():
    """A reply cut off inside its call (max_tokens) still names the call; the arguments are the model's text."""
    events = parse("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par')
    assert [(e.name, e.arguments) for e in events] == [("get_weather", '{"city": "Par')]
    events = parse("hermes", '<tool_call>\n{"name": "search", "arguments": {"q": x}}\n</tool_call>')
    assert [(e.name, e.arguments) for e in events] == [("search", '{"q": x}')]


def test_separate_argument_values_follow_the_schema():
    """glm / qwen-xml write each value as text: a string where the schema says string, else the JSON it spells."""
    reply = ("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>1984</arg_value>\n<arg_key>days</arg_key>\n"
             "<arg_value>2</arg_value>\n<arg_key>note</arg_key>\n<arg_value>null</arg_value>\n<arg_key>x</arg_key>\n"
             "<arg_value>[1, 2]</arg_value>\n<arg_key>y</arg_key>\n<arg_value>not json</arg_value>\n</tool_call>")
    assert summary(parse("glm", reply))[1] == [("get_weather", {"city": "1984", "days": 2, "note": "null",
                                                                  "x": [1, 2], "y": "not json"})]


def test_llama3_text_streams_at_once_and_calls_only_whole():
    p = ToolCallParser("llama3", TOOLS)
    assert p.feed("  ") == [] and p.feed("Hello") == ["  Hello"] and p.feed(" {x}") == [" {x}"] and p.finish() == []
    p = ToolCallParser("llama3", TOOLS)
    call = '<|python_tag|>{"name": "search", "parameters": {"q": "a"}}; {"name": "get_weather", "parameters": {}}'
    assert [e for i in range(len(call)) for e in p.feed(call[i])] == []
    assert [(e.name, json.loads(e.arguments)) for e in p.finish()] == [("search", {"q": "a"}), ("get_weather", {})]
    for not_a_call in ('{"answer": 42}', '{"name": "f", "parameters": {}} and more', "{ unfinished"):
        assert summary(parse("llama3", not_a_call)) == (not_a_call, [])


@settings(max_examples=60, deadline=None)
@given(pieces=st.lists(st.sampled_from(["Hi ", "<tool_call>", "</tool_call>", "<tool", "_call>", "\n",
                                        '{"name": "search", "arguments": {"q": "<"}}', "</", "x"]), max_size=12),
       step=st.integers(1, 9))
def test_streaming_gives_what_one_piece_gives(pieces, step):
    """However a reply is cut into deltas, the text and the calls come out the same, and no text is lost."""
    reply = "".join(pieces)
    whole, streamed = parse("hermes", reply), parse("hermes", reply, step)
    assert summary(whole) == summary(streamed)
    if not summary(whole)[1]:
        assert summary(whole)[0] == reply


def test_generic_messages_put_calls_and_results_in_plain_turns():
    convo = [ChatMessage(role="user", content="Weather?"),
             ChatMessage(role="assistant", content="Checking.", tool_calls=CALLS),
             ChatMessage(role="tool", content="18C", tool_call_id="call_1"),
             ChatMessage(role="tool", content="[]", tool_call_id="call_2"),
             ChatMessage(role="user", content="Thanks")]
    out = generic_messages(convo, TOOLS)
    assert [m["role"] for m in out] == ["user", "assistant", "user", "user"]
    assert out[0]["content"].endswith("\n\nWeather?") and '"name": "get_weather"' in out[0]["content"]
    assert out[1]["content"].startswith("Checking.\n<tool_call>\n") and out[1]["content"].count("</tool_call>") == 2
    assert summary(parse("generic", out[1]["content"]))[1] == [(c.name, json.loads(c.arguments)) for c in CALLS]
    assert out[2]["content"] == "<tool_response>\n18C\n</tool_response>\n<tool_response>\n[]\n</tool_response>"
    with_system = generic_messages([ChatMessage(role="system", content="Be brief.")] + convo, TOOLS)
    assert with_system[0]["content"].startswith("Be brief.\n\n# Functions") and with_system[1]["content"] == "Weather?"
    assert generic_messages(convo, [])[0] == {"role": "user", "content": "Weather?"}   # tool_choice none


def test_native_messages_carry_only_what_is_set():
    """Llama 3.1's template tests `'tool_calls' in message`: a message without calls must not have the key."""
    msgs, tools = template_inputs([ASK[1], ChatMessage(role="assistant", content="", tool_calls=CALLS[:1]),
                                   ChatMessage(role="tool", content="18C", tool_call_id="call_1", name="get_weather")],
                                  TOOLS, "llama3")
    assert msgs[0] == {"role": "user", "content": "Weather in Paris?"} and tools == TOOLS
    assert msgs[1]["tool_calls"] == [{"id": "call_1", "type": "function", "function": {
        "name": "get_weather", "arguments": {"city": "Paris", "days": 3, "note": "42"}}}]
    assert msgs[2] == {"role": "tool", "content": "18C", "tool_call_id": "call_1", "name": "get_weather"}
    assert template_inputs(ASK, [], "hermes")[1] is None


def test_the_bundled_models_prompt_lists_the_functions_and_ends_with_a_forced_opening(smol):
    """SmolLM2's template knows no functions: the generic format writes them into the prompt itself."""
    opening = call_opening(smol.tool_format, "get_weather")
    msgs, tools = template_inputs(ASK, TOOLS, smol.tool_format)
    ids = smol.apply_chat(msgs, prefix=opening, tools=tools)
    text = smol.decode(ids)
    assert smol.tool_format == "generic" and tools is None
    assert text.endswith("<|im_start|>assistant\n" + opening) and '"name": "search"' in text
    assert len(ids) > len(smol.apply_chat([{"role": m.role, "content": m.content} for m in ASK])) + 50


def test_the_reasoning_mode_is_read_from_the_template(smol):
    from tests.engine.tool_templates import THINKING_HERMES
    assert reasoning_mode(THINKING_HERMES) == "open" and reasoning_mode(TEMPLATES["hermes"]) == "tagged"
    assert reasoning_mode(smol.chat_template) == reasoning_mode(TEMPLATES["llama3"]) == reasoning_mode(None) == ""


def split(inside: bool, text: str, step: int) -> tuple[str, str]:
    s = ReasoningSplitter(inside)
    parts = [p for i in range(0, len(text), step) for p in s.feed(text[i:i + step])] + s.finish()
    return ("".join(t for k, t in parts if k == "reasoning"), "".join(t for k, t in parts if k == "content"))


@pytest.mark.parametrize("inside, reply, want", [
    (False, "<think>\nLet me see.\n</think>\n\nParis.", ("Let me see.", "Paris.")),
    (True, "Let me see.\n</think>\n\nParis.", ("Let me see.", "Paris.")),
    (False, "\n<think></think>\nParis.", ("", "Paris.")),
    (False, "Paris, not <think>.", ("", "Paris, not <think>.")),       # only at the reply's start
    (True, "cut off while thin", ("cut off while thin", "")),
    (True, "a </thin b </think> c </think>", ("a </thin b", "c </think>")),
])
def test_reasoning_comes_apart_however_the_reply_streams(inside, reply, want):
    assert {split(inside, reply, step) for step in (1, 2, 3, 7, 100)} == {want}


@settings(max_examples=60, deadline=None)
@given(pieces=st.lists(st.sampled_from(["<think>", "</think>", "<th", "ink>", "</", " ", "\n", "x", "yz"]),
                       max_size=12), inside=st.booleans(), step=st.integers(1, 9))
def test_reasoning_split_is_the_same_in_any_pieces(pieces, inside, step):
    reply = "".join(pieces)
    assert split(inside, reply, step) == split(inside, reply, len(reply) + 1)
