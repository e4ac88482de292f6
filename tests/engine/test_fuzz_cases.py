"""Every GGUF file the fuzzer once broke something with (tests/engine/fuzz_cases/), through the same
checks as tests/engine/test_fuzz_gguf.py: the reader, `strata inspect` and (on synthetic seeds) the
engine's load each succeed or give one clear error.

Two kinds of case, both small:
- `*.gguf`: a file built from scratch, kept as it is (its tensor data cut off where that does not
  change what the old code did with it);
- `*.json`: a recipe {"found": what went wrong, "seed": "smol" | "synthetic:ARCH", "mutations": [...]}
  applied to the seed file by tests/engine/gguf_mutate.py (named fields, so it survives a change in the
  seed's layout). "found" is the exception (and where) that the case once gave.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine.test_fuzz_gguf import (check_inspect, check_load, check_read, layouts, max_rss_growth,  # noqa: F401
                                         materialize, private_tokenizer_cache, seeds, workdir)

CASES = Path(__file__).parent / "fuzz_cases"
FILES = sorted(CASES.glob("*.gguf"))
RECIPES = sorted(CASES.glob("*.json"))
pytestmark = pytest.mark.timeout(120)


def test_cases_are_small():
    assert FILES and RECIPES
    assert all(f.stat().st_size < 4096 for f in FILES + RECIPES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_scratch_case(path):
    with max_rss_growth():
        check_read(path, trace=True)
        check_inspect(path)
        check_inspect(path, json=True)


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_recipe_case(recipe, seeds, workdir):
    r = json.loads(recipe.read_text())
    path = materialize(workdir, seeds, r, name=recipe.stem + ".gguf")
    with max_rss_growth():
        if check_read(path) is not None and check_inspect(path) == 0 and r["seed"].startswith("synthetic:"):
            check_load(path)


def test_inspect_process_says_one_line(tmp_path):
    """End to end: `strata inspect` in its own process on broken files prints one line and exits 1 (no
    traceback, whatever broke)."""
    for path in FILES[:2]:
        p = subprocess.run([sys.executable, "-m", "app.cli", "inspect", str(path)], capture_output=True,
                           text=True, timeout=60, cwd=Path(__file__).parents[2])
        assert p.returncode == 1 and not p.stdout, (p.stdout, p.stderr)
        assert p.stderr.count("\n") == 1 and p.stderr.startswith("strata inspect: error: " + str(path))
        assert "Traceback" not in p.stderr
