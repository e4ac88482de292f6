"""The GPU weight layout made for streaming: GGUF blocks repacked at load into separate planes.

A GGUF row interleaves small headers (f16 scales, packed 6-bit scales) with its codes, so a kernel
that walks it issues byte loads at odd strides. Repacked, every weight row is

    codes   uint8 [N, K/2] (4-bit types: GGUF's own nibble order, IQ4 types: `iq4_words`'s) or int8
            [N, K] (Q8_0), contiguous
            along K, so a 256-value chunk of a row is one aligned run of 128 (or 256) bytes;
    scales  float16 [N, K/32] (Q4_0, Q8_0: d), [N, K/32, 2] (Q4_1: d, m) or [N, K/256, 2]
            (Q4_K: d, dmin), compact and aligned;
    sub     uint8 [N, K/256, 16] (Q4_K): the eight 6-bit sub-block scales, then the eight mins,
            unpacked from their 12-byte field; int8 [N, K/256, 8] (IQ4_XS): each 32-value run's scale - 32.

With the tensor-core decode kernel (engine.kernels.q4k_mma, `MMA_Q4K`), a GPU stage's Q4_K matrices
(N a multiple of 16) keep their code bytes in that kernel's order instead (`mma_order`; `Packed.mma`):
each 16 rows' codes are still one run of 16 * K/2 bytes, so stacks and row ranges in steps of 16 work
as before, and the prompt kernels read them through the same index map (`kind` 7).

Q5_0 takes Q8_0's planes (its codes - 16 as int8, d as it is: 8.5 bits per weight where the file
has 5.5), so its matrices run the int8 kernels instead of the GGUF-layout ones: llama-quantize gives
Q5_0 to the matrices of a Q4_K file whose rows are not a multiple of 256 (GLM-4.5-Air's down experts
and shared expert, K = 1408).

With STRATA_Q6K_PLANES=0 / STRATA_Q3K_PLANES=0, Q6_K and Q3_K become int8 codes (Q6_K's q - 32; Q3_K's
signed q) under a float32 d * sc per 16 values (kind 8); Q5_1 (and Q5_K with STRATA_Q5K_PLANES=0) int8
codes q under float32 (d, m) per 32, the value d q + m (kind 9; Q5_K's m is -(dmin * m)): 10 bits per
weight, the products exact in float32. Where the streaming forms do not fit a load, the loader keeps the
types that grow most in the GGUF layout (FIT_KEEP).

By default the k-quants keep their own bits instead, in planes (PLANE_KINDS). Q6_K keeps its 6.56 bits
(kind 10, `six_bit_planes`): per 64 values 48 code bytes (the low nibbles as Q4_K's, then the high 2
bits), the int8 sub-block scales in `sub` and d in `scales`; the kernels multiply d * sc in float32
(exact) and sign-extend the codes. Q5_K keeps 5.625 bits (kind 11, `five_bit_planes`): Q4_K's codes, d
and dmin, and per 64 values 12 bytes of `sub` (its two scales, two mins and the 64 fifth bits). Q2_K
takes the int8 kernels too in its own 2.625 bits (kind 12, `two_bit_planes`; with STRATA_Q2K_PLANES=0 it
stays in the GGUF layout): per 64 values 16 code bytes, the file's four scale bytes (sc | m << 4 per 16
values) as a word of `sub`, d and dmin. Q3_K keeps 3.5625 bits (kind 13, `three_bit_planes`): Q2_K's
code plane for the low bits, per 64 values a word of int8 scales and two words of third bits (as Q5_K's
fifth bits) in `sub`, d.

IQ4_NL keeps Q4_0's planes (codes, d per 32); IQ4_XS codes, d per 256 and `sub`; their codes index
IQ4_NL's 16 values, and each 32-bit word of them holds the codes of two x words, four a half (the
lookup's byte-permute selectors as they stand: engine.kernels.iq4.kvalues8). IQ3_S, IQ3_XXS, IQ2_XXS
and IQ1_S take Q8_0's planes with float32 scales: each value is a float32 factor per 32-value run
times a small integer (engine.quant_iquants.RUN_FACTORS), so the run's factor and the int8 integers
give the values exactly, and the int8 kernels read them as Q8_0
(9 bits per weight where the file has 1.56-3.44, against 16 for the dense copy they had before).

Nothing is rounded or re-quantized: `unpack` gives back exactly the values `engine.quant.dequantize`
gives for the original bytes (same float32 operations), and the tests check it bit for bit. The
kernels on this layout are in engine.kernels.stream_matmul. Torch only: no triton import here.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as QT

from engine import model_info
from engine.quant_kquants import scale_min_k4

RUN_INT8_TYPES = frozenset({QT.IQ3_S, QT.IQ3_XXS, QT.IQ2_XXS, QT.IQ1_S})     # as Q8_0, float32 scales
SCALE16_TYPES = frozenset({QT.Q6_K, QT.Q3_K})          # int8 codes, a float32 scale per 16: kind 8
RUN16_INT8_TYPES = frozenset({QT.IQ2_XS, QT.IQ2_S, QT.IQ1_M})   # the same, the factor per 16 (IQ2_INT8)
AFFINE_INT8_TYPES = frozenset({QT.Q5_K, QT.Q5_1})     # int8 codes, float32 (d, m) per 32: kind 9
PACKED_TYPES = frozenset({QT.Q4_0, QT.Q4_1, QT.Q4_K, QT.Q8_0, QT.Q5_0, QT.IQ4_NL, QT.IQ4_XS}) \
    | RUN_INT8_TYPES | SCALE16_TYPES | AFFINE_INT8_TYPES
KIND = {QT.Q8_0: 1, QT.Q5_0: 1, QT.Q4_0: 2, QT.Q4_1: 3, QT.Q4_K: 4, QT.IQ4_NL: 5, QT.IQ4_XS: 6,   # the kernels' QTYPE constexpr
        **{t: 1 for t in RUN_INT8_TYPES}, **{t: 8 for t in SCALE16_TYPES | RUN16_INT8_TYPES},
        **{t: 9 for t in AFFINE_INT8_TYPES}}
IQ4_TYPES = frozenset({QT.IQ4_NL, QT.IQ4_XS})
# IQ4_NL / IQ4_XS repacked on GPU stages (tests/gpu/run_iq4.sh: 2.3x the dense copy's decode on the 8B
# shape); STRATA_GPU_IQ4=0 keeps a dense bfloat16 copy of them instead, for comparing
GPU_IQ4 = os.environ.get("STRATA_GPU_IQ4", "1") == "1"
# STRATA_GPU_KEEP=Q5_0,...: types left in the GGUF layout on GPU stages (their matrices on the GGUF-layout
# kernel, their expert stacks on engine.block.moe's per-expert loop), to measure what repacking them gives
GPU_KEEP = frozenset(t.strip() for t in os.environ.get("STRATA_GPU_KEEP", "").split(",") if t.strip())
# types the load keeps in the GGUF layout because their streaming form does not fit (set by each load:
# engine.loader._place)
FIT_KEEP: frozenset[str] = frozenset()
# Q4_K matrices repacked on GPU stages take the tensor-core decode kernel's code order (set by the loader
# when that is the decode kernel: engine.loader._decode_kernel)
MMA_Q4K = False
# Q6_K repacked in 6-bit planes (kind 10) instead of int8 codes (kind 8): the file's bytes, not 10 bits a
# weight (STRATA_Q6K_PLANES=0: int8 codes). H200, 2026-12-07 (tests/gpu/run_q6k_planes.sh): llama-3-8b shape
# Q4_K with a Q6_K head, v and down 5,763 -> 4,856 MiB, one stream 357 -> 381 tok/s, eight 1,696 -> 1,621
# (both at 8 rows a pass); qwen3-30b-a3b with Q6_K down experts 22,948 -> 18,988 MiB, one stream 370 -> 421
Q6K_PLANES = model_info.Q6K_PLANES
# Q5_K in 5-bit planes (kind 11) instead of int8 codes (kind 9): 5.625 bits a weight, not 10 (STRATA_Q5K_PLANES=0:
# int8 codes). H100, 2026-12-07 (QT=Q5_K tests/gpu/run_planes.sh): llama-3-8b shape Q5_K 8,945 -> 5,200 MiB,
# one stream 267 -> 384 tok/s, eight 949 -> 1,463 (8 rows a pass); qwen3-30b-a3b one stream 329 -> 405, four
# 717 -> 785; 512-token prompts 10,974 -> 11,824 and 7,270 -> 9,371 tok/s once the prompt tile read the fifth
# bits as words (tests/gpu/run_planes_prompt.sh; before that 9,855 and 5,612)
Q5K_PLANES = model_info.Q5K_PLANES
# Q2_K in 2-bit planes (kind 12) for the int8 kernels instead of the GGUF layout (STRATA_Q2K_PLANES=0: the GGUF
# layout). H100, 2026-12-07 (QT=Q2_K tests/gpu/run_planes.sh): llama-3-8b shape 14,081 -> 2,632 MiB of weights,
# one stream 129 -> 442 tok/s, prompt 1,718 -> 12,353, but eight streams 996 -> 795 (the planes' per-row cost);
# qwen3-30b-a3b one stream 4.3 -> 473 (its expert stacks leave the per-expert loop)
Q2K_PLANES = os.environ.get("STRATA_Q2K_PLANES", "1") == "1"
# Q3_K in 3-bit planes (kind 13) instead of int8 codes (kind 8): 3.5625 bits a weight, not 10 (STRATA_Q3K_PLANES=0:
# int8 codes). H100, 2026-12-07 (QT=Q3_K tests/gpu/run_planes.sh): llama-3-8b shape 8,945 -> 3,435 MiB, one
# stream 263 -> 447 tok/s, eight 954 -> 1,402, prompt 11,386 -> 12,065; qwen3-30b-a3b one 317 -> 481, four 670 -> 984
Q3K_PLANES = model_info.Q3K_PLANES
PLANE_KINDS = {QT.Q6_K: 10, QT.Q5_K: 11, QT.Q2_K: 12, QT.Q3_K: 13}
PLANE_BITS = {QT.Q6_K: 6, QT.Q5_K: 5, QT.Q2_K: 2, QT.Q3_K: 3}             # the planes' bits a code
# IQ2_XS, IQ2_S and IQ1_M as int8 codes under a float32 factor per 16 values (kind 8: 10 bits a weight against
# the file's 2.3 / 2.5 / 1.75) on the int8 kernels, instead of the GGUF layout and, for expert stacks, the
# per-expert loop (STRATA_IQ2_INT8=0 keeps that). H100, 2026-12-07 (tests/gpu/run_iq2_int8.sh): llama-3-8b
# shape IQ2_XS one stream 130 -> 261 tok/s, eight 1,024 -> 1,168, prompt 1,699 -> 11,002, weights 14,081 ->
# 8,945 MiB; qwen3-30b-a3b IQ2_XS one stream 4.5 -> 313, prompt 110 -> 2,996, weights 8,510 -> 35,977 MiB (a
# load that does not fit keeps the type in the GGUF layout: FIT_KEEP)
IQ2_INT8 = model_info.IQ2_INT8
# IQ3_XXS, IQ3_S, IQ2_XXS and IQ1_S in IQ4_XS's layout (kind 6), their codes indexing a table of 16 values
# (engine.kernels.iq4.TABLE_VALUES[TABLE_TYPES[t]]: each grid value with its sign; IQ1_S's 8 g +- 1): every
# value is d * TABLE_D (float32, exact) times an odd integer per 32 values (sub) times a table value, all
# exact, so the same values bit for bit at 4.375 bits a weight instead of the int8 planes' 9; IQ2_XS, IQ2_S
# and IQ1_M the same with their integer scale per 16 values (kind 14: 4.625 bits, not the int8 codes' 10)
# (STRATA_IQ_TABLES=1). H200, 2026-12-07 (tests/gpu/run_iq_tables.sh): llama-3-8b shape IQ3_S one stream
# 329 -> 440 tok/s, eight 1,169 -> 1,341, weights 8,089 -> 4,130 MiB; IQ2_XS one 322 -> 434, eight 1,185 ->
# 1,045 (kind 14's rows a pass not yet tuned); qwen3-30b-a3b IQ2_XS one 328 -> 454, four 664 -> 832, prompt
# 4,807 -> 8,895, weights 35,977 -> 16,756 MiB; batch-tests IDENTICAL. H100, 2026-12-07 (run_tables_w32.sh):
# the 8B IQ2_XS one stream 400 tok/s (261 as int8 codes, run_iq2_int8.sh), eight 1,032 (1,168). That H200
# call's kernel bench once stopped on an illegal address at the down matrix; two H100 runs of the same bench
# (blocking launches, then not) and the table kernel tests on the GPU (41) passed. On by default
# (STRATA_IQ_TABLES=0: the int8 forms)
IQ_TABLES = model_info.IQ_TABLES
TABLE_TYPES = {QT.IQ3_XXS: 1, QT.IQ3_S: 2, QT.IQ2_XXS: 3, QT.IQ1_S: 4, QT.IQ2_XS: 3, QT.IQ2_S: 3, QT.IQ1_M: 4}
TABLE_D = {QT.IQ3_XXS: 0.25, QT.IQ3_S: 1.0, QT.IQ2_XXS: 0.125, QT.IQ1_S: 0.125, QT.IQ2_XS: 0.125, QT.IQ2_S: 0.125,
           QT.IQ1_M: 0.125}


@dataclass
class Packed:
    qtype: QT
    n: int
    k: int
    codes: torch.Tensor
    scales: torch.Tensor
    sub: torch.Tensor | None = None
    mma: bool = False                  # Q4_K codes in engine.kernels.q4k_mma's order (mma_order)
    planes: bool = False               # Q6_K, Q5_K, Q2_K or Q3_K in bit planes (kinds 10-13: PLANE_KINDS)
    table: int = 0                     # TABLE_TYPES' codes into iq4.TABLE_VALUES[table] (kinds 6 and 14)

    @property
    def kind(self) -> int:      # 7: Q4_K, codes in the tensor-core order; 10..13: the bit planes
        if self.table:          # 6: a table and a scale per 32 (IQ4_XS's layout); 14: a scale per 16
            return 14 if self.qtype in RUN16_INT8_TYPES else 6
        return 7 if self.mma else PLANE_KINDS[self.qtype] if self.planes else KIND[self.qtype]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.codes, self.scales, self.sub) if t is not None)

    def rows(self, a: int, b: int) -> Packed:
        """Weight rows [a, b) as views of the same planes (in the tensor-core order: a, b multiples of 16)."""
        if self.mma and (a % 16 or b % 16):
            raise ValueError(f"rows {a}..{b} of a tensor-core ordered Q4_K matrix: ranges go in steps of 16")
        sub = self.sub[a:b] if self.sub is not None else None
        return Packed(self.qtype, b - a, self.k, self.codes[a:b], self.scales[a:b], sub, self.mma, self.planes,
                      self.table)


def supports(qtype, k: int) -> bool:
    return (qtype in PACKED_TYPES or qtype == QT.Q2_K and Q2K_PLANES
            or qtype in RUN16_INT8_TYPES and (IQ2_INT8 or IQ_TABLES)) \
        and k % GGML_QUANT_SIZES[qtype][0] == 0 \
        and (GPU_IQ4 or qtype not in IQ4_TYPES) and QT(qtype).name not in GPU_KEEP | FIT_KEEP


def _planes_default(qt: QT) -> bool:
    """Whether a PLANE_KINDS type loads in its planes when pack is not told (Q2_K has no other packed form)."""
    return {QT.Q6_K: Q6K_PLANES, QT.Q5_K: Q5K_PLANES, QT.Q3_K: Q3K_PLANES, QT.Q2_K: True}[qt]


def gpu_form(qtype) -> str:
    """What a GPU stage keeps of a quantized matrix of this type, in the effective configuration's words."""
    qt = QT(qtype)
    if qt in IQ4_TYPES and not GPU_IQ4:
        return "dense bfloat16"
    if not supports(qt, GGML_QUANT_SIZES[qt][0]):
        return "the GGUF layout"
    if qt in PLANE_KINDS and _planes_default(qt):
        return f"{PLANE_BITS[qt]}-bit planes"
    if qt in TABLE_TYPES and IQ_TABLES:
        return "4-bit table codes"
    if qt in SCALE16_TYPES | AFFINE_INT8_TYPES | RUN16_INT8_TYPES:
        return "int8 codes"
    if qt in RUN_INT8_TYPES or qt in (QT.Q8_0, QT.Q5_0):
        return "int8 planes"
    return "4-bit planes" + (" in the tensor-core order" if qt == QT.Q4_K and MMA_Q4K else "")


def mma_order(codes: torch.Tensor, k: int, inverse: bool = False) -> torch.Tensor:
    """Q4_K code bytes [N, K/2] (N a multiple of 16) in GGUF's order -> engine.kernels.q4k_mma's (or back):
    per 16 rows, super-block sb and 64-value pair j, lane (g, c) of a warp holds 16 bytes: bytes 8c..8c+7
    of the pair's 32 of row g, then of row g + 8."""
    n = codes.shape[0]
    if inverse:     # [ng, sb, j, g, c, g8, i] -> [ng, g8, g, sb, j, c, i]
        v = codes.reshape(n // 16, k // 256, 4, 8, 4, 2, 8).permute(0, 5, 3, 1, 2, 4, 6)
    else:
        v = codes.reshape(n // 16, 2, 8, k // 256, 4, 4, 8).permute(0, 3, 4, 2, 5, 1, 6)
    return v.contiguous().reshape(n, k // 2)


def pack(data: torch.Tensor, qtype, k: int, mma: bool = False, planes: bool | None = None) -> Packed:
    """GGUF bytes [N, row_bytes] uint8 (any device) -> the planes, on the same device. mma: Q4_K codes in
    the tensor-core decode kernel's order (N a multiple of 16); planes: Q6_K, Q5_K, Q3_K in bit planes
    (default Q6K_PLANES, Q5K_PLANES, Q3K_PLANES; Q2_K has no other packed form), the TABLE_TYPES in their
    table codes (default IQ_TABLES)."""
    qtype = QT(qtype)
    if qtype in PLANE_KINDS and (qtype == QT.Q2_K or (_planes_default(qtype) if planes is None else planes)):
        return {QT.Q6_K: six_bit_planes, QT.Q5_K: five_bit_planes, QT.Q2_K: two_bit_planes,
                QT.Q3_K: three_bit_planes}[qtype](data, k)
    block, size = GGML_QUANT_SIZES[qtype]
    n = data.shape[0]
    b = data.reshape(n, k // block, size)
    f16 = lambda lo: b[..., lo:lo + 2].contiguous().view(torch.float16).squeeze(-1)  # noqa: E731
    if qtype == QT.Q8_0:
        return Packed(qtype, n, k, b[..., 2:].contiguous().view(torch.int8).reshape(n, k), f16(0).contiguous())
    if qtype == QT.Q5_0:               # Q8_0's planes: the codes q - 16 as int8, d as it is
        return Packed(qtype, n, k, _q5_0_codes(b, n, k), f16(0).contiguous())
    if qtype in TABLE_TYPES and (IQ_TABLES if planes is None else planes):
        return _table_codes(data, qtype, n, k)
    if qtype in RUN_INT8_TYPES or qtype in RUN16_INT8_TYPES:
        return _run_int8(data, qtype, n, k)
    if qtype in SCALE16_TYPES or qtype in AFFINE_INT8_TYPES:
        return _int8_values(b, qtype, n, k)
    if qtype == QT.Q4_0:
        return Packed(qtype, n, k, b[..., 2:].reshape(n, k // 2).contiguous(), f16(0).contiguous())
    if qtype == QT.Q4_1:
        return Packed(qtype, n, k, b[..., 4:].reshape(n, k // 2).contiguous(),
                      torch.stack((f16(0), f16(2)), -1).contiguous())
    if qtype == QT.Q4_K:
        sc, mn = scale_min_k4(b[..., 4:16].reshape(-1, 12))
        sub = torch.cat((sc, mn), -1).reshape(n, k // 256, 16).contiguous()
        codes = b[..., 16:].reshape(n, k // 2)
        return Packed(qtype, n, k, mma_order(codes, k) if mma else codes.contiguous(),
                      torch.stack((f16(0), f16(2)), -1).contiguous(), sub, mma)
    if qtype == QT.IQ4_NL:             # d, then the codes; values kvalues[q]
        return Packed(qtype, n, k, iq4_words(b[..., 2:].reshape(n, k // 2)), f16(0).contiguous())
    if qtype == QT.IQ4_XS:             # d, 6-bit sub-block scales (- 32) split low / high, 8 runs of 16 bytes
        high = b[..., 2].int() | (b[..., 3].int() << 8)
        low = torch.stack((b[..., 4:8] & 0x0F, b[..., 4:8] >> 4), -1).reshape(n, k // 256, 8).int()
        high = (high[..., None] >> torch.arange(0, 16, 2, device=b.device)) & 3
        sub = ((low | (high << 4)) - 32).to(torch.int8).contiguous()
        return Packed(qtype, n, k, iq4_words(b[..., 8:].reshape(n, k // 2)), f16(0).contiguous(), sub)
    raise ValueError(f"no packed layout for {qtype.name}")


def _q5_0_codes(b: torch.Tensor, n: int, k: int) -> torch.Tensor:
    """Q5_0 blocks b [N, K/32, 22] -> the values' integers q - 16, int8 [N, K]; a few rows at a time, so an
    expert stack's temporaries stay small (its byte planes are each the size of the whole result)."""
    from engine.quant import fifth_bits, nibbles

    codes = torch.empty((n, k), dtype=torch.int8, device=b.device)
    step = max(1, (1 << 22) // k)
    for a in range(0, n, step):
        blk = b[a:a + step]
        q = nibbles(blk[..., 6:22].reshape(-1, 16)) | fifth_bits(blk[..., 2:6].reshape(-1, 4))
        codes[a:a + step] = (q.view(torch.int8) - 16).reshape(-1, k)
    return codes


def _int8_values(b: torch.Tensor, qtype: QT, n: int, k: int) -> Packed:
    """Q6_K, Q3_K, Q5_K, Q5_1 blocks b [N, K/block, size] -> int8 codes [N, K] and float32 scales, a few rows
    at a time: Q6_K q - 32, Q3_K its signed q, under d * sc per 16 values [N, K/16] (kind 8); Q5_K q and
    (d * sc, -(dmin * m)), Q5_1 q and (d, m) per 32 values [N, K/32, 2] (kind 9: value d q + m). The scales
    are engine.quant's own (its decoders' parts; d * sc is exact in float32), so the values are bit for bit."""
    from engine.quant import q5_1_parts
    from engine.quant_kquants import q3_k_parts, q5_k_parts, q6_k_parts

    codes = torch.empty((n, k), dtype=torch.int8, device=b.device)
    per16 = KIND[qtype] == 8
    scales = torch.empty((n, k // 16) if per16 else (n, k // 32, 2), dtype=torch.float32, device=b.device)
    step = max(1, (1 << 22) // k)
    for a in range(0, n, step):
        blk = b[a:a + step].reshape(-1, b.shape[-1])
        m = blk.shape[0] * GGML_QUANT_SIZES[qtype][0] // k
        if per16:
            sc, q = (q6_k_parts if qtype == QT.Q6_K else q3_k_parts)(blk)
        else:
            d, mn, q = (q5_k_parts if qtype == QT.Q5_K else q5_1_parts)(blk)
            sc = torch.stack((d, -mn if qtype == QT.Q5_K else mn), -1)
        codes[a:a + m] = q.view(torch.int8).reshape(m, k)
        scales[a:a + m] = sc.reshape(scales[a:a + m].shape)
    return Packed(qtype, n, k, codes, scales)


def six_bit_planes(data: torch.Tensor, k: int) -> Packed:
    """Q6_K rows [N, K/256 * 210] -> kind 10: codes uint8 [N, K/64 * 48], per 64 values u = (q - 32) & 63
    (6-bit two's complement): bytes 0..31 byte i = u[i] & 15 | (u[32 + i] & 15) << 4 (Q4_K's nibble
    order), bytes 32..47 byte 4 j + b holds u[16 g + 4 j + b] >> 4 in bits 2 g, 2 g + 1 (g = 0..3: the
    high bits of each 16 values' word j); sub int32 [N, K/64] (each word the 4 int8 sub-block scales of
    its 64 values, little-endian); scales float16 [N, K/256] (d). The file's 6.5625 bits a weight."""
    from engine.quant_kquants import q6_k_parts

    n = data.shape[0]
    b = data.reshape(n, k // 256, 210)
    codes = torch.empty((n, k // 64, 48), dtype=torch.uint8, device=data.device)
    for a, m, blk in _block_rows(b, k):
        u = (q6_k_parts(blk)[1].reshape(m, k // 64, 64).view(torch.uint8) & 63)
        codes[a:a + m, :, :32] = u[..., :32] & 15 | (u[..., 32:] & 15) << 4
        codes[a:a + m, :, 32:] = _bit_fields((u >> 4).reshape(m, k // 64, 4, 16), 2)     # [.., g, 4 j + b]
    sub = b[..., 192:208].contiguous().view(torch.int32).reshape(n, k // 64)
    d = b[..., 208:210].contiguous().view(torch.float16).reshape(n, k // 256)
    return Packed(QT.Q6_K, n, k, codes.reshape(n, k * 3 // 4), d, sub, planes=True)


def five_bit_planes(data: torch.Tensor, k: int) -> Packed:
    """Q5_K rows [N, K/256 * 176] -> kind 11: codes uint8 [N, K/2] (the low nibbles in Q4_K's order: the
    file's own bytes), scales float16 [N, K/256, 2] (d, dmin), sub int32 [N, K/64 * 3]: per 64 values (a
    pair of sub-blocks) a word of bytes (sc, sc', m, m'), then two words of fifth bits: value 16 g + 4 j + b
    (g, j, b = 0..3) in word j // 2, byte b, bit 2 g + j % 2. 5.625 bits a weight."""
    from engine.quant_kquants import q5_k_parts

    n = data.shape[0]
    b = data.reshape(n, k // 256, 176)
    sub = torch.empty((n, k // 64, 12), dtype=torch.uint8, device=data.device)
    for a, m, blk in _block_rows(b, k):
        sc, mn = scale_min_k4(blk[:, 4:16])                               # [.., 8] each
        sub[a:a + m, :, 0:2] = sc.reshape(m, k // 64, 2)
        sub[a:a + m, :, 2:4] = mn.reshape(m, k // 64, 2)
        h = (q5_k_parts(blk)[2] >> 4).reshape(m, k // 64, 4, 2, 2, 4)     # [.., g, w, j % 2, b]
        sub[a:a + m, :, 4:] = _bit_fields(h.permute(0, 1, 2, 4, 3, 5).reshape(m, k // 64, 8, 8), 1)
    scales = torch.stack((b[..., 0:2], b[..., 2:4]), -2).contiguous().view(torch.float16).reshape(n, k // 256, 2)
    return Packed(QT.Q5_K, n, k, b[..., 48:176].reshape(n, k // 2).contiguous(), scales,
                  sub.view(torch.int32).reshape(n, k // 64 * 3), planes=True)


def _block_rows(b: torch.Tensor, k: int):
    """(first row, rows, their 256-value blocks [rows * K/256, size]) of b [N, K/256, size], a few rows at a
    time (bounded temporaries)."""
    step = max(1, (1 << 22) // k)
    for a in range(0, b.shape[0], step):
        blk = b[a:a + step].reshape(-1, b.shape[-1])
        yield a, blk.shape[0] * 256 // k, blk


def _bit_fields(q: torch.Tensor, width: int) -> torch.Tensor:
    """[..., F, L] values of `width` bits -> [..., L] bytes holding field f in bits width * f.. (F * width <= 8)."""
    out = q[..., 0, :].to(torch.uint8)
    for f in range(1, q.shape[-2]):
        out = out | (q[..., f, :].to(torch.uint8) << (width * f))
    return out


def two_bit_planes(data: torch.Tensor, k: int) -> Packed:
    """Q2_K rows [N, K/256 * 84] -> kind 12: codes uint8 [N, K/4], per 64 values 16 bytes, byte 4 j + b
    holding value 16 g + 4 j + b in bits 2 g, 2 g + 1 (g, j, b = 0..3); sub int32 [N, K/64] (the file's scale
    bytes, sc | m << 4 per 16 values, four a word); scales float16 [N, K/256, 2] (d, dmin). The file's 2.625
    bits a weight."""
    n = data.shape[0]
    b = data.reshape(n, k // 256, 84)
    codes = torch.empty((n, k // 64, 16), dtype=torch.uint8, device=data.device)
    for a, m, blk in _block_rows(b, k):
        qs = blk[:, 16:80].reshape(-1, 2, 1, 32)
        q = ((qs >> torch.arange(0, 8, 2, device=qs.device)[:, None]) & 3).reshape(m, k // 64, 4, 16)   # [.., g, i]
        codes[a:a + m] = _bit_fields(q, 2)
    sub = b[..., :16].contiguous().view(torch.int32).reshape(n, k // 64)
    scales = b[..., 80:84].contiguous().view(torch.float16).reshape(n, k // 256, 2)
    return Packed(QT.Q2_K, n, k, codes.reshape(n, k // 4), scales, sub, planes=True)


def three_bit_planes(data: torch.Tensor, k: int) -> Packed:
    """Q3_K rows [N, K/256 * 110] -> kind 13: per 64 values u = q & 7 (q in -4..3, 3-bit two's complement):
    codes uint8 [N, K/4] hold u & 3 as two_bit_planes holds Q2_K's codes; sub int32 [N, K/64 * 3]: a word of
    the four int8 sub-block scales sc - 32, then two words of u >> 2 as five_bit_planes' fifth bits (value
    16 g + 4 j + b in word j // 2, byte b, bit 2 g + j % 2); scales float16 [N, K/256] (d). 3.5625 bits a
    weight."""
    from engine.quant_kquants import q3_k_parts, q3_k_scales

    n = data.shape[0]
    b = data.reshape(n, k // 256, 110)
    codes = torch.empty((n, k // 64, 16), dtype=torch.uint8, device=data.device)
    sub = torch.empty((n, k // 64, 12), dtype=torch.uint8, device=data.device)
    for a, m, blk in _block_rows(b, k):
        u = (q3_k_parts(blk)[1].view(torch.uint8) & 7).reshape(m, k // 64, 4, 16)         # [.., g, 4 j + b]
        codes[a:a + m] = _bit_fields(u & 3, 2)
        sub[a:a + m, :, :4] = q3_k_scales(blk).view(torch.uint8).reshape(m, k // 64, 4)
        h = (u >> 2).reshape(m, k // 64, 4, 2, 2, 4)                                      # [.., g, w, j % 2, b]
        sub[a:a + m, :, 4:] = _bit_fields(h.permute(0, 1, 2, 4, 3, 5).reshape(m, k // 64, 8, 8), 1)
    d = b[..., 108:110].contiguous().view(torch.float16).reshape(n, k // 256)
    return Packed(QT.Q3_K, n, k, codes.reshape(n, k // 4), d, sub.view(torch.int32).reshape(n, k // 64 * 3),
                  planes=True)


def _run_int8(data: torch.Tensor, qtype: QT, n: int, k: int) -> Packed:
    """RUN_INT8_TYPES: each 32-value run's factor (engine.quant_iquants.run_factors) and its values'
    integers (Q8_0's planes with float32 scales, kind 1); RUN16_INT8_TYPES: the same per 16 values (kind
    8's layout)."""
    codes, scales, _ = _int8_runs(data, qtype, n, k)
    return Packed(qtype, n, k, codes, scales)


def _int8_runs(data: torch.Tensor, qtype: QT, n: int, k: int):
    """(integers int8 [N, K], factors float32 [N, K/run], the factors with d = 1 [N, K/run]) of an i-quant
    whose values are integer multiples of a factor per run of 16 or 32 values. The integers are read off
    the values the decoders give with d set to 1 (finite, non-zero factors, so the quotients are whole:
    checked); a d of 0, inf or NaN then gives back what engine.quant gives too."""
    from engine.quant import dequantize
    from engine.quant_iquants import run_factors

    block, size = GGML_QUANT_SIZES[qtype]
    run = 16 if qtype in RUN16_INT8_TYPES else 32
    codes = torch.empty((n, k), dtype=torch.int8, device=data.device)
    scales = torch.empty((n, k // run), dtype=torch.float32, device=data.device)
    units = torch.empty((n, k // run), dtype=torch.float32, device=data.device)
    step = max(1, (1 << 22) // k)                 # rows at a time: bounded float32 temporaries
    for a in range(0, n, step):
        rows = data[a:a + step].reshape(-1, size)
        m = rows.shape[0] * block // k
        unit = rows.clone()
        if qtype == QT.IQ1_M:                     # d = 1.0: 0x3C00, a nibble in the top of each scale word
            unit[:, 49:57:2] = unit[:, 49:57:2] & 0x0F | torch.tensor([0x00, 0x00, 0xC0, 0x30], dtype=torch.uint8,
                                                                        device=unit.device)
        else:
            unit[:, 0], unit[:, 1] = 0x00, 0x3C   # d = 1.0 (float16, little-endian)
        values = dequantize(unit.reshape(-1), qtype, m * k).reshape(m, k // run, run)
        f = run_factors(unit, qtype).reshape(m, k // run, 1)
        q = values / f
        if not torch.equal(q.round(), q) or not (q.abs() <= 127).all() or not torch.equal(q * f, values):
            raise ValueError(f"{qtype.name} rows {a}..{a + m - 1}: values that are not whole multiples of "
                             f"their runs' scales")
        codes[a:a + m] = q.reshape(m, k).to(torch.int8)
        scales[a:a + m] = run_factors(rows, qtype).reshape(m, k // run)
        units[a:a + m] = f.reshape(m, k // run)
    return codes, scales, units


def _table_codes(data: torch.Tensor, qtype: QT, n: int, k: int) -> Packed:
    """TABLE_TYPES -> kind 6 (IQ4_XS's layout), or kind 14 for the types with a factor per 16 values: each
    value's index into iq4.TABLE_VALUES[TABLE_TYPES[qtype]] as 4-bit codes in `iq4_words`' order, d * TABLE_D
    per 256 values (float32) in `scales`, and each run's odd integer scale (its factor over that d,
    engine.quant_iquants.run_factors) in `sub`: int8 [N, K/256, 8] per 32 values (kind 6), or per 16 values
    four to an int32 word [N, K/64] (kind 14). The integer values are _int8_runs' (checked whole there); one
    outside the table is an error."""
    from engine.kernels.iq4 import TABLE_VALUES

    tab = TABLE_TYPES[qtype]
    run = 16 if qtype in RUN16_INT8_TYPES else 32
    q, f, unit = _int8_runs(data, qtype, n, k)                 # q: the values over their factors f
    lut = torch.full((256,), -1, dtype=torch.int16)
    for i, v in enumerate(TABLE_VALUES[tab]):
        if lut[v & 0xFF] < 0:
            lut[v & 0xFF] = i
    c = lut.to(data.device)[q.view(torch.uint8).int()]
    if (c < 0).any():
        raise ValueError(f"{qtype.name}: a value outside its table {TABLE_VALUES[tab]}")
    c = c.to(torch.uint8).reshape(n, k // 32, 2, 16)
    codes = iq4_words((c[:, :, 0] | c[:, :, 1] << 4).reshape(n, k // 2))
    sc = (unit / TABLE_D[qtype]).reshape(-1, 256 // run)       # the odd integers, [K/256 blocks, runs]
    d = f.reshape(-1, 256 // run)[:, 0] / sc[:, 0]              # d * TABLE_D: exact (a product of it and sc)
    sub = sc.to(torch.int8).reshape(n, k // 256, 256 // run)
    sub = sub.contiguous() if run == 32 else sub.reshape(n, k // 16).view(torch.int32).contiguous()
    return Packed(qtype, n, k, codes, d.reshape(n, k // 256).contiguous(), sub, table=tab)


def cat(parts: list[Packed]) -> Packed:
    """Weights with the same type and K stacked along N (q|k|v, gate|up): one launch reads them all."""
    p0 = parts[0]
    if any(p.qtype != p0.qtype or p.k != p0.k or p.kind != p0.kind or p.table != p0.table for p in parts):
        raise ValueError("stacked weights need the same type, K and code order")
    sub = torch.cat([p.sub for p in parts]) if p0.sub is not None else None
    return Packed(p0.qtype, sum(p.n for p in parts), p0.k, torch.cat([p.codes for p in parts]),
                  torch.cat([p.scales for p in parts]), sub, p0.mma, p0.planes, p0.table)


def iq4_words(codes: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """[N, K/2] IQ4 code bytes in GGUF's order (each 16-byte run: byte i holds value i low, i + 16
    high) -> the kernels' order, in which each 4-byte word j of a run holds values 4j .. 4j + 3 in its
    low half and 4j + 16 .. 4j + 19 in its high half, a nibble each from the low bits up; `inverse`
    goes back. The same nibbles, moved."""
    b = codes.reshape(*codes.shape[:-1], -1, 4)
    b0, b1, b2, b3 = b.unbind(-1)
    if inverse:
        out = (b0 & 0x0F | (b2 & 0x0F) << 4, b0 >> 4 | b2 & 0xF0, b1 & 0x0F | (b3 & 0x0F) << 4, b1 >> 4 | b3 & 0xF0)
    else:
        out = (b0 & 0x0F | (b1 & 0x0F) << 4, b2 & 0x0F | (b3 & 0x0F) << 4, b0 >> 4 | b1 & 0xF0, b2 >> 4 | b3 & 0xF0)
    return torch.stack(out, -1).reshape(codes.shape).contiguous()


def _nibbles(codes: torch.Tensor, group: int) -> torch.Tensor:
    """[N, K/2] bytes -> [N, K] values: per run of `group` bytes, the low nibbles then the high ones."""
    n = codes.shape[0]
    c = codes.reshape(n, -1, 1, group)
    return torch.cat((c & 0x0F, c >> 4), 2).reshape(n, -1)


def _two_bit_codes(codes: torch.Tensor, n: int, k: int) -> torch.Tensor:
    """two_bit_planes' code bytes [N, K/4] -> the values' 2-bit codes [N, K/64, 64], int32."""
    c = codes.reshape(n, k // 64, 1, 16).int()
    return ((c >> torch.arange(0, 8, 2, device=c.device)[:, None]) & 3).reshape(n, k // 64, 64)


def _unit_bits(words: torch.Tensor, n: int, k: int) -> torch.Tensor:
    """Per 64 values 8 bytes [N, K/64, 8] of one bit each (value 16 g + 4 j + b in byte 4 (j // 2) + b, bit
    2 g + j % 2: five_bit_planes') -> [N, K/64, 64] int32."""
    bits = (words.int()[..., None] >> torch.arange(8, device=words.device)) & 1           # [.., w, b, t]
    return bits.reshape(n, k // 64, 2, 4, 4, 2).permute(0, 1, 4, 2, 5, 3).reshape(n, k // 64, 64)


def unpack(p: Packed) -> torch.Tensor:
    """The float32 values [N, K], with engine.quant's operations (bit-identical to it)."""
    n, k = p.n, p.k
    if p.kind == 1:                               # Q8_0, Q5_0 and the run-int8 IQ types
        return (p.codes.reshape(n, k // 32, 32).float() * p.scales.float()[..., None]).reshape(n, k)
    if p.kind == 8:                               # Q6_K, Q3_K: (d * sc) * q per 16
        return (p.scales[..., None] * p.codes.reshape(n, k // 16, 16).float()).reshape(n, k)
    if p.kind == 10:                              # Q6_K's 6-bit planes: (d * sc) * q per 16
        c = p.codes.reshape(n, k // 64, 48).int()
        lo = torch.cat((c[..., :32] & 15, c[..., :32] >> 4), -1)                 # [N, K/64, 64]
        hi = (c[..., 32:, None] >> torch.arange(0, 8, 2, device=c.device)) & 3   # [.., 4 j + b, g]
        u = lo | hi.transpose(-1, -2).reshape(n, k // 64, 64) << 4
        q = ((u ^ 32) - 32).float().reshape(n, k // 16, 16)
        dl = p.scales.float().repeat_interleave(16, -1) * p.sub.view(torch.int8).float()
        return (dl[..., None] * q).reshape(n, k)
    if p.kind == 11:                              # Q5_K's 5-bit planes: (d * sc) * q - dmin * m per 32
        sub = p.sub.view(torch.uint8).reshape(n, k // 64, 12).int()
        q = _nibbles(p.codes, 32).reshape(n, k // 64, 64) | _unit_bits(sub[..., 4:], n, k) << 4
        d, dmin = p.scales.float().unbind(-1)
        dl = d.repeat_interleave(8, -1) * sub[..., 0:2].reshape(n, k // 32).float()
        ml = dmin.repeat_interleave(8, -1) * sub[..., 2:4].reshape(n, k // 32).float()
        return (dl[..., None] * q.reshape(n, k // 32, 32).float() - ml[..., None]).reshape(n, k)
    if p.kind == 13:                              # Q3_K's 3-bit planes: (d * sc) * q per 16
        sub = p.sub.view(torch.uint8).reshape(n, k // 64, 12)
        u = _two_bit_codes(p.codes, n, k) | _unit_bits(sub[..., 4:], n, k) << 2
        q = ((u ^ 4) - 4).float().reshape(n, k // 16, 16)
        dl = p.scales.float().repeat_interleave(16, -1) * sub[..., :4].view(torch.int8).reshape(n, k // 16).float()
        return (dl[..., None] * q).reshape(n, k)
    if p.kind == 12:                              # Q2_K's 2-bit planes: (d * sc) * q - dmin * m per 16
        q = _two_bit_codes(p.codes, n, k).reshape(n, k // 16, 16)
        sm = p.sub.view(torch.uint8).reshape(n, k // 16).int()
        d, dmin = (f.repeat_interleave(16, -1) for f in p.scales.float().unbind(-1))
        return ((d * (sm & 15).float())[..., None] * q.float() - (dmin * (sm >> 4).float())[..., None]).reshape(n, k)
    if p.kind == 9:                               # Q5_K, Q5_1: d * q + m per 32
        d, m = p.scales.unbind(-1)
        return (d[..., None] * p.codes.reshape(n, k // 32, 32).float() + m[..., None]).reshape(n, k)
    if p.qtype in IQ4_TYPES or p.table:
        from engine.kernels.iq4 import TABLE_VALUES

        kv = torch.tensor(TABLE_VALUES[p.table], dtype=torch.float32, device=p.codes.device)
        q = _nibbles(iq4_words(p.codes, inverse=True), 16)
        if p.qtype == QT.IQ4_NL:
            q = q.reshape(n, k // 32, 32).long()
            return (p.scales.float()[..., None] * kv[q]).reshape(n, k)
        runs = 16 if p.kind == 14 else 8                          # kind 14: a scale per 16 values
        q = q.reshape(n, k // 256, runs, 256 // runs).long()
        dl = (p.scales.float()[..., None] * p.sub.view(torch.int8).reshape(n, k // 256, runs).float())[..., None]
        return (dl * kv[q]).reshape(n, k)
    if p.qtype in (QT.Q4_0, QT.Q4_1):
        q = _nibbles(p.codes, 16).reshape(n, k // 32, 32)
        if p.qtype == QT.Q4_0:
            return (p.scales.float()[..., None] * (q.float() - 8)).reshape(n, k)
        d, m = p.scales.float().unbind(-1)
        return (d[..., None] * q.float() + m[..., None]).reshape(n, k)
    q = _nibbles(mma_order(p.codes, k, inverse=True) if p.mma else p.codes, 32).reshape(n, k // 256, 8, 32).float()
    d, dmin = p.scales.float().unbind(-1)
    dl = (d[..., None] * p.sub[..., :8].float())[..., None]
    ml = (dmin[..., None] * p.sub[..., 8:].float())[..., None]
    return (dl * q - ml).reshape(n, k)
