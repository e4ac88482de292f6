"""Function calling, the prompt side: which format a model writes its calls in, read from its chat template,
and what the template is given (the tools, earlier calls and their results; or, for a template that knows no
functions, the same as text).

  hermes    <tool_call>\\n{"name": "f", "arguments": {...}}\\n</tool_call>     Qwen 2.5 / 3, QwQ, Hermes
  qwen-xml  <tool_call>\\n<function=f>\\n<parameter=k>\\nv\\n</parameter>\\n</function>\\n</tool_call>
                                                                             Qwen3-Coder, Qwen 3.5
  glm       <tool_call>f\\n<arg_key>k</arg_key>\\n<arg_value>v</arg_value>\\n</tool_call>
                                                                             GLM-4.5 and later
  llama3    {"name": "f", "parameters": {...}} as the whole reply            Llama 3.1 - 3.3
  generic   any other template (SmolLM2, Gemma 3, the plain fallback, formats not listed here): the
            engine lists the functions in the system message (or the first user message) itself and
            asks for hermes blocks;
            earlier calls become hermes blocks in the assistant's turns, results <tool_response>
            blocks in a user turn.

engine.tool_parse reads the calls back out of the reply.
"""
from __future__ import annotations

import json

from engine.messages import ChatMessage, ToolCall

FORMATS = ("hermes", "qwen-xml", "glm", "llama3", "generic")

GENERIC_INSTRUCTIONS = """\
# Functions

You can call these functions (JSON schemas):
<tools>
{tools}
</tools>

To call one, answer with only a block like this, one block per call:
<tool_call>
{{"name": "<function name>", "arguments": {{<the arguments, a JSON object>}}}}
</tool_call>
Each result comes back in a <tool_response></tool_response> block. When no function is needed, answer normally."""


def tool_format(template: str | None) -> str:
    """The format a model with this chat template writes its calls in (one of FORMATS)."""
    t = template if isinstance(template, str) else ""     # (a damaged file's metadata may hold another type)
    if "tools" not in t:
        return "generic"
    if "<arg_key>" in t and "<tool_call>" in t:
        return "glm"
    if "<function=" in t and "<parameter=" in t and "<tool_call>" in t:
        return "qwen-xml"
    if "<tool_call>" in t:
        return "hermes"
    if "<|start_header_id|>" in t and '"parameters"' in t:
        return "llama3"
    return "generic"


def call_opening(fmt: str, name: str | None = None) -> str:
    """The text a forced call starts with; with `name`, that function's call up to its arguments.

    It is written after the generation prompt (engine: AddRequest.assistant_prefix), and the reply is parsed
    as if the model had written it."""
    if fmt == "qwen-xml":
        return "<tool_call>\n" + (f"<function={name}>\n" if name else "")
    if fmt == "glm":
        return "\n<tool_call>" + (f"{name}\n" if name else "")
    if fmt == "llama3":
        return '{"name": ' + (f'{json.dumps(name)}, "parameters": ' if name else "")
    return "<tool_call>\n" + (f'{{"name": {json.dumps(name)}, "arguments": ' if name else "")


def arguments_value(text: str):
    """Arguments as templates take them: the object the JSON text holds (the text itself if it is not one)."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, dict) else text


def hermes_block(call: ToolCall) -> str:
    args = arguments_value(call.arguments)
    args_text = json.dumps(args, ensure_ascii=False) if isinstance(args, dict) else call.arguments
    return f'<tool_call>\n{{"name": {json.dumps(call.name, ensure_ascii=False)}, "arguments": {args_text}}}\n</tool_call>'


def native_message(m: ChatMessage) -> dict:
    """A message as HF-style templates take it: keys only where set (Llama 3.1's tests `'tool_calls' in
    message`), each call's arguments as an object."""
    d = {"role": m.role, "content": m.content}
    if m.tool_calls:
        d["tool_calls"] = [{"id": c.id, "type": "function",
                            "function": {"name": c.name, "arguments": arguments_value(c.arguments)}}
                           for c in m.tool_calls]
    if m.reasoning:
        d["reasoning_content"] = m.reasoning
    if m.tool_call_id:
        d["tool_call_id"] = m.tool_call_id
    if m.name:
        d["name"] = m.name
    return d


def generic_messages(messages: list[ChatMessage], tools: list[dict]) -> list[dict]:
    """The conversation as plain turns: the functions in the system message (else before the first user
    message), calls as hermes blocks in the assistant's turn, a run of results as one user turn of
    <tool_response> blocks."""
    out: list[dict] = []
    for m in messages:
        if m.role == "tool":
            block = f"<tool_response>\n{m.content}\n</tool_response>"
            if out and out[-1].get("tool_results"):
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block, "tool_results": True})
        elif m.role == "assistant" and m.tool_calls:
            calls = "\n".join(hermes_block(c) for c in m.tool_calls)
            out.append({"role": "assistant", "content": f"{m.content}\n{calls}" if m.content else calls})
        else:
            out.append({"role": m.role, "content": m.content})
    for d in out:
        d.pop("tool_results", None)
    if tools:
        listing = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
        text = GENERIC_INSTRUCTIONS.format(tools=listing)
        first = next((d for d in out if d["role"] in ("system", "user")), None)
        if first is None:
            out.insert(0, {"role": "user", "content": text})
        elif first["role"] == "system":
            first["content"] = f"{first['content']}\n\n{text}" if first["content"] else text
        else:       # no system message: not one of ours either (some templates refuse the role)
            first["content"] = f"{text}\n\n{first['content']}"
    return out


def template_inputs(messages: list[ChatMessage], tools: list[dict], fmt: str) -> tuple[list[dict], list[dict] | None]:
    """(messages, tools) to render the chat template with: natively, or as text in the generic format
    (then the template gets no tools)."""
    if fmt == "generic":
        return generic_messages(messages, tools), None
    return [native_message(m) for m in messages], (tools or None)
