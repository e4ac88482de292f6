"""What a GGUF file holds, from its header alone: no torch, fast enough for the GUI's model picker."""
from __future__ import annotations

import os
from collections import Counter

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from engine.config import ModelConfig, model_config
from engine.gguf_file import GGUFFile, read_gguf
from engine.messages import ModelInfo
from engine.model_files import resolve_model, trained_mtp
from engine.reasoning import reasoning_mode
from engine.tool_format import tool_format


# int4 parts per matrix in the CPU fast mode (engine.cpu_int4; named here without importing torch)
INT4_PARTS = {"Q4_0": 1, "Q4_1": 1, "Q4_K": 1, "Q8_0": 2, "Q5_0": 2, "Q5_1": 2}


def int4_parts(qtype_name: str, torch_shape: tuple[int, ...]) -> int:
    """How many int4 parts the CPU fast mode keeps for a matrix of this type and (row-major) shape, or
    for each expert of a 3-D expert stack; 0 where it keeps a dense copy (other types, rows not in the
    kernel's 16s, K not whole groups)."""
    parts = INT4_PARTS.get(qtype_name, 0)
    if len(torch_shape) == 3:
        torch_shape = torch_shape[1:]
    if not parts or len(torch_shape) != 2 or torch_shape[0] % 16:
        return 0
    return parts if torch_shape[1] % (256 if qtype_name == "Q4_K" else 32) == 0 else 0


def cpu_matrix_bytes(t, bytes_per_value: int, fast: bool) -> int:
    """Bytes a CPU stage keeps for a matrix: in the fast mode int4 parts where engine.cpu_int4 takes the
    type and shape (0.625 bytes per value each: 4-bit codes, a bfloat16 scale and zero per 32), else a
    dense copy of bytes_per_value per value."""
    parts = int4_parts(t.qtype.name, t.torch_shape) if fast else 0
    return parts * t.n_elements * 5 // 8 if parts else t.n_elements * bytes_per_value


# GPU stages keep these IQ types as 4-bit codes into a table of 16 values in IQ4_XS's layout, 4.375 bits
# (engine.kernels.packed.TABLE_TYPES; RUN16_INT8 below so too, with a scale per 16: 4.625 bits), or with
# STRATA_IQ_TABLES=0 as Q8_0's planes with float32 scales, 9 bits per value (engine.kernels.packed.RUN_INT8_TYPES;
# tests/engine/test_packed.py holds the two equal)
RUN_INT8 = frozenset({"IQ3_S", "IQ3_XXS", "IQ2_XXS", "IQ1_S"})
IQ_TABLES = os.environ.get("STRATA_IQ_TABLES", "1") == "1"
# GPU stages keep Q6_K in 6-bit planes, the file's bytes (STRATA_Q6K_PLANES=1), or as int8 codes
# (engine.kernels.packed.Q6K_PLANES takes this value)
Q6K_PLANES = os.environ.get("STRATA_Q6K_PLANES", "1") == "1"
# ... and Q5_K in 5-bit planes, 5.625 bits (STRATA_Q5K_PLANES=1), or as int8 codes (=0)
Q5K_PLANES = os.environ.get("STRATA_Q5K_PLANES", "1") == "1"
# ... and Q3_K in 3-bit planes, 3.5625 bits (STRATA_Q3K_PLANES=1), or as int8 codes (=0)
Q3K_PLANES = os.environ.get("STRATA_Q3K_PLANES", "1") == "1"
# ... and with STRATA_IQ_TABLES=0, IQ2_XS, IQ2_S, IQ1_M as int8 codes under a float32 factor per 16 values, 10
# bits (and STRATA_IQ2_INT8=0: the GGUF layout, its kernel and, for expert stacks, the per-expert loop)
RUN16_INT8 = frozenset({"IQ2_XS", "IQ2_S", "IQ1_M"})
IQ2_INT8 = os.environ.get("STRATA_IQ2_INT8", "1") == "1"
# Bytes a value of the types GPU stages keep in a form other than the file's (engine.kernels.packed), as a
# fraction: RUN_INT8's planes or table codes, Q5_0 as Q8_0's (8.5 bits), Q6_K, Q3_K, Q5_K, Q5_1 and RUN16_INT8 as int8 codes
# with two float32 scales per 32 values (10 bits), Q5_K's and Q3_K's planes (Q6_K's and Q2_K's are the file's
# bytes)
GPU_BYTES_PER_VALUE = {**{name: (35, 64) if IQ_TABLES else (9, 8) for name in RUN_INT8}, "Q5_0": (17, 16),
                       **{name: (5, 4) for name in ("Q5_1",) + (() if Q6K_PLANES else ("Q6_K",))},
                       "Q5_K": (45, 64) if Q5K_PLANES else (5, 4), "Q3_K": (57, 128) if Q3K_PLANES else (5, 4),
                       **{name: (37, 64) if IQ_TABLES else (5, 4)
                          for name in (RUN16_INT8 if IQ2_INT8 or IQ_TABLES else ())}}


def gpu_matrix_bytes(t, keep: frozenset[str] = frozenset()) -> int:
    """Bytes a GPU stage keeps for a tensor: as stored, or in GPU_BYTES_PER_VALUE's form (not for the
    types in keep: those stay in the file's layout, engine.kernels.packed.FIT_KEEP)."""
    frac = GPU_BYTES_PER_VALUE.get(t.qtype.name) if len(t.shape) > 1 and t.qtype.name not in keep else None
    return t.n_elements * frac[0] // frac[1] if frac else t.nbytes


def compact_orders(gf: GGUFFile) -> list[frozenset[str]]:
    """The sets of types a GPU load may keep in the file's layout when their streaming form does not fit:
    none, then the file's types whose GPU form grows most (against the file's bits a value) one more at a
    time (IQ1_S's 9 bits for 1.56 first, Q6_K's 10 for 6.56 last)."""
    present = {t.qtype.name for t in gf.tensors.values() if len(t.shape) > 1} & set(GPU_BYTES_PER_VALUE)

    def growth(name: str) -> float:
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType[name]]
        num, den = GPU_BYTES_PER_VALUE[name]
        return num / den / (size / block)

    ranked = sorted(present, key=lambda n: (-growth(n), n))
    return [frozenset(ranked[:i]) for i in range(len(ranked) + 1)]


def layer_bytes(gf: GGUFFile, n_blocks: int, bytes_per_value: int | None = None, fast: bool = False,
                keep: frozenset[str] = frozenset()) -> list[int]:
    """Bytes of each block: what GPU stages keep (gpu_matrix_bytes, keep: its types kept as stored), or for
    CPU stages (bytes_per_value given) what they keep of each matrix (cpu_matrix_bytes; 1-D norms stay
    float32)."""
    out = [0] * n_blocks
    for t in gf.tensors.values():
        index = t.name.split(".")[1] if t.name.startswith("blk.") else ""
        if index.isascii() and index.isdigit():      # "blk.7.attn_q.weight"; another name is no block's
            i = int(index)
            if i < n_blocks:
                dense = bytes_per_value is not None and len(t.shape) > 1
                out[i] += cpu_matrix_bytes(t, bytes_per_value, fast) if dense else gpu_matrix_bytes(t, keep)
    return out


# The tensor types engine.quant decodes (its DECODERS), named here without importing torch: the GUI's
# model picker reads headers through this module. tests/engine/test_quant_iq.py holds the two equal.
DECODABLE = frozenset({
    "F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
    "IQ4_NL", "IQ4_XS", "IQ3_XXS", "IQ3_S", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ1_S", "IQ1_M",
})


def quant_mix(gf: GGUFFile) -> tuple[dict[str, int], float]:
    """(weight values per tensor type, most first; bits per weight = tensor bytes * 8 / values)."""
    values: Counter = Counter()
    for t in gf.tensors.values():
        values[t.qtype.name] += t.n_elements
    total = sum(values.values())
    bits = 8 * sum(t.nbytes for t in gf.tensors.values()) / total if total else 0.0
    return dict(values.most_common()), bits


def unsupported_tensor(gf: GGUFFile) -> str:
    """'' or one line naming the first tensor whose type this engine cannot decode, and the type."""
    bad = [t for t in gf.tensors.values() if t.qtype.name not in DECODABLE]
    if not bad:
        return ""
    more = f" (and {len(bad) - 1} more tensors)" if len(bad) > 1 else ""
    return f"tensor {bad[0].name!r} is {bad[0].qtype.name}, a type this engine cannot decode{more}"


def mtp_source(gf: GGUFFile, cfg: ModelConfig) -> tuple[str, str]:
    """(the MTP layer file trained for this model: attached by a load or found beside it, or '';
    why the one beside it is not used, or '')."""
    if gf.sidecar or cfg.n_mtp:
        return str(gf.sidecar or ""), ""
    side, note = trained_mtp(gf.path, cfg.arch, cfg.n_embd, cfg.n_layers)
    return str(side.path) if side else "", note


def model_info(gf: GGUFFile, cfg: ModelConfig | None = None) -> ModelInfo:
    cfg = cfg or model_config(gf)
    weights, bits = quant_mix(gf)
    mtp_file, mtp_note = mtp_source(gf, cfg)
    return ModelInfo(
        path=str(gf.path), name=cfg.name, arch=cfg.arch, n_layers=cfg.n_layers, n_embd=cfg.n_embd,
        n_heads=cfg.n_heads, n_kv_heads=cfg.n_kv_heads, vocab_size=cfg.vocab_size,
        context_length=cfg.context_length,
        quant_types=dict(Counter(t.qtype.name for t in gf.tensors.values())),
        file_bytes=gf.path.stat().st_size, layer_bytes=layer_bytes(gf, cfg.n_layers + cfg.n_mtp),
        mtp_layers=cfg.n_mtp, mtp_file=mtp_file, mtp_note=mtp_note,
        has_chat_template=bool(gf.get("tokenizer.chat_template")),
        tool_format=tool_format(gf.get("tokenizer.chat_template")),
        reasoning=reasoning_mode(gf.get("tokenizer.chat_template")),
        tokenizer=str(gf.get("tokenizer.ggml.model", "")), quant_weights=weights, bits_per_weight=bits,
        unsupported=unsupported_tensor(gf))


def probe_model(model: str) -> ModelInfo:
    """ModelInfo for a path (or 'default'), read from the header only."""
    return model_info(read_gguf(resolve_model(model)))
