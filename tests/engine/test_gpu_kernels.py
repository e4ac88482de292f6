"""The GPU block's Triton kernels (engine.kernels.fused, fast_block, quant_matmul.matmul_parts)
against the torch path, and their row-invariance.

On a GPU they run there; without one under TRITON_INTERPRET=1 on tiny shapes in float32 (the
interpreter multiplies bf16 bit patterns in tl.dot, triton-lang/triton#11584). Skipped without triton.
"""
from __future__ import annotations

import importlib
import os

import pytest
import torch

GPU = torch.cuda.is_available()
DEV = "cuda" if GPU else "cpu"


@pytest.fixture(scope="module")
def kernels():
    if not GPU:
        os.environ.setdefault("TRITON_INTERPRET", "1")   # must precede the first `import triton`
    pytest.importorskip("triton")
    return {n: importlib.import_module(f"engine.kernels.{n}") for n in ("fused", "fast_block", "quant_matmul")}


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def test_rms_norm(kernels):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(5, 3, 48, generator=gen).to(DEV)
    w = torch.randn(48, generator=gen).to(DEV)
    out = kernels["fused"].rms_norm(x, w, 1e-6)
    ref = x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
    assert out.shape == x.shape and out.dtype == torch.float32
    assert rel_err(out, ref) < 1e-6


def _weights(synthetic, arch: str, qtype: str, device, dtype=torch.float32):
    from engine.config import model_config
    from engine.gguf_file import read_gguf
    from engine.layers import rope_tables
    from engine.weights import WeightLoader

    gf = read_gguf(synthetic(arch, qtype=qtype, shape="small"))
    cfg = model_config(gf)
    lw = WeightLoader(gf, cfg, dtype).layer(1, "cpu")      # GGUF bytes (on a GPU the loader repacks)
    for name, m in vars(lw).items():
        if hasattr(m, "qtype"):
            m.data = m.data.to(device)
            m._dense = m._dense.to(device) if m._dense is not None else None
            m._experts.clear()                  # an expert stack's views of the CPU bytes
        elif isinstance(m, torch.Tensor):
            setattr(lw, name, m.to(device))
    return cfg, lw, rope_tables(cfg.layer_rope_base(1), cfg.rope_dim, 256, device)


def _packed(lw):
    """The layer as a GPU stage holds it: matrices repacked, q|k|v and gate|up stacked."""
    from engine.weights import stack_packed

    for m in (lw.wq, lw.wk, lw.wv, lw.wo, lw.w_gate, lw.w_up, lw.w_down):
        assert m.repack(on_cpu=True)
    lw.qkv = stack_packed([lw.wq, lw.wk, lw.wv])
    lw.gate_up = stack_packed([lw.w_gate, lw.w_up])
    return lw


@pytest.mark.parametrize("qtype", ["Q4_1", "Q4_K"])
def test_matmul_parts_side_by_side(kernels, synthetic, qtype):
    qm = kernels["quant_matmul"]
    cfg, lw, _ = _weights(synthetic, "llama", qtype, DEV)
    x = torch.randn(20, cfg.n_embd, generator=torch.Generator().manual_seed(2)).to(DEV)
    ws = [lw.wq, lw.wk, lw.wv]
    part, s = qm.matmul_parts(x, [(w.data, w.qtype) for w in ws])
    out = part.sum(0) if s > 1 else part[0]
    ref = torch.cat([x.double() @ w.dequantize().double().T for w in ws], dim=1)
    assert rel_err(out, ref) < 1e-5
    # row 7 among other rows, and in a call of another size: the same partial sums bit for bit
    other = torch.randn(16, cfg.n_embd, generator=torch.Generator().manual_seed(3)).to(DEV)
    other[7] = x[7]
    p2, _ = qm.matmul_parts(other, [(w.data, w.qtype) for w in ws])
    assert torch.equal(p2[:, 7], part[:, 7])


def _tile(n_slots: int, rows: list[tuple[int, int]], device):
    from engine.block import Tile

    slot = torch.tensor([r[0] for r in rows], dtype=torch.long, device=device)
    pos = torch.tensor([r[1] for r in rows], dtype=torch.long, device=device)
    return Tile(slot, pos, len(rows))


def _block_case(synthetic, arch, qtype, n_rows=16, seed=4):
    cfg, lw, rope = _weights(synthetic, arch, qtype, DEV)
    gen = torch.Generator().manual_seed(seed)
    n_slots, ctx = 3, 256
    shape = (n_slots + 1, ctx, cfg.n_kv_heads, cfg.head_dim)
    k = torch.randn(shape, generator=gen).to(DEV)
    v = torch.randn(shape, generator=gen).to(DEV)
    rows = [(1, 77) if i == 7 else (2 * (i % 2), 70 + i) for i in range(n_rows)]   # row 7 alone in slot 1
    x = torch.randn(n_rows, cfg.n_embd, generator=gen).to(DEV)
    return cfg, lw, rope, k, v, rows, x


@pytest.mark.parametrize("arch", ["llama", "qwen3", "gemma3", "glm4moe"])
def test_fast_block_matches_torch_block(kernels, synthetic, arch):
    """Same function as the torch path (float32 weights; a few rounding steps differ). glm4moe: q, k, v
    biases (added by the q|k|v kernel), routed and shared experts."""
    from engine.block import attention_part, ffn_part

    fb = kernels["fast_block"]
    cfg, lw, rope, k, v, rows, x = _block_case(synthetic, arch, "Q8_0")
    assert fb.supports(cfg, lw)
    k1, v1, k2, v2 = k.clone(), v.clone(), k.clone(), v.clone()
    tile = _tile(3, rows, DEV)
    layer = 1
    out = fb.run_block_cuda(lw, cfg, layer, x, tile, k1, v1, rope)[0]
    ref = ffn_part(lw, cfg, attention_part(lw, cfg, layer, x, tile, k2, v2, rope))
    assert rel_err(out, ref) < 1e-4
    assert rel_err(k1, k2) < 1e-5 and rel_err(v1, v2) < 1e-5


def test_fast_block_is_row_invariant(kernels, synthetic):
    fb = kernels["fast_block"]
    cfg, lw, rope, k, v, rows, x = _block_case(synthetic, "qwen3", "Q4_1")
    out = fb.run_block_cuda(lw, cfg, 1, x, _tile(3, rows, DEV), k.clone(), v.clone(), rope)[0]
    # row 7 (slot 1, position 77) among other rows and in a call of another size; under the
    # interpreter (numpy tl.dot) it keeps its position in the 16-row tile
    placements = [(16, 7), (9, 7)] + ([(1, 0)] if GPU else [])
    _assert_row_7_everywhere(fb, cfg, lw, rope, k, v, rows, x, out, placements)
    if GPU:     # calls of prompt tiles' sizes (over SPLIT_ROWS rows: flash attention): one bits among them
        _assert_row_7_everywhere(fb, cfg, lw, rope, k, v, rows, x, None, [(40, 23), (24, 5), (17, 16), (64, 0)])


def _assert_row_7_everywhere(fb, cfg, lw, rope, k, v, rows, x, out, placements):
    """Row 7 of (x, rows) at each (call rows, place) beside other rows: out[7]'s bits (out None: the first
    placement's)."""
    gen = torch.Generator().manual_seed(9)
    want = None if out is None else out[7]
    for n, at in placements:
        xs = torch.randn(n, cfg.n_embd, generator=gen).to(DEV)
        xs[at] = x[7]
        rr = [rows[7] if i == at else (2 * (i % 2), 5 + i) for i in range(n)]
        got = fb.run_block_cuda(lw, cfg, 1, xs, _tile(3, rr, DEV), k.clone(), v.clone(), rope)[0]
        want = got[at] if want is None else want
        assert torch.equal(got[at], want), (n, at)


@pytest.fixture(scope="module")
def unpacked_blocks():
    """qtype -> _block_case's block output from the GGUF-layout weights (quant_matmul: no decode kernel
    involved), made by the first test that needs it."""
    return {}


# Each decode kernel in the block on the types it meets there. The CUDA-core float32 kernel (gemv, not the
# default) on Q4_1 only: its Q4_K code is checked with the same placements in test_packed.py (and at K 512, 768
# and 1024 there), and the Q4_K block layout by the other kernels here.
@pytest.mark.parametrize("qtype,kernel", [("Q4_1", "gemv"), ("Q4_K", "mma"), ("Q4_1", "dp4a"),
                                          ("Q4_K", "dp4a"), ("Q4_K", "dp4a+mma"), ("Q4_K", "q4k-mma")])
def test_packed_block_decode_tile_is_row_invariant_and_right(kernels, synthetic, monkeypatch, unpacked_blocks,
                                                            qtype, kernel):
    """The GPU stage's layout: repacked weights, decode tiles through either decode kernel; a row does not
    depend on the other rows, their count or (except under the interpreter's tl.dot) its place. dp4a+mma:
    tiles of several rows on the int8 kernel's tensor-core twin (engine.kernels.dp4a_mma), a 1-row tile on
    the int8 kernel: the same row, the same bits. q4k-mma: Q4_K repacked in the tensor-core order, every
    decode row on engine.kernels.q4k_mma (Gluon: a GPU only)."""
    if kernel == "q4k-mma" and not GPU:
        pytest.skip("the Gluon kernel runs on a GPU only")
    monkeypatch.setattr(importlib.import_module("engine.kernels.packed"), "MMA_Q4K", kernel == "q4k-mma")
    if kernel == "dp4a+mma":
        monkeypatch.setattr(importlib.import_module("engine.kernels.dp4a_mma"), "ROWS", True)
        kernel = "dp4a"
    monkeypatch.setattr(importlib.import_module("engine.kernels.stream_matmul"), "DECODE_KERNEL", kernel)
    fb = kernels["fast_block"]
    cfg, lw, rope, k, v, rows, x = _block_case(synthetic, "llama", qtype)
    if qtype not in unpacked_blocks:    # the GGUF layout's result: the same for every decode kernel
        unpacked_blocks[qtype] = fb.run_block_cuda(lw, cfg, 1, x, _tile(3, rows, DEV), k.clone(), v.clone(), rope)[0]
    ref = unpacked_blocks[qtype]
    _packed(lw)
    out = fb.run_block_cuda(lw, cfg, 1, x, _tile(3, rows, DEV), k.clone(), v.clone(), rope)[0]
    assert rel_err(out, ref) < (5e-3 if kernel in ("dp4a", "q4k-mma") else 1e-5)     # x rounded to int8
    anywhere = kernel != "mma" or GPU
    _assert_row_7_everywhere(fb, cfg, lw, rope, k, v, rows, x, out,
                             [(16, 7), (9, 2), (1, 0), (16, 15)] if anywhere else [(16, 7), (9, 7)])


def test_quant_matmul_programs_that_walk_several_k_steps(kernels, synthetic, monkeypatch):
    """No K split: each program walks all of K in UNROLL-block steps, carrying its sums."""
    qm = kernels["quant_matmul"]
    monkeypatch.setattr(qm, "TARGET_PROGRAMS", 1)
    cfg, lw, _ = _weights(synthetic, "llama", "Q4_K", DEV)
    x = torch.randn(5, cfg.n_embd, generator=torch.Generator().manual_seed(12)).to(DEV)
    part, s = qm.matmul_parts(x, [(lw.wq.data, lw.wq.qtype)])
    assert s == 1
    assert rel_err(part[0], x.double() @ lw.wq.dequantize().double().T) < 1e-5


@pytest.mark.parametrize("k", [160, 576])
def test_quant_linear_k_tails(kernels, k):
    """K not a multiple of the kernel's K step (UNROLL blocks of 32): the tail blocks add nothing."""
    import numpy as np
    from gguf import quants
    from gguf.constants import GGMLQuantizationType as QT

    from engine.quant import QuantTensor

    qm = kernels["quant_matmul"]
    rng = np.random.default_rng(7)
    raw = quants.quantize(rng.standard_normal((40, k)).astype(np.float32), QT.Q8_0)
    w = QuantTensor(torch.from_numpy(raw).to(DEV), QT.Q8_0, (40, k))
    x = torch.randn(5, k, generator=torch.Generator().manual_seed(8)).to(DEV)
    ref = x.double() @ w.dequantize().double().T
    assert rel_err(qm.quant_linear(x, w.data, w.qtype), ref) < 1e-6
    dense = torch.randn(24, k - 16, generator=torch.Generator().manual_seed(9)).to(DEV)
    xd = x[:, : k - 16].contiguous()
    assert rel_err(qm.dense_linear(xd, dense), xd.double() @ dense.double().T) < 1e-6


def test_moe_block_tiles_on_the_device(kernels, synthetic, monkeypatch):
    """A qwen3moe block with repacked expert stacks runs its routed experts on the device: decode tiles
    by engine.kernels.moe_gemv, prompt tiles (over 16 rows) by engine.kernels.moe_grouped; both close to
    the experts picked on the host from the GGUF bytes, and a decode row does not depend on the other
    rows, their count or its place."""
    import engine.block as block

    if not GPU:          # the interpreter: the device path by its condition, not by the tensors' device
        monkeypatch.setattr(block, "device_experts", lambda lw, rows: lw.router is not None and
                            lw.gate_exps.packed is not None)
    fb = kernels["fast_block"]
    cfg, lw, rope, k, v, rows, x = _block_case(synthetic, "qwen3moe", "Q4_K")
    assert fb.supports(cfg, lw)
    if not GPU:          # the router through its GPU kernel too (torch's CPU matmul is not row-invariant)
        lw.router.linear = lambda h, tile=None, n_dev=None: lw.router.triton_linear(h)
    rows32 = [(i % 3, 40 + i) for i in range(32)]
    x32 = torch.randn(32, cfg.n_embd, generator=torch.Generator().manual_seed(5)).to(DEV)
    ref = fb.run_block_cuda(lw, cfg, 1, x, _tile(3, rows, DEV), k.clone(), v.clone(), rope)[0]
    ref32 = fb.run_block_cuda(lw, cfg, 1, x32, _tile(3, rows32, DEV), k.clone(), v.clone(), rope)[0]
    for m in (lw.wq, lw.wk, lw.wv, lw.wo, lw.gate_exps, lw.up_exps, lw.down_exps):
        assert m.repack(on_cpu=True)
    from engine.weights import stack_packed
    lw.qkv = stack_packed([lw.wq, lw.wk, lw.wv])
    assert block.device_experts(lw, 16) and block.device_experts(lw, 128)
    out = fb.run_block_cuda(lw, cfg, 1, x, _tile(3, rows, DEV), k.clone(), v.clone(), rope)[0]
    assert rel_err(out, ref) < 5e-3                                       # x rounded to int8
    out32 = fb.run_block_cuda(lw, cfg, 1, x32, _tile(3, rows32, DEV), k.clone(), v.clone(), rope)[0]
    assert rel_err(out32, ref32) < 1e-5
    _assert_row_7_everywhere(fb, cfg, lw, rope, k, v, rows, x, out, [(16, 7), (9, 2), (1, 0), (16, 15)])


@pytest.mark.parametrize("qtype", ["Q8_0"])
def test_blocks_hand_on_the_next_blocks_normed_input(kernels, synthetic, monkeypatch, qtype):
    """engine.block.run_blocks: a block's last kernel makes the next block's attention RMSNorm (and its
    int8 form); the two blocks give what each block on its own gives, and row 7 is row-invariant. The
    hand-on is the same for every weight type (the int8 form is quantize()'s, test_dp4a_gemv.py); Q8_0 here,
    whose int8 kernel code no other block test runs (Q4_K's and Q4_1's: the packed block test above)."""
    import engine.block as eb
    monkeypatch.setattr(importlib.import_module("engine.kernels.stream_matmul"), "DECODE_KERNEL", "dp4a")
    fb = kernels["fast_block"]
    monkeypatch.setattr(eb, "fused_blocks", lambda x: fb)          # under the interpreter too
    cfg, lw, rope, k, v, rows, x = _block_case(synthetic, "llama", qtype)
    _packed(lw)
    tile = _tile(3, rows, DEV)
    two = eb.run_blocks([lw, lw], cfg, 1, x, tile, [k.clone(), k.clone()], [v.clone(), v.clone()], lambda _: rope)
    ks, vs = [k.clone(), k.clone()], [v.clone(), v.clone()]
    one, handed = fb.run_block_cuda(lw, cfg, 1, x, tile, ks[0], vs[0], rope, None, lw)
    h = importlib.import_module("engine.kernels.fused").rms_norm(one, lw.attn_norm, cfg.norm_eps, lw.wq.compute_dtype)
    assert torch.equal(handed[0], h) and handed[1] is not None and handed[1][0].dtype == torch.int8
    alone = fb.run_block_cuda(lw, cfg, 2, one, tile, ks[1], vs[1], rope)[0]
    assert torch.equal(two, alone)        # a stage that starts at the second block gives the same bits
    assert torch.equal(two[:7], fb.run_block_cuda(lw, cfg, 2, one, tile, ks[1], vs[1], rope, handed)[0][:7])
    xs = torch.randn(9, cfg.n_embd, generator=torch.Generator().manual_seed(3)).to(DEV)
    xs[2] = x[7]
    rr = [rows[7] if i == 2 else (2 * (i % 2), 5 + i) for i in range(9)]
    got = eb.run_blocks([lw, lw], cfg, 1, xs, _tile(3, rr, DEV), [k.clone(), k.clone()], [v.clone(), v.clone()],
                        lambda _: rope)
    assert torch.equal(got[2], two[7])


@pytest.mark.parametrize("n", [576, 2048, 4096])
def test_a_stages_first_norm_is_the_handed_on_one(kernels, n):
    """rms_norm (a stage's first block) and residual_norm (the block before it, when the layers are not
    split there) make the same normed row and int8 form bit for bit: a layer split must not change a
    token. Many rows of several scales, so a sum of squares in another order would flip some roundings
    (on the H200 it did: one sampled token of 64 in a 2-stage batch-test)."""
    from engine.kernels import dp4a_gemv
    fused = kernels["fused"]
    gen = torch.Generator().manual_seed(n)
    rows = 256 if GPU else 16
    x = (torch.randn(rows, n, generator=gen) * torch.logspace(-2, 2, rows)[:, None]).to(DEV)
    part = torch.randn(3, rows, n, generator=gen).to(DEV)
    w = (1 + 0.1 * torch.randn(n, generator=gen)).to(DEV)
    q8a, q8b = dp4a_gemv.buffers(rows, n, DEV), dp4a_gemv.buffers(rows, n, DEV)
    xo, handed = fused.residual_norm(x, part, 3, None, w, 1e-6, torch.bfloat16, q8a)
    first = fused.rms_norm(xo, w, 1e-6, torch.bfloat16, q8b)
    assert torch.equal(handed, first) and torch.equal(q8a[0], q8b[0]) and torch.equal(q8a[1], q8b[1])


@pytest.mark.skipif(not GPU or torch.cuda.get_device_capability()[0] < 9,
                    reason="programmatic dependent launch: a GPU of compute capability 9.0 or later")
def test_programmatic_dependent_launch_changes_no_bits(kernels, synthetic, monkeypatch):
    """engine.kernels.pdl: each kernel of a decode block may start before the one ahead of it has
    finished and waits for its writes before reading them. Four blocks back to back (every kernel reads
    what the one before wrote, every block the one before's output and KV) give the bits of launches one
    after another, run eagerly and replayed from a CUDA graph; with a read before the wait they would not."""
    import engine.block as eb
    pdl = importlib.import_module("engine.kernels.pdl")
    monkeypatch.setattr(importlib.import_module("engine.kernels.stream_matmul"), "DECODE_KERNEL", "dp4a")
    monkeypatch.setattr(eb, "fused_blocks", lambda x: kernels["fast_block"])
    cfg, lw, rope, k, v, rows, x = _block_case(synthetic, "llama", "Q4_K", n_rows=4)
    _packed(lw)
    tile = _tile(3, rows, DEV)
    tile.n_dev = torch.tensor([3], dtype=torch.int32, device=DEV)

    def run(k, v):
        return eb.run_blocks([lw] * 4, cfg, 1, x, tile, [k] * 4, [v] * 4, lambda _: rope)

    monkeypatch.setattr(pdl, "ENABLED", False)
    ref = run(k.clone(), v.clone())
    monkeypatch.setattr(pdl, "ENABLED", True)
    assert pdl.on(x.device) and not pdl.on(torch.device("cpu"))
    assert torch.equal(run(k.clone(), v.clone()), ref)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    kg, vg = k.clone(), v.clone()
    with torch.cuda.stream(side):
        run(kg, vg)                         # compiled and warmed on the capture stream
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        out = run(kg, vg)
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, ref)
