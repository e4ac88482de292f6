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
