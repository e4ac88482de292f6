"""Chained draft windows (engine.draft_chain): a draft window's verdict and the drafter's next proposals
queued on the device, the next window built on them without a host wait. On by default where windows
chain (a GPU stage); here forced on a CPU stage (STRATA_CHAIN=1), where the logic is the same, and
compared token for token, and draft for draft, with the host's draft windows (STRATA_CHAIN_DRAFTS=0). On a
machine with a GPU they run there (tests/gpu/run_chain_drafts.sh)."""
from __future__ import annotations

import pytest

import torch

from app.local_engine import local_client
from app.run_requests import run_together
from engine import draft_guard, scheduler
from engine.messages import AddRequest, EngineConfig, SamplingParams


DEVICES = "cuda:0" if torch.cuda.is_available() else "cpu"


def req(rid, prompt, n=12, **kw):
    return AddRequest(request_id=rid, prompt=prompt, sampling=SamplingParams(max_tokens=n, **kw))


@pytest.fixture()
def chained_drafts(monkeypatch):
    """[draft windows launched on a window's device drafts, the most windows in flight when one was]"""
    count = [0, 0]
    real = scheduler.Scheduler._launch_chained_drafts

    def counting(self, w):
        count[0] += 1
        count[1] = max(count[1], len(self.inflight))
        return real(self, w)
    monkeypatch.setattr(scheduler.Scheduler, "_launch_chained_drafts", counting)
    return count


def run(model, reqs, chain_drafts: str, monkeypatch, spec=4, parallel=2):
    monkeypatch.setenv("STRATA_CHAIN", "1")
    monkeypatch.setenv("STRATA_DRAFT_GUARD", "0")          # drafts every window
    monkeypatch.setenv("STRATA_CHAIN_DRAFTS", chain_drafts)
    with local_client(EngineConfig(model=model, parallel=parallel, spec=spec, devices=DEVICES)) as eng:
        return run_together(eng, reqs)


def same(got, base, reqs):
    for r in reqs:
        a, b = got[r.request_id], base[r.request_id]
        assert a.tokens == b.tokens, r.request_id
        assert a.done.finish_reason == b.done.finish_reason, r.request_id
        # the same drafts offered and kept, in the same number of windows
        assert (a.done.drafts_offered, a.done.drafts_accepted, a.done.windows) == \
               (b.done.drafts_offered, b.done.drafts_accepted, b.done.windows), r.request_id


@pytest.mark.parametrize("depth, window", [(1, "1"), (2, "1"), (2, "0")])
def test_chained_draft_windows_keep_every_token_and_draft(counting, synthetic, monkeypatch, chained_drafts, depth,
                                                          window):
    """A model whose drafts are all kept (the counting model: 5 tokens a window at --spec 4) and one whose
    drafts are all rejected (random MTP layer); EOS on, max_tokens inside a window, a stop string, more
    requests than slots (slots reused after chained windows), a sampled request beside greedy ones (its
    windows draft on the host); one and two chained windows beyond the oldest in flight. window "0"
    (STRATA_DRAFT_WINDOW=0): the drafter's work in separate passes (MtpDrafter.on_device) instead of one
    DraftWindow call."""
    monkeypatch.setattr(scheduler, "CHAIN_DEPTH", depth)
    monkeypatch.setenv("STRATA_DRAFT_WINDOW", window)
    for model, n_chained in ((str(counting("llama")), 5), (str(synthetic("llama", mtp=1)), 30)):
        reqs = [req("a", "the first request", n=24), req("b", "another one here", n=7),
                req("c", "a third, with eos", n=30, ignore_eos=False), req("e", "the last request", n=17)]
        base = run(model, reqs, "0", monkeypatch)
        assert chained_drafts[0] == 0
        stop = base["a"].text[len(base["a"].text) // 2:][:3]
        reqs += [req("f", "the first request", n=24, stop=[stop]),
                 req("s", "sampled beside them", n=10, temperature=0.8, seed=4)]
        base.update(run(model, reqs[-2:], "0", monkeypatch))
        got = run(model, reqs, "1", monkeypatch)
        assert chained_drafts[0] >= n_chained and chained_drafts[1] == depth, model
        same(got, base, reqs)
        assert got["f"].done.finish_reason == "stop" and stop not in got["f"].text
        chained_drafts[:] = [0, 0]


def test_a_chained_draft_window_ends_where_the_context_does(counting, monkeypatch, chained_drafts):
    """Windows near the end of the context stop chaining (their rows and the drafter's chain must fit):
    the same tokens up to the context's end as the host's draft windows."""
    model = str(counting("llama"))
    reqs = [req("a", "the first request", n=200)]

    def at_ctx(chain_drafts):
        monkeypatch.setenv("STRATA_CHAIN", "1")
        monkeypatch.setenv("STRATA_DRAFT_GUARD", "0")
        monkeypatch.setenv("STRATA_CHAIN_DRAFTS", chain_drafts)
        with local_client(EngineConfig(model=model, parallel=1, spec=4, ctx=64, devices=DEVICES)) as eng:
            return run_together(eng, reqs)
    base = at_ctx("0")
    got = at_ctx("1")
    assert chained_drafts[0] >= 5
    same(got, base, reqs)
    assert got["a"].done.finish_reason == "length"


def test_draft_windows_chain_at_the_depth_the_guard_moves_to(counting, monkeypatch, chained_drafts):
    """The draft guard changes the depth between windows (1 -> 2 -> 3 -> 1 here, as its climb and its
    halving do): the first window at a deeper depth carries the fewer proposals of the one before, and the
    windows chained on it run at its depth (before 2026-12-06 the DraftWindow captured for its rows chained
    at the shallower depth, and the next window failed: guarded GPU requests ended in an error after
    310-335 of 512 tokens). Every token is the one decoded without drafts, to max_tokens."""
    levels = [1] * 6 + [2] * 6 + [3] * 6 + [1] * 6 + [3] * 100

    class Scripted(draft_guard.DraftGuard):
        def __init__(self, enabled, clock=None, top=1):
            super().__init__(enabled, top=top)
            self.n = 0
            self.level = levels[0]

        def committed(self, tokens, all_decoding, n_active, depth=1):
            self.n += 1
            self.level = levels[min(self.n, len(levels) - 1)]
    monkeypatch.setattr(scheduler, "DraftGuard", Scripted)
    monkeypatch.setenv("STRATA_CHAIN", "1")
    monkeypatch.setenv("STRATA_CHAIN_DRAFTS", "1")
    model = str(counting("llama"))
    reqs = [req("a", "the first request", n=60)]
    out = {}
    for spec, guard in ((1, "0"), (4, "1")):
        monkeypatch.setenv("STRATA_DRAFT_GUARD", guard)
        with local_client(EngineConfig(model=model, parallel=1, spec=spec, devices=DEVICES)) as eng:
            out[spec] = run_together(eng, reqs)["a"]
    assert chained_drafts[0] >= 10
    got = out[4]
    assert got.done.error == "" and got.done.finish_reason == "length" and got.done.completion_tokens == 60
    assert got.tokens == out[1].tokens


def test_abort_amid_chained_draft_windows_frees_the_slot(synthetic, monkeypatch, chained_drafts):
    """A request cancelled while draft windows are chained on its device drafts: the windows queued after
    it are dropped, the slot frees and the next request decodes in it."""
    monkeypatch.setenv("STRATA_CHAIN", "1")
    monkeypatch.setenv("STRATA_DRAFT_GUARD", "0")
    monkeypatch.setenv("STRATA_CHAIN_DRAFTS", "1")
    with local_client(EngineConfig(model=str(synthetic("llama", mtp=1)), parallel=1, spec=4, devices=DEVICES)) as eng:
        long, nxt = eng.submit(req("long", "tell me everything", n=2000)), eng.submit(req("next", "a short one", n=6))
        seen = 0
        for ev in long:
            seen += len(getattr(ev, "token_ids", []))
            if seen >= 5:
                long.cancel()
        _, done_next = nxt.result(timeout=60)
    assert chained_drafts[0] >= 3
    assert long.done.finish_reason == "abort" and 5 <= long.done.completion_tokens < 2000
    assert done_next.finish_reason == "length" and done_next.completion_tokens == 6


def test_pipelined_groups_on_one_stage_chain_their_drafts(counting, synthetic, monkeypatch, chained_drafts):
    """Two groups on one stage with piped drafts (their depth, --piped-mtp): each group's draft windows
    chain on its own device drafts, with the same tokens and drafts as the host's draft windows."""
    reqs = [req(c, f"request {c} here", n=20 + 3 * i) for i, c in enumerate("abcdefg")]
    for model in (str(counting("llama")), str(synthetic("llama", mtp=1))):
        out = {}
        for chain_drafts in ("0", "1"):
            monkeypatch.setenv("STRATA_CHAIN", "1")
            monkeypatch.setenv("STRATA_DRAFT_GUARD", "0")
            monkeypatch.setenv("STRATA_CHAIN_DRAFTS", chain_drafts)
            with local_client(EngineConfig(model=model, parallel=4, batch_groups="2", piped_mtp=3, spec=1,
                                           devices=DEVICES)) as eng:
                out[chain_drafts] = run_together(eng, reqs)
        assert chained_drafts[0] >= 20, model
        same(out["1"], out["0"], reqs)
        chained_drafts[:] = [0, 0]


def test_the_device_verdict_keeps_proposals_up_to_the_first_miss():
    """kept_on_device (the chained windows' verdict, DraftWindow's and MtpDrafter.on_device's): a slot keeps
    its current token and the proposals before its first rejected one, none after it, whatever follows; a
    slot with fewer proposals pads its checks with the window's last row (which confirms nothing)."""
    from engine.window import kept_on_device

    # slot 0: rows 0-3 (token, proposals 11 12 13), picks confirm 11, reject 12 (pick 99), would confirm 13
    # slot 1: rows 4-7, first proposal rejected, the next two confirmed by chance
    # slot 2: rows 8-11, every proposal confirmed; slot 3: rows 12-13, one proposal, confirmed
    toks = torch.tensor([10, 11, 12, 13, 20, 21, 22, 23, 30, 31, 32, 33, 40, 41])
    picks = torch.tensor([11, 99, 13, 5, 77, 22, 23, 6, 31, 32, 33, 7, 41, 8])
    at = torch.tensor([[0, 1, 2], [4, 5, 6], [8, 9, 10], [12, 13, 13]])
    assert kept_on_device(picks, toks, at).tolist() == [2, 1, 4, 2]
    # the same runs of equal width (a chained draft window's), slot 3 left out: its checks sliced, not gathered
    assert kept_on_device(picks[:12], toks[:12], width=4).tolist() == [2, 1, 4]
