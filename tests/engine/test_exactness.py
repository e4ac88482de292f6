"""DESIGN.md invariant 1: a slot's tokens do not depend on the slot count, group layout, layer split,
piped MTP depth or the other requests in flight. Checked with `strata batch-test` itself."""
from __future__ import annotations

import pytest

from app.cli import main


def batch_test(capsys, *args) -> tuple[int, str]:
    rc = main(["batch-test", *map(str, args)])
    out = capsys.readouterr().out
    return rc, out


def assert_identical(rc: int, out: str, n: int) -> None:
    lines = [line for line in out.splitlines() if line.startswith("slot ")]
    assert len(lines) == n, out
    assert all("IDENTICAL" in line for line in lines), out
    assert rc == 0


# (arch, devices, split, parallel, groups, piped, spec, temperature)
SYNTHETIC_LAYOUTS = [
    ("qwen3moe", "cpu,cpu", "auto", 4, 2, 0, 1, 0.0),
    ("qwen3moe", "cpu,cpu", "auto", 4, 2, 2, 1, 0.9),
    ("llama", "cpu,cpu,cpu", "2,4", 3, 3, 3, 1, 0.0),
    ("llama", "cpu", "auto", 4, 1, 0, 4, 0.8),
    ("gemma3", "cpu,cpu", "3", 2, 2, 1, 1, 0.7),
    ("qwen3", "cpu,cpu", "auto", 4, 1, 0, 3, 0.0),
    ("glm4moe", "cpu,cpu", "auto", 4, 2, 2, 1, 0.8),
    ("glm4moe", "cpu", "auto", 3, 1, 0, 3, 0.0),
    ("qwen35", "cpu,cpu", "auto", 4, 2, 2, 1, 0.8),
    ("qwen35", "cpu,cpu,cpu", "2,4", 3, 1, 0, 4, 0.0),
    ("qwen35moe", "cpu,cpu", "3", 4, 2, 3, 1, 0.0),
    ("qwen3next", "cpu,cpu", "auto", 4, 2, 2, 1, 0.7),
    ("llama", "cpu,cpu,cpu,cpu", "auto", 8, 4, 3, 1, 0.0),     # issue 21's layouts on four CPU stages
    ("qwen3moe", "cpu,cpu,cpu,cpu", "auto", 4, 4, 2, 1, 0.8),
]


@pytest.mark.parametrize("arch,devices,split,parallel,groups,piped,spec,temp", SYNTHETIC_LAYOUTS)
def test_synthetic_layouts_identical(capsys, synthetic, arch, devices, split, parallel, groups, piped, spec, temp):
    path = synthetic(arch, mtp=1)
    rc, out = batch_test(capsys, "--model", path, "--devices", devices, "--layer-split", split,
                         "--parallel", parallel, "--batch-groups", groups, "--piped-mtp", piped, "--spec", spec,
                         "--max-tokens", 20, "--temperature", temp, "--seed", 11)
    assert_identical(rc, out, parallel)
    if piped or spec > 1:
        assert "drafts 0/0" not in out and "(drafts" in out, "drafts were not offered: " + out


@pytest.mark.slow
def test_default_model_two_stages_two_groups(capsys):
    rc, out = batch_test(capsys, "--parallel", 4, "--batch-groups", 2, "--devices", "cpu,cpu",
                         "--max-tokens", 24)
    assert_identical(rc, out, 4)


@pytest.mark.slow
def test_default_model_lookup_drafts_sampled(capsys):
    rc, out = batch_test(capsys, "--parallel", 3, "--devices", "cpu,cpu,cpu", "--layer-split", "10,20",
                         "--draft", "lookup", "--spec", 4, "--piped-mtp", 3, "--max-tokens", 24,
                         "--temperature", 0.8, "--seed", 4)
    assert_identical(rc, out, 3)


def test_batch_test_reports_a_mismatch(capsys, synthetic, monkeypatch):
    """The checker can fail: perturb one sampled draw in the batched run only and it must say DIFFERS."""
    import app.cmd_batch_test as bt

    real = bt.requests

    def skewed(n, sp, tag, prompts=None):
        reqs = real(n, sp, tag, prompts)
        if tag == "b":
            reqs[1].sampling.seed += 1000
        return reqs

    monkeypatch.setattr(bt, "requests", skewed)
    rc, out = batch_test(capsys, "--model", synthetic("llama"), "--parallel", 2, "--max-tokens", 12,
                         "--temperature", 1.0)
    assert rc == 2 and "DIFFERS at" in out, out


def test_batch_test_reports_logits_that_differ_with_the_same_tokens(capsys, synthetic, monkeypatch):
    """A perturbation too small to change a greedy token still fails: the pick rows must be bit-identical."""
    from engine.stage import Stage

    real = Stage.forward_logits

    def nudged(self, x, tile, *tok_fed):   # rows of several slots in one tile: the batched run only
        y, logits = real(self, x, tile, *tok_fed)
        return (y + 1e-5 if len(set(tile.slot[:tile.n_real].tolist())) > 1 else y), logits

    monkeypatch.setattr(Stage, "forward_logits", nudged)
    rc, out = batch_test(capsys, "--model", synthetic("llama"), "--parallel", 2, "--max-tokens", 8)
    assert rc == 2 and "LOGITS DIFFER max|diff|" in out and "tokens identical" in out, out


def test_pick_rows_come_back_only_when_asked(synthetic):
    """return_logits gives one float32 row per emitted token (its greedy pick is that row's argmax, drafts
    on); without it RequestDone carries none."""
    import numpy as np

    from app.local_engine import local_client
    from app.run_requests import run_together
    from engine.messages import AddRequest, EngineConfig, SamplingParams

    sp = SamplingParams(max_tokens=10, ignore_eos=True)
    with local_client(EngineConfig(model=synthetic("llama", mtp=1), spec=3)) as eng:
        out = run_together(eng, [AddRequest(request_id="a", prompt="hello", sampling=sp, return_logits=True),
                                 AddRequest(request_id="b", prompt="hello", sampling=sp)])
    a, b = out["a"], out["b"]
    assert len(a.tokens) == 10 and a.tokens == b.tokens and b.done.logits == []
    assert a.done.drafts_offered > 0
    assert [int(np.frombuffer(r, np.float32).argmax()) for r in a.done.logits] == a.tokens


def test_long_prompts_and_a_follow_up_turn_identical(capsys, synthetic):
    """Prompts of several chunks and a second turn per slot that reuses its first prompt's cache: the
    follow-up reads from the reused position on, so its tiles start elsewhere than the reference's, which
    reads the whole prompt afresh; every slot still gets the reference's tokens and logits."""
    rc, out = batch_test(capsys, "--model", synthetic("llama", qtype="Q4_K"), "--devices", "cpu,cpu",
                         "--parallel", 3, "--batch-groups", 3, "--prompt-tokens", "150-400", "--follow-up",
                         "--max-tokens", 8, "--temperature", 0.8, "--seed", 3, "--ctx", 1024)
    lines = [line for line in out.splitlines() if line.startswith("slot ")]
    assert rc == 0 and len(lines) == 6 and all("IDENTICAL" in line for line in lines), out
    lengths = [int(n) for n in out.split("# prompts of ")[1].split(" tokens")[0].split(", ")]
    assert abs(lengths[0] - 150) < 15 and abs(lengths[2] - 400) < 40, out   # the asked lengths, several chunks
    reused = [int(line.split("; ")[1].split()[0]) for line in lines[3:]]
    assert all(r >= n - 2 for r, n in zip(reused, lengths)), out       # the first prompt, all but its end


def test_follow_up_without_reuse_is_an_error(capsys, synthetic, monkeypatch):
    """A follow-up turn that reused nothing proves nothing about reuse: batch-test says so and fails."""
    from engine.scheduler import Scheduler

    monkeypatch.setattr(Scheduler, "_reuse", lambda self, s, n: 0)
    rc, out = batch_test(capsys, "--model", synthetic("llama"), "--parallel", 2, "--prompt-tokens", "80",
                         "--follow-up", "--max-tokens", 4)
    lines = [line for line in out.splitlines() if line.startswith("slot ")]
    assert rc == 1 and all("IDENTICAL" in line for line in lines[:2]), out
    assert all("ERROR no prefix reused" in line for line in lines[2:]), out


def test_batch_test_holds_one_engine_at_a_time(capsys, monkeypatch, synthetic):
    """The reference engine is closed before the layout under test loads (a model of over half a GPU fits
    there once only: GLM-4.5-Air's shape on an 80 GB card)."""
    from app import cmd_batch_test

    opened = cmd_batch_test.local_client
    live, most = [], []

    class Counted:
        def __init__(self, cfg, *a, **kw):
            self.client = opened(cfg, *a, **kw)
            live.append(self)
            most.append(len(live))

        def __enter__(self):
            return self.client

        def __exit__(self, *exc):
            self.client.close()
            live.remove(self)

    monkeypatch.setattr(cmd_batch_test, "local_client", Counted)
    rc, out = batch_test(capsys, "--model", synthetic("llama"), "--parallel", 2, "--max-tokens", 6)
    assert_identical(rc, out, 2)
    assert max(most) == 1 and len(most) == 2 and not live, most


def test_batch_test_checks_the_layout_before_the_reference(capsys, monkeypatch, synthetic):
    """A layer split the file cannot take is said at once: no engine (not even the reference's) loads."""
    from app import cmd_batch_test

    opened = []
    monkeypatch.setattr(cmd_batch_test, "local_client", lambda *a, **kw: opened.append(a))
    rc = main(["batch-test", "--model", str(synthetic("llama")), "--devices", "cpu,cpu", "--layer-split", "99",
               "--parallel", "2", "--max-tokens", "4"])
    err = capsys.readouterr().err
    assert rc == 1 and "--layer-split 99" in err and "out of range" in err, err
    assert opened == []
