"""How a window's rows are packed into tiles (engine.pipeline.Rows.build): prompt rows first in prompt
tiles, decode rows in decode tiles, and on a GPU a decode row alone in its tile in a 1-row tile (its
own graph, where the int8 decode kernel takes one x row per pass); on a CPU stage in the fast mode (int4
matrices and head) likewise, with up to 8 decode rows per tile (engine.stage.Stage.rows_free)."""
from __future__ import annotations

import torch

from engine.graphs import rows_at
from engine.loader import TILE_SIZES
from engine.pipeline import Rows, WindowLogits


def tiles(n_prompt: int, n_decode: int, kind: str) -> list[tuple[int, int]]:
    n = n_prompt + n_decode
    rows = Rows.build(list(range(n)), [0] * n, list(range(n)), TILE_SIZES[kind], scratch_slot=9,
                      is_prompt=[True] * n_prompt + [False] * n_decode)
    assert rows.n == n and sorted(rows.index) == rows.index
    for i, p in enumerate(rows.index):            # each real row at its place, padding after
        assert int(rows.tokens[p]) == i
    return [(size, real) for _, size, real in rows.bounds]


def test_a_lone_decode_row_gets_a_one_row_tile_on_a_gpu():
    assert tiles(0, 1, "cuda") == [(1, 1)]
    assert tiles(0, 2, "cuda") == [(16, 2)]
    assert tiles(0, 17, "cuda") == [(16, 16), (1, 1)]
    assert tiles(0, 18, "cuda") == [(16, 16), (16, 2)]
    assert tiles(5, 1, "cuda") == [(TILE_SIZES["cuda"].prompt, 5), (1, 1)]
    assert tiles(1, 0, "cuda") == [(TILE_SIZES["cuda"].prompt, 1)]          # prompt rows keep their tile
    assert tiles(0, 1, "cuda-moe") == [(1, 1)]
    assert TILE_SIZES["cuda"].decode_sizes() == {1, 16}


def test_cpu_tiles_are_unchanged():
    assert tiles(0, 3, "cpu") == [(1, 1)] * 3
    assert tiles(33, 0, "cpu") == [(32, 32), (32, 1)]
    assert TILE_SIZES["cpu"].decode_sizes() == {1}


def test_cpu_int4_stages_share_decode_tiles():
    assert tiles(0, 1, "cpu-rows") == [(1, 1)]
    assert tiles(0, 3, "cpu-rows") == [(8, 3)]
    assert tiles(0, 9, "cpu-rows") == [(8, 8), (1, 1)]
    assert tiles(33, 2, "cpu-rows") == [(128, 33), (8, 2)]
    assert tiles(129, 0, "cpu-rows") == [(128, 128), (128, 1)]
    assert TILE_SIZES["cpu-rows"].chunk == 128          # a window reads a whole tile of a prompt
    assert TILE_SIZES["cpu-rows"].decode_sizes() == {1, 8}


def test_a_windows_rows_are_a_slice_only_where_they_are_consecutive():
    """The last stage's hidden rows of a window (engine.graphs.rows_at): a view of the stage's output
    where the real rows sit side by side (no index copy), else a gather of exactly those rows (prompt
    rows and decode rows in their own tiles leave padding between them)."""
    for n_prompt, n_decode in ((0, 5), (3, 2)):
        n = n_prompt + n_decode
        rows = Rows.build(list(range(n)), [0] * n, list(range(n)), TILE_SIZES["cpu-rows"], scratch_slot=9,
                          is_prompt=[True] * n_prompt + [False] * n_decode)
        y = torch.arange(float(len(rows.tokens) * 2)).reshape(-1, 2)
        got = rows_at(y, rows.index)
        assert torch.equal(got, y[torch.tensor(rows.index)])
        consecutive = rows.index == list(range(rows.index[0], rows.index[0] + n))
        assert consecutive == (n_prompt == 0)
        assert (got.data_ptr() == y[rows.index[0]].data_ptr()) == consecutive     # a view only then


def test_window_logits_are_made_once_per_row_list():
    """A window's logits_of (engine.pipeline.WindowLogits): a chained window's greedy pick and its
    verdicts ask for the same rows, which are made once; other row lists are made on their own."""
    table = torch.tensor([[0.0, 3.0, 1.0], [5.0, 1.0, 2.0], [1.0, 1.0, 4.0]])
    made = []
    lo = WindowLogits(lambda idx: made.append(list(idx)) or table[idx])
    assert torch.equal(lo.argmax([0, 2]), torch.tensor([1, 2]))
    assert torch.equal(lo([0, 2]), table[[0, 2]]) and torch.equal(lo.argmax([0, 2]), torch.tensor([1, 2]))
    assert torch.equal(lo([1]), table[[1]]) and torch.equal(lo.argmax([1]), torch.tensor([0]))
    assert made == [[0, 2], [1]]
