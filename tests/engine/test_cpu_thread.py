"""A lone CPU stage loads and runs on one OS thread (engine.cpu_thread), on every core; layouts of more
stages keep a thread per stage. Why it matters is in engine/cpu_thread.py (libgomp's throttled spin once
a second OpenMP team exists); here: which thread does what, and that models come and go on it."""
from __future__ import annotations

import os
import threading

import pytest
import torch

from engine import cpu_thread
from engine.loader import load_model
from engine.messages import EngineConfig
from engine.pipeline import Rows
from engine.stage import Stage
from engine.synthetic import make_model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_model("llama", "tiny", tmp_path_factory.mktemp("m") / "tiny.gguf", qtype="Q4_0")


def run_window(lm) -> list[tuple[str, int]]:
    """One decode row through the pipeline: (thread, its torch threads) that ran each stage."""
    seen = []
    real = Stage.forward_logits

    def spy(self, x, tile, *tok_fed):
        seen.append((threading.current_thread().name, torch.get_num_threads()))
        return real(self, x, tile, *tok_fed)

    Stage.forward_logits = spy
    try:
        rows = Rows.build([1], [0], [0], lm.pipeline.tiles, lm.pipeline.scratch_slot, [False])
        lm.pipeline.submit(rows, lambda h, logits_of: logits_of([0])).result()
    finally:
        Stage.forward_logits = real
    return seen


def test_a_lone_cpu_stage_loads_and_runs_on_the_compute_thread_on_every_core(tiny, monkeypatch):
    loaded_on = []
    real = Stage.__init__
    monkeypatch.setattr(Stage, "__init__", lambda self, *a, **k: (loaded_on.append(threading.current_thread().name),
                                                                  real(self, *a, **k))[1])
    lm = load_model(EngineConfig(model=str(tiny), devices="cpu", parallel=2, ctx=64))
    try:
        [(thread, threads)] = run_window(lm)
        assert loaded_on == [thread] and thread.startswith(cpu_thread.NAME)
        assert threads == os.cpu_count()
        assert lm.pipeline.stages[0].head_threads == 0          # its thread already has every core
    finally:
        lm.pipeline.close()
    again = load_model(EngineConfig(model=str(tiny), devices="cpu", parallel=2, ctx=64))   # the thread stays
    try:
        assert run_window(again) == [(thread, threads)]
    finally:
        again.pipeline.close()


def test_two_cpu_stages_keep_a_thread_each(tiny):
    lm = load_model(EngineConfig(model=str(tiny), devices="cpu,cpu", parallel=2, ctx=64))
    try:
        assert [t for t, _ in run_window(lm)] == ["stage0_0", "stage1_0"]
    finally:
        lm.pipeline.close()


def test_a_window_queued_behind_an_unload_fails_instead_of_running(tiny):
    lm = load_model(EngineConfig(model=str(tiny), devices="cpu", parallel=2, ctx=64))
    gate = threading.Event()
    cpu_thread.executor().submit(gate.wait)                 # the compute thread busy until the unload
    rows = Rows.build([1], [0], [0], lm.pipeline.tiles, lm.pipeline.scratch_slot, [False])
    fut = lm.pipeline.submit(rows, lambda h, logits_of: logits_of([0]))
    threading.Timer(0.2, gate.set).start()
    lm.pipeline.close()
    with pytest.raises(RuntimeError, match="unloaded"):
        fut.result(timeout=10)


_THREADS_AFTER_A_REQUEST = """
import os, sys
from engine.core import EngineCore
from engine.messages import AddRequest, EngineConfig, LoadModel, SamplingParams
core = EngineCore(lambda m: None)
core.handle(LoadModel(config=EngineConfig(model=sys.argv[1], devices="cpu", ctx=4096, spec=int(sys.argv[2]))))
core.handle(AddRequest(request_id="a", prompt="a b c", sampling=SamplingParams(max_tokens=24, ignore_eos=True)))
while core.scheduler.has_work:
    core.step()
print(len(os.listdir("/proc/self/task")))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts the process's threads in /proc")
def test_drafts_on_a_lone_cpu_stage_start_no_second_openmp_team(synthetic):
    """With MTP drafts under the draft guard the process holds the same threads as without drafts: every
    parallel torch op ran on the compute thread (a ring allocated on the engine thread had made a second
    team there, and a 2-core machine's decode step went from 19 to 36 ms)."""
    import subprocess
    import sys

    model = str(synthetic("llama", mtp=1))
    env = dict(os.environ, STRATA_DRAFT_GUARD="1", STRATA_CHAIN="1")
    counts = [int(subprocess.run([sys.executable, "-c", _THREADS_AFTER_A_REQUEST, model, str(spec)], env=env,
                                 capture_output=True, text=True, check=True, timeout=300).stdout.split()[-1])
              for spec in (1, 3)]
    assert counts[0] == counts[1], counts
