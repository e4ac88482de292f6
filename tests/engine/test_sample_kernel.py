"""Seeded sampling on the device (engine.kernels.sample; under TRITON_INTERPRET=1 here): the same token
as the host's engine.sampling.pick for the same row, temperature, top-k, top-p, min-p and keyed uniform,
on peaked and flat rows, rows with ties and with -inf; a row's pick the same alone and among others; rows
with +inf, all -inf or NaN picked by the host's rules for them."""
from __future__ import annotations

import pytest
import torch

from engine.messages import SamplingParams
from engine.sampling import keyed_uniform, pick
from tests.engine.test_packed import DEV, kernel_module

V = 1000


@pytest.fixture
def ks(monkeypatch):
    """The kernel module; under the interpreter its few candidates' path holds 64 (the sort of 1,024 takes
    minutes there; on a GPU the tests run at the module's own size)."""
    mod = kernel_module("sample")
    if DEV == "cpu":
        monkeypatch.setattr(mod, "FEW", 64)
    return mod


def rows(seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    peaked = torch.randn(3, V, generator=g) * 6
    flat = torch.randn(3, V, generator=g) * 0.3
    ties = torch.randint(-3, 4, (3, V), generator=g).float()        # many equal logits
    holes = torch.randn(3, V, generator=g) * 3
    holes[:, ::3] = float("-inf")
    few = torch.randn(3, V, generator=g) * 0.5 - 20                  # 24 likely tokens across the row
    for r in range(3):
        few[r, torch.randperm(V, generator=g)[:24]] = torch.randn(24, generator=g) * 1.5
    return torch.cat((peaked, flat, ties, holes, few))


PARAMS = [SamplingParams(temperature=0.8, seed=1), SamplingParams(temperature=1.0, top_p=0.9, seed=2),
          SamplingParams(temperature=0.7, top_k=40, seed=3), SamplingParams(temperature=1.3, min_p=0.05, seed=4),
          SamplingParams(temperature=0.6, top_k=200, top_p=0.8, min_p=0.02, seed=5),
          SamplingParams(temperature=2.0, top_k=1, seed=6), SamplingParams(temperature=0.9, top_p=0.3, seed=7)]


def device_picks(ks, logits, params, positions):
    rows = [ks.row_params(i, p, keyed_uniform(p.seed, q)) for i, (p, q) in enumerate(zip(params, positions))]
    return ks.sample(logits.to(DEV), torch.tensor(rows, dtype=torch.float32, device=DEV)).cpu()


@pytest.mark.parametrize("few,chunk", [(0, None), (None, 256)])
def test_device_picks_are_the_hosts(ks, monkeypatch, few, chunk):
    """Every row, except that with top-k the host's candidates are torch.topk's, whose order among equal
    logits is its own (the kernel's is by index, as everywhere else): rows of many equal logits are left out
    there. few 0: no row takes the few candidates' path (every row by bisection); else the rows of few
    likely tokens take it where their candidates decide the pick. chunk 256: a row's maximum, mass and candidates come from
    four chunks of two blocks, as a real vocabulary's do."""
    if few is not None:
        monkeypatch.setattr(ks, "FEW", few)
    if chunk is not None:
        monkeypatch.setattr(ks, "CHUNK", chunk)
        monkeypatch.setattr(ks, "CHUNK_BLOCK", chunk // 2)
    logits = rows(0)
    n = logits.shape[0]
    for k, p in enumerate(PARAMS):
        positions = [100 * k + i for i in range(n)]
        got = device_picks(ks, logits, [p] * n, positions)
        want = [pick(logits[i], p, None, positions[i])[0] for i in range(n)]
        some = [i for i in range(n) if not (p.top_k and 6 <= i < 9)]
        assert [got[i].item() for i in some] == [want[i] for i in some], (p, got.tolist(), want)


def test_a_rows_pick_does_not_depend_on_the_rows_beside_it(ks, monkeypatch):
    monkeypatch.setattr(ks, "CHUNK", 256)
    monkeypatch.setattr(ks, "CHUNK_BLOCK", 128)
    logits = rows(1)
    params = [PARAMS[i % len(PARAMS)] for i in range(logits.shape[0])]
    positions = list(range(7, 7 + logits.shape[0]))
    together = device_picks(ks, logits, params, positions)
    for i in (0, 4, 7, 11):
        assert device_picks(ks, logits[i:i + 1], params[i:i + 1], positions[i:i + 1])[0] == together[i]


def test_rows_without_a_finite_maximum_take_the_hosts_rules(ks):
    """+inf entries share the mass alike (here 3 of them, with NaN beside), a row of -inf and NaN gives every
    token alike: over many positions, the host's token at each, and every one of those tokens drawn."""
    inf = float("inf")
    a = torch.randn(V)
    a[[5, 77, 400]] = inf
    a[9] = float("nan")
    b = torch.full((V,), -inf)
    b[::7] = float("nan")
    p = PARAMS[0]
    for row, drawn in ((a, {5, 77, 400}), (b, None)):
        positions = list(range(40))
        got = device_picks(ks, row[None].expand(40, V).contiguous(), [p] * 40, positions).tolist()
        assert got == [pick(row, p, None, q)[0] for q in positions]
        assert drawn is None or set(got) == drawn


@pytest.mark.skipif(DEV == "cpu", reason="CUDA graphs need a GPU")
def test_a_graphs_picks_are_the_launches(ks, monkeypatch):
    """On a GPU sample() replays a graph of its launches per shape: the same picks as launching them, and
    each call's picks its own (the next replay reuses the graph's buffer)."""
    logits = rows(2).to(DEV)
    params = [PARAMS[i % len(PARAMS)] for i in range(logits.shape[0])]
    monkeypatch.setattr(ks, "GRAPHS", True)
    graphed = [device_picks(ks, logits, params, range(q, q + logits.shape[0])) for q in (0, 50)]
    monkeypatch.setattr(ks, "GRAPHS", False)
    launched = [device_picks(ks, logits, params, range(q, q + logits.shape[0])) for q in (0, 50)]
    assert ks._GRAPHS and all(torch.equal(a, b) for a, b in zip(graphed, launched))
    assert not torch.equal(graphed[0], graphed[1])
