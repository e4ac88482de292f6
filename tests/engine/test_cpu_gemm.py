"""The CPU fast mode's own kernels (engine.cpu_gemm): the prompt-tile kernel (engine/native/int4_prompt_gemm.c),
the int4 decode-row kernel (engine/native/int4_rows.c), the Q8_0 head kernel (engine/native/q8_0_rows.c), the
Q6_K decode rows (engine/native/q6_k_rows.c) and the CPU stages' RMSNorm (engine/native/rows_norm.c).

The prompt kernel must read torch's packed int4 layout right for every type the fast mode keeps (one part
and two), give a row the same bits whatever the other rows, their count and the thread count, and be the
kernel that prompt tiles (and only they) run on a machine that can build it; the head kernel likewise on the
file's Q8_0 blocks."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from gguf.constants import GGMLQuantizationType as QT

from engine import cpu_gemm, cpu_int4, layers
from engine.quant import QuantTensor, dequantize
from tests.engine.test_cpu_int4 import blocks

needs_kernel = pytest.mark.skipif(not cpu_gemm.available(), reason=f"the CPU prompt kernel: {cpu_gemm.describe()}")


@needs_kernel
@pytest.mark.parametrize("qt,k", [(QT.Q4_0, 576), (QT.Q4_1, 320), (QT.Q4_K, 512), (QT.Q8_0, 320), (QT.Q5_0, 640),
                                  (QT.Q5_1, 96)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_prompt_kernel_reads_every_type_and_rows_stand_alone(qt, k):
    n = 192                                           # three 64-column blocks
    data = blocks(qt, n, k, 7)
    w = cpu_int4.from_gguf(data, qt, n, k)
    assert cpu_gemm.usable(w.n, 128) and not cpu_gemm.usable(w.n, 8) and not cpu_gemm.usable(48, 128)
    x = torch.randn(45, k, generator=torch.Generator().manual_seed(8)).to(torch.bfloat16)
    y = cpu_int4.linear(x, w, 128)
    assert y.dtype == torch.bfloat16 and y.shape == (45, n)
    exact = x.double() @ dequantize(data, qt, n * k).reshape(n, k).double().T
    assert ((y.double() - exact).norm() / exact.norm()).item() < 1e-2          # the file's values, in bfloat16
    torch_kernel = cpu_int4._mm(x.clone(), w).double()                          # torch's int4 kernel
    assert ((y.double() - torch_kernel).norm() / exact.norm()).item() < 1e-2
    # the float32 sums (before the rounding to bfloat16, which would hide most differences): every row the
    # same bits in register blocks of 6 rows and in the tails, whatever the rows beside it
    sums = lambda rows: cpu_gemm.matmul(rows.contiguous(), w.packed, w.sz, n, 2 if w.twice else 1, f32=True)  # noqa: E731
    full = sums(x)
    assert torch.equal(full.to(torch.bfloat16), y)
    for a, b in ((0, 1), (5, 6), (6, 13), (1, 45), (38, 45)):
        assert torch.equal(sums(x[a:b]), full[a:b]), (a, b)
        assert torch.equal(cpu_int4.linear(x[a:b], w, 128), y[a:b]), (a, b)
    other = torch.randn(45, k, generator=torch.Generator().manual_seed(9)).to(torch.bfloat16)
    other[40] = x[2]
    assert torch.equal(sums(other)[40], full[2])                             # other rows, other place


@needs_kernel
@pytest.mark.parametrize("qt,k", [(QT.Q4_0, 576), (QT.Q4_1, 320), (QT.Q4_K, 512), (QT.Q8_0, 320), (QT.Q5_1, 96)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_decode_row_kernel_reads_every_type_and_rows_stand_alone(qt, k, monkeypatch):
    """int4_rows.c: decode tiles of any int4 matrix (prompt tiles run the prompt kernel); each row the bits it
    gets alone, in passes of 4 rows and their tails, whatever the rows beside it and the thread count. (Its
    sums are torch's int4 kernel's: s * sum x (q - 8) + z * sum x a group; on these weights the same bits.)"""
    n = 192
    data = blocks(qt, n, k, 11)
    w = cpu_int4.from_gguf(data, qt, n, k)
    parts = 2 if w.twice else 1
    assert cpu_gemm.rows_usable(n, k) and not cpu_gemm.rows_usable(48, k)
    rows = lambda r: cpu_gemm.rows_matmul(r.contiguous(), w.packed, w.sz, n, parts)     # noqa: E731
    ran = []
    real = cpu_gemm.rows_matmul
    monkeypatch.setattr(cpu_gemm, "rows_matmul", lambda *a: ran.append(a[0].shape[0]) or real(*a))
    x = torch.randn(13, k, generator=torch.Generator().manual_seed(12)).to(torch.bfloat16)
    y = cpu_int4.linear(x, w, 16)
    assert ran == [13]                                                 # a decode tile: this kernel, one call
    assert not torch.equal(cpu_int4.linear(x, w, 128), y) and ran == [13]     # a prompt tile: the prompt kernel
    w.gemm = False                                                     # a head's, a router's, an expert's rows:
    assert torch.equal(cpu_int4.linear(x, w, 128), y) and ran == [13, 13]     # this kernel at any tile
    assert y.dtype == torch.bfloat16 and y.shape == (13, n) and torch.equal(y, rows(x))
    exact = x.double() @ dequantize(data, qt, n * k).reshape(n, k).double().T
    assert ((y.double() - exact).norm() / exact.norm()).item() < 1e-2
    torch_kernel = cpu_int4._mm(x.clone(), w).double()
    assert ((y.double() - torch_kernel).norm() / exact.norm()).item() < 1e-2
    for a, b in ((0, 1), (3, 4), (4, 9), (1, 13), (12, 13)):
        assert torch.equal(rows(x[a:b]), y[a:b]), (a, b)
    other = torch.randn(6, k, generator=torch.Generator().manual_seed(13)).to(torch.bfloat16)
    other[5] = x[2]
    assert torch.equal(rows(other)[5], y[2])
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert torch.equal(rows(x), y)
    finally:
        torch.set_num_threads(threads)


@needs_kernel
def test_prompt_kernel_bits_do_not_depend_on_threads_and_k_blocks():
    """Columns split over threads by 64-column blocks; k past one cache block (256 pairs) goes through the
    float32 scratch: the same bits on 1 thread and on 2, and a stacked q|k|v gives each matrix its own."""
    k = 1536                                           # three k blocks of 256 pairs
    ws = [cpu_int4.from_gguf(blocks(QT.Q4_K, n, k, n), QT.Q4_K, n, k) for n in (256, 64, 64)]
    x = torch.randn(20, k, generator=torch.Generator().manual_seed(10)).to(torch.bfloat16)
    alone = [cpu_int4.linear(x, w, 128) for w in ws]
    sums = lambda w: cpu_gemm.matmul(x, w.packed, w.sz, w.n, 1, f32=True)     # noqa: E731
    both = [sums(w) for w in ws]
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = [sums(w) for w in ws]
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(a, b) for a, b in zip(both, one))
    st = cpu_int4.Int4Stack(cpu_int4.stack(ws), [256, 64, 64])
    assert st.weight.gemm
    assert all(torch.equal(a, b) for a, b in zip(st.split_linear(x, 128, torch.bfloat16), alone))


@needs_kernel
def test_rms_norm_kernel_matches_torch_and_rows_stand_alone():
    """engine.layers.rms_norm on a CPU runs rows_norm.c: torch's values to float32 rounding (widths with a
    tail past 16 lanes too, and heads of a [T, H, hd] tensor), a row's bits the same alone, in a tile of 128
    rows and on one thread; a tensor autograd follows keeps torch's path."""
    g = torch.Generator().manual_seed(3)
    for shape in [(1, 640), (128, 640), (40, 4, 256), (7, 17), (3, 2, 64)]:
        x = torch.randn(*shape, generator=g) * 3
        w = torch.randn(shape[-1], generator=g)
        y, ref = layers.rms_norm(x, w, 1e-6), layers.torch_rms_norm(x, w, 1e-6)
        assert y.dtype == torch.float32 and y.shape == x.shape
        assert (y - ref).abs().max() <= 2e-6 * ref.abs().max(), shape
        flat, rows = x.reshape(-1, shape[-1]), y.reshape(-1, shape[-1])
        last = flat.shape[0] - 1
        assert torch.equal(layers.rms_norm(flat[last:], w, 1e-6), rows[last:])
        threads = torch.get_num_threads()
        try:
            torch.set_num_threads(1)
            assert torch.equal(layers.rms_norm(x, w, 1e-6), y)
        finally:
            torch.set_num_threads(threads)
    x = torch.randn(4, 64, generator=g)
    w = torch.randn(64, generator=g, requires_grad=True)
    assert cpu_gemm.rms_norm(x, w, 1e-6) is None and layers.rms_norm(x, w, 1e-6).requires_grad


def test_off_switch_falls_back_to_torchs_kernel_and_says_so():
    """STRATA_CPU_GEMM=0 (as where no compiler or AVX512-BF16 is found): prompt tiles run torch's kernel,
    and the effective configuration names that."""
    code = ("from engine import cpu_gemm; from engine.loader import weights_mode; import torch; "
            "print(cpu_gemm.available(), cpu_gemm.usable(128, 128)); print(weights_mode(['cpu'], torch.bfloat16))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "STRATA_CPU_GEMM": "0"})
    assert out.returncode == 0, out.stderr
    first, mode = out.stdout.splitlines()
    assert first == "False False"
    assert "prompt tiles on torch's int4 kernel (the AVX512-BF16 kernel: off (STRATA_CPU_GEMM=0))" in mode


def _exact_rows_alone(matmul, data, qt, n: int, k: int, rows: int, seed: int):
    """A block kernel's float32 sums within float32 rounding of the exact product, each row's bits the same
    in any run of the rows (4 a pass, tails) and on one thread. Returns (x, y, exact)."""
    x = torch.randn(rows, k, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)
    y = matmul(x, data, n)
    exact = x.double() @ dequantize(data, qt, n * k).reshape(n, k).double().T
    assert (y.double() - exact).abs().max().item() < 1e-5 * exact.abs().max().item()
    for a, b in ((0, 1), (3, 4), (3, rows), (1, 6), (rows - 1, rows)):
        assert torch.equal(matmul(x[a:b], data, n), y[a:b]), (a, b)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert torch.equal(matmul(x, data, n), y)
    finally:
        torch.set_num_threads(threads)
    return x, y, exact


@needs_kernel
def test_q6_k_decode_kernel_is_exact_and_rows_stand_alone():
    """Q6_K decode tiles read the file's blocks (q6_k_rows.c): every value of the layout in place (the
    product within float32 rounding of the exact one), a row's float32 sums the same bits whatever the other
    rows, their count and the thread count; prompt tiles keep the dense copy's GEMM; a model's Q6_K matrix
    answers a decode tile through it."""
    n, k = 96, 512
    data = blocks(QT.Q6_K, n, k, 21)
    assert cpu_gemm.q6_k_rows(QT.Q6_K, (n, k), 16) and not cpu_gemm.q6_k_rows(QT.Q6_K, (n, k), 128)
    assert not cpu_gemm.q6_k_rows(QT.Q8_0, (n, k), 1)
    x, y, exact = _exact_rows_alone(cpu_gemm.q6_k_matmul, data, QT.Q6_K, n, k, 9, 22)
    m = QuantTensor(data, QT.Q6_K, (n, k), torch.bfloat16)
    assert torch.equal(m.linear(x[:4], 16), y[:4].to(torch.bfloat16))
    dense = m.linear(x, 128).double()                    # a prompt tile: the dense copy
    assert ((dense - exact).norm() / exact.norm()).item() < 1e-2


@needs_kernel
def test_q8_0_head_kernel_is_exact_and_rows_stand_alone():
    """The Q8_0 head kernel reads the file's blocks: within float32 rounding of the exact product, and every
    row's float32 logits the same bits whatever the other rows (4 at a time, tails), their count and the
    thread count."""
    n, k = 640, 576
    data = blocks(QT.Q8_0, n, k, 11)
    assert cpu_gemm.q8_head(QT.Q8_0, (n, k)) and not cpu_gemm.q8_head(QT.Q4_0, (n, k))
    x, y, _ = _exact_rows_alone(cpu_gemm.q8_matmul, data, QT.Q8_0, n, k, 11, 12)
    other = torch.randn(7, k, generator=torch.Generator().manual_seed(13)).to(torch.bfloat16)
    other[6] = x[1]
    assert torch.equal(cpu_gemm.q8_matmul(other, data, n)[6], y[1])


@needs_kernel
def test_default_model_prompt_tiles_run_the_kernel_and_the_head_keeps_its_blocks():
    """On the real default model: the layers' matrices (and their q|k|v and gate|up stacks) take the
    kernel on prompt tiles; the head (Q8_0, a few wanted rows of 49,152 columns) is the file's blocks on
    the Q8_0 kernel, counted in the stage's weights as the load predicted, and decode rows still share
    tiles (Stage.rows_free)."""
    from engine.loader import load_model
    from engine.messages import EngineConfig

    m = load_model(EngineConfig(model="default", ctx=128))
    try:
        st = m.pipeline.stages[0]
        lw = st.layers[0]
        assert lw.wq.int4.gemm and lw.qkv.weight.gemm and lw.gate_up.weight.gemm and lw.w_down.int4.gemm
        head = st.head.output
        assert head.q8 and head.int4 is None and head.nbytes == m.gf.tensors["token_embd.weight"].nbytes
        assert st.rows_free and st.weight_bytes >= head.nbytes
        assert "prompt tiles on the AVX512-BF16 kernel" in m.effective.weights
        assert "a Q8_0 head and Q6_K decode rows on the file's blocks" in m.effective.weights
    finally:
        m.pipeline.close()
