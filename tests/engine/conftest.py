"""Engine-test fixtures: the HF transformers reference, loaded once per session (test-only oracle)."""
from __future__ import annotations

import contextlib
import os

import pytest
import torch


@pytest.fixture(scope="session")
def gguf_readers():
    """gguf_readers() -> a context in which gguf.GGUFReader gives one reader per file (as long as its size
    and mtime stay) for the whole session. Transformers builds a reader for a model's config, another for
    its weights and one more for a tokenizer, and each parses every vocabulary entry (Gemma's 262K: ~8 s
    here, SmolLM2's ~2 s); the readers only read their files' memory maps, so the oracles can share one."""
    gguf = pytest.importorskip("gguf")
    real, made = gguf.GGUFReader, {}

    def reader(path, mode="r"):
        st = os.stat(path)
        key = (os.path.realpath(path), st.st_size, st.st_mtime_ns, mode)
        if key not in made:
            made[key] = real(path, mode)
        return made[key]

    @contextlib.contextmanager
    def reading():
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(gguf, "GGUFReader", reader)
            yield

    yield reading
    made.clear()


@pytest.fixture(scope="session")
def hf_reference(gguf_readers):
    """hf_reference(path, **config_overrides) -> the GGUF loaded by HF transformers in float32, cached:
    loading dequantizes the whole file (SmolLM2 ~13 s, Gemma ~30 s), so every reference test shares one."""
    transformers = pytest.importorskip("transformers")
    made = {}

    def load(path, **overrides):
        key = (str(path), tuple(sorted(overrides.items())))
        if key not in made:
            with gguf_readers():
                made[key] = transformers.AutoModelForCausalLM.from_pretrained(
                    str(path.parent), gguf_file=path.name, dtype=torch.float32, **overrides).eval()
        return made[key]

    yield load
    made.clear()
