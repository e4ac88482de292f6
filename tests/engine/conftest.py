"""Engine-test fixtures: the HF transformers reference, loaded once per session (test-only oracle)."""
from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="session")
def hf_reference():
    """hf_reference(path, **config_overrides) -> the GGUF loaded by HF transformers in float32, cached:
    loading dequantizes the whole file (SmolLM2 ~13 s, Gemma ~30 s), so every reference test shares one."""
    transformers = pytest.importorskip("transformers")
    made = {}

    def load(path, **overrides):
        key = (str(path), tuple(sorted(overrides.items())))
        if key not in made:
            made[key] = transformers.AutoModelForCausalLM.from_pretrained(
                str(path.parent), gguf_file=path.name, dtype=torch.float32, **overrides).eval()
        return made[key]

    yield load
    made.clear()
