"""Text <-> token ids for a GGUF model, on HF `tokenizers`.

    tok = Tokenizer.from_gguf(read_gguf(path))
    ids = tok.apply_chat([{"role": "user", "content": "Hi"}])
    stream = tok.stream_decoder()
    text = "".join(stream.push(i) for i in generated_ids) + stream.flush()

The backend is built from the file's metadata by `engine.tokenizer_build` (cached on disk) and gives
transformers' GGUF tokenizer ids (one deliberate exception is described there). Control tokens such
as `<|im_start|>` are matched whole in the text.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from tokenizers import Tokenizer as Backend

from engine.chat_template import render_chat
from engine.gguf_file import GGUFFile
from engine.tokenizer_build import CONTROL, load_backend, token_types
from engine.tool_format import tool_format

# Control tokens that end an assistant turn in common chat formats (llama.cpp's end-of-generation set).
END_OF_TURN_TOKENS = ("<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|eom_id|>", "<|endoftext|>",
                      "<|end|>", "<|return|>", "<EOT>")
REPLACEMENT_CHAR = "\ufffd"  # what an incomplete UTF-8 sequence decodes to


class Tokenizer:
    """Encode, decode and chat-format for one model's vocabulary."""

    def __init__(self, backend: Backend, gf: GGUFFile):
        self._backend = backend
        self._tokens: list[str] = list(gf.get("tokenizer.ggml.tokens"))
        self.vocab_size = len(self._tokens)
        self.bos_id = optional_id(gf, "tokenizer.ggml.bos_token_id")
        self.eos_id = optional_id(gf, "tokenizer.ggml.eos_token_id")
        self.eos_ids = end_of_generation_ids(gf, self.eos_id)
        self.add_bos = bool(gf.get("tokenizer.ggml.add_bos_token", gf.get("tokenizer.ggml.model") == "llama"))
        self.chat_template: str | None = gf.get("tokenizer.chat_template") or None
        self.tool_format = tool_format(self.chat_template)

    @classmethod
    def from_gguf(cls, gf: GGUFFile, cache_dir: Path | None = None) -> "Tokenizer":
        """Build (or load from the cache under `cache_dir`) the tokenizer a GGUF file describes."""
        return cls(load_backend(gf, cache_dir), gf)

    @property
    def bos_token(self) -> str | None:
        return None if self.bos_id is None else self._tokens[self.bos_id]

    @property
    def eos_token(self) -> str | None:
        return None if self.eos_id is None else self._tokens[self.eos_id]

    @property
    def has_chat_template(self) -> bool:
        return self.chat_template is not None

    def backend_json(self) -> str:
        """The HF tokenizers backend as its tokenizer.json text (engine.grammar reads the vocabulary from it)."""
        return self._backend.to_str()

    def token_text(self, token_id: int) -> str:
        """The token's piece as the vocabulary spells it (e.g. 'Ġthe', '▁the', '<0x0A>')."""
        return self._tokens[token_id]

    def encode(self, text: str, add_bos: bool | None = None) -> list[int]:
        """Token ids of `text`; `add_bos=None` follows the file's add_bos_token rule."""
        ids = self._backend.encode(text, add_special_tokens=False).ids
        if (self.add_bos if add_bos is None else add_bos) and self.bos_id is not None:
            ids.insert(0, self.bos_id)
        return ids

    def decode(self, ids, skip_special: bool = False) -> str:
        return self._backend.decode(list(ids), skip_special_tokens=skip_special)

    def render_chat(self, messages: list[dict], add_generation_prompt: bool = True, **variables) -> str:
        """The prompt text for `messages`: the file's chat template, else the plain fallback (`variables`:
        tools, enable_thinking)."""
        return render_chat(self.chat_template, messages, self.bos_token, self.eos_token,
                           add_generation_prompt, **variables)

    def apply_chat(self, messages: list[dict], add_generation_prompt: bool = True, prefix: str = "",
                   **variables) -> list[int]:
        """Render and encode a conversation, then `prefix` (text the assistant's turn starts with); no second
        BOS when the template writes one."""
        text = self.render_chat(messages, add_generation_prompt, **variables) + prefix
        writes_bos = self.bos_token is not None and text.startswith(self.bos_token)
        return self.encode(text, add_bos=False if writes_bos else None)

    def stream_decoder(self, skip_special: bool = False) -> "StreamDecoder":
        return StreamDecoder(self, skip_special)


class StreamDecoder:
    """Incremental decoding: `push(id)` returns the text that id completes.

    Text is held back while it ends in an incomplete UTF-8 sequence (a byte-level piece or a
    byte-fallback `<0xNN>` token), so the concatenation of every push and a final `flush()` equals
    `decode(all ids)`. Each push decodes only a short window of recent ids.
    """

    def __init__(self, tokenizer: Tokenizer, skip_special: bool = False):
        self._tokenizer = tokenizer
        self._skip_special = skip_special
        self._ids: list[int] = []
        self._prefix = 0   # window start: ids before it have been returned and are left behind
        self._read = 0     # ids before it have been returned

    def push(self, token_id: int) -> str:
        self._ids.append(int(token_id))
        new = self._pending()
        if not new or new.endswith(REPLACEMENT_CHAR):
            return ""
        self._prefix, self._read = self._read, len(self._ids)
        return new

    def flush(self) -> str:
        """Whatever is still held back (for example a final incomplete UTF-8 sequence)."""
        new = self._pending()
        self._prefix = self._read = len(self._ids)
        return new

    def _pending(self) -> str:
        """The text of the ids not returned yet, decoded with a little context before them."""
        returned = self._decode(self._ids[self._prefix:self._read])
        return self._decode(self._ids[self._prefix:])[len(returned):]

    def _decode(self, ids: list[int]) -> str:
        return self._tokenizer.decode(ids, self._skip_special) if ids else ""


def optional_id(gf: GGUFFile, key: str) -> int | None:
    value = gf.get(key)
    return None if value is None else int(value)


def end_of_generation_ids(gf: GGUFFile, eos_id: int | None) -> frozenset[int]:
    """EOS plus the file's EOT/EOM ids and any control token that ends a chat turn."""
    ids = {optional_id(gf, k) for k in ("tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id")}
    ids.add(eos_id)
    tokens = gf.get("tokenizer.ggml.tokens")
    wanted = set(END_OF_TURN_TOKENS)
    ids.update(int(i) for i in np.flatnonzero(token_types(gf) == CONTROL) if tokens[i] in wanted)
    return frozenset(i for i in ids if i is not None)
