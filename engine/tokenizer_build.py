"""Build a HF `tokenizers.Tokenizer` from GGUF metadata, cached on disk.

Two vocabulary kinds are supported, as `tokenizer.ggml.model` names them:

- `gpt2`: byte-level BPE with merges. The split regex follows the `tokenizer.ggml.pre` tag
  (llama.cpp's names; see PRE_TOKENIZER_SPLITS). For 'smollm' every \\p{N} character is split off
  first, as llama.cpp and SmolLM's own tokenizer do; transformers' GGUF path does not, so the two
  differ on non-ASCII numerals such as " ½" (ASCII digits come out the same).
- `llama`: SentencePiece pieces with scores and no merges. Merges are derived from the vocabulary
  the way HF transformers does for GGUF files, so the ids match its GGUF tokenizer. Gemma files
  rank merges by file order instead of by score and spell space-run tokens with real spaces.

Deriving ~0.5 M merges for Gemma takes seconds, so every built tokenizer is saved as JSON under
`platformdirs.user_cache_dir("strata-studio")/tokenizers`, keyed by a hash of the vocabulary.
"""
from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import numpy as np
import platformdirs
from tokenizers import AddedToken, Regex, decoders, normalizers, pre_tokenizers
from tokenizers import Tokenizer as Backend
from tokenizers.models import BPE

from engine.errors import ModelFileError
from engine.gguf_file import GGUFFile

log = logging.getLogger(__name__)

BUILD_VERSION = 1  # bump when a builder changes: old cache entries are then ignored

CONTROL, USER_DEFINED = 3, 4  # llama.cpp token types
SPM_SPACE = "\u2581"

_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# `tokenizer.ggml.pre` tag -> split regex applied before the byte-level mapping. Tags not listed
# here use GPT-2's own split (ByteLevel's built-in regex), as transformers does for 'default'.
PRE_TOKENIZER_SPLITS = {
    "llama-bpe": _LLAMA3_SPLIT, "llama3": _LLAMA3_SPLIT, "llama-v3": _LLAMA3_SPLIT,
    "smaug-bpe": _LLAMA3_SPLIT, "falcon3": _LLAMA3_SPLIT,
    "qwen2": _QWEN2_SPLIT, "deepseek-r1-qwen": _QWEN2_SPLIT, "megrez": _QWEN2_SPLIT,
}
# Tags whose vocabulary was trained with every digit on its own (llama.cpp: `\p{N}` first).
DIGIT_SPLIT_TAGS = {"smollm", "starcoder", "refact", "codeshell", "exaone", "minerva"}
GPT2_SPLIT_TAGS = {"default", "gpt2", "mpt", "olmo", "jais"}
GEMMA_ARCHS = {"gemma", "gemma2", "gemma3"}


def load_backend(gf: GGUFFile, cache_dir: Path | None = None) -> Backend:
    """The backend tokenizer for this file: from the cache if built before, else built and cached."""
    check_metadata(gf)
    path = (cache_dir or default_cache_dir()) / f"{vocabulary_hash(gf)}.json"
    if path.exists():
        try:
            return Backend.from_file(str(path))
        except Exception as e:  # a truncated or foreign file: rebuild it
            log.warning("tokenizer cache %s unreadable (%s); rebuilding", path, e)
    backend = build_backend(gf)
    save_atomically(backend, path)
    return backend


def default_cache_dir() -> Path:
    return Path(platformdirs.user_cache_dir("strata-studio")) / "tokenizers"


def vocabulary_hash(gf: GGUFFile) -> str:
    """A hash of everything the built tokenizer depends on."""
    h = hashlib.sha256(f"v{BUILD_VERSION}".encode())
    for key in ("general.architecture", "tokenizer.ggml.model", "tokenizer.ggml.pre",
                "tokenizer.ggml.add_space_prefix"):
        h.update(f"\0{key}={gf.get(key)!r}".encode())
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges"):
        h.update("\0".join(gf.get(key) or ()).encode("utf-8", "surrogatepass"))
    for key in ("tokenizer.ggml.token_type", "tokenizer.ggml.scores"):
        h.update(np.ascontiguousarray(gf.get(key, ())).tobytes())
    return h.hexdigest()[:32]


def save_atomically(backend: Backend, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    backend.save(str(tmp))
    os.replace(tmp, path)


ID_KEYS = ("bos", "eos", "eot", "eom", "unknown", "padding")


def check_metadata(gf: GGUFFile) -> None:
    """The tokenizer keys have the types and ranges the builders rely on (else one ModelFileError)."""
    def bad(key, why):
        raise ModelFileError(gf.path, f"tokenizer metadata {key!r} {why}")

    tokens = gf.get("tokenizer.ggml.tokens")
    if tokens is None or isinstance(tokens, list) and not tokens:
        raise ModelFileError(gf.path, "no tokenizer.ggml.tokens in the metadata")
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        bad("tokenizer.ggml.tokens", "should be a list of strings")
    for key in ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.chat_template"):
        if gf.get(key) is not None and not isinstance(gf.get(key), str):
            bad(key, "should be a string")
    for key in ("tokenizer.ggml.add_space_prefix", "tokenizer.ggml.add_bos_token"):
        if gf.get(key) is not None and not isinstance(gf.get(key), bool):
            bad(key, "should be true or false")
    merges = gf.get("tokenizer.ggml.merges")
    if merges is not None and (not isinstance(merges, list)
                               or not all(isinstance(m, str) and " " in m for m in merges)):
        bad("tokenizer.ggml.merges", "should be a list of 'left right' strings")
    for key, kind in (("tokenizer.ggml.token_type", "iu"), ("tokenizer.ggml.scores", "iuf")):
        value = gf.get(key)
        if value is None:
            if key == "tokenizer.ggml.scores" and gf.get("tokenizer.ggml.model") == "llama":
                bad(key, "is missing (a SentencePiece vocabulary needs scores)")
            continue
        if not isinstance(value, np.ndarray) or value.ndim != 1 or value.dtype.kind not in kind \
                or len(value) != len(tokens):
            bad(key, f"should be {len(tokens):,} numbers, one per token")
    for name in ID_KEYS:
        key = f"tokenizer.ggml.{name}_token_id"
        value = gf.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or not 0 <= value < len(tokens)):
            bad(key, f"should be a token id below {len(tokens):,}, not {str(value)[:40]}")


def build_backend(gf: GGUFFile) -> Backend:
    check_metadata(gf)
    model = gf.get("tokenizer.ggml.model")
    if model not in ("gpt2", "llama"):
        raise ModelFileError(gf.path, f"tokenizer model {model!r} is not supported (gpt2, llama are)")
    try:
        backend, vocab = byte_level_backend(gf) if model == "gpt2" else sentencepiece_backend(gf)
        add_gguf_added_tokens(backend, gf, vocab)
    except Exception as e:  # noqa: BLE001 - the tokenizers library refuses the file's vocabulary or merges
        why = " ".join(str(e).split())[:300]
        raise ModelFileError(gf.path, f"the tokenizer cannot be built from this file: {why}") from None
    return backend


def byte_level_backend(gf: GGUFFile) -> tuple[Backend, dict[str, int]]:
    """GPT-2 style byte-level BPE from the file's tokens and merges."""
    vocab = {t: i for i, t in enumerate(gf.get("tokenizer.ggml.tokens"))}
    merges = [tuple(m.split(" ", 1)) for m in gf.get("tokenizer.ggml.merges") or ()]
    backend = Backend(BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    backend.pre_tokenizer = byte_level_pre_tokenizer(gf.get("tokenizer.ggml.pre") or "default")
    backend.decoder = decoders.ByteLevel()
    return backend, vocab


def byte_level_pre_tokenizer(tag: str):
    """The split llama.cpp uses for this `pre` tag, followed by the byte-to-unicode mapping."""
    if tag in PRE_TOKENIZER_SPLITS:
        return pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(PRE_TOKENIZER_SPLITS[tag]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    if tag in DIGIT_SPLIT_TAGS:
        return pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ])
    if tag not in GPT2_SPLIT_TAGS:
        log.warning("unknown tokenizer.ggml.pre %r: using GPT-2's split", tag)
    return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)


def sentencepiece_backend(gf: GGUFFile) -> tuple[Backend, dict[str, int]]:
    """SentencePiece pieces as a byte-fallback BPE with merges derived from the vocabulary."""
    tokens = list(gf.get("tokenizer.ggml.tokens"))
    gemma = gf.get("general.architecture") in GEMMA_ARCHS
    if gemma:  # Gemma stores space-run tokens with real spaces; the model looks them up as ▁▁...
        tokens = [SPM_SPACE * len(t) if t and not t.strip(" ") else t for t in tokens]
        ranks = {t: -i for i, t in enumerate(tokens)}  # Gemma's merge order is its file order
    else:
        ranks = dict(zip(tokens, np.asarray(gf.get("tokenizer.ggml.scores")).tolist()))
    vocab = {t: i for i, t in enumerate(tokens)}
    unk_id = int(gf.get("tokenizer.ggml.unknown_token_id", 0))
    bpe = BPE(vocab=vocab, merges=derive_merges(vocab, ranks), unk_token=tokens[unk_id],
              fuse_unk=True, byte_fallback=True)
    backend = Backend(bpe)
    steps = [decoders.Replace(SPM_SPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
    if gemma:
        backend.normalizer = normalizers.Replace(" ", SPM_SPACE)
    elif gf.get("tokenizer.ggml.add_space_prefix", True):
        backend.pre_tokenizer = pre_tokenizers.Metaspace(SPM_SPACE, prepend_scheme="first", split=False)
        steps.append(decoders.Strip(" ", 1, 0))
    else:
        backend.pre_tokenizer = pre_tokenizers.Metaspace(SPM_SPACE, prepend_scheme="never", split=False)
    backend.decoder = decoders.Sequence(steps)
    return backend, vocab


def derive_merges(vocab: dict[str, int], ranks: dict[str, float]) -> list[tuple[str, str]]:
    """Every split of a piece into two vocabulary pieces, best-ranked piece first.

    Same order as `transformers.tokenization_utils_base.generate_merges` with scores: by rank,
    then longer left part, then longer right part; ties keep vocabulary order.
    """
    candidates = []
    for piece, rank in ranks.items():
        splits = [(piece[:k], piece[k:]) for k in range(1, len(piece))
                  if piece[:k] in vocab and piece[k:] in vocab]
        splits.sort(key=lambda lr: (vocab[lr[0]], vocab[lr[1]]))
        candidates.extend((rank, len(left), len(right), left, right) for left, right in splits)
    candidates.sort(key=lambda c: c[:3], reverse=True)
    return [(c[3], c[4]) for c in candidates]


def add_gguf_added_tokens(backend: Backend, gf: GGUFFile, vocab: dict[str, int]) -> None:
    """Control tokens become special tokens, user-defined ones plain added tokens: both match whole.

    In a byte-level vocabulary a control token spelled outside the byte alphabet is a converter
    mislabel and is skipped, as transformers does; so is a user-defined token not in `vocab`.
    """
    tokens = gf.get("tokenizer.ggml.tokens")
    types = token_types(gf)
    alphabet = byte_alphabet() if gf.get("tokenizer.ggml.model") == "gpt2" else None
    control = [tokens[i] for i in np.flatnonzero(types == CONTROL)]
    control = [t for t in control if alphabet is None or set(t) <= alphabet]
    user = [tokens[i] for i in np.flatnonzero(types == USER_DEFINED) if tokens[i] in vocab]
    backend.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in control])
    backend.add_tokens([AddedToken(t, normalized=False, special=False) for t in user])


def token_types(gf: GGUFFile) -> np.ndarray:
    """llama.cpp's type of every token (1 = normal where the file has none)."""
    types = gf.get("tokenizer.ggml.token_type")
    return np.ones(len(gf.get("tokenizer.ggml.tokens")), np.int32) if types is None else np.asarray(types)


def byte_alphabet() -> set[str]:
    """The 256 characters GPT-2's byte-level mapping uses."""
    return set(pre_tokenizers.ByteLevel.alphabet())
