"""Shared fixtures: headless Qt, a private data directory, and the real models."""
from __future__ import annotations

import os
import tempfile

# Before anything imports Qt or creates a QApplication.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Without an NVIDIA GPU the Triton kernels run under the interpreter; the variable must be set before
# anything (transformers, a kernel module) imports triton, whatever order the tests run in.
if not os.path.exists("/dev/nvidiactl"):
    os.environ.setdefault("TRITON_INTERPRET", "1")
# Drafts every window unless a test turns the draft guard on: its choice follows the wall clock, so with it a
# test's draft counts would depend on the machine's speed (tests/engine/test_draft_guard.py tests it).
os.environ.setdefault("STRATA_DRAFT_GUARD", "0")
# Keep every test away from the user's real settings and chats.
os.environ.setdefault("STRATA_STUDIO_HOME", tempfile.mkdtemp(prefix="strata-test-home-"))

import pytest  # noqa: E402


def _fixed_order_interpreter_dot() -> None:
    """Under TRITON_INTERPRET, tl.dot is numpy's matmul, which hands float32 to OpenBLAS. Some of its CPU
    kernels (this 2-core AMD EPYC's, 2026-12-07) sum a row's products in an order that depends on where the
    row sits in the block, so a kernel that is row-invariant on the GPU's MMA would fail its row-invariance
    tests here. einsum sums each output in the same order wherever its row is, as the MMA does."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    import numpy as np
    from triton.runtime import interpreter

    real = interpreter.InterpreterBuilder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.data.dtype in (np.float32, np.float64) and b.data.dtype == a.data.dtype:
            prod = np.einsum("...ik,...kj->...ij", a.data, b.data, dtype=d.data.dtype)
            return interpreter.TensorHandle(prod + d.data, d.dtype.scalar)
        return real(self, a, b, d, input_precision, max_num_imprecise_acc)

    interpreter.InterpreterBuilder.create_dot = create_dot


_fixed_order_interpreter_dot()


@pytest.fixture(scope="session")
def smol_path():
    from engine.model_files import default_model_path

    return default_model_path()


@pytest.fixture(scope="session")
def gemma_file():
    from engine.model_files import gemma_path

    return gemma_path()


@pytest.fixture(scope="session")
def synthetic(tmp_path_factory):
    """make(arch, mtp=0, qtype=...) -> path of a tiny synthetic GGUF, written once per session."""
    from engine.synthetic import make_model

    made = {}
    root = tmp_path_factory.mktemp("synthetic")

    def make(arch: str, mtp: int = 0, qtype: str = "Q8_0", shape: str = "tiny"):
        key = (arch, mtp, qtype, shape)
        if key not in made:
            made[key] = make_model(arch, shape, root / f"{arch}-{shape}-mtp{mtp}-{qtype}.gguf", mtp=mtp, qtype=qtype)
        return made[key]

    return make


@pytest.fixture(scope="session")
def counting(tmp_path_factory):
    """counting(arch) -> a small model that counts, with an MTP layer that agrees (acceptance ~1)."""
    from engine.synthetic_counting import make_counting_model

    made = {}
    root = tmp_path_factory.mktemp("counting")

    def make(arch: str = "llama"):
        if arch not in made:
            made[arch] = make_counting_model(root / f"{arch}-counting.gguf", arch, "small", mtp=1)
        return made[arch]

    return make


def pytest_collection_modifyitems(config, items):
    """Every test has its own node id: pytest-xdist (make test) schedules by id and runs one item of each,
    so a second item under the same id would be dropped without a word."""
    seen: dict[str, int] = {}
    for item in items:
        seen[item.nodeid] = seen.get(item.nodeid, 0) + 1
    twice = sorted(n for n, c in seen.items() if c > 1)
    if twice:
        raise pytest.UsageError("tests collected under the same node id: " + ", ".join(twice))
