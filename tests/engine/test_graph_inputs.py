"""What a stage's tile graph takes in (engine.graphs.TileGraph.replay, engine.pipeline.fed_in), checked on
a CPU with a graph that runs its pass again at every replay: a first stage's token ids embedded inside
the graph, a chained window's device picks put over some of them, x rows given instead, and the parts
of a window's fed rows that land in each tile. The captured path runs on the GPU machine's batch-tests."""
from __future__ import annotations

import torch

from engine.pipeline import fed_in
from tests.engine.eager_graph import EagerGraph

TABLE = torch.randn(50, 8, generator=torch.Generator().manual_seed(3))


def embed(ids: torch.Tensor) -> torch.Tensor:
    return TABLE[ids] * 2.0


def graph() -> EagerGraph:
    # the pass: x plus each row's position and slot, so wrong rows, slots or positions show
    return EagerGraph(lambda x, tok, slot, pos, n: (x + pos[:, None] + 100 * slot[:, None],), 4, 8, 9,
                      torch.device("cpu"), embed=embed)


def test_token_ids_are_embedded_inside_the_graph_with_fed_ids_over_them():
    g = graph()
    slot, pos = torch.tensor([0, 1, 9, 9]), torch.tensor([5, 6, 0, 0])
    tok = torch.tensor([3, 4, 0, 0])
    want = lambda ids: embed(torch.tensor(ids)) + pos[:, None] + 100 * slot[:, None]  # noqa: E731
    assert torch.equal(g.replay(None, slot, pos, 2, tok)[0], want([3, 4, 0, 0]))
    assert torch.equal(g.replay(None, slot, pos, 2, tok, fed=([1], torch.tensor([7])))[0], want([3, 7, 0, 0]))
    assert torch.equal(g.replay(None, slot, pos, 2, tok, fed=([0, 2], torch.tensor([11, 12])))[0],
                       want([11, 4, 12, 0]))
    assert torch.equal(tok, torch.tensor([3, 4, 0, 0]))       # the caller's ids untouched
    x = torch.randn(4, 8)                                      # x rows given: they, not the ids, go in
    assert torch.equal(g.replay(x, slot, pos, 2, tok)[0], x + pos[:, None] + 100 * slot[:, None])
    assert torch.equal(g.replay(None, slot, pos, 2, tok)[0], want([3, 4, 0, 0]))   # and back
    assert int(g.n_real) == 2


def test_a_windows_fed_rows_are_split_by_tile():
    ids = torch.tensor([10, 11, 12, 13, 14])
    fed = ([3, 4, 5, 6, 7], ids)                   # consecutive rows 3..7 over tiles [0, 4) and [4, 8)
    at, part = fed_in(fed, 0, 4)
    assert at == [3] and part.tolist() == [10]
    at, part = fed_in(fed, 4, 4)
    assert at == [0, 1, 2, 3] and part.tolist() == [11, 12, 13, 14]
    assert fed_in(fed, 8, 4) is None and fed_in(None, 0, 4) is None
    fed = ([1, 6, 2], torch.tensor([20, 21, 22]))  # not consecutive
    at, part = fed_in(fed, 0, 4)
    assert at == [1, 2] and part.tolist() == [20, 22]
    at, part = fed_in(fed, 4, 4)
    assert at == [2] and part.tolist() == [21]
