"""How a window's rows are packed into tiles (engine.pipeline.Rows.build): prompt rows first in prompt
tiles, decode rows in decode tiles, and on a GPU a decode row alone in its tile in a 1-row tile (its
own graph, where the int8 decode kernel takes one x row per pass); on a CPU stage in the fast mode (int4
matrices and head) likewise, with up to 8 decode rows per tile (engine.stage.Stage.rows_free)."""
from __future__ import annotations

from engine.loader import TILE_SIZES
from engine.pipeline import Rows


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
    assert tiles(33, 2, "cpu-rows") == [(32, 32), (32, 1), (8, 2)]
    assert TILE_SIZES["cpu-rows"].decode_sizes() == {1, 8}
