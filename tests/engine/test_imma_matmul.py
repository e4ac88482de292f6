"""The int8 tensor-core decode kernel (engine.kernels.imma_matmul, STRATA_DECODE_KERNEL=imma).

It takes the same int8 x as the dp4a kernel and does exact integer block sums, so it is compared
tightly with x's own int8 values times the weights' float values; a row's result must not depend on the
other rows (any count, any place) nor on the split of K. Here under TRITON_INTERPRET=1; on a GPU
tests/gpu/bench_matmul.py checks the same with the real MMA.
"""
from __future__ import annotations

import importlib

import pytest
import torch
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as QT

from engine.kernels.packed import pack, unpack
from tests.engine.test_dp4a_gemv import dequantized_x
from tests.engine.test_packed import DEV, KERNEL_TYPES, blocks, kernel_module, row_7_everywhere


@pytest.fixture(scope="module")
def im():
    return kernel_module("imma_matmul")


@pytest.fixture()
def sm(im, monkeypatch):
    mod = importlib.import_module("engine.kernels.stream_matmul")
    monkeypatch.setattr(mod, "DECODE_KERNEL", "imma")
    return mod


@pytest.mark.parametrize("qt", KERNEL_TYPES, ids=lambda t: t.name)
def test_imma_kernel_is_right_and_row_invariant(sm, im, qt):
    """Every type (KERNEL_TYPES: one run-int8 type for the four); 40 weight rows: a ragged last tile of BN."""
    dg = importlib.import_module("engine.kernels.dp4a_gemv")
    k = 768 if GGML_QUANT_SIZES[qt][0] == 256 else 352        # 352: 11 blocks, a partial last chunk
    p = pack(blocks(qt, 40, k, 5).to(DEV), qt, k)
    x = torch.randn(16, k, generator=torch.Generator().manual_seed(6)).to(DEV)
    y = sm.linear(x, p)
    ref = dequantized_x(dg, x).double() @ unpack(p).double().T
    assert ((y.double() - ref).norm() / ref.norm()).item() < 1e-6
    row_7_everywhere(lambda r: sm.linear(r, p), x, y, [(16, 7), (9, 2), (1, 0), (16, 15)])


def test_imma_split_of_k_is_the_shape_s_and_rows_past_the_real_count_are_zero(sm, im):
    """The split-K plan reads the weight only; partials per split sum (in order) to the unsplit result
    within float rounding; 5 real rows of 16 give those rows bit for bit and zeros after."""
    k = 1024
    assert im.plan(4, 6144, k) == im.plan(4, 6144, k)
    bn, s, cps = im.plan(4, 24, k, target=8)
    assert s > 1 and s * cps >= k // 256
    p = pack(blocks(QT.Q4_K, 24, k, 7).to(DEV), QT.Q4_K, k)
    x = torch.randn(16, k, generator=torch.Generator().manual_seed(8)).to(DEV)
    full, s16 = im.matmul_parts(x, p, torch.tensor([16], device=DEV), target=8)
    assert s16 == s and full.shape == (s, 16, 24)
    part, _ = im.matmul_parts(x, p, torch.tensor([5], device=DEV), target=8)
    assert torch.equal(part[:, :5], full[:, :5]) and not part[:, 5:].any()
    one, s1 = im.matmul_parts(x, p, torch.tensor([16], device=DEV), target=1)
    assert s1 == 1
    split = sm.sum_parts(full, s).double()
    assert ((split - one[0].double()).norm() / one[0].double().norm()).item() < 1e-6
