"""The int8 decode kernel's arithmetic on tensor cores (engine.kernels.dp4a_mma) against the int8 kernel
itself (engine.kernels.dp4a_gemv): bit for bit, since a many-row tile on the one and a lone row's 1-row
tile on the other must give a request the same tokens.

Here under TRITON_INTERPRET=1, where both add a row's lanes in the order written out in
engine.kernels.lane_tree (the GPU's tl.sum order); test_gpu_kernels.py repeats the comparison on a GPU.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf.constants import GGMLQuantizationType as QT

from engine.kernels.packed import pack
from tests.engine.test_packed import DEV, blocks, kernel_module

lane_tree = None                                      # engine.kernels.lane_tree, once imported


@pytest.fixture(scope="module")
def mods():
    return kernel_module("dp4a_gemv"), kernel_module("dp4a_mma"), kernel_module("lane_tree")


# (type, K): lanes 8 with a ragged last step, 16 and 32 with even ones (the lane count follows K; several
# steps at 8 and 16 lanes)
CASES = [(QT.Q4_1, 576), (QT.Q4_1, 1536), (QT.Q4_0, 576), (QT.Q8_0, 576), (QT.IQ3_S, 512), (QT.Q4_K, 1280),
         (QT.Q4_K, 2048)]


@pytest.mark.parametrize("qt,k", CASES, ids=lambda v: getattr(v, "name", None) or str(v))
def test_tensor_core_rows_give_the_int8_kernels_bits(mods, qt, k):
    """Each (weight row, x row) equal to the int8 kernel's, for 16, 5 of 16 and 3 real rows and a last
    program past the weight rows (37 rows, 16 a program); zeros past the real rows."""
    dg, dm, lt = mods
    p = pack(blocks(qt, 37, k, 21).to(DEV), qt, k, planes=False)    # (IQ3_S: its int8 planes, kind 1)
    assert dm.supports(p)
    x = torch.randn(16, k, generator=torch.Generator().manual_seed(22)).to(DEV)
    x[3] *= 1e3                                       # rows of other scales: a wrong order shows in the bits
    x[4] *= 1e-3
    for m, n_real in ((16, 16), (16, 5), (3, 3)):
        xm, nr = x[:m].contiguous(), torch.tensor([n_real], dtype=torch.int32, device=DEV)
        want, _ = dg.matmul_parts(xm, p, nr)
        got, s = dm.matmul_parts(xm, p, nr, bn=16)
        assert s == 1 and got.shape == want.shape == (1, m, 37)
        assert torch.equal(got, want), (m, n_real, (got - want).abs().max().item())
        assert got[:, :n_real].any() and not got[:, n_real:].any()


def test_the_lane_tree_is_the_gpus_butterfly(mods):
    """lane_tree.tree adds lane l to l ^ (1 << b) for each bit b in order(...): the shuffle-xor tree of
    the GPU's tl.sum; numpy's own sum (the interpreter's tl.sum) gives other bits on such values."""
    global lane_tree                                  # the kernel below reads it from this module
    _, _, lt = mods
    lane_tree = lt
    import triton
    import triton.language as tl

    @triton.jit
    def summed(v_ptr, o_ptr, L: tl.constexpr, X: tl.constexpr, ORD: tl.constexpr):
        v = tl.load(v_ptr + tl.arange(0, L)[:, None] * X + tl.arange(0, X)[None, :])
        tl.store(o_ptr + tl.arange(0, X), lane_tree.tree(v, L, X, ORD))

    for bn, lanes, bits in ((4, 32, (2, 1, 0, 4, 3)), (16, 8, (0, 2, 1)), (8, 16, (1, 0, 3, 2))):
        assert lt.order(bn, lanes, 4) == bits
        v = (np.random.default_rng(lanes).standard_normal((lanes, 16)) * np.logspace(-3, 3, lanes)[:, None])
        v = v.astype(np.float32)
        ref = v.copy()
        for b in bits:                                 # lane 0's partners always hold their sums by then
            for lane in range(lanes):
                if not (lane >> b) & 1:
                    ref[lane] = ref[lane] + ref[lane ^ (1 << b)]
        out = torch.empty(16, device=DEV)
        summed[(1,)](torch.from_numpy(v).to(DEV), out, L=lanes, X=16, ORD=lt.packed(bits))
        assert np.array_equal(out.cpu().numpy(), ref[0]) and not np.array_equal(ref[0], v.sum(0))
    with pytest.raises(ValueError):
        lt.order(8, 8, 4)                             # not one weight row a thread and lane
