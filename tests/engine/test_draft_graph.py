"""The MTP drafter's graph path (engine.draft_graph) checked on a CPU: each pass is "replayed" by
running it again on the graph's input buffers, so what the path feeds in and reads out (tiles of 1 and
16 rows with padding on the scratch slot, tokens kept on the device between chain steps, one trip to
the host, chains cut by spec-min-p afterwards) must give the eager drafter's proposals. The CUDA capture
itself runs on the GPU machine (tests/gpu/run_final11.sh, tests/gpu/run_draft_profile.sh)."""
from __future__ import annotations

import pytest

from app.local_engine import local_client
from app.run_requests import run_together
from engine import draft_graph
from engine.drafts import MtpDrafter
from engine.loader import TILE_SIZES
from engine.messages import AddRequest, EngineConfig, SamplingParams
from tests.engine.eager_graph import EagerGraph


def outcome(model: str, layout: dict, n: int, graphs: bool, monkeypatch, chains=(1, 2, 3)) -> dict:
    """chains: the chain lengths the graph path runs whole (DraftGraphs' chainN); the others step by step."""
    if graphs:
        monkeypatch.setattr(draft_graph, "TileGraph", EagerGraph)
        real = MtpDrafter.__init__

        def init(self, *a, **k):
            real(self, *a, **k)
            self.graphs = draft_graph.DraftGraphs(self, self.scratch_slot, TILE_SIZES["cuda"], chains)
        monkeypatch.setattr(MtpDrafter, "__init__", init)
    reqs = [AddRequest(request_id=f"r{i}", prompt=f"count from {i}",
                       sampling=SamplingParams(max_tokens=20, ignore_eos=True, seed=i)) for i in range(n)]
    with local_client(EngineConfig(model=model, **layout)) as eng:
        out = run_together(eng, reqs)
    monkeypatch.undo()
    return {k: (o.tokens, o.done.drafts_offered, o.done.drafts_accepted, o.done.windows) for k, o in out.items()}


@pytest.mark.parametrize("layout", [dict(devices="cpu", parallel=1, spec=4),           # 1-row tiles
                                    dict(devices="cpu", parallel=3, spec=4),           # 16-row tiles
                                    dict(devices="cpu,cpu", parallel=4, batch_groups="2", piped_mtp=3)])
def test_the_graph_path_proposes_what_the_eager_drafter_does(counting, layout, monkeypatch):
    model = str(counting("llama"))
    eager = outcome(model, layout, layout["parallel"], False, monkeypatch)
    assert all(acc > 0.9 * off for _, off, acc, _ in eager.values())      # the counting drafter agrees
    assert outcome(model, layout, layout["parallel"], True, monkeypatch) == eager          # chains whole
    assert outcome(model, layout, layout["parallel"], True, monkeypatch, ()) == eager      # step by step


def test_the_graph_path_cuts_unsure_chains_like_the_eager_one(synthetic, monkeypatch):
    """A random drafter's probabilities are tiny: with spec-min-p 0.5 each chain stops after its first
    proposal, though on the graph path the chain's later steps still run."""
    model = str(synthetic("llama", mtp=1))
    layout = dict(devices="cpu", parallel=2, spec=4, spec_min_p=0.5)
    eager = outcome(model, layout, 2, False, monkeypatch)
    assert all(off <= windows for _, off, _, windows in eager.values())
    assert outcome(model, layout, 2, True, monkeypatch) == eager
    assert outcome(model, layout, 2, True, monkeypatch, ()) == eager


def test_whole_chains_propose_at_each_steps_position(tmp_path, monkeypatch):
    """On the induction model (the next token is the one 4 rows back, through attention to the right
    rows, and its MTP layer agrees) a chain step at a wrong position proposes a wrong token: the whole
    chains' graph (chainN) must give the eager drafter's proposals, so the same acceptance."""
    from engine.synthetic_induction import make_induction_model

    model = str(make_induction_model(tmp_path / "induction.gguf", "llama", mtp=1))
    layout = dict(devices="cpu", parallel=2, spec=4)
    prompts = [[1000, 2000, 3000, 4000, 5000, 6000, 777], [1100, 2200, 3300, 4400, 5500, 6600, 777]]
    for graphs in (False, True):
        monkeypatch.setattr(draft_graph, "TileGraph", EagerGraph)
        if graphs:
            real = MtpDrafter.__init__

            def init(self, *a, **k):
                real(self, *a, **k)
                self.graphs = draft_graph.DraftGraphs(self, self.scratch_slot, TILE_SIZES["cuda"], (2,))
            monkeypatch.setattr(MtpDrafter, "__init__", init)
        reqs = [AddRequest(request_id=f"r{i}", token_ids=p, sampling=SamplingParams(max_tokens=24, ignore_eos=True))
                for i, p in enumerate(prompts)]
        with local_client(EngineConfig(model=model, **layout)) as eng:
            out = run_together(eng, reqs)
        monkeypatch.undo()
        got = {k: (o.tokens, o.done.drafts_offered, o.done.drafts_accepted) for k, o in out.items()}
        if not graphs:
            eager = got
            assert all(acc > 0.8 * off for _, off, acc in eager.values())
    assert got == eager
