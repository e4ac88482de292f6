"""A thinking model's reasoning apart from its answer: the text between <think> and </think> (Qwen 3,
QwQ, Qwen 3.5, GLM-4.5 on, DeepSeek-R1's distills), split off as the reply streams.

A model's mode is read from its chat template at load: "" (it writes no thinking), "tagged" (a reply may open
with <think>) or "open" (the generation prompt itself ends in <think>, so the reply starts inside it).
"""
from __future__ import annotations

from engine.chat_template import render_chat
from engine.errors import RequestError
from engine.tool_parse import held_prefix

THINK, UNTHINK = "<think>", "</think>"


def reasoning_mode(template: str | None) -> str:
    if not isinstance(template, str) or UNTHINK not in template:
        return ""
    try:
        prompt = render_chat(template, [{"role": "user", "content": "Hi"}], "", "", True)
    except RequestError:
        return "tagged"
    return "open" if prompt.rstrip().endswith(THINK) else "tagged"


class ReasoningSplitter:
    """feed(text) / finish() -> [("reasoning" | "content", text)], in order. `inside`: the reply starts inside
    the thinking (mode "open"); else a <think> at its very start (after white space) opens it. White space
    around the reasoning and at the answer's start is dropped; a reply cut off while thinking is all
    reasoning."""

    def __init__(self, inside: bool):
        self._state = "inside" if inside else "start"
        self._buf = ""
        self._lead = True            # white space at the start of the current part is dropped

    def feed(self, text: str) -> list[tuple[str, str]]:
        self._buf += text
        out = []
        if self._state == "start":
            head = self._buf.lstrip()
            if THINK.startswith(head) and head != THINK:     # (nothing yet, or a start of <think>)
                return out
            if head.startswith(THINK):
                self._state, self._buf = "inside", head[len(THINK):]
            else:
                self._state = "content"
        if self._state == "inside":
            i = self._buf.find(UNTHINK)
            if i < 0:
                part = held_prefix(self._buf, UNTHINK)          # and the white space before it
                before = self._buf[:len(self._buf) - part]
                keep = part + len(before) - len(before.rstrip())
                self._emit(out, "reasoning", self._buf[:len(self._buf) - keep])
                self._buf = self._buf[len(self._buf) - keep:]
                return out
            self._emit(out, "reasoning", self._buf[:i].rstrip())
            self._state, self._buf, self._lead = "content", self._buf[i + len(UNTHINK):], True
        self._emit(out, "content", self._buf)
        self._buf = ""
        return out

    def finish(self) -> list[tuple[str, str]]:
        out = []
        if self._buf:
            self._emit(out, "reasoning" if self._state == "inside" else "content",
                       self._buf.rstrip() if self._state == "inside" else self._buf)
        self._buf = ""
        return out

    def _emit(self, out: list, kind: str, text: str) -> None:
        if self._lead:
            text = text.lstrip()
            if text:
                self._lead = False
        if text:
            out.append((kind, text))
