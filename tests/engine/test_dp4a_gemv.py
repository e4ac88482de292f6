"""The int8 decode kernel (engine.kernels.dp4a_gemv), the default for decode tiles on a GPU.

Its arithmetic beyond the int8 rounding of x is exact integer dot products plus float32 scaling, so it
is compared tightly with x's own int8 values times the weights' float values; and a row's result must
not depend on the other rows (any count, any place). Here under TRITON_INTERPRET=1 (dp4a emulated
with shifts); on a GPU with the real instruction (tests/gpu/bench_matmul.py checks the same there).
"""
from __future__ import annotations

import importlib

import pytest
import torch
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as QT

from engine.kernels.packed import pack, unpack
from tests.engine.test_packed import DEV, KERNEL_TYPES, blocks, kernel_module, layouts, row_7_everywhere


@pytest.fixture(scope="module")
def dg():
    return kernel_module("dp4a_gemv")


@pytest.fixture()
def sm(dg, monkeypatch):
    mod = importlib.import_module("engine.kernels.stream_matmul")
    monkeypatch.setattr(mod, "DECODE_KERNEL", "dp4a")
    return mod


def dequantized_x(dg, x: torch.Tensor) -> torch.Tensor:
    q, ds = dg.quantize(x)
    return (q.float().reshape(x.shape[0], -1, 32) * ds[..., :1]).reshape(x.shape)


def test_quantize_rounds_each_block_of_32_to_int8(dg):
    x = torch.randn(3, 96, generator=torch.Generator().manual_seed(1)).to(DEV)
    x[1, 32:64] = 0.0                                   # an all-zero block: scale 0, codes 0
    q, ds = dg.quantize(x)
    assert q.dtype == torch.int8 and ds.shape == (3, 3, 2)
    d = ds[..., 0]
    blocks_ = x.reshape(3, 3, 32)
    assert torch.allclose(d, blocks_.abs().amax(-1) / 127)
    assert q.abs().max() <= 127 and q.reshape(3, 3, 32).abs().amax(-1)[d > 0].min() == 127
    err = (q.float().reshape(3, 3, 32) * d[..., None] - blocks_).abs()
    assert (err <= d[..., None] / 2 * (1 + 1e-5)).all()       # round to nearest
    assert torch.equal(ds[..., 1], d * q.float().reshape(3, 3, 32).sum(-1))
    assert not q.reshape(3, 3, 32)[1, 1].any() and d[1, 1] == 0


@pytest.mark.parametrize("qt,planes", layouts(KERNEL_TYPES, (QT.IQ3_XXS, QT.IQ3_S, QT.IQ2_XS, QT.IQ1_M)))
def test_decode_kernel_is_right_and_row_invariant(sm, dg, qt, planes):
    """Every type (KERNEL_TYPES: one run-int8 type for the four; Q6_K in both its layouts; the table codes of
    tables 1 and 2 in kind 6, 3 and 4 in kind 14: tables 3 and 4 in kind 6 run in test_moe_gemv's routed
    experts, on this kernel's pass), a K that takes several lane steps with a ragged last one (Q4_K 1280: 20
    units of 64 values on 8 lanes; the 32-value types at 576: 18 units on 8 lanes)."""
    k = 1280 if GGML_QUANT_SIZES[qt][0] == 256 else 576
    p = pack(blocks(qt, 40, k, 5).to(DEV), qt, k, planes=planes)
    x = torch.randn(16, k, generator=torch.Generator().manual_seed(6)).to(DEV)
    y = sm.linear(x, p)
    ref = dequantized_x(dg, x).double() @ unpack(p).double().T
    assert ((y.double() - ref).norm() / ref.norm()).item() < 1e-6
    exact = x.double() @ unpack(p).double().T
    assert ((y.double() - exact).norm() / exact.norm()).item() < 2e-2        # the int8 rounding of x only
    row_7_everywhere(lambda r: sm.linear(r, p), x, y, [(16, 7), (9, 2), (1, 0), (16, 15)])


@pytest.mark.parametrize("qt", [QT.Q4_K, QT.IQ4_XS], ids=lambda t: t.name)
@pytest.mark.parametrize("k", [4096, 512])
def test_decode_kernel_lanes_and_steps(dg, k, qt):
    """The plan takes the weight's shape only; a full-width row walks K in even steps (Q4_K and IQ4_XS:
    64 values a unit step, at 4096 two steps of 32 lanes)."""
    p = pack(blocks(qt, 8, k, 7).to(DEV), qt, k)
    assert dg.unit_values(p.kind) == 64
    bn, lanes = dg.plan(p.kind, 6144, k)
    assert lanes in (8, 16, 32) and bn % (32 // lanes) == 0
    assert dg.plan(p.kind, 6144, k) == dg.plan(p.kind, 6144, k, dg.WARPS, dg.ROWS_PER_THREAD)
    x = torch.randn(2, k, generator=torch.Generator().manual_seed(8)).to(DEV)
    part, s = dg.matmul_parts(x, p, torch.tensor([2], device=DEV))
    assert s == 1 and part.shape == (1, 2, 8)
    ref = dequantized_x(dg, x).double() @ unpack(p).double().T
    assert ((part[0].double() - ref).norm() / ref.norm()).item() < 1e-6


@pytest.mark.parametrize("qt,planes", layouts([QT.Q4_K, QT.Q4_1, QT.Q8_0, QT.IQ4_XS], (QT.IQ2_XS,)))
def test_weight_rows_sharing_x_loads_give_the_same_bits(dg, qt, planes):
    """Two weight rows a thread, each x load serving both (xs=2): every weight row runs the same code as
    alone, so the bits equal xs=1's, for 1 and 5 real rows (passes of 1 and 4, one short), a ragged last
    program (20 rows, 8 a program: the last one's second weight rows lie past the matrix) and zeros past
    the real rows."""
    k = 1280 if GGML_QUANT_SIZES[qt][0] == 256 else 576
    p = pack(blocks(qt, 20, k, 12).to(DEV), qt, k, planes=planes)
    x = torch.randn(16, k, generator=torch.Generator().manual_seed(13)).to(DEV)
    for m, n_real in ((1, 1), (8, 5)):
        xm, nr = x[:m].contiguous(), torch.tensor([n_real], device=DEV)
        one, _ = dg.matmul_parts(xm, p, nr, None, 1, 1, xs=1)
        two, _ = dg.matmul_parts(xm, p, nr, None, 1, 1, xs=2)
        assert torch.equal(one, two) and one[:, :n_real].any() and not two[:, n_real:].any()


def test_rows_per_pass_give_the_same_bits(dg):
    """x rows per pass 1, 4 and 8 (each loaded weight unit serving the pass's rows; rows past the real
    count skipped), with and without the next step's weights prefetched: the same bits for 6 real rows (one pass of 8, two rows short) and 11 (8 + 3, the
    second pass's last four skipped; 4 + 4 + 3), zeros past them. The pass is the same code for every
    type (the types differ inside a row's unit step, checked above). 8 weight rows: two programs of 4."""
    k = 1280
    p = pack(blocks(QT.Q4_K, 8, k, 14).to(DEV), QT.Q4_K, k)
    x = torch.randn(16, k, generator=torch.Generator().manual_seed(15)).to(DEV)
    for n_real in (6, 11):
        nr = torch.tensor([n_real], device=DEV)
        got = [dg.matmul_parts(x, p, nr, None, 1, 1, rb=rb, pf=False)[0] for rb in (1, 4, 8)]
        got += [dg.matmul_parts(x, p, nr, None, 1, 1, rb=rb, pf=True)[0] for rb in (1, 4)]   # next units prefetched
        assert all(torch.equal(got[0], g) for g in got[1:])
        assert got[2][:, :n_real].all() and not got[2][:, n_real:].any()


def test_decode_kernel_computes_only_the_real_rows(sm):
    p = pack(blocks(QT.Q4_1, 24, 576, 8).to(DEV), QT.Q4_1, 576)
    x = torch.randn(16, 576, generator=torch.Generator().manual_seed(9)).to(DEV)
    full, s = sm.matmul_parts(x, p)
    part, s2 = sm.matmul_parts(x, p, torch.tensor([5], device=DEV))
    assert s == s2 == 1 and torch.equal(part[:, :5], full[:, :5])
    assert not part[:, 5:].any()


def test_decode_kernel_bf16_rows(sm):
    p = pack(blocks(QT.Q4_K, 24, 768, 10).to(DEV), QT.Q4_K, 768)
    x = torch.randn(5, 768, generator=torch.Generator().manual_seed(11)).to(DEV).to(torch.bfloat16)
    y = sm.linear(x, p)
    assert y.dtype == torch.bfloat16
    ref = x.double() @ unpack(p).double().T
    assert ((y.double() - ref).norm() / ref.norm()).item() < 2e-2
    assert torch.equal(sm.linear(x[3:4].contiguous(), p)[0], y[3])


def test_row_kernels_write_the_same_int8_x_as_quantize(dg):
    """rms_norm, residual_norm and glu give the int8 form of their output (the decode matmul's input)
    equal to quantize() of that output, bit for bit; 96 wide: a power-of-two block with a masked tail."""
    fused = importlib.import_module("engine.kernels.fused")
    gen = torch.Generator().manual_seed(21)
    x = torch.randn(3, 96, generator=gen).to(DEV)
    w = torch.randn(96, generator=gen).to(DEV)

    def same(out, q8):
        q, ds = dg.quantize(out)
        assert torch.equal(q8[0], q) and torch.equal(q8[1], ds)

    q8 = dg.buffers(3, 96, DEV)
    same(fused.rms_norm(x, w, 1e-6, torch.float32, q8), q8)
    part = torch.randn(2, 3, 96, generator=gen).to(DEV)
    q8 = dg.buffers(3, 96, DEV)
    _, h = fused.residual_norm(x, part, 2, None, w, 1e-6, torch.float32, q8)
    same(h, q8)
    gu = torch.randn(1, 3, 192, generator=gen).to(DEV)
    q8 = dg.buffers(3, 96, DEV)
    same(fused.glu(gu, 1, 96, False, torch.float32, q8), q8)
    attention = importlib.import_module("engine.kernels.attention")     # 4 heads of 32, 2 real rows of 3
    q = torch.randn(3, 4, 32, generator=gen).to(DEV)
    kc, vc = (torch.randn(2, 16, 2, 32, generator=gen).to(DEV) for _ in range(2))
    q8 = dg.buffers(3, 128, DEV)
    a = attention.tile_attention(q, kc, vc, torch.tensor([0, 1, 1], device=DEV), torch.tensor([5, 9, 0], device=DEV),
                                 0, 0.2, torch.bfloat16, torch.tensor([2], device=DEV), q8)
    assert not a[2].any()
    same(a.reshape(3, 128), q8)
