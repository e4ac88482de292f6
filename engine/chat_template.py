"""Chat templates: a conversation -> the prompt text a model expects.

A GGUF file may carry a Jinja2 template in `tokenizer.chat_template` (the same text as a HF
tokenizer_config.json). It is rendered the way HF transformers renders it: in an
ImmutableSandboxedEnvironment (here with bounded `*` and `**` and output: see TemplateSandbox) with trim_blocks, lstrip_blocks and loop controls, with the helpers
`raise_exception(message)` and `strftime_now(format)`, a `tojson` filter that keeps non-ASCII text,
and the variables `messages`, `add_generation_prompt`, `bos_token` and `eos_token`.

A model without a template (a base model such as Gemma 3 270M) gets PLAIN_CHAT_TEMPLATE: one line
per message, the role capitalised, then the open assistant line for the model to continue:

    System: You are terse.
    User: Hi!
    Assistant: Hello.
    User: Name a colour.
    Assistant:

No BOS is written by the fallback; the tokenizer adds it where the model's add_bos rule says so.
"""
from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache

import jinja2
import jinja2.ext
import jinja2.sandbox
from jinja2.sandbox import ImmutableSandboxedEnvironment

from engine.errors import RequestError

PLAIN_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ message['role'] | capitalize }}: {{ message['content'] }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}Assistant:{% endif %}"
)


MAX_OUTPUT_CHARS = 16 << 20     # a rendered prompt longer than this is refused (no context holds it)
MAX_REPEAT = 1 << 20            # `'x' * n` and `[..] * n` in a template: at most this many items
MAX_POWER_BITS = 1 << 16        # `a ** b` on integers in a template: a result of at most this many bits


def render_chat(template: str | None, messages: list[dict], bos_token: str | None,
                eos_token: str | None, add_generation_prompt: bool = True, tools: list[dict] | None = None,
                enable_thinking: bool | None = None) -> str:
    """The prompt text for `messages` under `template` (None: PLAIN_CHAT_TEMPLATE).

    `tools` (the functions the model may call, as OpenAI lists them) and `enable_thinking` are passed as
    those variables when given, left undefined when None, as transformers does.

    The template comes from the model file, so it is untrusted: it runs sandboxed (no attribute access
    to Python internals, no mutation of the messages, bounded repetition, powers and output). Raises
    RequestError when the template rejects the conversation, cannot be compiled, breaks a sandbox rule
    or fails in any other way.
    """
    extra = {k: v for k, v in (("tools", tools), ("enable_thinking", enable_thinking)) if v is not None}
    try:
        out, n = [], 0
        for piece in compile_template(template or PLAIN_CHAT_TEMPLATE).generate(
                messages=[with_text_content(m) for m in messages],
                add_generation_prompt=add_generation_prompt,
                bos_token=bos_token or "",
                eos_token=eos_token or "", **extra):
            n += len(piece)
            if n > MAX_OUTPUT_CHARS:
                raise RequestError(f"chat template: the rendered prompt is over {MAX_OUTPUT_CHARS:,} characters")
            out.append(piece)
        return "".join(out)
    except RequestError:
        raise
    except jinja2.TemplateError as e:
        raise RequestError(f"chat template: {e}") from e
    except Exception as e:  # noqa: BLE001 - the file's template failed (1/0, a type error, a sandbox limit)
        raise RequestError(f"chat template: {type(e).__name__}: {e}") from e


class TemplateSandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox, plus bounds on the two operators that can exhaust memory or time."""
    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context, operator, left, right):
        if operator == "*":
            seq, n = (left, right) if isinstance(right, int) else (right, left)
            if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * max(n, 0) > MAX_REPEAT:
                raise jinja2.sandbox.SecurityError(f"repetition to more than {MAX_REPEAT:,} items is not allowed")
        elif operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
            if max(abs(left).bit_length(), 1) * right > MAX_POWER_BITS:       # (2 ** 256) ** 256 ** ...
                raise jinja2.sandbox.SecurityError(f"powers above 2 ** {MAX_POWER_BITS} are not allowed")
        return super().call_binop(context, operator, left, right)


@lru_cache(maxsize=8)
def compile_template(template: str) -> jinja2.Template:
    env = TemplateSandbox(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(template)


def with_text_content(message: dict) -> dict:
    """OpenAI-style content parts that are all text become one string, as templates expect."""
    content = message.get("content")
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return {**message, "content": "".join(p.get("text", "") for p in content)}
    return message


def raise_exception(message: str):
    raise jinja2.TemplateError(message)


def strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)
