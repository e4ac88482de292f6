"""Constrained decoding: a request's grammar as a mask over the vocabulary at each of its picks.

A grammar is llguidance's Lark dialect (JSON schemas inside it as `%json {...}`); app.grammars writes them for
response_format and for forced function calls. The matcher follows the sequence's tokens: at a window's pick
rows it masks each row's logits, then takes the pick, and goes on to the next row only while the pick equals
that row's proposal, so row i sees what it would have seen had the proposals before it been accepted one by
one, and the matcher ends where the sequence does (its kept tokens). Once the grammar is complete only the end
of turn is allowed; with ignore_eos the picks go free after it.
"""
from __future__ import annotations

import numpy as np
import torch

from engine.errors import RequestError


def _llguidance():
    try:
        import llguidance
    except ImportError as e:       # a build without it (the GPU machine's image): only constrained requests fail
        raise RequestError("constrained output needs the llguidance package, which is not installed") from e
    return llguidance


class Constraint:
    """One sequence's grammar matcher over a vocabulary of `n_vocab` tokens."""

    def __init__(self, matcher, n_vocab: int):
        self._m, self.n_vocab = matcher, n_vocab
        self._ended = False

    @property
    def free(self) -> bool:
        """Nothing is constrained any more: a token was taken after the grammar's end (its end of turn, or with
        ignore_eos whatever came), or the matcher failed."""
        return self._ended or self._m.is_error()

    def allowed(self) -> np.ndarray:
        """The tokens the grammar allows next: bool [n_vocab]."""
        bits = np.frombuffer(self._m.compute_bitmask(), dtype=np.uint8)
        return np.unpackbits(bits, bitorder="little")[:self.n_vocab].astype(bool)

    def mask(self, logits: torch.Tensor) -> torch.Tensor:
        """`logits` [V] with every token the grammar does not allow at -inf (V may exceed the vocabulary)."""
        if self.free:
            return logits
        ok = torch.zeros(logits.shape[0], dtype=torch.bool)
        ok[:self.n_vocab] = torch.from_numpy(self.allowed())
        return logits.masked_fill(~ok, float("-inf"))

    def consume(self, token: int) -> None:
        if self.free:
            return
        if self._m.is_stopped():        # complete: its mask allowed only the end of turn
            self._ended = True
        else:
            self._m.consume_token(token)


def grammar_tokenizer(tok):
    """llguidance's view of a Tokenizer's vocabulary (built once per tokenizer, about half a second)."""
    lt = getattr(tok, "_llguidance", None)
    if lt is None:
        lt = _llguidance().LLTokenizer(tok.backend_json(), n_vocab=tok.vocab_size,
                                       eos_token=sorted(tok.eos_ids) or None)
        tok._llguidance = lt
    return lt


def constraint(tok, grammar: str) -> Constraint:
    """The matcher of `grammar` over `tok`'s vocabulary; RequestError naming the problem if it is not one."""
    m = _llguidance().LLMatcher(grammar_tokenizer(tok), grammar)      # (compiles it once; says what is wrong)
    if m.is_error():
        raise RequestError(f"grammar: {m.get_error().strip()}")
    return Constraint(m, tok.vocab_size)
