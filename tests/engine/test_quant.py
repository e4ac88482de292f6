"""engine.quant and engine.kernels.quant_matmul against `gguf.quants.dequantize`.

Dequantization must match gguf bit for bit (same float operations in the same order). Linear must
be row-invariant: a row's result is bit-identical alone or among any other rows. The Triton tests
run on a GPU when there is one, else under TRITON_INTERPRET=1 on tiny shapes (f32 only: the
interpreter multiplies bf16 bit patterns in tl.dot, triton-lang/triton#11584).
"""
from __future__ import annotations

import importlib
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as QT

from engine.errors import EngineError
from engine.gguf_file import read_gguf
from engine.model_files import default_model_path, gemma_path
from engine.quant import CHUNK_ELEMENTS, DECODERS, QuantTensor, UnsupportedQuantError, dequantize, numpy_as_torch

GPU = torch.cuda.is_available()
KERNEL_DEVICE = "cuda" if GPU else "cpu"

# (model fixture, tensor, expected type): a few real tensors per type, not every tensor.
REAL_TENSORS = [
    ("smollm", "token_embd.weight", QT.Q8_0),
    ("smollm", "blk.0.ffn_down.weight", QT.Q4_1),
    ("smollm", "blk.3.attn_q.weight", QT.Q4_1),
    ("smollm", "blk.0.attn_norm.weight", QT.F32),
    ("gemma", "output_norm.weight", QT.F32),
    ("gemma", "blk.0.attn_k.weight", QT.Q5_0),
    ("gemma", "blk.0.ffn_gate.weight", QT.Q5_0),
    ("gemma", "blk.0.attn_output.weight", QT.Q4_K),
    ("gemma", "blk.0.attn_v.weight", QT.Q8_0),
    ("gemma", "blk.0.ffn_down.weight", QT.Q6_K),
]
# Types neither model has: gguf can quantize these ...
QUANTIZABLE = [QT.F16, QT.BF16, QT.Q4_0, QT.Q5_1]
# ... and for these it cannot, so random blocks with finite f16 scales at these byte offsets.
F16_FIELDS = {QT.Q2_K: (80, 82), QT.Q3_K: (108,), QT.Q4_K: (0, 2), QT.Q5_K: (0, 2), QT.Q6_K: (208,)}
ROW_COUNTS = (2, 5, 16, 17, 40)
MAX_VALUES = 2 * CHUNK_ELEMENTS  # compare at most this much of a real tensor


@pytest.fixture(scope="module")
def smollm():
    return read_gguf(default_model_path())


@pytest.fixture(scope="module")
def gemma():
    return read_gguf(gemma_path())


def random_blocks(qtype: QT, n_blocks: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    type_size = GGML_QUANT_SIZES[qtype][1]
    blocks = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for at in F16_FIELDS[qtype]:
        scales = rng.uniform(-0.05, 0.05, n_blocks).astype(np.float16)
        blocks[:, at:at + 2] = scales.view(np.uint8).reshape(n_blocks, 2)
    return blocks.reshape(-1)


def quantized(qtype: QT, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    values = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return np.ascontiguousarray(quants.quantize(values, qtype)).view(np.uint8).reshape(-1)


def assert_same_bits(ours: torch.Tensor, raw: np.ndarray, qtype: QT) -> None:
    ref = quants.dequantize(raw, qtype).reshape(-1).astype(np.float32)
    assert ours.dtype == torch.float32
    assert np.array_equal(ours.numpy().view(np.uint32), ref.view(np.uint32))


# ---- dequantize ----------------------------------------------------------------------------

@pytest.mark.parametrize("model,name,qtype", REAL_TENSORS)
def test_dequantize_real_tensor_matches_gguf(request, model, name, qtype):
    gf = request.getfixturevalue(model)
    info = gf.tensors[name]
    assert info.qtype == qtype
    n = min(info.n_elements, MAX_VALUES // info.shape[0] * info.shape[0])  # whole rows, two chunks at most
    block, type_size = GGML_QUANT_SIZES[qtype]
    raw = gf.raw(name)[: n // block * type_size]
    assert_same_bits(dequantize(numpy_as_torch(raw), qtype, n), raw, qtype)


@pytest.mark.parametrize("qtype", QUANTIZABLE, ids=lambda t: t.name)
def test_dequantize_gguf_quantized_bytes(qtype):
    raw = quantized(qtype, (64, 512))
    assert_same_bits(dequantize(torch.from_numpy(raw), qtype, 64 * 512), raw, qtype)


@pytest.mark.parametrize("qtype", list(F16_FIELDS), ids=lambda t: t.name)
def test_dequantize_random_kquant_blocks(qtype):
    raw = random_blocks(qtype, 300)
    assert_same_bits(dequantize(torch.from_numpy(raw), qtype, 300 * 256), raw, qtype)


def test_unsupported_type_names_the_supported_ones():
    with pytest.raises(UnsupportedQuantError) as err:
        dequantize(torch.zeros(66, dtype=torch.uint8), QT.TQ2_0, 256)
    assert isinstance(err.value, EngineError)
    assert "quant type TQ2_0 is not supported" in str(err.value)
    assert "Q4_K" in str(err.value) and "Q8_0" in str(err.value) and "IQ3_S" in str(err.value)
    with pytest.raises(UnsupportedQuantError):
        QuantTensor(torch.zeros(66, dtype=torch.uint8), QT.TQ2_0, (256,))


# ---- QuantTensor on CPU --------------------------------------------------------------------

def test_from_gguf_keeps_the_file_bytes_without_copying(smollm):
    info = smollm.tensors["token_embd.weight"]
    qt = QuantTensor.from_gguf(smollm, "token_embd.weight")
    assert (qt.qtype, qt.shape, qt.nbytes, qt.device) == (QT.Q8_0, (49152, 576), info.nbytes, torch.device("cpu"))
    assert qt.data.data_ptr() == smollm.raw("token_embd.weight").ctypes.data


def test_quant_tensor_dequantize_and_rows(smollm):
    qt = QuantTensor.from_gguf(smollm, "blk.0.attn_k.weight")
    ref = torch.from_numpy(quants.dequantize(smollm.raw("blk.0.attn_k.weight"), QT.Q4_1).reshape(192, 576))
    assert torch.equal(qt.dequantize(), ref)
    ids = torch.tensor([[5, 0, 191], [7, 7, 100]])
    assert torch.equal(qt.rows(ids), ref[ids])
    qt.dense_weight()
    assert torch.equal(qt.rows(ids), ref[ids])  # from the cached copy: same values
    half = QuantTensor.from_gguf(smollm, "blk.0.attn_k.weight", compute_dtype=torch.bfloat16)
    assert torch.equal(half.rows(ids), ref[ids].bfloat16())


def test_linear_matches_dense_matmul(gemma):
    qt = QuantTensor.from_gguf(gemma, "blk.0.attn_output.weight")  # Q4_K, (640, 1024)
    x = torch.randn(3, 7, 1024, generator=torch.Generator().manual_seed(1))
    out = qt.linear(x)
    assert out.shape == (3, 7, 640)
    torch.testing.assert_close(out, F.linear(x, qt.dequantize()), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("model,name", [("smollm", "blk.0.ffn_down.weight"), ("gemma", "blk.0.ffn_down.weight")])
def test_linear_is_row_invariant(request, model, name, dtype):
    qt = QuantTensor.from_gguf(request.getfixturevalue(model), name, compute_dtype=dtype)
    gen = torch.Generator().manual_seed(2)
    row = torch.randn(qt.shape[1], generator=gen)
    alone = qt.linear(row[None])[0]
    for m in ROW_COUNTS:
        for pos in (0, m // 2, m - 1):
            x = torch.randn(m, qt.shape[1], generator=gen) * 3
            x[pos] = row
            assert torch.equal(qt.linear(x)[pos], alone), (m, pos)


def test_expert_views_share_the_stack_bytes():
    raw = quantized(QT.Q4_0, (4, 32, 64))
    stack = QuantTensor(torch.from_numpy(raw), QT.Q4_0, (4, 32, 64))
    whole = stack.dequantize()
    e2 = stack.expert(2)
    assert e2.shape == (32, 64) and e2.nbytes == stack.nbytes // 4
    assert e2.data.data_ptr() == stack.data.data_ptr() + 2 * e2.nbytes
    assert torch.equal(e2.dequantize(), whole[2])
    assert stack.expert(2) is e2
    x = torch.randn(5, 64)
    assert torch.equal(e2.linear(x), QuantTensor(torch.from_numpy(raw), QT.Q4_0, (4, 32, 64)).expert(2).linear(x))
    with pytest.raises(IndexError):
        stack.expert(4)


# ---- Triton kernels (GPU, or the interpreter on CPU) ----------------------------------------

@pytest.fixture(scope="module")
def qm():
    if not GPU:
        # Triton reads this when it is first imported: it must precede `import triton` itself.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    pytest.importorskip("triton")
    return importlib.import_module("engine.kernels.quant_matmul")


def kernel_weight(request, source) -> QuantTensor:
    """80 rows (two BLOCK_N tiles, the second partial) by 512 columns of a real or synthetic weight."""
    if isinstance(source, tuple):
        qt = QuantTensor.from_gguf(request.getfixturevalue(source[0]), source[1])
        block, type_size = GGML_QUANT_SIZES[qt.qtype]
        part = qt.data[:80, :512 // block * type_size]  # the first whole blocks of each row
        return QuantTensor(part.contiguous().to(KERNEL_DEVICE), qt.qtype, (80, 512))
    raw = random_blocks(source, 80) if source in F16_FIELDS else quantized(source, (80, 256))
    return QuantTensor(torch.from_numpy(raw).to(KERNEL_DEVICE), source, (80, 256))


KERNEL_CASES = [("smollm", "token_embd.weight"), ("smollm", "blk.0.ffn_down.weight"), ("gemma", "blk.0.attn_k.weight"),
                ("gemma", "blk.0.attn_output.weight"), ("gemma", "blk.0.ffn_down.weight"), QT.Q4_0, QT.Q5_1, QT.Q5_K]


def assert_kernel_row_invariant(linear, x: torch.Tensor, out: torch.Tensor) -> None:
    """Row 7 of `out` = linear(x) again, among other random rows in calls of other sizes.

    On a GPU also alone. The interpreter's tl.dot is numpy's matmul (OpenBLAS), whose result can
    depend on a row's position inside the 16-row tile, so there the row keeps tile position 7.
    """
    gen = torch.Generator().manual_seed(5)
    placements = [(8, 7), (17, 7), (40, 23)] + ([(1, 0), (5, 4), (40, 39)] if GPU else [])
    for m, at in placements:
        part = torch.randn(m, x.shape[1], generator=gen).to(x.device)
        part[at] = x[7]
        assert torch.equal(linear(part)[at], out[7]), (m, at)


@pytest.mark.parametrize("source", KERNEL_CASES, ids=str)
def test_quant_kernel_matches_dequantized_matmul_and_is_row_invariant(request, qm, source):
    w = kernel_weight(request, source)
    assert w.qtype in qm.KERNEL_TYPES
    x = torch.randn(40, w.shape[1], generator=torch.Generator().manual_seed(3)).to(KERNEL_DEVICE)
    out = qm.quant_linear(x, w.data, w.qtype)
    ref = (x.double() @ w.dequantize().double().T).float()
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4 * ref.abs().max().item())
    assert_kernel_row_invariant(lambda rows: qm.quant_linear(rows, w.data, w.qtype), x, out)


def test_dense_kernel_for_types_without_a_quant_kernel(qm):
    w = QuantTensor(torch.from_numpy(random_blocks(QT.Q3_K, 40)).to(KERNEL_DEVICE), QT.Q3_K, (40, 256))
    assert w.qtype not in qm.KERNEL_TYPES
    x = torch.randn(40, 256, generator=torch.Generator().manual_seed(4)).to(KERNEL_DEVICE)
    out = qm.dense_linear(x, w.dense_weight())
    ref = (x.double() @ w.dequantize().double().T).float()
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4 * ref.abs().max().item())
    assert_kernel_row_invariant(lambda rows: qm.dense_linear(rows, w.dense_weight()), x, out)


@pytest.mark.parametrize("qtype", [QT.Q4_K, QT.Q3_K], ids=lambda t: t.name)
def test_triton_linear_dispatch(qm, qtype):
    """Q4_K has a kernel; Q3_K goes through its dequantized copy and the dense kernel."""
    w = QuantTensor(torch.from_numpy(random_blocks(qtype, 20)).to(KERNEL_DEVICE), qtype, (20, 256))
    x = torch.randn(2, 3, 256, generator=torch.Generator().manual_seed(6)).to(KERNEL_DEVICE)
    out = w.triton_linear(x)
    assert out.shape == (2, 3, 20) and out.dtype == torch.float32
    torch.testing.assert_close(out, F.linear(x, w.dequantize()), rtol=1e-4, atol=1e-4 * out.abs().max().item())


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="needs CUDA: the Triton interpreter cannot run bf16 tl.dot")
@pytest.mark.parametrize("name", ["blk.0.attn_output.weight", "blk.0.ffn_down.weight", "blk.0.attn_v.weight"])
def test_cuda_linear_bf16_is_row_invariant(gemma, name):
    qt = QuantTensor.from_gguf(gemma, name, device="cuda", compute_dtype=torch.bfloat16)
    x = torch.randn(40, qt.shape[1], device="cuda", dtype=torch.bfloat16)
    out = qt.linear(x)
    ref = F.linear(x.float(), qt.dequantize().float())
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2 * ref.abs().max().item())
    alone = qt.linear(x[7:8])[0]
    for m in ROW_COUNTS:
        part = torch.randn(m, qt.shape[1], device="cuda", dtype=torch.bfloat16)
        part[m - 1] = x[7]
        assert torch.equal(qt.linear(part)[m - 1], alone), m


@pytest.mark.parametrize("qtype", sorted(DECODERS, key=lambda t: t.name), ids=lambda t: t.name)
def test_decoders_build_no_tensor_from_host_values_after_a_warm_up(monkeypatch, qtype):
    """A CUDA graph capture fails on any host-to-device copy (the MTP drafter decodes its quantized
    embedding rows inside its graph, after one warm-up pass): once a type has decoded, decoding again
    may not make a tensor from Python or numpy values."""
    block, size = GGML_QUANT_SIZES[qtype]
    raw = torch.randint(0, 256, (4 * size,), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    first = dequantize(raw, qtype, 4 * block)

    def host_copy(*args, **kwargs):
        raise AssertionError(f"{qtype.name}: a tensor made from host values while decoding")

    for name in ("tensor", "as_tensor", "from_numpy"):
        monkeypatch.setattr(torch, name, host_copy)
    again = dequantize(raw, qtype, 4 * block)
    assert torch.equal(again.view(torch.int32), first.view(torch.int32))
