"""CPU stages in the fast mode run a window's decode rows (several streams, a slot's proposals) in shared
tiles of up to 8 rows, a lone row in its own 1-row tile (engine.stage.Stage.rows_free): each row must get
the bits it gets alone, which batch-test checks (each slot alone, then all together), greedy, sampled
and with MTP drafts; layouts with a dense matrix keep one decode row per tile."""
from __future__ import annotations

import pytest

from app.cli import main
from engine.loader import TILE_SIZES, load_model
from engine.messages import EngineConfig


@pytest.fixture(scope="module")
def q4k(synthetic):
    return synthetic("llama", mtp=1, qtype="Q4_K")


def test_int4_stages_take_shared_decode_tiles_and_dense_ones_do_not(q4k, synthetic):
    assert load_model(EngineConfig(model=str(q4k), devices="cpu")).pipeline.tiles == TILE_SIZES["cpu-rows"]
    # the reference mode's dense GEMMs give a row other bits at another row count
    assert load_model(EngineConfig(model=str(q4k), devices="cpu", dtype="float32")).pipeline.tiles == TILE_SIZES["cpu"]
    # routed experts have row-count dependent parts
    moe = synthetic("qwen3moe", qtype="Q4_K")
    assert load_model(EngineConfig(model=str(moe), devices="cpu")).pipeline.tiles == TILE_SIZES["cpu"]


@pytest.mark.parametrize("flags", [[], ["--temperature", "0.8", "--seed", "3"], ["--draft", "mtp", "--spec", "3"],
                                   ["--devices", "cpu,cpu", "--batch-groups", "2", "--piped-mtp", "2"]],
                         ids=["greedy", "sampled", "spec3", "piped"])
def test_rows_in_shared_decode_tiles_keep_their_bits(q4k, capsys, flags):
    rc = main(["batch-test", "--model", str(q4k), "--parallel", "4", "--max-tokens", "12", *flags])
    out = capsys.readouterr().out
    assert rc == 0 and out.count("IDENTICAL") == 4, out
