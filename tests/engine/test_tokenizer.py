"""Tokenizer and chat templates, checked against HF transformers' GGUF tokenizer as the oracle.

transformers is test-only: each model's oracle is loaded once per module (SmolLM2 and Gemma 3 270M).
"""
from __future__ import annotations

import copy
import datetime
import time

import pytest

from engine import tokenizer_build
from engine.chat_template import PLAIN_CHAT_TEMPLATE, render_chat
from engine.errors import ModelFileError, RequestError
from engine.gguf_file import read_gguf
from engine.model_files import default_model_path, gemma_path
from engine.tokenizer import Tokenizer

slow = pytest.mark.slow

TEXTS = [
    "",
    "Hello, world!",
    "12345",
    "Call 555-0123 before 2024-12-31, or pay 3.14159 EUR.",
    "def f(x):\n    if x > 0:\n        return x * 2\n\treturn None\n",
    "  two leading spaces",
    " one leading space and trailing   ",
    "It's a test: don't, we'll, THEY'RE, I'd've",
    "naïve café, déjà vu — Straße",
    "I ❤️ 🦙 and 👩‍💻 👍🏽!",
    "日本語のテキストと中文字符，한국어도 있어요。",
    "Rare: 𠜎𠝹 and Zero\u200bwidth\x00null",
    "Lines\n\n\nand\r\nwindows\ttabs",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "<start_of_turn>user\nHi<end_of_turn>\n<bos>text<eos>",
    "<table><tr><td>html</td></tr></table>",
]
STREAM_TEXT = "Emoji 🦙🎉 then 中文字符 and 日本語, then 𠜎 and ok."
CONVERSATION = [
    {"role": "system", "content": "You are a terse assistant."},
    {"role": "user", "content": "What is 2 + 2?"},
]


def load_oracle(path, gguf_readers):
    transformers = pytest.importorskip("transformers")
    with gguf_readers():               # the reader the reference model's load made, if it ran (conftest.py)
        return transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def timed_tokenizer(path, cache_dir):
    gf = read_gguf(path)
    start = time.perf_counter()
    tok = Tokenizer.from_gguf(gf, cache_dir=cache_dir)
    return tok, time.perf_counter() - start


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tokenizers")


@pytest.fixture(scope="module")
def smol(cache_dir):
    tok, seconds = timed_tokenizer(default_model_path(), cache_dir)
    print(f"\nSmolLM2 tokenizer, first build: {seconds:.2f} s")
    return tok


@pytest.fixture(scope="module")
def smol_hf(gguf_readers):
    return load_oracle(default_model_path(), gguf_readers)


@pytest.fixture(scope="module")
def gemma_file():
    try:
        return gemma_path()
    except ModelFileError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def gemma(gemma_file, cache_dir):
    tok, seconds = timed_tokenizer(gemma_file, cache_dir)
    print(f"\nGemma 3 tokenizer, first build: {seconds:.2f} s")
    return tok


@pytest.fixture(scope="module")
def gemma_hf(gemma_file, gguf_readers):
    return load_oracle(gemma_file, gguf_readers)


@pytest.fixture(params=["smol", "gemma"])
def pair(request):
    """(our tokenizer, the transformers oracle) for each model."""
    name = request.param
    return request.getfixturevalue(name), request.getfixturevalue(f"{name}_hf")


@slow
def test_ids_match_transformers(pair):
    tok, hf = pair
    for text in TEXTS:
        assert tok.encode(text) == hf(text)["input_ids"], repr(text)


@slow
def test_decode_round_trip(pair):
    tok, hf = pair
    for text in TEXTS:
        ids = tok.encode(text, add_bos=False)
        assert tok.decode(ids) == text, repr(text)
        assert tok.decode(ids) == hf.decode(ids), repr(text)


@slow
def test_special_tokens_are_single_ids(smol, gemma):
    assert smol.encode("<|im_start|>user<|im_end|>") == [1, *smol.encode("user"), 2]
    assert gemma.encode("<start_of_turn>", add_bos=False) == [105]
    assert smol.decode(smol.encode("<|im_start|>hi<|im_end|>"), skip_special=True) == "hi"


@slow
def test_smollm_splits_every_numeral_like_llama_cpp(smol):
    # The 'smollm' tag splits each \p{N} character off first (llama.cpp, SmolLM's own tokenizer).
    # transformers' GGUF path uses GPT-2's split here and gives 'Ġ½' as one token, so no oracle.
    pieces = [smol.token_text(i) for i in smol.encode(" ½ 12")]
    assert pieces == ["Ġ", "Â½", "Ġ", "1", "2"]


@slow
def test_special_ids(smol, gemma):
    assert (smol.bos_id, smol.eos_id, smol.vocab_size) == (1, 2, 49152)
    assert smol.eos_ids == {0, 2}  # <|im_end|> (eos) and <|endoftext|>
    assert (gemma.bos_id, gemma.eos_id, gemma.vocab_size) == (2, 1, 262144)
    assert gemma.eos_ids == {1, 106}  # <eos> and <end_of_turn>
    assert gemma.encode("hi")[0] == 2 and smol.encode("hi")[0] != 1
    assert smol.token_text(smol.encode(" the")[0]) == "Ġthe"


@slow
@pytest.mark.parametrize("name", ["smol", "gemma"])
def test_stream_decoder_equals_decode(request, name):
    tok = request.getfixturevalue(name)
    ids = tok.encode(STREAM_TEXT, add_bos=False)
    stream = tok.stream_decoder()
    pieces = [stream.push(i) for i in ids]
    pieces.append(stream.flush())
    assert "".join(pieces) == tok.decode(ids) == STREAM_TEXT
    assert not any("\ufffd" in p for p in pieces)
    assert "" in pieces[:-1]  # some ids were partial characters and were held back


@slow
def test_stream_decoder_flushes_an_incomplete_tail(smol):
    ids = smol.encode("🦙")
    stream = smol.stream_decoder()
    assert [stream.push(i) for i in ids[:-1]] == [""] * (len(ids) - 1)
    assert stream.flush() == smol.decode(ids[:-1])


@slow
def test_chatml_matches_transformers(smol, smol_hf):
    for messages in (CONVERSATION, CONVERSATION[1:]):
        text = smol_hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        assert smol.render_chat(messages) == text
        assert smol.apply_chat(messages) == smol_hf(text, add_special_tokens=False)["input_ids"]
    assert smol.has_chat_template


@slow
def test_gemma_uses_the_plain_fallback(gemma):
    assert not gemma.has_chat_template
    messages = [*CONVERSATION, {"role": "assistant", "content": "4"}, {"role": "user", "content": "And 3 + 3?"}]
    text = gemma.render_chat(messages)
    assert text == ("System: You are a terse assistant.\nUser: What is 2 + 2?\nAssistant: 4\n"
                    "User: And 3 + 3?\nAssistant:")
    assert gemma.apply_chat(messages) == [gemma.bos_id, *gemma.encode(text, add_bos=False)]


@slow
def test_apply_chat_adds_no_second_bos(gemma):
    tok = copy.copy(gemma)
    tok.chat_template = "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}"
    ids = tok.apply_chat([{"role": "user", "content": "hi"}])
    assert ids == [tok.bos_id, *tok.encode("hi", add_bos=False)]


@slow
def test_second_gemma_build_hits_the_cache(gemma, smol, gemma_file, cache_dir, monkeypatch):
    # (the gemma and smol fixtures built both tokenizers into cache_dir, whatever ran before)
    monkeypatch.setattr(tokenizer_build, "build_backend", lambda gf: pytest.fail("cache missed"))
    tok, seconds = timed_tokenizer(gemma_file, cache_dir)
    _, smol_seconds = timed_tokenizer(default_model_path(), cache_dir)
    print(f"\nGemma 3 tokenizer, cached: {seconds:.2f} s; SmolLM2 tokenizer, cached: {smol_seconds:.2f} s")
    assert tok.encode(STREAM_TEXT) == gemma.encode(STREAM_TEXT)


def test_template_helpers():
    year = render_chat("{{ strftime_now('%Y') }}", [], None, None)
    assert year == str(datetime.date.today().year)
    assert render_chat("{{ messages[0]['content'] | tojson }}", [{"role": "user", "content": "é"}],
                       None, None) == '"é"'
    with pytest.raises(RequestError, match="roles must alternate"):
        render_chat("{{ raise_exception('roles must alternate') }}", [], None, None)


def test_template_is_sandboxed():
    with pytest.raises(RequestError):
        render_chat("{% set x = messages.append(1) %}", [], None, None)
    with pytest.raises(RequestError):
        render_chat("{{ messages.__class__.__mro__[1].__subclasses__() }}", [], None, None)


def test_text_parts_become_one_string():
    messages = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert render_chat(None, messages, None, None, add_generation_prompt=False) == "User: ab\n"
    assert render_chat(PLAIN_CHAT_TEMPLATE, messages, "<s>", "</s>") == "User: ab\nAssistant:"
