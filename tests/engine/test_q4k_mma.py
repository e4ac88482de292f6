"""The Q4_K tensor-core decode kernel (engine.kernels.q4k_mma) on a GPU: a row's bits do not depend on
the tile's real row count or on the rows beside it, and the result is the product of the weights as
engine.quant reads them with x as the int8 kernels round it; stream_matmul sends such weights' decode
rows there and prompt rows to its tensor-core kernel. Skipped without a CUDA GPU (Gluon kernels
do not run under the Triton interpreter)."""
import numpy as np
import pytest
import torch
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as QT

from engine.synthetic import _random_blocks

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _weights(n, k, seed=0):
    from engine.kernels.packed import pack
    block, _ = GGML_QUANT_SIZES[QT.Q4_K]
    data = torch.from_numpy(_random_blocks(QT.Q4_K, n * k // block, np.random.default_rng(seed), 0.02))
    return data.reshape(n, -1), pack(data.reshape(n, -1).cuda(), QT.Q4_K, k, mma=True)


@pytest.mark.parametrize("n,k", [(320, 2048), (576, 1536), (1024, 4096), (16384, 1024)])   # 8, 2, 8, 2 warps
def test_rows_are_independent_of_the_tile_and_right(n, k):
    from engine.kernels import dp4a_gemv, q4k_mma
    from engine.quant import dequantize
    data, w = _weights(n, k)
    x = torch.randn(16, k, device="cuda").to(torch.bfloat16)
    full, s = q4k_mma.matmul_parts(x, w, torch.tensor([16], dtype=torch.int32, device="cuda"))
    y = full.sum(0) if s > 1 else full[0]
    xq, xds = dp4a_gemv.quantize(x)
    xd = (xq.double().reshape(16, -1, 32) * xds[..., :1].double()).reshape(16, k)
    ref = xd @ dequantize(data, QT.Q4_K, n * k).reshape(n, k).double().cuda().T
    assert ((y.double() - ref).norm() / ref.norm()).item() < 1e-5
    for m in (1, 3, 8, 9, 15):
        part, _ = q4k_mma.matmul_parts(x, w, torch.tensor([m], dtype=torch.int32, device="cuda"))
        assert torch.equal(part[:, :m], full[:, :m]), m
        assert not part[:, m:].any(), m
    for i in (0, 5, 12):
        alone, _ = q4k_mma.matmul_parts(x[i:i + 1].contiguous(), w, torch.tensor([1], dtype=torch.int32, device="cuda"))
        assert torch.equal(alone[:, 0], full[:, i]), i


@pytest.mark.parametrize("n,k,nw", [(1024, 4096, 4), (576, 1536, 2), (16384, 1024, 8)])
def test_groups_a_warp_keep_the_bits(n, k, nw):
    """16-row groups a warp (one x fragment for several MMAs), both passes of a 16-row tile in one sweep and
    loading two super-blocks ahead change which loads serve which MMAs, not the arithmetic: every row's bits
    as with one group a warp."""
    from engine.kernels import q4k_mma
    _, w = _weights(n, k, 5)
    x = torch.randn(16, k, device="cuda").to(torch.bfloat16)
    for m in (1, 5, 8, 12, 16):
        rows = torch.tensor([m], dtype=torch.int32, device="cuda")
        xs = x[:1].contiguous() if m == 1 else x
        one = q4k_mma.matmul_parts(xs, w, rows, nw=nw, tm=1)[0]
        for tm in (2, 4):
            assert torch.equal(q4k_mma.matmul_parts(xs, w, rows, nw=nw, tm=tm)[0], one), (m, tm)
        for ahead in (1, 2):                           # super-blocks loaded ahead: the same bits
            assert torch.equal(q4k_mma.matmul_parts(xs, w, rows, nw=nw, tm=1, ahead=ahead)[0], one), (m, ahead)


def test_stream_matmul_routes_the_tensor_core_order():
    """Decode tiles of tensor-core ordered Q4_K run this kernel (whatever DECODE_KERNEL says); prompt tiles
    read the same codes in the prompt kernel and agree with the GGUF-ordered weights bit for bit."""
    from engine.kernels import q4k_mma, stream_matmul
    from engine.kernels.packed import pack
    data, w = _weights(512, 2048, 3)
    g = pack(data.cuda(), QT.Q4_K, 2048)
    x = torch.randn(40, 2048, device="cuda").to(torch.bfloat16)
    rows = torch.tensor([5], dtype=torch.int32, device="cuda")
    part, s = stream_matmul.matmul_parts(x[:5].contiguous(), w, rows)
    assert s == 1 and torch.equal(part, q4k_mma.matmul_parts(x[:5].contiguous(), w, rows)[0])
    assert torch.equal(stream_matmul.linear(x, w), stream_matmul.linear(x, g))
    with pytest.raises(ValueError, match="q4k_mma"):
        from engine.kernels import dp4a_gemv
        dp4a_gemv.matmul_parts(x[:5].contiguous(), w, rows)
