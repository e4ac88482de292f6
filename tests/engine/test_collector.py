"""A loaded model's objects are left out of Python's full collections (engine.core: gc.freeze after load),
so one that falls in the middle of a request looks only at what was made since: on an H100 host a full
collection of the ~180,000 objects a loaded default model leaves took 90-120 ms inside a 0.5 s request."""
from __future__ import annotations

import gc

from app.local_engine import local_client
from app.run_requests import run_together
from engine.messages import AddRequest, EngineConfig, SamplingParams


def test_a_loaded_model_is_left_out_of_full_collections_until_it_is_unloaded(synthetic):
    model = str(synthetic("llama", mtp=1))
    reqs = [AddRequest(request_id="a", prompt="a lone request", sampling=SamplingParams(max_tokens=24))]
    looked_at = []

    def full(phase, info):
        if phase == "start" and info["generation"] == 2:
            looked_at.append(len(gc.get_objects(2)))
    with local_client(EngineConfig(model=model, parallel=1, spec=3)) as eng:
        frozen = gc.get_freeze_count()
        assert frozen > 10_000
        gc.callbacks.append(full)
        try:
            got = run_together(eng, reqs)["a"]
            gc.collect()
        finally:
            gc.callbacks.remove(full)
        assert len(got.tokens) == 24
        assert looked_at and max(looked_at) < frozen / 4
    assert gc.get_freeze_count() == 0            # unloaded: the model's objects can be collected again
