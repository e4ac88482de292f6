"""Request and response models of the OpenAI-compatible API.

The same pydantic models validate the requests (strict types: "0.5" is not a number) and make the
OpenAPI schema, so /openapi.json says what the server really takes and returns. Unknown fields
are ignored (agents send many); fields we cannot honour (n > 1, logprobs, the old `functions`) are refused
by the server with a 400 that names them.
"""
from __future__ import annotations

import random
from typing import Annotated, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from app.grammars import ANY_OBJECT, call_grammar, json_grammar
from engine.messages import ChatMessage, SamplingParams, ToolCall
from engine.tool_format import call_opening


NonEmptyStr = Annotated[str, Field(min_length=1)]
MAX_TOOLS = 128               # functions per request (OpenAI's limit)


class _Req(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


class _Resp(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- requests

class TextPart(_Req):
    type: Literal["text"]
    text: str


FunctionName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:-]{1,64}$")]


class FunctionDef(_Req):
    name: FunctionName
    description: str | None = None
    parameters: dict | None = Field(None, description="a JSON schema of the arguments object")
    strict: bool | None = Field(None, description="accepted; forced calls are held to the schema either way")


class ToolDef(_Req):
    type: Literal["function"]
    function: FunctionDef


class CalledFunction(_Req):
    name: FunctionName
    arguments: str = Field(..., description="JSON text")


class ToolCallIn(_Req):
    id: NonEmptyStr
    type: Literal["function"] = "function"
    function: CalledFunction


class NamedFunction(_Req):
    name: FunctionName


class NamedToolChoice(_Req):
    type: Literal["function"]
    function: NamedFunction


class ChatMessageIn(_Req):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = Field(
        None, description="A string, or a list of text parts (joined). Images are not supported.")
    name: str | None = None
    tool_calls: list[ToolCallIn] | None = Field(None, description="assistant: the calls it made")
    tool_call_id: str | None = Field(None, description="tool: the call this result answers")
    reasoning_content: str | None = Field(None, description="assistant: its reasoning (templates that show it)")


class StreamOptions(_Req):
    include_usage: bool = False


class StrataOptions(_Req):
    """Strata extension: per-request draft settings (None = the engine's setting)."""
    spec: int | None = Field(None, ge=1, le=64, description="window size: current token + up to spec-1 proposals")
    spec_min_p: float | None = Field(None, ge=0.0, le=1.0, description="drafter probability needed to chain")


class _Sampling(_Req):
    model: str | None = Field(None, description="Ignored: the server answers with the model it has loaded.")
    max_tokens: int | None = Field(None, ge=1, description="Default: until the context is full.")
    temperature: float | None = Field(None, ge=0.0, le=2.0, description="0 = greedy (the default is 1.0)")
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=0, description="0 = off")
    min_p: float | None = Field(None, ge=0.0, le=1.0)
    seed: int | None = Field(None, ge=-(2 ** 63), le=2 ** 64 - 1)
    stop: str | list[str] | None = Field(None, description="up to 16 strings; the stop text is not returned")
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    repetition_penalty: float | None = Field(None, gt=0.0, le=10.0)
    ignore_eos: bool = False
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1, le=1, description="only 1 is supported")
    logprobs: bool | int | None = Field(None, description="not supported: must be absent, null or false")
    user: str | None = None
    strata: StrataOptions | None = None


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessageIn] = Field(..., min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1, description="alias of max_tokens")
    tools: list[ToolDef] | None = Field(None, max_length=MAX_TOOLS, description="functions the model may call")
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = Field(
        None, description="default: auto when tools are given; required / a named function start the reply "
                          "with a call")
    parallel_tool_calls: bool | None = Field(None, description="false: at most one call in a reply")
    functions: list | None = Field(None, description="not supported (deprecated by OpenAI): use tools")
    reasoning_format: Literal["auto", "none"] = Field(
        "auto", description="auto: a thinking model's <think> text comes apart as reasoning_content; none: "
                            "left in the content")
    response_format: dict | None = Field(
        None, description='{"type": "text"} (the default), {"type": "json_object"}, or {"type": "json_schema", '
                          '"json_schema": {"name": ..., "schema": {...}}}: the reply is held to it token by token')


class CompletionRequest(_Sampling):
    prompt: NonEmptyStr | list[NonEmptyStr] | list[int] = Field(
        ..., description="a string (or a list of one), or token ids")
    echo: bool = False
    suffix: str | None = None
    best_of: int | None = Field(None, ge=1, le=1)


# ---------------------------------------------------------------- responses

class PromptTokensDetails(_Resp):
    cached_tokens: int = Field(0, description="prompt tokens reused from an earlier request's KV cache")


class Usage(_Resp):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails


class StrataTimings(_Resp):
    """Strata extension on non-streamed responses and on the usage chunk."""
    ttft_s: float
    prompt_s: float
    decode_s: float
    drafts_offered: int
    drafts_accepted: int
    windows: int
    slot: int


FinishReason = Literal["stop", "length", "tool_calls", "abort", "error"]


class CalledFunctionOut(_Resp):
    name: str
    arguments: str = Field(..., description="JSON text as the model wrote it: usually an object; check it")


class ToolCallOut(_Resp):
    id: str
    type: Literal["function"] = "function"
    function: CalledFunctionOut


class ToolCallDelta(ToolCallOut):
    """A streamed call, whole in one chunk."""
    index: int


class ChatMessageOut(_Resp):
    role: Literal["assistant"] = "assistant"
    content: str | None = Field(..., description="null when the reply is only calls")
    reasoning_content: str | None = Field(None, description="a thinking model's reasoning, when it wrote some")
    tool_calls: list[ToolCallOut] | None = None


class ChatChoice(_Resp):
    index: int
    message: ChatMessageOut
    finish_reason: FinishReason
    logprobs: None = None


class ChatCompletion(_Resp):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage
    system_fingerprint: str | None = None
    strata: StrataTimings | None = None


class ChatDelta(_Resp):
    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None


class ChatChunkChoice(_Resp):
    index: int
    delta: ChatDelta
    finish_reason: FinishReason | None = None
    logprobs: None = None


class ChatCompletionChunk(_Resp):
    """One `data:` event of a streamed chat completion; the stream ends with `data: [DONE]`."""
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChatChunkChoice]
    usage: Usage | None = None
    system_fingerprint: str | None = None
    strata: StrataTimings | None = None


class CompletionChoice(_Resp):
    index: int
    text: str
    finish_reason: FinishReason | None = None
    logprobs: None = None


class Completion(_Resp):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None = None
    system_fingerprint: str | None = None
    strata: StrataTimings | None = None


class ModelCard(_Resp):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "strata"
    meta: dict = Field(default_factory=dict, description="architecture, context, slots, stages")


class ModelList(_Resp):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ErrorBody(_Resp):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(_Resp):
    error: ErrorBody


class Health(_Resp):
    status: Literal["ok", "loading", "error"]
    message: str = ""
    model: str | None = None


class SlotView(_Resp):
    id: int
    group: int
    state: str
    request_id: str = ""
    prompt_read: int = 0
    prompt_total: int = 0
    generated: int = 0
    tok_s: float = 0.0
    position: int = 0
    drafts_offered: int = 0
    drafts_accepted: int = 0


class Slots(_Resp):
    slots: list[SlotView]
    queue_depth: int = Field(0, description="requests waiting in the engine for a slot")
    in_flight: int = Field(0, description="requests the HTTP server holds (running + waiting)")
    max_in_flight: int = Field(0, description="beyond this, new requests get 503")


# ---------------------------------------------------------------- requests -> engine

MAX_STOP = 16                 # stop strings per request
MAX_STOP_CHARS = 1000         # characters in one stop string


class Unsupported(ValueError):
    """A field that validated but cannot be honoured; the server answers 400 naming `param`."""

    def __init__(self, param: str, message: str):
        super().__init__(f"{param}: {message}")
        self.param = param


def sampling_params(req: _Sampling, ctx: int) -> SamplingParams:
    """The engine's sampling settings for a request (OpenAI defaults: temperature 1, random seed).
    `ctx` is the context each slot holds: the default max_tokens, and the most a request may ask for."""
    if req.logprobs:
        raise Unsupported("logprobs", "log probabilities are not supported")
    stop = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    if len(stop) > MAX_STOP:
        raise Unsupported("stop", f"at most {MAX_STOP} stop strings")
    if any(len(x) > MAX_STOP_CHARS for x in stop):
        raise Unsupported("stop", f"a stop string may have at most {MAX_STOP_CHARS} characters")
    asked = getattr(req, "max_completion_tokens", None) or req.max_tokens
    param = "max_completion_tokens" if getattr(req, "max_completion_tokens", None) else "max_tokens"
    if asked is not None and asked > ctx:
        raise Unsupported(param, f"{asked:,} is more than the context holds ({ctx:,} tokens, prompt included)")
    max_tokens = asked or ctx
    seed = random.getrandbits(63) if req.seed is None else req.seed % 2 ** 63
    s = req.strata or StrataOptions()
    return SamplingParams(
        temperature=1.0 if req.temperature is None else req.temperature,
        top_k=req.top_k or 0, top_p=1.0 if req.top_p is None else req.top_p, min_p=req.min_p or 0.0,
        repetition_penalty=req.repetition_penalty or 1.0, presence_penalty=req.presence_penalty or 0.0,
        frequency_penalty=req.frequency_penalty or 0.0, seed=seed, max_tokens=max_tokens,
        stop=[x for x in stop if x], ignore_eos=req.ignore_eos, spec=s.spec, spec_min_p=s.spec_min_p)


def chat_messages(req: ChatCompletionRequest) -> list[ChatMessage]:
    if req.functions:
        raise Unsupported("functions", "the deprecated functions field is not supported: send tools")
    out, called = [], {}
    for m in req.messages:
        text = m.content if isinstance(m.content, str) else "".join(p.text for p in m.content or [])
        calls = [ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments) for c in m.tool_calls or []]
        called.update((c.id, c.name) for c in calls)
        name = m.name or called.get(m.tool_call_id or "", "") if m.role == "tool" else ""
        out.append(ChatMessage(role="system" if m.role == "developer" else m.role, content=text,
                               tool_calls=calls, tool_call_id=m.tool_call_id or "", name=name,
                               reasoning=m.reasoning_content or "" if m.role == "assistant" else ""))
    return out


class ToolPlan(NamedTuple):
    """What a chat request asks of function calling and of its output's form: the engine's AddRequest fields,
    the grammar the reply is held to, and how to read the reply."""
    fields: dict               # tools, assistant_prefix, enable_thinking (empty: no functions offered)
    parse: bool                # read calls out of the reply
    single: bool               # at most one call (parallel_tool_calls false)
    grammar: str = ""          # SamplingParams.grammar (app.grammars)


def output_grammar(req: ChatCompletionRequest) -> str:
    """The grammar response_format asks for ("" for text)."""
    rf = req.response_format or {}
    kind = rf.get("type", "text")
    if kind == "text":
        return ""
    if kind == "json_object":
        return json_grammar(ANY_OBJECT)
    if kind != "json_schema":
        raise Unsupported("response_format.type", "must be text, json_object or json_schema")
    spec = rf.get("json_schema")
    schema = spec.get("schema", ANY_OBJECT) if isinstance(spec, dict) else None
    if not isinstance(schema, dict):
        raise Unsupported("response_format.json_schema", 'must be an object whose "schema" is a JSON schema')
    return json_grammar(schema)


def tool_plan(req: ChatCompletionRequest, fmt: str) -> ToolPlan:
    """Function calling for `req` on a model whose calls are written in `fmt` (engine.tool_format)."""
    tools = [t.model_dump(exclude_none=True) for t in req.tools or []]
    names = [t["function"]["name"] for t in tools]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise Unsupported("tools", f"two functions are named {dup!r}")
    choice = req.tool_choice or ("auto" if tools else "none")
    if choice != "none" and not tools:
        raise Unsupported("tool_choice", "a tool_choice other than none needs tools")
    if isinstance(choice, NamedToolChoice) and choice.function.name not in names:
        raise Unsupported("tool_choice", f"no function named {choice.function.name!r} is in tools")
    shape = output_grammar(req)
    if choice == "none" or (shape and choice == "auto"):   # a reply held to JSON writes no call: none offered
        return ToolPlan({"enable_thinking": False} if shape else {}, False, False, shape)
    if shape:
        raise Unsupported("response_format", "a JSON response_format cannot go with a tool_choice that forces a call")
    fields = {"tools": tools}
    if choice != "auto":
        name = choice.function.name if isinstance(choice, NamedToolChoice) else None
        fields["assistant_prefix"] = call_opening(fmt, name)
        fields["enable_thinking"] = False
        return ToolPlan(fields, True, req.parallel_tool_calls is False, call_grammar(fmt, tools, name))
    return ToolPlan(fields, True, req.parallel_tool_calls is False)


def reasoning_start(req: ChatCompletionRequest, mode: str, plan: ToolPlan) -> bool | None:
    """None: the reply's reasoning stays in its text (a model that writes none, or reasoning_format none);
    else whether the reply starts inside it (engine.reasoning's "open" mode, unless a forced call turned the
    thinking off)."""
    if not mode or req.reasoning_format == "none":
        return None
    return mode == "open" and plan.fields.get("enable_thinking") is not False


def completion_prompt(req: CompletionRequest) -> dict:
    """AddRequest fields for a completion prompt: {"prompt": str} or {"token_ids": [...]}."""
    if req.echo:
        raise Unsupported("echo", "echo is not supported")
    if req.suffix:
        raise Unsupported("suffix", "suffix (fill-in-the-middle) is not supported")
    p = req.prompt
    if isinstance(p, str):
        return {"prompt": p}
    if not p:
        raise Unsupported("prompt", "must not be empty")
    if all(isinstance(x, str) for x in p):
        if len(p) != 1:
            raise Unsupported("prompt", "only one prompt per request is supported")
        return {"prompt": p[0]}
    if any(x < 0 for x in p):
        raise Unsupported("prompt", "token ids must not be negative")
    return {"token_ids": list(p)}
