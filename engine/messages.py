"""Message types shared by the engine, its clients (app, HTTP server) and the GUI.

This module must stay light: msgspec only, no torch, no Qt. `ui/` may import it (and nothing else
from `engine`). Every message is a tagged msgspec Struct, so one msgpack decoder reads them all.
Counters in Telemetry are monotonic totals: a dropped message loses nothing.
"""
from __future__ import annotations

import os

import msgspec

PROTOCOL_VERSION = 1


class Msg(msgspec.Struct, tag=True, omit_defaults=True, kw_only=True):
    pass


# ---------------------------------------------------------------- configuration

class EngineConfig(msgspec.Struct, omit_defaults=True, kw_only=True):
    """What the user asks for. The engine answers with EffectiveConfig (what it really runs)."""
    model: str = "default"                 # path, or "default" (bundled SmolLM2), or "gemma"
    devices: str = "cpu"                   # "cpu" | "cpu,cpu" | "cuda:0,cuda:1"
    layer_split: str = "auto"              # "auto" or "K1,K2,..." = first layer of each next stage
    parallel: int = 1                      # request slots
    batch_groups: str = "auto"             # "auto" or an integer that divides parallel
    ctx: int = 2048                        # context length per slot
    draft: str = "mtp"                     # "mtp" | "lookup" | "both" | "replay" (benchmarks: engine.drafts)
    spec: int = 1                          # window size: current token + up to spec-1 proposals
    spec_min_p: float = 0.0
    piped_mtp: int = 0                     # draft depth inside pipelined groups (0 = off)
    dtype: str = "auto"                    # "auto" | "float32" | "bfloat16"
    decode_kernel: str = "auto"            # GPU decode rows: "auto" | "q4k-mma" | "dp4a" | "imma" | "bf16"


class StageInfo(msgspec.Struct, omit_defaults=True, kw_only=True):
    index: int
    device: str
    first_layer: int
    end_layer: int                          # exclusive
    weight_bytes: int = 0
    kv_bytes: int = 0
    has_head: bool = False


class EffectiveConfig(msgspec.Struct, omit_defaults=True, kw_only=True):
    model_path: str
    model_name: str
    arch: str
    n_layers: int
    stages: list[StageInfo]
    parallel: int
    groups: list[list[int]]                # slot indices per group
    ctx: int
    dtype: str
    draft: str
    spec: int
    spec_min_p: float
    piped_mtp: int
    mtp_layers: int = 0
    mtp_file: str = ""                     # where the MTP layer came from when not the model's own file
    decode_kernel: str = ""                # the GPU stages' decode-row matmul ("" without a GPU stage)
    weights: str = ""                      # what the stages keep of each matrix (CPU fast / reference mode)
    fallbacks: list[str] = []              # one line per fallback, saying why


class ModelInfo(msgspec.Struct, omit_defaults=True, kw_only=True):
    path: str
    name: str
    arch: str
    n_layers: int
    n_embd: int
    n_heads: int
    n_kv_heads: int
    vocab_size: int
    context_length: int
    quant_types: dict[str, int] = {}       # type name -> tensor count
    file_bytes: int = 0
    layer_bytes: list[int] = []
    mtp_layers: int = 0
    mtp_file: str = ""                     # a file without one: the MTP layer trained for it (drafts load it)
    mtp_note: str = ""                     # ... or why the one beside it is not used
    has_chat_template: bool = False
    tool_format: str = "generic"           # how its calls to functions are written (engine.tool_format)
    reasoning: str = ""                    # "" | "tagged" | "open": how it writes its thinking (engine.reasoning)
    tokenizer: str = ""
    quant_weights: dict[str, int] = {}     # type name -> weight values stored in it, most first
    bits_per_weight: float = 0.0           # tensor bytes * 8 / values, over every tensor
    unsupported: str = ""                  # one line naming a tensor whose type the engine cannot decode

    def mtp_text(self) -> str:
        """What drafts would run on: the file's MTP layers, or a trained one beside it / shipped, or none."""
        if self.mtp_file:
            return f"1 trained for this file, in {os.path.basename(self.mtp_file)}"
        if self.mtp_layers:
            return f"{self.mtp_layers} in the file"
        return self.mtp_note or "none (MTP drafts unavailable; lookup drafts still work)"

    def quant_mix(self) -> str:
        """e.g. 'IQ3_S 78% · Q6_K 17% · Q4_K 5.1% · F32 0.027%, 3.62 bits/weight' ('' if unknown)."""
        return format_quant_mix(self.quant_weights, self.bits_per_weight) if self.quant_weights else ""


def format_quant_mix(weights: dict[str, int], bits_per_weight: float) -> str:
    """Share of the weight values in each tensor type (most first) and the bits per weight."""
    total = sum(weights.values()) or 1

    def share(n: int) -> str:
        p = 100 * n / total
        return f"{p:.0f}%" if p >= 9.95 else f"{p:.1f}%" if p >= 0.995 else f"{p:.2g}%" if p >= 0.01 else "<0.01%"

    parts = [f"{name} {share(n)}" for name, n in sorted(weights.items(), key=lambda kv: -kv[1])]
    return " · ".join(parts) + f", {bits_per_weight:.2f} bits/weight"


# ---------------------------------------------------------------- requests

class SamplingParams(msgspec.Struct, omit_defaults=True, kw_only=True):
    temperature: float = 0.0               # 0 = greedy
    top_k: int = 0                         # 0 = off
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int = 0
    max_tokens: int = 256
    stop: list[str] = []
    ignore_eos: bool = False
    grammar: str = ""                      # constrained output: llguidance Lark (engine.grammar; "" = free)
    # per-request draft overrides (None = engine setting)
    spec: int | None = None
    spec_min_p: float | None = None
    # the "replay" draft source (benchmarks): the tokens this request produced in an earlier run; each
    # proposal is the next of them with probability replay_accept (drawn by position), else a wrong token
    replay: list[int] = []
    replay_accept: float = 1.0


class ToolCall(msgspec.Struct, omit_defaults=True, kw_only=True):
    """A function call the assistant made (OpenAI's tool_calls[i]): `arguments` is JSON text as the model wrote
    it (usually an object; not guaranteed to parse)."""
    id: str
    name: str
    arguments: str = "{}"


class ChatMessage(msgspec.Struct, omit_defaults=True, kw_only=True):
    role: str                              # "system" | "user" | "assistant" | "tool"
    content: str
    tool_calls: list[ToolCall] = []        # assistant: the calls it made
    tool_call_id: str = ""                 # tool: the call this message answers
    name: str = ""                         # tool: the function's name (some templates show it)
    reasoning: str = ""                    # assistant: its <think> text, given apart (templates that show it)


# ---------------------------------------------------------------- client -> engine

class Hello(Msg):
    protocol: int = PROTOCOL_VERSION
    secret: str = ""
    client: str = ""


class LoadModel(Msg):
    config: EngineConfig


class AddRequest(Msg):
    request_id: str
    prompt: str | None = None              # raw text (tokenized with the model's BOS rule)
    messages: list[ChatMessage] | None = None  # rendered with the model's chat template
    token_ids: list[int] | None = None
    sampling: SamplingParams = msgspec.field(default_factory=SamplingParams)
    return_logits: bool = False            # RequestDone.logits: the pick row of every emitted token
    # chat only: functions the model may call (OpenAI `tools` entries, JSON schemas; engine.tool_format renders
    # them), text the assistant's turn starts with (a forced call's opening), and the template's
    # `enable_thinking` (None: leave it undefined)
    tools: list[dict] = []
    assistant_prefix: str = ""
    enable_thinking: bool | None = None


class Abort(Msg):
    request_id: str


class Configure(Msg):
    """Settings that need no reload."""
    spec: int | None = None
    spec_min_p: float | None = None
    piped_mtp: int | None = None
    draft: str | None = None


class Shutdown(Msg):
    pass


class Ping(Msg):
    nonce: int = 0


class MeasureWindows(Msg):
    """Time decode windows of these row counts on the scratch slot, by part (engine.window_cost), while no
    request runs: answered by WindowCosts."""
    rows: list[int]
    nonce: int = 0


# ---------------------------------------------------------------- engine -> client

class HelloReply(Msg):
    protocol: int = PROTOCOL_VERSION
    engine_version: str = ""
    capabilities: list[str] = []
    pid: int = 0


class LoadProgress(Msg):
    fraction: float                        # 0..1
    message: str = ""


class Ready(Msg):
    config: EffectiveConfig
    model: ModelInfo
    load_seconds: float = 0.0


class TokenDelta(Msg):
    request_id: str
    token_ids: list[int]
    text: str                              # decoded text for these tokens (may be "" mid-UTF-8)


class PromptProgress(Msg):
    request_id: str
    read: int
    total: int
    cached: int = 0                        # tokens reused from an earlier turn


class RequestDone(Msg):
    request_id: str
    finish_reason: str                     # "stop" | "length" | "abort" | "error"
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    ttft_s: float = 0.0                    # time to first token
    prompt_s: float = 0.0
    decode_s: float = 0.0
    drafts_offered: int = 0
    drafts_accepted: int = 0
    windows: int = 0
    slot: int = -1
    error: str = ""
    logits: list[bytes] = []               # with return_logits: per emitted token, its pick row (float32 LE)


class ErrorReply(Msg):
    kind: str                              # "model_file" | "config" | "oom" | "request" | "protocol" | "internal"
    message: str
    request_id: str = ""


class Pong(Msg):
    nonce: int = 0


class WindowCosts(Msg):
    """Milliseconds a decode window of each row count takes, cumulatively by part: the stages' layers (on a
    GPU's last stage the head runs inside its graph), + the picks to the host, + the drafter (its layer over
    the rows and chains of `depth` from one row in depth + 1; empty without an MTP drafter)."""
    nonce: int = 0
    rows: list[int] = []
    trunk_ms: list[float] = []
    pick_ms: list[float] = []
    draft_ms: list[float] = []
    depth: int = 0
    error: str = ""                        # why nothing was measured (a request running, no model)


class SlotState(msgspec.Struct, omit_defaults=True, kw_only=True):
    slot: int
    group: int
    state: str                             # "idle" | "reading" | "decoding"
    request_id: str = ""
    prompt_read: int = 0
    prompt_total: int = 0
    generated: int = 0
    tok_s: float = 0.0
    position: int = 0
    drafts_offered: int = 0                # this request's drafts so far
    drafts_accepted: int = 0


class DeviceMemory(msgspec.Struct, omit_defaults=True, kw_only=True):
    device: str
    name: str = ""
    used_bytes: int = 0
    total_bytes: int = 0


class Telemetry(Msg):
    t: float                               # engine monotonic time, seconds
    state: str = "idle"                    # "loading" | "idle" | "busy"
    stage_busy: list[float] = []           # per stage, fraction of the last second (0..1)
    stage_busy_s_total: list[float] = []   # per stage, monotonic busy seconds
    tok_s: float = 0.0                     # decode tok/s over the last second, all slots
    prompt_tok_s: float = 0.0
    tokens_total: int = 0                  # monotonic: tokens emitted
    prompt_tokens_total: int = 0
    requests_total: int = 0
    windows_total: int = 0
    drafts_offered_total: int = 0
    drafts_accepted_total: int = 0
    drafts_offered_by_pos: list[int] = []  # monotonic, index i = draft position i+1
    drafts_accepted_by_pos: list[int] = []
    tokens_per_window: float = 0.0         # over the last second, per slot-window
    rows_per_window: float = 0.0           # over the last second, rows each window carried
    rows_total: int = 0                    # monotonic: rows run through the stages
    chained_total: int = 0                 # monotonic: chained windows launched before their feeding one ended
    chained_late_total: int = 0            # monotonic: chained windows launched after it had ended
    drafts_paused_total: int = 0           # monotonic: windows run without drafts while they were on
    draft_guard: str = ""                  # what engine.draft_guard decided and why ('' : nothing yet)
    slots: list[SlotState] = []
    queue_depth: int = 0
    memory: list[DeviceMemory] = []


EngineIn = Hello | LoadModel | AddRequest | Abort | Configure | Shutdown | Ping | MeasureWindows
EngineOut = (HelloReply | LoadProgress | Ready | TokenDelta | PromptProgress | RequestDone
             | ErrorReply | Pong | Telemetry | WindowCosts)

_enc = msgspec.msgpack.Encoder()
_dec_in = msgspec.msgpack.Decoder(EngineIn)
_dec_out = msgspec.msgpack.Decoder(EngineOut)


def encode(msg: Msg) -> bytes:
    return _enc.encode(msg)


def decode_in(data: bytes) -> EngineIn:
    return _dec_in.decode(data)


def decode_out(data: bytes) -> EngineOut:
    return _dec_out.decode(data)
