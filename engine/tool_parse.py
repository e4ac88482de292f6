"""Function calling, the reply side: split a reply, as it streams, into its text and the calls it makes.

    parser = ToolCallParser("hermes", tools)
    for piece in stream: events += parser.feed(piece)     # str (content) or ToolCall, in order
    events += parser.finish()

Text that may be the start of a call is held back until it is known not to be. A call is given out whole
once its block ends (at the end of the reply for llama3's bare JSON, which may only be known to be a call
then). A block that names no function is given back as text, unchanged: nothing the model wrote is lost.
Arguments are JSON text; a call whose arguments do not parse keeps them as the model wrote them (OpenAI's own
caveat: check them). For the formats that write each argument apart (glm, qwen-xml) a value is a string where
the function's schema says so, else the JSON it spells, else a string.
"""
from __future__ import annotations

import json
import re
import uuid

from engine.messages import ToolCall

START, END = "<tool_call>", "</tool_call>"
PYTHON_TAG = "<|python_tag|>"
_NAME = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_ARGS = re.compile(r'"(?:arguments|parameters)"\s*:\s*', re.S)
_XML_FUNCTION = re.compile(r"<function=([^>\n]+)>")
_XML_PARAM = re.compile(r"<parameter=([^>\n]+)>\n?(.*?)\n?</parameter>", re.S)
_GLM_PAIR = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.S)


def call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def string_params(tools: list[dict]) -> dict[str, set[str]]:
    """Per function, the parameters its schema types as strings only."""
    out: dict[str, set[str]] = {}
    for t in tools or []:
        f = t.get("function") if isinstance(t, dict) else None
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            continue
        props = f["parameters"].get("properties") if isinstance(f.get("parameters"), dict) else None
        names = set()
        for k, schema in (props if isinstance(props, dict) else {}).items():
            ty = schema.get("type") if isinstance(schema, dict) else None
            types = [ty] if isinstance(ty, str) else [x for x in ty if x != "null"] if isinstance(ty, list) else []
            if types and all(x == "string" for x in types):
                names.add(k)
        out[f["name"]] = names
    return out


def typed_value(raw: str, is_string: bool):
    if is_string:
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def json_call(body: str) -> ToolCall | None:
    """{"name": ..., "arguments" (or "parameters"): ...}; a body that is not JSON still gives its call when its
    name can be read (the arguments are then the text after "arguments": without the closing brace)."""
    try:
        obj = json.loads(body)
    except ValueError:
        obj = None
    if isinstance(obj, dict) and isinstance(obj.get("name"), str):
        args = obj.get("arguments", obj.get("parameters", {}))
        text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        return ToolCall(id=call_id(), name=obj["name"], arguments=text)
    name, args = _NAME.search(body), _ARGS.search(body)
    if not name:
        return None
    text = body[args.end():].rstrip() if args else "{}"
    text = text[:-1].rstrip() if text.endswith("}") and args else text
    try:
        called = json.loads(f'"{name.group(1)}"')
    except ValueError:                  # an escape JSON does not know: the name as written
        called = name.group(1)
    return ToolCall(id=call_id(), name=called, arguments=text or "{}")


def pairs_call(name: str, pairs, strings: dict[str, set[str]]) -> ToolCall | None:
    name = name.strip()
    if not name:
        return None
    as_string = strings.get(name, set())
    args = {k.strip(): typed_value(v, k.strip() in as_string) for k, v in pairs}
    return ToolCall(id=call_id(), name=name, arguments=json.dumps(args, ensure_ascii=False))


def parse_block(fmt: str, body: str, strings: dict[str, set[str]]) -> ToolCall | None:
    """The call inside one <tool_call> block, or None when it names no function."""
    if fmt == "glm":
        head = body.split("<arg_key>", 1)[0]
        return pairs_call(head, _GLM_PAIR.findall(body), strings)
    if fmt == "qwen-xml":
        m = _XML_FUNCTION.search(body)
        return pairs_call(m.group(1), _XML_PARAM.findall(body[m.end():]), strings) if m else None
    return json_call(body.strip())


def bare_json_calls(text: str) -> list[ToolCall] | None:
    """llama3: the reply is one or more call objects (separated by ';' or white space), or it is not a call."""
    dec, calls, i = json.JSONDecoder(), [], 0
    while True:
        while i < len(text) and (text[i].isspace() or text[i] == ";"):
            i += 1
        if i == len(text):
            return calls or None
        try:
            obj, i = dec.raw_decode(text, i)
        except ValueError:
            return None
        if not (isinstance(obj, dict) and isinstance(obj.get("name"), str)
                and isinstance(obj.get("parameters", obj.get("arguments", {})), dict)):
            return None
        args = obj.get("parameters", obj.get("arguments", {}))
        calls.append(ToolCall(id=call_id(), name=obj["name"], arguments=json.dumps(args, ensure_ascii=False)))


def held_prefix(text: str, marker: str) -> int:
    """How many characters at the end of `text` could be the start of `marker`."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-n:]):
            return n
    return 0


class ToolCallParser:
    """One reply's calls. `opening` is text the prompt already ended with (a forced call's start,
    engine.tool_format.call_opening): it is read as the reply's beginning and not given out."""

    def __init__(self, fmt: str, tools: list[dict] | None = None, opening: str = ""):
        self.fmt, self.strings = fmt, string_params(tools or [])
        self._buf, self._inside = "", False
        # llama3: "undecided" until the reply's start shows whether it is a call ("json") or not ("text")
        self._mode = "undecided" if fmt == "llama3" else "marker"
        if opening:
            self.feed(opening)

    def feed(self, text: str) -> list:
        self._buf += text
        if self._mode == "marker":
            return self._marker_step()
        if self._mode == "undecided":
            head = self._buf.lstrip()
            rest = head[len(PYTHON_TAG):].lstrip() if head.startswith(PYTHON_TAG) else head
            if not rest or (PYTHON_TAG.startswith(head) and head != PYTHON_TAG):
                return []
            self._mode = "json" if rest.startswith("{") else "text"
        if self._mode == "json":
            return []
        out, self._buf = self._buf, ""
        return [out] if out else []

    def finish(self) -> list:
        buf, self._buf = self._buf, ""
        if self._mode in ("json", "undecided"):
            head = buf.lstrip()
            calls = bare_json_calls(head[len(PYTHON_TAG):] if head.startswith(PYTHON_TAG) else head)
            return calls if calls else [buf] if buf else []
        if self._inside:
            self._inside = False
            call = parse_block(self.fmt, buf, self.strings)
            return [call] if call else [START + buf]
        return [buf] if buf else []

    def _marker_step(self) -> list:
        out = []
        while True:
            if not self._inside:
                i = self._buf.find(START)
                if i < 0:
                    keep = held_prefix(self._buf, START)
                    text, self._buf = self._buf[:len(self._buf) - keep], self._buf[len(self._buf) - keep:]
                    if text:
                        out.append(text)
                    return out
                if i:
                    out.append(self._buf[:i])
                self._buf, self._inside = self._buf[i + len(START):], True
            i = self._buf.find(END)
            if i < 0:
                return out
            body, self._buf, self._inside = self._buf[:i], self._buf[i + len(END):], False
            call = parse_block(self.fmt, body, self.strings)
            out.append(call if call else START + body + END)
