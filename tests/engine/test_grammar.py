"""Constrained decoding (engine.grammar) on the bundled model's vocabulary: every pick the grammar allows, a
finished grammar leaving only the end of turn, and a window's rows picked as if its proposals had been
accepted one by one (the drafts' invariant), the matcher ending where the kept tokens do."""
from __future__ import annotations

import json

import pytest
import torch

from app.grammars import call_grammar, closed, json_grammar
from engine.errors import RequestError
from engine.gguf_file import read_gguf
from engine.messages import SamplingParams
from engine.model_files import default_model_path
from engine.sampling import argmax_pick, host_picks, pick_rows
from engine.tokenizer import Tokenizer

pytest.importorskip("llguidance")
from engine.grammar import constraint  # noqa: E402

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99},
                                           "ok": {"type": "boolean"}, "tag": {"enum": ["a", "bb"]}},
          "required": ["n", "ok", "tag"], "additionalProperties": False}


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return Tokenizer.from_gguf(read_gguf(default_model_path()), cache_dir=tmp_path_factory.mktemp("tokenizers"))


def walk(tok, grammar: str, seed: int, temperature: float, steps: int = 400) -> list[int]:
    """Picks on random logits under the grammar until an end of turn."""
    c, g = constraint(tok, grammar), torch.Generator().manual_seed(seed)
    p = SamplingParams(temperature=temperature, seed=seed, grammar=grammar)
    out = []
    for pos in range(steps):
        logits = torch.randn(tok.vocab_size + 64, generator=g) * 4     # rows wider than the vocabulary too
        t = pick_rows(logits[None], p, [], [pos], [], c)[0]
        if t in tok.eos_ids:
            return out
        out.append(t)
    raise AssertionError(f"no end of turn in {steps} picks: {tok.decode(out)!r}")


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_random_logits_under_a_schema_give_json_that_fits_it(tok, seed, temperature):
    data = json.loads(tok.decode(walk(tok, json_grammar(SCHEMA), seed, temperature)))
    assert set(data) == {"n", "ok", "tag"} and 0 <= data["n"] <= 99 and type(data["n"]) is int
    assert isinstance(data["ok"], bool) and data["tag"] in ("a", "bb")


def test_a_forced_call_grammar_ends_the_call_and_then_the_turn(tok):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}]
    text = tok.decode(walk(tok, call_grammar("hermes", tools, "f"), 7, 1.0))
    args, end = text.rsplit("}", 1)[0], text.rsplit("}", 1)[1]
    assert end == "\n</tool_call>" and set(json.loads(args)) == {"x"}
    text = tok.decode(walk(tok, call_grammar("llama3", tools, None), 8, 1.0))
    assert text.startswith('"f", "parameters": ') and set(json.loads("{\"name\": " + text)["parameters"]) == {"x"}


def test_function_schemas_are_closed_where_they_do_not_say():
    s = closed({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {}}},
                                                 "c": {"type": "object", "additionalProperties": True}}})
    assert s["additionalProperties"] is False and s["properties"]["a"]["additionalProperties"] is False
    assert s["properties"]["c"]["additionalProperties"] is True and "additionalProperties" not in s["properties"]["a"][
        "properties"]["b"]


def test_a_windows_rows_are_picked_as_if_its_proposals_were_accepted_one_by_one(tok):
    grammar = json_grammar(SCHEMA)
    p = SamplingParams(temperature=0.0, grammar=grammar)
    assert host_picks(p) and not argmax_pick(p)
    g = torch.Generator().manual_seed(3)
    for trial in range(6):
        logits = torch.randn(5, tok.vocab_size, generator=g) * 4
        ref, picks_one = constraint(tok, grammar), []
        for i in range(5):                                   # one row at a time, each pick taken
            picks_one.append(pick_rows(logits[i:i + 1], p, [], [i], [], ref)[0])
        agree = trial % 5                                    # proposals: the first `agree` right, then a wrong one
        proposals = picks_one[:agree] + ([tok.vocab_size - 1] if agree < 4 else [])
        c = constraint(tok, grammar)
        picks = pick_rows(logits[:len(proposals) + 1], p, [], list(range(len(proposals) + 1)), proposals, c)
        assert picks[:agree + 1] == picks_one[:agree + 1], trial
        after = constraint(tok, grammar)
        for t in picks_one[:agree + 1]:
            after.consume(t)
        assert (c.allowed() == after.allowed()).all(), trial         # the matcher is where the kept tokens end


def test_a_bad_grammar_is_a_clear_request_error(tok):
    with pytest.raises(RequestError, match="grammar: .*objec"):
        constraint(tok, json_grammar({"type": "objec"}))
    with pytest.raises(RequestError, match="grammar: "):
        constraint(tok, "start: (")
