"""Chained greedy windows (engine.scheduler, Pipeline.chain): the next window queued on the device picks
of the one in flight. On by default on a GPU stage; here forced on a CPU stage (STRATA_CHAIN=1), where the
logic is the same, and compared token for token with the same requests unchained."""
from __future__ import annotations

import time

import pytest

from app.local_engine import local_client
from app.run_requests import run_together
from engine import scheduler
from engine.messages import AddRequest, EngineConfig, SamplingParams


@pytest.fixture(scope="module")
def model(synthetic):
    return str(synthetic("llama"))


def req(rid, prompt, n=12, **kw):
    return AddRequest(request_id=rid, prompt=prompt, sampling=SamplingParams(max_tokens=n, **kw))


def run(model, reqs, chain: str, monkeypatch, parallel=2, telemetry: list | None = None, devices: str = ""):
    """The requests' results; telemetry: gets the engine's telemetry from after the last window."""
    monkeypatch.setenv("STRATA_CHAIN", chain)
    with local_client(EngineConfig(model=model, parallel=parallel, **({"devices": devices} if devices else {}))) as eng:
        out = run_together(eng, reqs)
        if telemetry is not None:
            t_end = time.monotonic() + 5
            while time.monotonic() < t_end and (eng.latest_telemetry is None
                                                or eng.latest_telemetry.t < t_end - 4.9):
                time.sleep(0.02)
            telemetry.append(eng.latest_telemetry)
        return out


@pytest.fixture()
def chained_windows(monkeypatch):
    """[chained windows launched, the most windows in flight when one was]"""
    count = [0, 0]
    real = scheduler.Scheduler._launch_chained

    def counting(self, w):
        count[0] += 1
        count[1] = max(count[1], len(self.inflight))
        return real(self, w)
    monkeypatch.setattr(scheduler.Scheduler, "_launch_chained", counting)
    return count


@pytest.mark.parametrize("depth", [1, 2])
def test_chained_greedy_windows_give_the_same_tokens_and_ends(model, monkeypatch, chained_windows, depth):
    """Greedy streams with EOS on, max_tokens, a stop string and one sampled stream beside them (which
    stops chaining for its group); more requests than slots, so slots are reused after chained windows;
    one and two chained windows beyond the oldest in flight (depth 2: sequences end two windows early)."""
    monkeypatch.setattr(scheduler, "CHAIN_DEPTH", depth)
    reqs = [req("a", "the first request", n=24), req("b", "another one here", n=7),
            req("c", "a third, with eos", n=30, ignore_eos=False),
            req("d", "sampled beside them", n=10, temperature=0.8, seed=4),
            req("e", "the last request", n=16)]
    base = run(model, reqs, "0", monkeypatch)
    assert chained_windows[0] == 0
    stop = base["a"].text[len(base["a"].text) // 2:][:3]
    reqs.append(req("f", "the first request", n=24, stop=[stop]))
    base["f"] = run(model, reqs[-1:], "0", monkeypatch)["f"]
    tel = []
    got = run(model, reqs, "1", monkeypatch, telemetry=tel)
    assert chained_windows[0] > 20 and chained_windows[1] == depth
    # the telemetry counts each chained window once: launched on top of its feeding window, or after it
    assert tel[0].chained_total + tel[0].chained_late_total == chained_windows[0]
    for r in reqs:
        assert got[r.request_id].tokens == base[r.request_id].tokens, r.request_id
        assert got[r.request_id].done.finish_reason == base[r.request_id].done.finish_reason, r.request_id
    assert got["f"].done.finish_reason == "stop" and stop not in got["f"].text



def test_a_model_with_an_mtp_layer_chains_while_drafts_are_off(synthetic, monkeypatch, chained_windows):
    """The MTP drafter follows the windows only while drafts are on: without them a model with an MTP
    layer decodes like one without (no catch-up rows, chained windows), with the same tokens."""
    from engine import drafts

    advanced = [0]
    real = drafts.MtpDrafter.advance

    def counting(self, *a):
        advanced[0] += 1
        return real(self, *a)
    monkeypatch.setattr(drafts.MtpDrafter, "advance", counting)
    mtp = str(synthetic("llama", mtp=1))
    reqs = [req("a", "the first request", n=16), req("b", "another one here", n=16)]
    base = run(mtp, reqs, "0", monkeypatch)
    got = run(mtp, reqs, "1", monkeypatch)
    assert advanced[0] == 0 and chained_windows[0] > 10
    assert all(got[r.request_id].tokens == base[r.request_id].tokens for r in reqs)
    monkeypatch.setenv("STRATA_CHAIN", "1")
    with local_client(EngineConfig(model=mtp, parallel=2, spec=3)) as eng:      # drafts on: it follows
        on = run_together(eng, reqs)
    assert advanced[0] > 0 and all(on[r.request_id].tokens == base[r.request_id].tokens for r in reqs)


def test_sampled_windows_chain_on_the_samplers_device_picks(model, monkeypatch, chained_windows):
    """Where the device samples (engine.kernels.sample; on a GPU there, forced here on the CPU under the
    Triton interpreter), sampled streams chain like greedy ones: the next window embeds the device's pick,
    the verdict makes the same pick from the same logits, and the tokens are those of the unchained run and
    of the host's sampler."""
    import torch

    from engine import window
    from tests.engine.test_packed import kernel_module

    devices = "cuda:0" if torch.cuda.is_available() else "cpu"
    if devices == "cpu":
        monkeypatch.setattr(kernel_module("sample"), "FEW", 64)    # the interpreter's sort of 1,024 takes minutes
    reqs = [req("a", "another one here", n=6, temperature=1.1, top_p=0.9, seed=5),
            req("b", "a greedy one beside", n=6)]
    monkeypatch.setattr(window, "DEVICE_SAMPLING", "0")
    host = run(model, reqs, "0", monkeypatch, devices=devices)
    monkeypatch.setattr(window, "DEVICE_SAMPLING", "1")
    got = run(model, reqs, "1", monkeypatch, devices=devices)
    assert chained_windows[0] >= 3          # (a window chains only where all its slots' picks are the device's)
    assert all(got[r.request_id].tokens == host[r.request_id].tokens for r in reqs)
