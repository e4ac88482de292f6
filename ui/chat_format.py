"""Text for the chat view (no Qt): Markdown to Qt rich text, the stats line, the config summary."""
from __future__ import annotations

import html
import os
import re

import markdown
import msgspec

from engine.messages import EffectiveConfig, RequestDone

try:  # code highlighting when Pygments is there; plain code blocks otherwise
    import pygments  # noqa: F401
    _EXT = ["fenced_code", "tables", "sane_lists", "nl2br", "codehilite"]
    _HL = True
except ImportError:
    _EXT, _HL = ["fenced_code", "tables", "sane_lists", "nl2br"], False

_FENCE = re.compile(r"^\s*(```|~~~)", re.M)


def _md(dark: bool) -> markdown.Markdown:
    cfg = {"codehilite": {"noclasses": True, "guess_lang": False, "css_class": "hl",
                          "pygments_style": "monokai" if dark else "default"}} if _HL else {}
    md = markdown.Markdown(extensions=_EXT, extension_configs=cfg, output_format="html")
    # Model output is text, not markup: raw HTML (e.g. "<think>") is shown, not interpreted.
    md.preprocessors.deregister("html_block")
    md.inlinePatterns.deregister("html")
    return md


_MD = {False: _md(False), True: _md(True)}


def split_thinking(text: str) -> tuple[str | None, str]:
    """(the reasoning, the answer) of a thinking model's reply: what its opening <think> holds (all of it while
    the </think> has not come), or what comes before a </think> where the prompt opened the thinking (Qwen
    3.5); None and the text for a reply without one."""
    head = text.lstrip()
    if head.startswith("<think>"):
        reasoning, sep, answer = head[len("<think>"):].partition("</think>")
        return reasoning.strip(), answer.lstrip()
    reasoning, sep, answer = text.partition("</think>")
    if sep and "<think>" not in reasoning:
        return reasoning.strip(), answer.lstrip()
    return None, text


def render_markdown(text: str, code_bg: str = "#f0f2f5", streaming: bool = False, dark: bool = False,
                    muted: str = "#68717c") -> str:
    """Qt rich text for a message: a thinking model's reasoning first, as a muted block ("Thinking…" until
    it ends), then the answer as Markdown. While streaming, an unclosed code fence is closed so it renders."""
    reasoning, text = split_thinking(text)
    thinking = ""
    if reasoning is not None:
        label = "Thinking…" if streaming and not text else "Reasoning"
        thinking = (f'<table width="100%" cellpadding="6" bgcolor="{code_bg}"><tr><td><span style="color:{muted}">'
                    f"<i>{label}</i><br>{plain_html(reasoning)}</span></td></tr></table>")
    return thinking + _answer_html(text, code_bg, streaming, dark)


def _answer_html(text: str, code_bg: str, streaming: bool, dark: bool) -> str:
    if streaming and len(_FENCE.findall(text)) % 2 == 1:
        text += "\n```"
    md = _MD[dark]
    md.reset()
    body = md.convert(text)
    # Qt's rich text honours table backgrounds reliably; wrap code blocks in a one-cell table.
    body = re.sub(r'<div class="hl"[^>]*>', "", body)
    body = re.sub(r"<pre[^>]*>", f'<table width="100%" cellpadding="8" bgcolor="{code_bg}"><tr><td><pre '
                  'style="white-space: pre-wrap; font-family: monospace;">', body)
    body = body.replace("</pre></div>", "</pre>").replace("</pre>", "</pre></td></tr></table>")
    body = re.sub(r"<code>", '<code style="font-family: monospace;">', body)
    return body


def plain_html(text: str) -> str:
    return html.escape(text).replace("\n", "<br>")


# ---------------------------------------------------------------- stats

def stats_from_done(done: RequestDone) -> dict:
    d = msgspec.structs.asdict(done)
    d.pop("request_id", None)
    d["tok_s"] = done.completion_tokens / done.decode_s if done.decode_s > 0 else 0.0
    return d


def config_summary(cfg: EffectiveConfig | None) -> dict:
    return msgspec.to_builtins(cfg) if cfg is not None else {}


def _stages_text(stages: list) -> str:
    parts = []
    for s in stages:
        parts.append(f"{s.get('device', '?')} L{s.get('first_layer', 0)}–{s.get('end_layer', 1) - 1}")
    return " | ".join(parts)


def describe_config(cfg: dict) -> str:
    """One line naming the effective configuration a reply ran with."""
    if not cfg:
        return ""
    parts = []
    path = str(cfg.get("model_path") or "")
    name = os.path.basename(path).removesuffix(".gguf") if path else str(cfg.get("model_name") or "")
    if name:
        parts.append(name)
    if cfg.get("stages"):
        parts.append(_stages_text(cfg["stages"]))
    n_slots, groups = cfg.get("parallel", 1), cfg.get("groups") or []
    parts.append(f"{n_slots} slot{'s' if n_slots != 1 else ''} / {max(len(groups), 1)} "
                 f"group{'s' if len(groups) > 1 else ''}")
    draft = cfg.get("draft", "mtp")
    spec, piped = cfg.get("spec", 1), cfg.get("piped_mtp", 0)
    if spec > 1 or piped:
        d = f"{draft} spec {spec}"
        if piped:
            d += f", piped {piped}"
        if cfg.get("spec_min_p"):
            d += f", min-p {cfg['spec_min_p']:g}"
        parts.append(d)
    else:
        parts.append("no drafts")
    if cfg.get("ctx"):
        parts.append(f"ctx {cfg['ctx']}")
    if cfg.get("dtype"):
        parts.append(str(cfg["dtype"]))
    return " · ".join(parts)


def format_stats(stats: dict, cfg: dict | None = None) -> str:
    """'42 tokens · TTFT 0.12 s · 35.1 tok/s · drafts 10/14 accepted (71%) · <config>'."""
    if not stats:
        return describe_config(cfg or {})
    n = int(stats.get("completion_tokens", 0))
    parts = [f"{n} token{'s' if n != 1 else ''}"]
    if stats.get("ttft_s"):
        parts.append(f"TTFT {stats['ttft_s']:.2f} s")
    tok_s = stats.get("tok_s") or (n / stats["decode_s"] if stats.get("decode_s") else 0.0)
    if tok_s:
        parts.append(f"{tok_s:.1f} tok/s")
    off, acc = int(stats.get("drafts_offered", 0)), int(stats.get("drafts_accepted", 0))
    parts.append(f"drafts {acc}/{off} accepted ({acc / off:.0%})" if off else "drafts 0/0")
    if stats.get("prompt_tokens"):
        cached = stats.get("cached_tokens", 0)
        parts.append(f"prompt {stats['prompt_tokens']}" + (f" ({cached} cached)" if cached else ""))
    reason = stats.get("finish_reason")
    if reason and reason not in ("stop",):
        parts.append({"length": "stopped at max tokens", "abort": "stopped"}.get(reason, reason))
    line = " · ".join(parts)
    desc = describe_config(cfg or {})
    return f"{line}  —  {desc}" if desc else line
