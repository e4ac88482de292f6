"""The GPU streaming weight layout (engine.kernels.packed) and its matmul (engine.kernels.stream_matmul).

The layout must hold exactly the GGUF values: `unpack` and the Triton kernel's own dequantization are
compared bit for bit with engine.quant. The kernel runs here under TRITON_INTERPRET=1 in float32 (the
interpreter's bf16 tl.dot is wrong, ../shared/ENVIRONMENT.md); its bf16 branch is checked on the GPU
by tests/gpu/bench_matmul.py, which every GPU script runs.
"""
from __future__ import annotations

import importlib
import os

import numpy as np
import pytest
import torch
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as QT

import engine.kernels.packed as packed_module
from engine.kernels.packed import KIND, PACKED_TYPES, RUN_INT8_TYPES, TABLE_TYPES, cat, pack, supports, unpack
from engine.quant import dequantize
from engine.synthetic import _random_blocks

TYPES = sorted(PACKED_TYPES, key=lambda t: t.name)
# The types a matmul kernel's tests run: the four run-int8 IQ types pack to the same planes (int8 codes, a
# float32 scale per 32 values, kind 1: test_run_int8_types_are_q8_planes_with_float32_scales), so every
# kernel runs the same code on each of them; IQ3_S stands for the four (their values are checked above).
# Q5_0 packs to Q8_0's planes exactly (test_q5_0_is_q8_planes), so Q8_0 stands for it too; Q3_K packs to
# Q6_K's (kind 8: test_int8_value_types), so Q6_K stands for it.
PLANE_TYPES = (QT.Q6_K, QT.Q5_K, QT.Q2_K, QT.Q3_K)
KERNEL_TYPES = [t for t in TYPES if (t not in RUN_INT8_TYPES or t == QT.IQ3_S) and t not in (QT.Q5_0, QT.Q3_K)]


# the table-code types whose kernels differ: each table in kind 6 and 14 (IQ2_S reads as IQ2_XS: the same kind
# and table, its values checked by the unpack tests)
KERNEL_TABLES = (QT.IQ3_XXS, QT.IQ3_S, QT.IQ2_XXS, QT.IQ1_S, QT.IQ2_XS, QT.IQ1_M)


def layouts(types, tables=KERNEL_TABLES) -> list:
    """(type, planes) params: each type with its int8 codes where it has planes (planes=False), then Q6_K in
    6-bit planes (kind 10, packed.six_bit_planes), Q5_K in 5-bit (kind 11), Q2_K in 2-bit (kind 12) and Q3_K
    in 3-bit (kind 13), then `tables` in their table codes (kind 6 or 14, packed.TABLE_TYPES)."""
    return [pytest.param(t, False, id=t.name) for t in types] + [pytest.param(t, True, id=t.name + "-planes")
                                                                 for t in PLANE_TYPES] \
        + [pytest.param(t, True, id=t.name + "-table") for t in tables]


def blocks(qt, n, k, seed=0):
    block, _ = GGML_QUANT_SIZES[qt]
    return torch.from_numpy(_random_blocks(qt, n * k // block, np.random.default_rng(seed), 0.02)).reshape(n, -1)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-identical, where NaN payloads may differ."""
    both_nan = a.isnan() & b.isnan()
    return a.shape == b.shape and bool(((a.view(torch.int32) == b.view(torch.int32)) | both_nan).all())


@pytest.mark.parametrize("qt,planes", layouts(TYPES, TABLE_TYPES))
def test_unpack_is_bit_identical_to_engine_quant(qt, planes):
    k = 768 if GGML_QUANT_SIZES[qt][0] == 256 else 576
    for data in (blocks(qt, 7, k), torch.randint(0, 256, blocks(qt, 7, k).shape, dtype=torch.uint8,
                                                  generator=torch.Generator().manual_seed(3))):
        assert same_bits(unpack(pack(data, qt, k, planes=planes)), dequantize(data, qt, 7 * k).reshape(7, k))


def test_run_int8_types_are_q8_planes_with_float32_scales():
    """IQ3_S, IQ3_XXS, IQ2_XXS and IQ1_S become int8 codes and a float32 scale per 32 values (the int8
    kernels read them as Q8_0), the values exact (test_unpack_is_bit_identical_to_engine_quant); the
    GPU memory estimate (engine.model_info, no torch) names the same types."""
    from engine.model_info import RUN_INT8

    assert {t.name for t in RUN_INT8_TYPES} == RUN_INT8
    for qt in RUN_INT8_TYPES:
        p = pack(blocks(qt, 3, 512), qt, 512, planes=False)     # (planes=True: table codes)
        assert p.kind == 1 and p.codes.dtype == torch.int8 and p.scales.dtype == torch.float32
        assert p.nbytes == 3 * 512 * 9 // 8 and p.codes.abs().max() > 1


@pytest.mark.parametrize("qt", list(TABLE_TYPES), ids=lambda t: t.name)
def test_table_types_are_four_bit_codes_in_iq4_xs_layout(qt, monkeypatch):
    """With STRATA_IQ_TABLES=1 IQ3_XXS, IQ3_S, IQ2_XXS and IQ1_S become IQ4_XS's layout (kind 6): 4-bit codes
    into their own table of 16 values, d * TABLE_D per 256 values, an odd integer scale per 32: 4.375 bits a
    weight; IQ2_XS, IQ2_S and IQ1_M the same with the scale per 16 (kind 14, four to a word): 4.625 bits (the
    GPU memory estimate says the same); the values bit for bit engine.quant's for random blocks and random
    bytes (d of 0, inf, NaN included)."""
    import engine.model_info as model_info
    from engine.kernels.iq4 import TABLE_VALUES

    per16 = qt in packed_module.RUN16_INT8_TYPES
    monkeypatch.setattr(packed_module, "IQ_TABLES", False)
    assert pack(blocks(qt, 3, 512), qt, 512).kind == (8 if per16 else 1)
    monkeypatch.setattr(packed_module, "IQ_TABLES", True)
    data = blocks(qt, 5, 768)
    p = pack(data, qt, 768)
    bits = (37, 64) if per16 else (35, 64)
    assert p.kind == (14 if per16 else 6) and p.table == TABLE_TYPES[qt]
    assert p.nbytes == 5 * 768 * bits[0] // bits[1]
    assert p.scales.dtype == torch.float32 and p.sub.dtype == (torch.int32 if per16 else torch.int8)
    sc = p.sub.view(torch.int8)
    assert sc.numel() == 5 * 768 // (16 if per16 else 32)
    assert (sc % 2 == 1).all() and sc.min() >= 1 and sc.max() <= 31
    used = set(TABLE_VALUES[p.table][c] for c in packed_module._nibbles(p.codes, 16).unique().tolist())
    assert len(used) == {1: 16, 2: 16, 3: 6, 4: 6}[p.table]
    assert same_bits(unpack(p), dequantize(data, qt, 5 * 768).reshape(5, 768))
    noise = torch.randint(0, 256, data.shape, dtype=torch.uint8, generator=torch.Generator().manual_seed(9))
    assert same_bits(unpack(pack(noise, qt, 768)), dequantize(noise, qt, 5 * 768).reshape(5, 768))
    rows = pack(data, qt, 768).rows(1, 4)
    assert rows.table == p.table and same_bits(unpack(cat([rows, p.rows(0, 1)])),
                                               unpack(p)[torch.tensor([1, 2, 3, 0])])
    assert model_info.GPU_BYTES_PER_VALUE[qt.name] == (bits if model_info.IQ_TABLES else (5, 4) if per16 else (9, 8))


@pytest.mark.parametrize("qt", [QT.IQ2_XS, QT.IQ2_S, QT.IQ1_M], ids=lambda t: t.name)
def test_run16_int8_types_are_int8_codes_with_a_scale_per_16(qt, monkeypatch):
    """IQ2_XS, IQ2_S and IQ1_M (by default; STRATA_IQ2_INT8=0 leaves them in the GGUF layout) become int8 codes under
    a float32 factor per 16 values (kind 8, as Q6_K's int8 codes), the values bit for bit engine.quant's
    for random blocks and random bytes (d of 0, inf, NaN included), over the packer's row chunks; the GPU
    memory estimate names the same types."""
    from engine.model_info import RUN16_INT8

    assert {t.name for t in packed_module.RUN16_INT8_TYPES} == RUN16_INT8
    assert packed_module.IQ2_INT8 == (os.environ.get("STRATA_IQ2_INT8", "1") == "1")
    monkeypatch.setattr(packed_module, "IQ_TABLES", False)
    monkeypatch.setattr(packed_module, "IQ2_INT8", False)
    assert not supports(qt, 512) and packed_module.gpu_form(qt) == "the GGUF layout"
    monkeypatch.setattr(packed_module, "IQ2_INT8", True)
    assert supports(qt, 512) and not supports(qt, 500) and packed_module.gpu_form(qt) == "int8 codes"
    p = pack(blocks(qt, 3, 512), qt, 512)
    assert p.kind == 8 and p.codes.dtype == torch.int8 and p.scales.shape == (3, 32) and p.nbytes == 3 * 512 * 10 // 8
    assert p.codes.abs().max() > 1
    noise = torch.randint(0, 256, (7, 2 * GGML_QUANT_SIZES[qt][1]), dtype=torch.uint8, generator=torch.Generator().manual_seed(3))
    n = 2 * (1 << 22) // 512 + 5
    for data, rows in ((noise, 7), (blocks(qt, n, 512, 4), n)):
        assert same_bits(unpack(pack(data, qt, 512)), dequantize(data, qt, rows * 512).reshape(rows, 512))


def test_q5_0_is_q8_planes():
    """Q5_0 (llama-quantize's type for a Q4_K file's matrices with K not a multiple of 256) becomes Q8_0's
    planes: int8 codes q - 16, the float16 d per 32; the values exact (test_unpack_is_bit_identical_to_
    engine_quant), and the GPU memory estimate counts its 8.5 bits per value."""
    from types import SimpleNamespace

    from engine.model_info import gpu_matrix_bytes

    p = pack(blocks(QT.Q5_0, 3, 1408), QT.Q5_0, 1408)
    assert p.kind == 1 and p.codes.dtype == torch.int8 and p.scales.dtype == torch.float16
    assert p.codes.min() == -16 and p.codes.max() == 15
    t = SimpleNamespace(qtype=QT.Q5_0, shape=(1408, 3), n_elements=3 * 1408, nbytes=3 * 1408 * 22 // 32)
    assert gpu_matrix_bytes(t) == p.nbytes == 3 * 1408 * 17 // 16
    n = 2 * (1 << 22) // 1408 + 5            # rows over two of the packer's row chunks
    data = blocks(QT.Q5_0, n, 1408, 4)
    assert supports(QT.Q5_0, 1408) and not supports(QT.Q5_0, 1400)
    assert same_bits(unpack(pack(data, QT.Q5_0, 1408)), dequantize(data, QT.Q5_0, n * 1408).reshape(n, 1408))


@pytest.mark.parametrize("qt,kind,lo,hi", [(QT.Q6_K, 8, -32, 31), (QT.Q3_K, 8, -4, 3), (QT.Q5_K, 9, 0, 31),
                                           (QT.Q5_1, 9, 0, 31)],
                         ids=lambda v: getattr(v, "name", None) or str(v))
def test_int8_value_types(qt, kind, lo, hi):
    """Q5_1 (and Q6_K, Q3_K, Q5_K with their planes off: STRATA_Q6K_PLANES=0, ...) become int8 codes
    with float32 scales (Q6_K, Q3_K: d * sc per 16 values; Q5_K, Q5_1: (d, m) per 32), read by the int8
    kernels as kinds 8 and 9; the values exact (test_unpack_is_bit_identical_to_engine_quant), over the packer's row
    chunks, and the GPU memory estimate counts their 10 bits per value where that is the form loaded."""
    from types import SimpleNamespace

    from engine.model_info import gpu_matrix_bytes

    k = 512 if GGML_QUANT_SIZES[qt][0] == 256 else 1408
    p = pack(blocks(qt, 3, k), qt, k, planes=False)        # (the k-quants' default is their planes: below)
    assert p.kind == kind and p.codes.dtype == torch.int8 and p.scales.dtype == torch.float32
    assert p.codes.min() == lo and p.codes.max() == hi and p.nbytes == 3 * k * 10 // 8
    planes = {QT.Q6_K: packed_module.Q6K_PLANES, QT.Q3_K: packed_module.Q3K_PLANES, QT.Q5_K: packed_module.Q5K_PLANES}
    if not planes.get(qt, False):
        assert gpu_matrix_bytes(SimpleNamespace(qtype=qt, shape=(k, 3), n_elements=3 * k, nbytes=0)) == p.nbytes
    n = 2 * (1 << 22) // k + 5
    data = blocks(qt, n, k, 4)
    assert same_bits(unpack(pack(data, qt, k, planes=False)), dequantize(data, qt, n * k).reshape(n, k))


def test_q6k_six_bit_planes():
    """Q6_K (by default; STRATA_Q6K_PLANES=0: int8 codes) keeps the file's 6.5625 bits a weight in three
    planes (kind 10): per 64 values 48 code bytes (q - 32 as 6-bit two's complement: Q4_K's nibble order,
    then the high bits), the sub-block scales as int8 words, d as float16; the values exact over the
    packer's row chunks, stacked rows, and the GPU memory estimate counts the file's bytes."""
    from types import SimpleNamespace

    import engine.model_info as model_info

    p = pack(blocks(QT.Q6_K, 3, 512), QT.Q6_K, 512)
    assert packed_module.Q6K_PLANES == model_info.Q6K_PLANES == (os.environ.get("STRATA_Q6K_PLANES", "1") == "1")
    assert p.kind == (10 if packed_module.Q6K_PLANES else 8)
    p = pack(blocks(QT.Q6_K, 3, 512), QT.Q6_K, 512, planes=True)
    assert p.kind == 10 and p.codes.shape == (3, 384) and p.sub.dtype == torch.int32 and p.sub.shape == (3, 8)
    assert p.scales.dtype == torch.float16 and p.nbytes == 3 * 2 * 210
    if model_info.Q6K_PLANES:
        t = SimpleNamespace(qtype=QT.Q6_K, shape=(512, 3), n_elements=3 * 512, nbytes=3 * 2 * 210)
        assert model_info.gpu_matrix_bytes(t) == p.nbytes
    n = 2 * (1 << 22) // 512 + 5
    data = blocks(QT.Q6_K, n, 512, 4)
    both = cat([pack(data, QT.Q6_K, 512, planes=True), p])
    assert both.kind == 10 and same_bits(unpack(both.rows(0, n)), dequantize(data, QT.Q6_K, n * 512).reshape(n, 512))
    with pytest.raises(ValueError):
        cat([p, pack(blocks(QT.Q6_K, 3, 512), QT.Q6_K, 512, planes=False)])


def test_q2k_two_bit_planes(monkeypatch):
    """Q2_K planes (default; STRATA_Q2K_PLANES=0 leaves it in the GGUF layout): Q2_K takes the int8 kernels in the file's 2.625
    bits a weight (kind 12): 16 code bytes per 64 values, the file's scale bytes as words, d and dmin; the
    values exact over the packer's row chunks and stacked rows."""
    assert packed_module.Q2K_PLANES == (os.environ.get("STRATA_Q2K_PLANES", "1") == "1")
    monkeypatch.setattr(packed_module, "Q2K_PLANES", False)
    assert not supports(QT.Q2_K, 512)
    monkeypatch.setattr(packed_module, "Q2K_PLANES", True)
    assert supports(QT.Q2_K, 512) and not supports(QT.Q2_K, 500)
    p = pack(blocks(QT.Q2_K, 3, 512), QT.Q2_K, 512)
    assert p.kind == 12 and p.codes.shape == (3, 128) and p.sub.shape == (3, 8) and p.nbytes == 3 * 2 * 84
    n = 4 * (1 << 22) // 512 + 5
    data = blocks(QT.Q2_K, n, 512, 4)
    both = cat([pack(data, QT.Q2_K, 512), p])
    assert same_bits(unpack(both.rows(0, n)), dequantize(data, QT.Q2_K, n * 512).reshape(n, 512))


def test_q3k_three_bit_planes():
    """Q3_K planes (default; STRATA_Q3K_PLANES=0: int8 codes): Q3_K in 3.5625 bits a weight (kind 13) instead of 10: its codes' low two bits as
    Q2_K's planes, per 64 values a word of int8 scales and two of third bits, d; the values exact over the
    packer's row chunks; the GPU memory estimate counts those bytes where on."""
    from types import SimpleNamespace

    import engine.model_info as model_info

    assert packed_module.Q3K_PLANES == model_info.Q3K_PLANES == (os.environ.get("STRATA_Q3K_PLANES", "1") == "1")
    p = pack(blocks(QT.Q3_K, 3, 512), QT.Q3_K, 512, planes=True)
    assert p.kind == 13 and p.codes.shape == (3, 128) and p.sub.shape == (3, 24) and p.scales.shape == (3, 2)
    assert p.nbytes == 3 * 2 * 114
    t = SimpleNamespace(qtype=QT.Q3_K, shape=(512, 3), n_elements=3 * 512, nbytes=3 * 2 * 110)
    assert model_info.gpu_matrix_bytes(t) == (p.nbytes if model_info.Q3K_PLANES else 3 * 512 * 10 // 8)
    n = 2 * (1 << 22) // 512 + 5
    data = blocks(QT.Q3_K, n, 512, 4)
    assert same_bits(unpack(pack(data, QT.Q3_K, 512, planes=True)), dequantize(data, QT.Q3_K, n * 512).reshape(n, 512))


def test_q5k_five_bit_planes():
    """Q5_K planes (default; STRATA_Q5K_PLANES=0: int8 codes): Q5_K in 5.625 bits a weight (kind 11): the file's low nibbles (Q4_K's order),
    d and dmin, and per 64 values its two scales, two minimums and 64 fifth bits in three words; the values
    exact over the packer's row chunks and stacked rows; the GPU memory estimate counts those bytes where on."""
    from types import SimpleNamespace

    import engine.model_info as model_info

    assert packed_module.Q5K_PLANES == model_info.Q5K_PLANES == (os.environ.get("STRATA_Q5K_PLANES", "1") == "1")
    p = pack(blocks(QT.Q5_K, 3, 512), QT.Q5_K, 512, planes=True)
    assert p.kind == 11 and p.codes.shape == (3, 256) and p.sub.dtype == torch.int32 and p.sub.shape == (3, 24)
    assert p.scales.dtype == torch.float16 and p.scales.shape == (3, 2, 2) and p.nbytes == 3 * 2 * 180
    t = SimpleNamespace(qtype=QT.Q5_K, shape=(512, 3), n_elements=3 * 512, nbytes=3 * 2 * 176)
    assert model_info.gpu_matrix_bytes(t) == (p.nbytes if model_info.Q5K_PLANES else 3 * 512 * 10 // 8)
    n = 2 * (1 << 22) // 512 + 5
    data = blocks(QT.Q5_K, n, 512, 4)
    both = cat([p, pack(data, QT.Q5_K, 512, planes=True)])
    assert both.kind == 11 and same_bits(unpack(both.rows(3, n + 3)), dequantize(data, QT.Q5_K, n * 512).reshape(n, 512))


def test_stacked_rows_are_views_of_the_same_values():
    a, b = blocks(QT.Q4_K, 5, 512, 1), blocks(QT.Q4_K, 3, 512, 2)
    both = cat([pack(a, QT.Q4_K, 512), pack(b, QT.Q4_K, 512)])
    assert torch.equal(unpack(both.rows(5, 8)), dequantize(b, QT.Q4_K, 3 * 512).reshape(3, 512))
    with pytest.raises(ValueError):
        cat([pack(a, QT.Q4_K, 512), pack(blocks(QT.Q8_0, 2, 512), QT.Q8_0, 512)])


def test_tensor_core_order_holds_the_same_values():
    """Q4_K codes in the tensor-core decode kernel's order (engine.kernels.q4k_mma): the same values,
    16-row ranges and stacks as views, and no mixing of orders."""
    from engine.kernels.packed import mma_order
    data = blocks(QT.Q4_K, 48, 768, 14)
    p = pack(data, QT.Q4_K, 768, mma=True)
    ref = dequantize(data, QT.Q4_K, 48 * 768).reshape(48, 768)
    assert p.mma and p.kind == 7 and same_bits(unpack(p), ref)
    assert not torch.equal(p.codes, pack(data, QT.Q4_K, 768).codes)
    assert torch.equal(mma_order(p.codes, 768, inverse=True), pack(data, QT.Q4_K, 768).codes)
    assert same_bits(unpack(p.rows(16, 48)), ref[16:48])
    both = cat([p.rows(32, 48), p.rows(0, 16)])
    assert both.mma and same_bits(unpack(both), torch.cat((ref[32:48], ref[:16])))
    with pytest.raises(ValueError, match="steps of 16"):
        p.rows(3, 19)
    with pytest.raises(ValueError, match="code order"):
        cat([p, pack(data, QT.Q4_K, 768)])


def test_tensor_core_order_is_the_mma_fragments():
    """Where q4k_mma's lane (g, c) loads its four words for 16 weight rows, super-block sb and 64-value
    pair j (word (ng K/256 + sb) 512 + 128 j + 4 lane + e), their bytes' nibbles are the A fragments of
    PTX's mma m16n8k32 s8 (a0 / a2: row g, k 4c..4c+3 / 16+4c..19+4c; a1 / a3: row g + 8; the words in the
    order a0, a2, a1, a3) of sub-block
    2j (low nibbles) and 2j + 1 (high), with k running over the values 8c..8c+7 by c: the values the B
    fragments hold, which the kernel loads as x's words 2c and 2c + 1 of the sub-block."""
    n, k = 32, 512
    data = blocks(QT.Q4_K, n, k, 15)
    gguf = pack(data, QT.Q4_K, k).codes.reshape(n, k // 256, 4, 32)          # [row, sb, pair, byte]
    words = pack(data, QT.Q4_K, k, mma=True).codes.view(torch.int32).reshape(-1)
    value = [8 * (kk % 16 // 4) + kk % 4 + 4 * (kk // 16) for kk in range(32)]     # MMA k -> value in sub-block
    for ng in range(n // 16):
        for sb in range(k // 256):
            for j in range(4):
                a = torch.zeros(16, 32, dtype=torch.uint8)
                for lane in range(32):
                    g, c = lane // 4, lane % 4
                    for e in range(4):
                        w = words[(ng * (k // 256) + sb) * 512 + 128 * j + 4 * lane + e]
                        row, k0 = g + 8 * (e // 2), 4 * c + 16 * (e % 2)
                        a[row, k0:k0 + 4] = torch.tensor([w]).view(torch.uint8)
                want = gguf[16 * ng:16 * ng + 16, sb, j][:, value]
                assert torch.equal(a, want), (ng, sb, j)


def kernel_module(name: str):
    """engine.kernels.<name>, under TRITON_INTERPRET=1 without a GPU; skips the test without triton."""
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")   # must precede the first `import triton`
    pytest.importorskip("triton")
    return importlib.import_module(f"engine.kernels.{name}")


def test_tensor_core_kernel_configuration():
    """engine.kernels.q4k_mma: warps a program (each warp's share of K, so the summation order) from the
    shape alone, dividing the super-blocks, as measured best on an H200 for the llama-3-8b matrices; the
    16-row groups a warp (the arithmetic does not depend on them) dividing the shape's groups; two
    super-blocks loaded ahead in 1-row tiles of the smaller matrices only."""
    q4k_mma = pytest.importorskip("engine.kernels.q4k_mma")
    if q4k_mma.gluon is None:
        pytest.skip("triton without Gluon")
    shapes = {"qkv": (6144, 4096), "wo": (4096, 4096), "gate|up": (28672, 4096), "down": (4096, 14336)}
    assert {k: q4k_mma.warps(*v) for k, v in shapes.items()} == {"qkv": 4, "wo": 8, "gate|up": 2, "down": 8}
    for n, k in [*shapes.values(), (320, 2048), (576, 1536), (16384, 1024), (48, 2816), (80, 768)]:
        w = q4k_mma.warps(n, k)
        assert w in (1, 2, 4, 8) and (k // 256) % w == 0, (n, k, w)
        for t in (1, 2, 16):
            tm = q4k_mma.groups(n, k, t)
            assert tm in (1, 2, 4) and (n // 16) % tm == 0, (n, k, t, tm)
    assert q4k_mma.groups(28672, 4096, 1) == 1 and q4k_mma.groups(4096, 14336, 1) == 2
    assert q4k_mma.groups(28672, 4096, 16) == 2 and q4k_mma.groups(48, 2816, 16) == 1
    assert [q4k_mma.loaded_ahead(n, t) for n, t in ((6144, 1), (28672, 1), (6144, 16))] == [2, 1, 1]


@pytest.fixture(scope="module")
def sm():
    return kernel_module("stream_matmul")


DEV = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("qt,planes", layouts(TYPES))
def test_kernel_reads_the_layout_like_engine_quant(sm, qt, planes):
    k = 512 if GGML_QUANT_SIZES[qt][0] == 256 else 320        # 320: a K tail inside the last chunk
    data = blocks(qt, 20, k, 4)
    got = sm.unpack_values(pack(data.to(DEV), qt, k, planes=planes)).cpu()
    # equal values (the identity product turns -0.0 into +0.0, so not the sign bit of zeros)
    assert torch.equal(got, dequantize(data, qt, 20 * k).reshape(20, k))


@pytest.mark.parametrize("qt,planes", layouts(TYPES))
def test_dequantize_kernel_writes_engine_quants_values(sm, qt, planes):
    """The prompt tiles' "cublas" path dequantizes each weight with one kernel: bit for bit the float32
    values of engine.quant (a K tail inside the last chunk for the 32-value types), then rounded."""
    k = 512 if GGML_QUANT_SIZES[qt][0] == 256 else 320
    data = blocks(qt, 20, k, 4)
    p = pack(data.to(DEV), qt, k, planes=planes)
    ref = dequantize(data, qt, 20 * k).reshape(20, k)
    assert torch.equal(sm.dequantize(p, torch.float32).cpu(), ref)
    half = sm.dequantize(p, torch.bfloat16).cpu()
    if DEV == "cuda":                       # round to nearest even, as torch rounds
        assert torch.equal(half, ref.to(torch.bfloat16))
    else:                                   # the interpreter's conversion truncates: within one bf16 step
        assert ((half.float() - ref).abs() <= ref.abs() * 2.0 ** -7).all()
    x = torch.randn(24, k, generator=torch.Generator().manual_seed(2)).to(DEV).to(torch.bfloat16)
    y = sm.dense_product(x, p)
    assert y.dtype == torch.float32
    exact = x.double() @ ref.to(DEV).double().T
    assert ((y.double() - exact).norm() / exact.norm()).item() < 1e-2


@pytest.mark.parametrize("qt", [QT.IQ4_NL, QT.IQ4_XS], ids=lambda t: t.name)
def test_prompt_kernels_iq4_values_by_select_tree(sm, qt, monkeypatch):
    """STRATA_IQ4_PRMT=0: the prompt kernels take IQ4 values by a tree of selects per code instead of the
    default byte permutes (iq4.kvalues8, run by the other tests here), engine.quant's values bit for bit."""
    import triton.language as tl

    if DEV == "cuda" and sm.IQ4_PRMT:           # a compiled kernel keeps the globals it was compiled with
        pytest.skip("on a GPU this runs with STRATA_IQ4_PRMT=0")
    monkeypatch.setattr(sm, "IQ4_PRMT", tl.constexpr(False))
    k = 512 if qt == QT.IQ4_XS else 320
    data = blocks(qt, 20, k, 4)
    assert torch.equal(sm.dequantize(pack(data.to(DEV), qt, k), torch.float32).cpu(),
                       dequantize(data, qt, 20 * k).reshape(20, k))


@pytest.mark.parametrize("w32", [True, False], ids=["w32", "w16"])
@pytest.mark.parametrize("qt,planes", [(QT.Q6_K, True), (QT.Q6_K, False), (QT.Q3_K, True), (QT.Q2_K, True),
                                       (QT.IQ2_XS, False)], ids=["Q6_K-planes", "Q6_K", "Q3_K-planes", "Q2_K-planes",
                                                                 "IQ2_XS"])
def test_prompt_kernels_scale16_values_as_rows_of_32(sm, qt, planes, w32, monkeypatch):
    """STRATA_PROMPT_W32 (default 1): the types with a scale per 16 take their prompt values as [BN, 8, 32]
    (engine.kernels.scale16_chunk; kinds 8, 10, 12) or, at 0 and always for Q3_K's planes (kind 13), as
    [BN, 16, 16] reshaped: engine.quant's values bit for bit either way, through the prompt tile's values
    and the dequantize kernel."""
    import triton.language as tl

    if DEV == "cuda" and w32 != bool(sm.PROMPT_W32):   # a compiled kernel keeps the globals it was compiled with
        pytest.skip(f"on a GPU this runs with STRATA_PROMPT_W32={int(w32)}")
    monkeypatch.setattr(sm, "PROMPT_W32", tl.constexpr(w32))
    data = blocks(qt, 20, 768, 4)
    p = pack(data.to(DEV), qt, 768, planes=planes)
    assert p.kind in (8, 10, 12, 13)
    ref = dequantize(data, qt, 20 * 768).reshape(20, 768)
    assert torch.equal(sm.unpack_values(p).cpu(), ref)
    assert torch.equal(sm.dequantize(p, torch.float32).cpu(), ref)


def row_7_everywhere(linear, x: torch.Tensor, out: torch.Tensor, placements) -> None:
    """Row 7 of `out` = linear(x) again, among other random rows, in calls of other sizes and places."""
    gen = torch.Generator().manual_seed(5)
    for m, at in placements:
        rows = torch.randn(m, x.shape[1], generator=gen).to(x.device)
        rows[at] = x[7]
        assert torch.equal(linear(rows)[at], out[7]), (m, at)


def test_kernels_read_the_tensor_core_order(sm, monkeypatch):
    """The prompt kernels (and unpack_values, dequantize) read Q4_K in the tensor-core order (kind 7)
    as they read GGUF's: the same values and the same product bit for bit."""
    data = blocks(QT.Q4_K, 48, 768, 16)
    p, g = pack(data.to(DEV), QT.Q4_K, 768, mma=True), pack(data.to(DEV), QT.Q4_K, 768)
    ref = dequantize(data, QT.Q4_K, 48 * 768).reshape(48, 768)
    assert torch.equal(sm.unpack_values(p).cpu(), ref)
    assert torch.equal(sm.dequantize(p, torch.float32).cpu(), ref)
    monkeypatch.setattr(sm, "DECODE_KERNEL", "mma")
    x = torch.randn(20, 768, generator=torch.Generator().manual_seed(17)).to(DEV)
    assert torch.equal(sm.linear(x, p), sm.linear(x, g))


@pytest.mark.parametrize("qt,rows,kernel,planes", [(qt, 16, "gemv", False) for qt in KERNEL_TYPES if KIND[qt] <= 4]
                         + [(qt, 40, "mma", False) for qt in KERNEL_TYPES]
                         + [(t, 40, "mma", True) for t in PLANE_TYPES + (QT.IQ3_S, QT.IQ2_XS)],
                         ids=lambda v: getattr(v, "name", None) or ("planes" if v is True else str(v)))
def test_matmul_is_right_and_row_invariant(sm, monkeypatch, qt, rows, kernel, planes):
    """The float32 CUDA-core decode kernel (up to 16 rows: any row count, any place; the decode rows of
    the types past kind 4 go to the int8 kernel, tests/engine/test_dp4a_gemv.py) and the tensor-core kernel (under the
    interpreter its numpy tl.dot keeps a row's place in the 16-row block)."""
    monkeypatch.setattr(sm, "DECODE_KERNEL", kernel)
    k = 512 if GGML_QUANT_SIZES[qt][0] == 256 else 576
    p = pack(blocks(qt, 40, k, 5).to(DEV), qt, k, planes=planes)
    x = torch.randn(rows, k, generator=torch.Generator().manual_seed(6)).to(DEV)
    y = sm.linear(x, p)
    ref = x.double() @ unpack(p).double().T
    assert ((y.double() - ref).norm() / ref.norm()).item() < 1e-6
    if rows <= sm.DECODE_ROWS:
        row_7_everywhere(lambda r: sm.linear(r, p), x, y, [(16, 7), (9, 2), (1, 0), (16, 15)])
    else:
        row_7_everywhere(lambda r: sm.linear(r, p), x, y, [(17, 7), (40, 23)] + ([(128, 100)] if DEV == "cuda" else []))


def test_decode_kernel_computes_only_the_real_rows(sm, monkeypatch):
    monkeypatch.setattr(sm, "DECODE_KERNEL", "gemv")
    p = pack(blocks(QT.Q4_K, 40, 512, 8).to(DEV), QT.Q4_K, 512)
    x = torch.randn(16, 512, generator=torch.Generator().manual_seed(9)).to(DEV)
    full, s = sm.matmul_parts(x, p)
    part, s2 = sm.matmul_parts(x, p, torch.tensor([5], device=DEV))
    assert s == s2 and torch.equal(part[:, :5], full[:, :5])
    assert not part[:, 5:].any()


def test_decode_kernel_bf16_rows(sm, monkeypatch):
    """The decode kernel's bfloat16 branch (it needs no tl.dot, so the interpreter runs it right)."""
    monkeypatch.setattr(sm, "DECODE_KERNEL", "gemv")
    p = pack(blocks(QT.Q4_K, 24, 768, 10).to(DEV), QT.Q4_K, 768)
    x = torch.randn(5, 768, generator=torch.Generator().manual_seed(11)).to(DEV).to(torch.bfloat16)
    y = sm.linear(x, p)
    assert y.dtype == torch.bfloat16
    ref = x.double() @ unpack(p).double().T
    assert ((y.double() - ref).norm() / ref.norm()).item() < 8e-3      # one bf16 rounding of the output
    assert torch.equal(sm.linear(x[3:4].contiguous(), p)[0], y[3])


@pytest.mark.parametrize("kernel", ["gemv", "mma"])
def test_programs_that_walk_several_chunks(sm, monkeypatch, kernel):
    """One program per weight tile (no K split): each walks every chunk of K, carrying its sums."""
    monkeypatch.setattr(sm, "DECODE_KERNEL", kernel)
    monkeypatch.setattr(sm, "TARGET_PROGRAMS", 1)
    monkeypatch.setattr(sm, "GEMV_TARGET", 1)
    for qt, k in ((QT.Q4_K, 1024), (QT.Q8_0, 800)):
        p = pack(blocks(qt, 24, k, 12).to(DEV), qt, k)
        x = torch.randn(3, k, generator=torch.Generator().manual_seed(13)).to(DEV)
        part, s = sm.matmul_parts(x, p)
        assert s == 1
        ref = x.double() @ unpack(p).double().T
        assert ((part[0].double() - ref).norm() / ref.norm()).item() < 1e-6


def test_plan_depends_on_the_weight_only(sm):
    """Both plans take the weight's N and K alone (no row count), and their splits cover every chunk
    of K exactly once."""
    for plan in (sm.plan, sm.gemv_plan):
        for n, k in ((14336, 4096), (4096, 14336), (960, 576), (49152, 576)):
            bn, s, cps = plan(n, k)
            chunks = -(-k // sm.CHUNK)
            assert bn in (16, 32, 64, 128) and s * cps >= chunks and (s - 1) * cps < chunks, (plan, n, k)


def test_effective_configuration_names_each_types_gpu_form(gemma_file, monkeypatch):
    """The effective configuration's weights line names what GPU stages keep of each quantized type of the
    model's matrices (the real Gemma 3 270M Q4_K_M: Q4_K, Q5_0, Q6_K and its tied Q8_0 embedding as the
    head), and follows the flags: Q6_K's int8 codes, a type kept in the GGUF layout, Q4_K's tensor-core order."""
    from engine.gguf_file import read_gguf
    from engine.loader import _matrix_types, weights_mode

    types = _matrix_types(read_gguf(gemma_file))
    assert sorted({t.name for t in types}) == ["Q4_K", "Q5_0", "Q6_K", "Q8_0"]
    mode = weights_mode(["cuda:0"], torch.bfloat16, types)
    assert mode.endswith("(Q4_K in 4-bit planes, Q5_0 in int8 planes, Q6_K in 6-bit planes, Q8_0 in int8 planes)")
    assert "GPU" not in weights_mode(["cpu"], torch.bfloat16, types)
    monkeypatch.setattr(packed_module, "Q6K_PLANES", False)
    monkeypatch.setattr(packed_module, "FIT_KEEP", frozenset({"Q5_0"}))
    monkeypatch.setattr(packed_module, "MMA_Q4K", True)
    assert weights_mode(["cuda:0"], torch.bfloat16, types).endswith(
        "(Q4_K in 4-bit planes in the tensor-core order, Q5_0 in the GGUF layout, Q6_K in int8 codes, Q8_0 in int8 planes)")
    assert [packed_module.gpu_form(t) for t in (QT.Q2_K, QT.Q3_K, QT.Q5_K, QT.IQ2_S, QT.IQ3_S, QT.TQ1_0)] == [
        "2-bit planes" if packed_module.Q2K_PLANES else "the GGUF layout",
        "3-bit planes" if packed_module.Q3K_PLANES else "int8 codes",
        "5-bit planes" if packed_module.Q5K_PLANES else "int8 codes",
        "4-bit table codes" if packed_module.IQ_TABLES else "int8 codes" if packed_module.IQ2_INT8 else "the GGUF layout",
        "4-bit table codes" if packed_module.IQ_TABLES else "int8 planes", "the GGUF layout"]
