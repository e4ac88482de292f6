"""Sequence: one request's tokens, stop conditions, streamed text and figures."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from engine.messages import SamplingParams


@dataclass
class SeqStats:
    t_arrive: float = field(default_factory=time.monotonic)
    t_start: float = 0.0
    t_first: float = 0.0
    t_done: float = 0.0
    cached: int = 0
    windows: int = 0
    drafts_offered: int = 0
    drafts_accepted: int = 0


class Sequence:
    def __init__(self, request_id: str, prompt: list[int], params: SamplingParams, eos_ids: set[int],
                 decoder, ctx: int, return_logits: bool = False):
        self.request_id, self.params = request_id, params
        self.prompt_len = len(prompt)
        self.tokens: list[int] = list(prompt)      # prompt + generated; tokens[-1] is the current token
        self.eos_ids = set() if params.ignore_eos else set(eos_ids)
        self.decoder = decoder                     # StreamDecoder or None
        self.ctx = ctx
        self.text = ""                             # all decoded text so far
        self.sent = 0                              # characters of `text` already streamed
        self.finish_reason = ""
        self.stats = SeqStats()
        self.cancelled = False
        self.error = ""
        self._hold = max((len(s) for s in params.stop), default=0)
        self.logits: list[bytes] | None = [] if return_logits else None   # pick row of each emitted token
        self.constraint = None                     # engine.grammar.Constraint of a request with a grammar

    def keep_logits(self, rows, n: int) -> None:
        """With return_logits: keep the float32 pick rows of the n tokens just emitted (exact bytes)."""
        if self.logits is not None:
            self.logits += [r.numpy().tobytes() for r in rows[:n]]

    @property
    def generated(self) -> list[int]:
        return self.tokens[self.prompt_len:]

    @property
    def n_generated(self) -> int:
        return len(self.tokens) - self.prompt_len

    @property
    def finished(self) -> bool:
        return bool(self.finish_reason)

    def room(self) -> int:
        """How many more tokens this sequence may still emit."""
        return max(0, min(self.params.max_tokens - self.n_generated, self.ctx - len(self.tokens)))

    def accept(self, new: list[int]) -> list[int]:
        """Append the target's picks in order until a stop condition; returns the tokens taken."""
        taken = []
        for t in new:
            if self.finished:
                break
            if t in self.eos_ids:
                self.finish_reason = "stop"
                break
            self.tokens.append(t)
            taken.append(t)
            if self.decoder is not None:
                self.text += self.decoder.push(t)
                if self._check_stop():
                    break
            if self.n_generated >= self.params.max_tokens or len(self.tokens) >= self.ctx:
                self.finish_reason = "length"
        if taken and not self.stats.t_first:
            self.stats.t_first = time.monotonic()
        return taken

    def _check_stop(self) -> bool:
        tail_from = max(0, self.sent - self._hold)
        for s in self.params.stop:
            i = self.text.find(s, tail_from)
            if s and i >= 0:
                self.text = self.text[:i]
                self.finish_reason = "stop"
                return True
        return False

    def take_text(self) -> str:
        """Text ready to stream: all of it once finished, else all but a possible stop-string prefix."""
        end = len(self.text) if self.finished or not self._hold else max(self.sent, len(self.text) - self._hold + 1)
        out = self.text[self.sent:end]
        self.sent = end
        return out
