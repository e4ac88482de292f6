"""The bfloat16 tensor-core decode kernel (engine.kernels.bf16_decode, STRATA_DECODE_KERNEL=bf16).

Its weights are the Q4_K values rounded to bfloat16 (through bfloat16 scales) and x keeps its bfloat16
values, so it is compared with float64 products within bfloat16 rounding; a row's result must not
depend on the other rows (any count, any place) nor on the real-row count. Here under TRITON_INTERPRET=1;
on a GPU tests/gpu/bench_matmul.py checks the same with the real MMA.
"""
from __future__ import annotations

import importlib

import pytest
import torch
from gguf.constants import GGMLQuantizationType as QT

from engine.kernels.packed import pack, unpack
from tests.engine.test_packed import DEV, blocks, kernel_module, row_7_everywhere


@pytest.fixture(scope="module")
def bf():
    return kernel_module("bf16_decode")


def linear(bf, x, p, real=None):
    sm = importlib.import_module("engine.kernels.stream_matmul")
    return sm.sum_parts(*bf.matmul_parts(x, p, torch.tensor([real or x.shape[0]], dtype=torch.int32, device=DEV)))


def test_bf16_kernel_is_right_within_bfloat16_and_row_invariant(bf):
    """40 weight rows (a ragged tile), K = 768 (three super-blocks) split in two partials."""
    k = 768
    p = pack(blocks(QT.Q4_K, 40, k, 5).to(DEV), QT.Q4_K, k)
    x = torch.randn(16, k, generator=torch.Generator().manual_seed(6)).to(DEV).to(torch.bfloat16)
    y = linear(bf, x, p)
    ref = x.double() @ unpack(p).double().T
    err = ((y.double() - ref).norm() / ref.norm()).item()
    assert 1e-5 < err < 1e-2, err        # bfloat16 weights: not float32-exact, within their rounding
    row_7_everywhere(lambda r: linear(bf, r.to(torch.bfloat16), p), x, y, [(16, 7), (9, 2), (1, 0), (16, 15)])


def test_bf16_rows_past_the_real_count_are_zero_and_the_split_is_the_shapes(bf):
    k = 1024
    assert bf.plan(6144, k) == bf.plan(6144, k)
    p = pack(blocks(QT.Q4_K, 24, k, 7).to(DEV), QT.Q4_K, k)
    x = torch.randn(16, k, generator=torch.Generator().manual_seed(8)).to(DEV).to(torch.bfloat16)
    full, s = bf.matmul_parts(x, p, torch.tensor([16], dtype=torch.int32, device=DEV), target=8, bn=16)
    assert s > 1 and full.shape == (s, 16, 24)
    part, _ = bf.matmul_parts(x, p, torch.tensor([5], dtype=torch.int32, device=DEV), target=8, bn=16)
    assert torch.equal(part[:, :5], full[:, :5]) and not part[:, 5:].any()


def test_bf16_kernel_takes_q4_k_only(bf):
    p = pack(blocks(QT.Q4_0, 8, 256, 1).to(DEV), QT.Q4_0, 256)
    with pytest.raises(ValueError, match="Q4_K"):
        bf.matmul_parts(torch.zeros(1, 256, dtype=torch.bfloat16, device=DEV), p, torch.tensor([1], device=DEV))
