"""Synthetic GGUF models: valid files with random weights, for tests (tiny shapes) and GPU benchmarks.

Quantized tensors are generated directly as random quant blocks with valid f16 scales, chunk by
chunk, and streamed to the file: a 17 GB model never exists as floats in memory. Scales are
calibrated against `gguf.quants.dequantize` so every weight matrix dequantizes to std ~0.02 with
mean ~0; norms are ~1. Every file carries the default model's tokenizer (SmolLM2, gpt2 BPE).
"""
from __future__ import annotations

import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache, partial
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
from gguf import GGUFWriter
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as Q, GGUFValueType as V, LlamaFileType
from gguf.quants import dequantize

from engine.errors import ConfigError
from engine.gguf_append import partial_writer
from engine.gguf_file import read_gguf
from engine.model_files import default_model_path
from engine.synthetic_iq import FALLBACK as _IQ_FALLBACK, FILE_TYPE as _IQ_FILE_TYPE, FILL as _IQ_FILL, MIX
from engine.synthetic_iq import _f16, _scales, mapped_qtype, parse_qtype_map
from engine.synthetic_shapes import ARCHS, SHAPES, Shape, TensorSpec, arch_metadata, check, layout

__all__ = ["ARCHS", "MIX", "QTYPES", "SHAPES", "Shape", "make_model", "tensor_qtype", "tokenizer_metadata"]

WEIGHT_STD = 0.02
UNIFORM_HALF_WIDTH = WEIGHT_STD * 3 ** 0.5  # float weights: uniform in +-this has std WEIGHT_STD
CHUNK_BYTES = 1 << 20
WORKERS = min(8, os.cpu_count() or 1)
Progress = Callable[[int, int], None]  # (bytes written, total bytes)

_FILE_TYPE = {
    Q.F32: LlamaFileType.ALL_F32, Q.F16: LlamaFileType.MOSTLY_F16, Q.Q8_0: LlamaFileType.MOSTLY_Q8_0,
    Q.Q4_0: LlamaFileType.MOSTLY_Q4_0, Q.Q4_1: LlamaFileType.MOSTLY_Q4_1, Q.Q5_0: LlamaFileType.MOSTLY_Q5_0,
    Q.Q4_K: LlamaFileType.MOSTLY_Q4_K_S, Q.Q6_K: LlamaFileType.MOSTLY_Q6_K, Q.Q5_1: LlamaFileType.MOSTLY_Q5_1,
    Q.Q5_K: LlamaFileType.MOSTLY_Q5_K_S, Q.Q3_K: LlamaFileType.MOSTLY_Q3_K_S, Q.Q2_K: LlamaFileType.MOSTLY_Q2_K,
    **_IQ_FILE_TYPE,
}
QTYPES = tuple(q.name for q in _FILE_TYPE)
# llama-quantize's substitutes for rows that are not a multiple of a K-quant's 256-element block.
_FALLBACK = {Q.Q2_K: Q.IQ4_NL, Q.Q3_K: Q.IQ4_NL, Q.Q4_K: Q.Q5_0, Q.Q5_K: Q.Q5_1, Q.Q6_K: Q.Q8_0, **_IQ_FALLBACK}


# ---- random quant blocks, filled in place: `b` is (n_blocks, type_size) uint8 of random bytes ----

def _fill_q8_0(b, rng, d):
    q = b.view(np.int8)
    np.maximum(q, -127, out=q)  # quantizers emit -127..127 (clamping whole rows is the fast way)
    b[:, 0:2] = _f16(_scales(rng, len(b), d))


def _fill_q4_0(b, rng, d):
    b[:, 0:2] = _f16(_scales(rng, len(b), d, signed=True))


def _fill_q4_1(b, rng, d):
    s = _scales(rng, len(b), d)
    b[:, 0:2] = _f16(s)
    b[:, 2:4] = _f16(-7.5 * s)  # min: centres the 0..15 codes on zero


def _fill_q5_0(b, rng, d):
    b[:, 0:2] = _f16(_scales(rng, len(b), d, signed=True))


def _fill_q5_1(b, rng, d):
    s = _scales(rng, len(b), d)
    b[:, 0:2] = _f16(s)
    b[:, 2:4] = _f16(-15.5 * s)  # min: centres the 0..31 codes on zero


def _fill_q4_k(b, rng, d):
    """Sub-block scales sc in 8..31 and mins m = 2*sc with dmin = 3.75*d: every sub-block has mean 0."""
    _fill_k_scales(b, rng, d, 3.75, 32)


def _fill_q5_k(b, rng, d):
    """Q4_K's scale fields with sc in 8..15 and dmin = 7.75 * d: every sub-block of 0..31 codes has mean 0."""
    _fill_k_scales(b, rng, d, 7.75, 16)


def _fill_k_scales(b, rng, d, dmin_ratio, sc_end):
    """Q4_K / Q5_K's d, dmin = dmin_ratio * d and 12-byte field of eight 6-bit sub-block scales sc in
    8..sc_end - 1 and mins m = 2 * sc."""
    s = _scales(rng, len(b), d)
    b[:, 0:2] = _f16(s)
    b[:, 2:4] = _f16(dmin_ratio * s)
    sc = rng.integers(8, sc_end, (len(b), 8), dtype=np.uint8)
    m = 2 * sc
    b[:, 4:8] = sc[:, :4] | ((sc[:, 4:] >> 4) << 6)
    b[:, 8:12] = m[:, :4] | ((m[:, 4:] >> 4) << 6)
    b[:, 12:16] = (sc[:, 4:] & 0xF) | ((m[:, 4:] & 0xF) << 4)


def _fill_q2_k(b, rng, d):
    """Scale bytes sc | m << 4 with sc in 2, 4, .., 14 and m = sc / 2, dmin = 3 * d: every 16 values of 0..3
    codes have mean 0."""
    m = rng.integers(1, 8, (len(b), 16), dtype=np.uint8)
    b[:, 0:16] = (2 * m) | (m << 4)
    s = _scales(rng, len(b), d)
    b[:, 80:82] = _f16(s)
    b[:, 82:84] = _f16(3 * s)


def _fill_q3_k(b, rng, d):
    """Random 6-bit sub-block scales (sc - 32 in -32..31) and codes, then the f16 super-block scale."""
    b[:, 108:110] = _f16(_scales(rng, len(b), d, signed=True))


def _fill_q6_k(b, rng, d):
    """16 signed int8 sub-block scales in -63..63, then the f16 super-block scale."""
    b[:, 192:208] = rng.integers(-63, 64, (len(b), 16), dtype=np.int8).view(np.uint8)
    b[:, 208:210] = _f16(_scales(rng, len(b), d))


_FILL = {Q.Q8_0: _fill_q8_0, Q.Q4_0: _fill_q4_0, Q.Q4_1: _fill_q4_1, Q.Q5_0: _fill_q5_0, Q.Q5_1: _fill_q5_1,
         Q.Q2_K: _fill_q2_k, Q.Q3_K: _fill_q3_k, Q.Q4_K: _fill_q4_k, Q.Q5_K: _fill_q5_k, Q.Q6_K: _fill_q6_k, **_IQ_FILL}


def _random_blocks(qtype: Q, n_blocks: int, rng: np.random.Generator, d: float) -> np.ndarray:
    """n_blocks random blocks of a quant type, with valid scales of size ~d."""
    size = GGML_QUANT_SIZES[qtype][1]
    words = -(-n_blocks * size // 8)
    b = rng.bit_generator.random_raw(words).view(np.uint8)[:n_blocks * size].reshape(n_blocks, size)
    _FILL[qtype](b, rng, d)
    return b


@lru_cache(maxsize=None)
def _unit_std(qtype: Q) -> float:
    """Std of the dequantized values when the base scale is 1 (measured once per type)."""
    blocks = _random_blocks(qtype, 4096, np.random.default_rng(0), 1.0)
    return float(dequantize(blocks, qtype).std())


# ---- tensors ----

def tensor_qtype(spec: TensorSpec, qtype: Q) -> Q:
    """The type a tensor is stored in: norms and the MoE router stay F32; a K- or i-quant whose rows
    are not a multiple of 256 falls back as llama-quantize does (Q4_K -> Q5_0, Q6_K -> Q8_0, IQ* -> IQ4_NL)."""
    if spec.role != "weight":
        return Q.F32
    if spec.shape[0] % GGML_QUANT_SIZES[qtype][0]:
        qtype = _FALLBACK.get(qtype, qtype)
    if spec.shape[0] % GGML_QUANT_SIZES[qtype][0]:
        raise ConfigError(f"{spec.name}: rows of {spec.shape[0]} do not fit {qtype.name} blocks")
    return qtype


def _nbytes(shape: tuple[int, ...], qtype: Q) -> int:
    block, size = GGML_QUANT_SIZES[qtype]
    return int(np.prod(shape)) // block * size


def _units(spec: TensorSpec, qtype: Q) -> tuple[int, int]:
    """(how many blocks the tensor holds, blocks per chunk); a float 'block' is one element."""
    block, size = GGML_QUANT_SIZES[qtype]
    return int(np.prod(spec.shape)) // block, max(1, CHUNK_BYTES // size)


# float tensors by role (others: uniform +-UNIFORM_HALF_WIDTH): norms ~1; a delta net's conv taps large
# enough that its layers matter, and its decay rates a = -exp(A_log) negative
_RANGES = {"norm": (0.9, 1.1), "conv": (-0.6, 0.6), "decay": (-1.5, -0.2)}


def _chunk(role: str, qtype: Q, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` blocks of random file bytes for a tensor of this role and type."""
    if qtype not in (Q.F32, Q.F16):
        return _random_blocks(qtype, count, rng, WEIGHT_STD / _unit_std(qtype))
    lo, hi = _RANGES.get(role, (-UNIFORM_HALF_WIDTH, UNIFORM_HALF_WIDTH))
    x = rng.random(count, dtype=np.float32)  # uniform: 5x faster than normal, and quants are uniform too
    x *= hi - lo
    x += lo
    return x.astype(np.float16) if qtype == Q.F16 else x


def _jobs(plan: list[tuple[TensorSpec, Q]], seed: int, align: int) -> Iterator[tuple[Callable[[], np.ndarray], int]]:
    """(make one chunk, padding to write after it) in file order; each chunk has its own seed, so
    the bytes do not depend on how many threads make them."""
    for index, (spec, qtype) in enumerate(plan):
        n, step = _units(spec, qtype)
        starts = range(0, n, step)
        for k, start in enumerate(starts):
            rng = np.random.default_rng([seed, index, k])
            pad = -_nbytes(spec.shape, qtype) % align if k == len(starts) - 1 else 0
            yield partial(_chunk, spec.role, qtype, min(step, n - start), rng), pad


def _in_order(jobs: Iterator[tuple[Callable[[], np.ndarray], int]], workers: int) -> Iterator[tuple[np.ndarray, int]]:
    """Run the jobs on a thread pool (numpy releases the GIL), at most 2 per worker ahead of the reader."""
    with ThreadPoolExecutor(workers) as pool:
        pending: deque = deque()
        for make, pad in jobs:
            pending.append((pool.submit(make), pad))
            if len(pending) > 2 * workers:
                future, after = pending.popleft()
                yield future.result(), after
        for future, after in pending:
            yield future.result(), after


# ---- metadata ----

_ARRAY_TYPES = {np.dtype(np.int32): V.INT32, np.dtype(np.uint32): V.UINT32, np.dtype(np.float32): V.FLOAT32}


def _typed(value) -> tuple[object, V, V | None]:
    """A tokenizer value as read by read_gguf -> (value, GGUF type, array item type), as llama.cpp types them."""
    if isinstance(value, bool):
        return value, V.BOOL, None
    if isinstance(value, int):
        return value, V.UINT32, None  # token ids
    if isinstance(value, float):
        return value, V.FLOAT32, None
    if isinstance(value, str):
        return value, V.STRING, None
    if isinstance(value, np.ndarray):
        return value.tolist(), V.ARRAY, _ARRAY_TYPES[value.dtype]
    return list(value), V.ARRAY, V.STRING


@lru_cache(maxsize=1)
def tokenizer_metadata() -> dict[str, tuple[object, V, V | None]]:
    """Every `tokenizer.*` key of the default model (or of the GGUF named by STRATA_TOKENIZER_FROM, for
    machines without the default model), typed for GGUFWriter."""
    source = os.environ.get("STRATA_TOKENIZER_FROM") or default_model_path()
    meta = read_gguf(source).metadata
    return {key: _typed(value) for key, value in meta.items() if key.startswith("tokenizer.")}


def _add_metadata(w: GGUFWriter, arch: str, shape_name: str, s: Shape, mtp: int, qtype: Q, seed: int) -> None:
    w.add_type("model")
    w.add_name(f"synthetic-{arch}-{shape_name}")
    w.add_description(f"Strata Studio synthetic model: random weights, {qtype.name}, seed {seed}")
    w.add_file_type(_FILE_TYPE[qtype])
    w.add_quantization_version(2)
    for key, (value, vtype) in arch_metadata(arch, s, mtp).items():
        w.add_key_value(key, value, vtype, V.INT32 if vtype == V.ARRAY else None)
    for key, (value, vtype, sub_type) in tokenizer_metadata().items():
        w.add_key_value(key, value, vtype, sub_type)


# ---- the file ----

def _resolve(arch: str, shape: str | Shape, qtype: str) -> tuple[str, Shape, Q]:
    if isinstance(shape, Shape):
        name, s = "custom", shape
    elif shape in SHAPES:
        name, s = shape, SHAPES[shape]
    else:
        raise ConfigError(f"unknown shape {shape!r}: choose one of {', '.join(SHAPES)}")
    if qtype.upper() not in QTYPES:
        raise ConfigError(f"unsupported qtype {qtype!r}: choose one of {', '.join(QTYPES)}")
    return name, s, Q[qtype.upper()]


def _write_tensors(w: GGUFWriter, plan: list[tuple[TensorSpec, Q]], seed: int, progress: Progress | None) -> None:
    """Stream every tensor's chunks into the open file, aligned as GGUFWriter lays them out."""
    fout = w.fout[0]
    total, done = sum(_nbytes(spec.shape, q) for spec, q in plan), 0
    w.write_padding(fout, fout.tell())
    for chunk, pad in _in_order(_jobs(plan, seed, w.data_alignment), WORKERS):
        fout.write(chunk.data)
        fout.write(bytes(pad))
        done += chunk.nbytes
        if progress:
            progress(done, total)


def make_model(arch: str, shape: str | Shape, out: str | os.PathLike, mtp: int = 0, qtype: str = "Q8_0",
               seed: int = 0, progress: Progress | None = None, mtp_own_head: bool = False,
               qtype_map: str | dict[str, str] | None = None) -> Path:
    """Write a random-weight GGUF model of `arch` and `shape` to `out` and return its path.

    shape: a SHAPES key or a Shape. mtp adds that many nextn (MTP) blocks after the trunk;
    mtp_own_head gives each its own embed_tokens / shared_head_head. progress(done, total) is
    called with bytes after each chunk. The same arguments give the same bytes, whatever WORKERS.
    qtype_map: 'PATTERN=TYPE,...' (or a dict): tensors whose name matches a glob get that type instead
    of qtype (a mixed file, e.g. MIX); short rows still fall back.
    """
    shape_name, s, q = _resolve(arch, shape, qtype)
    check(arch, s, mtp)
    rules = parse_qtype_map(qtype_map, QTYPES)
    plan = [(spec, tensor_qtype(spec, mapped_qtype(spec.name, rules, q)))
            for spec in layout(arch, s, mtp, mtp_own_head)]
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with partial_writer(out, arch) as w:              # renamed into place only when complete
        _add_metadata(w, arch, shape_name, s, mtp, q, seed)
        for spec, tq in plan:
            w.add_tensor_info(spec.name, tuple(reversed(spec.shape)), np.dtype(np.float32),
                              _nbytes(spec.shape, tq), raw_dtype=tq)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        _write_tensors(w, plan, seed, progress)
    return out
