"""Synthetic i-quant blocks and mixed-type files for engine.synthetic (strata make-model).

IQ blocks are random bytes with a valid f16 super-block scale: every other bit pattern of an
i-quant block (grid indices, sign bits, 3- to 6-bit sub-scales) decodes to finite values, so random
blocks are valid blocks. Mixed files, like the ones people download (an IQ type for most matrices,
K types for a few sensitive ones), come from a type map: glob pattern over tensor names -> type.
"""
from __future__ import annotations

from fnmatch import fnmatchcase

import numpy as np
from gguf.constants import GGMLQuantizationType as Q, LlamaFileType

from engine.errors import ConfigError

IQ_TYPES = (Q.IQ4_NL, Q.IQ4_XS, Q.IQ3_XXS, Q.IQ3_S, Q.IQ2_XXS, Q.IQ2_XS, Q.IQ2_S, Q.IQ1_S, Q.IQ1_M)
FILE_TYPE = {q: LlamaFileType[f"MOSTLY_{q.name}"] for q in IQ_TYPES}
# llama-quantize's substitute for rows that are not a multiple of the 256-element i-quant block
FALLBACK = {q: Q.IQ4_NL for q in IQ_TYPES if q != Q.IQ4_NL}
# `--mix`: the kind of recipe llama-quantize applies to low-bit files: the output head in Q6_K, the
# value projection and the FFN down projection in Q4_K (each falls back like the others on short rows)
MIX = "output.weight=Q6_K,*.attn_v.weight=Q4_K,*.ffn_down.weight=Q4_K"


def _f16(x: np.ndarray) -> np.ndarray:
    """float values -> their f16 bytes as an (n, 2) uint8 array (engine.synthetic uses it too)."""
    return x.astype(np.float16).view(np.uint8).reshape(-1, 2)


def _scales(rng: np.random.Generator, n: int, d: float, signed: bool = False) -> np.ndarray:
    """Per-block scales around d (x0.5..x1.5); with signed, half of them negative (zero-mean blocks)."""
    s = d * rng.uniform(0.5, 1.5, n).astype(np.float32)
    return np.where(rng.random(n) < 0.5, -s, s) if signed else s


def _fill_d0(b, rng, d):
    """The f16 scale at byte 0 (positive: the signs and signed sub-scales centre the values)."""
    b[:, 0:2] = _f16(_scales(rng, len(b), d))


def _fill_iq4_nl(b, rng, d):
    """IQ4_NL's 16 values are not symmetric (-127..113): half the blocks negative centres them."""
    b[:, 0:2] = _f16(_scales(rng, len(b), d, signed=True))


def _fill_iq1_m(b, rng, d):
    """IQ1_M spreads its f16 scale over the top 4 bits of its four u16 sub-scale words (bytes 48..56)."""
    bits = _f16(_scales(rng, len(b), d)).copy().view(np.uint16).astype(np.uint16)   # (n, 1)
    words = b[:, 48:56].copy().view(np.uint16)                                        # (n, 4)
    nibble = (bits >> np.array([0, 4, 8, 12], dtype=np.uint16)) & 0xF
    b[:, 48:56] = ((words & 0x0FFF) | (nibble << 12)).astype(np.uint16).view(np.uint8)


FILL = {q: _fill_d0 for q in IQ_TYPES} | {Q.IQ4_NL: _fill_iq4_nl, Q.IQ1_M: _fill_iq1_m}


def parse_qtype_map(text: str | dict | None, known) -> list[tuple[str, Q]]:
    """'PATTERN=TYPE,PATTERN=TYPE' (fnmatch globs over tensor names; the first match wins), or a
    dict of the same -> [(pattern, type)]. `known`: the type names make-model can write."""
    if not text:
        return []
    items = text.items() if isinstance(text, dict) else (part.split("=", 1) for part in text.split(",") if part.strip())
    out = []
    for item in items:
        if len(item) != 2 or not item[0].strip():
            raise ConfigError(f"bad --qtype-map entry {'='.join(item)!r}: use PATTERN=TYPE, e.g. {MIX.split(',')[0]}")
        pattern, name = item[0].strip(), item[1].strip().upper()
        if name not in known:
            raise ConfigError(f"--qtype-map {pattern}={name}: unsupported qtype (choose one of {', '.join(known)})")
        out.append((pattern, Q[name]))
    return out


def mapped_qtype(name: str, rules: list[tuple[str, Q]], default: Q) -> Q:
    """The type the map gives tensor `name` (before the short-row fallback), else `default`."""
    return next((q for pattern, q in rules if fnmatchcase(name, pattern)), default)
