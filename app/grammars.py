"""The grammars (llguidance's Lark dialect, engine.grammar) a chat request's output is held to:
response_format's JSON (any object, or a schema), and a forced call's arguments against its function's schema
in the formats that write them as one JSON object (hermes, generic, llama3; glm and qwen-xml write each
argument apart, and are not constrained)."""
from __future__ import annotations

import json

ANY_OBJECT = {"type": "object"}
JSON_ARGUMENTS = ("hermes", "generic", "llama3")
# white space between JSON tokens: none, a space, or a line break and an indent (llguidance's default takes any
# run, which a small model can spin in for ever)
WHITESPACE = r"(?: |\n[ \t]{0,20})?"


def closed(schema):
    """A function's schema with every object that lists its properties closed to others where it does not say
    (OpenAI's strict mode; a function given an argument it does not take fails)."""
    if isinstance(schema, list):
        return [closed(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: closed(v) if k not in ("properties", "$defs", "definitions") else
           {n: closed(x) for n, x in v.items()} if isinstance(v, dict) else v for k, v in schema.items()}
    if isinstance(out.get("properties"), dict) and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def json_rule(schema: dict) -> str:
    """`%json {...}`: the schema, with WHITESPACE unless it sets llguidance's own options."""
    return "%json " + json.dumps({"x-guidance": {"whitespace_pattern": WHITESPACE}, **schema}, ensure_ascii=False)


def json_grammar(schema: dict) -> str:
    return "start: " + json_rule(schema)


def _literal(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def call_grammar(fmt: str, tools: list[dict], name: str | None) -> str:
    """The rest of a forced call after engine.tool_format.call_opening(fmt, name): the arguments as the
    function's schema says (closed), then the call's end; with no name, any one of the functions. "" where the
    format writes arguments apart."""
    if fmt not in JSON_ARGUMENTS:
        return ""
    key, end = ("parameters", "}") if fmt == "llama3" else ("arguments", "}\n</tool_call>")
    rules, alts = [], []
    for i, t in enumerate(tools):
        f = t["function"]
        if name is not None and f["name"] != name:
            continue
        schema = closed(f.get("parameters") or ANY_OBJECT)
        called = f'{json.dumps(f["name"], ensure_ascii=False)}, "{key}": '
        head = "" if name is not None else _literal(called if fmt == "llama3" else '{"name": ' + called) + " "
        rules.append(f"args{i}: {json_rule(schema)}")
        alts.append(f"{head}args{i} {_literal(end)}")
    return "start: " + " | ".join(alts) + "\n" + "\n".join(rules)
