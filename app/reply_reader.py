"""A chat reply, as it streams, into the parts OpenAI's API gives apart: the reasoning (a thinking model's
<think> text, engine.reasoning), the answer's text, and the calls it makes (engine.tool_parse)."""
from __future__ import annotations

from engine.messages import ToolCall
from engine.reasoning import ReasoningSplitter
from engine.tool_parse import ToolCallParser


class ReplyReader:
    """feed(text) / finish() -> [("reasoning" | "content", str) | ("call", ToolCall)], in order.

    `inside`: None keeps the reasoning in the text; else whether the reply starts inside it. `parser`: None
    reads no calls."""

    def __init__(self, inside: bool | None, parser: ToolCallParser | None):
        self._split = None if inside is None else ReasoningSplitter(inside)
        self._parser = parser

    def feed(self, text: str) -> list[tuple[str, str | ToolCall]]:
        return self._calls(self._split.feed(text) if self._split else [("content", text)])

    def finish(self) -> list[tuple[str, str | ToolCall]]:
        out = self._calls(self._split.finish()) if self._split else []
        if self._parser:
            out += [as_part(e) for e in self._parser.finish()]
        return out

    def _calls(self, parts: list[tuple[str, str]]) -> list[tuple[str, str | ToolCall]]:
        if not self._parser:
            return parts
        out = []
        for kind, text in parts:
            out += [(kind, text)] if kind == "reasoning" else [as_part(e) for e in self._parser.feed(text)]
        return out


def as_part(event: str | ToolCall) -> tuple[str, str | ToolCall]:
    return ("content", event) if isinstance(event, str) else ("call", event)


def message(parts: list[tuple[str, str | ToolCall]]) -> tuple[dict, int]:
    """A whole reply's message in OpenAI's shape (reasoning_content when there was some, tool_calls and a null
    empty content when it made calls) and how many calls it made."""
    calls = [call_json(p) for kind, p in parts if kind == "call"]
    content = "".join(p for kind, p in parts if kind == "content")
    reasoning = "".join(p for kind, p in parts if kind == "reasoning").strip()
    out = {"role": "assistant", "content": (content.strip() or None) if calls else content}
    if reasoning:
        out["reasoning_content"] = reasoning
    if calls:
        out["tool_calls"] = calls
    return out, len(calls)


def call_json(call: ToolCall) -> dict:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
