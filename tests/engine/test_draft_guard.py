"""The draft guard (engine.draft_guard): drafts only while they give more tokens per second than windows
without them; first its policy on a clock of its own, then in a real engine (chained windows forced on the
CPU stage, STRATA_CHAIN=1) whose clock makes a draft window cost what the GPU's does."""
from __future__ import annotations

import json

import pytest
import torch

from app.local_engine import local_client
from app.run_requests import run_together
from engine import draft_guard, drafts, loader, scheduler
from engine.draft_guard import DraftGuard
from engine.messages import AddRequest, EngineConfig, SamplingParams


class Clock:
    """A window costs `draft` seconds while the guard drafts, `plain` while it doesn't."""

    def __init__(self, draft: float, plain: float):
        self.t, self.draft, self.plain, self.guard = 0.0, draft, plain, None

    def __call__(self) -> float:
        self.t += self.draft if self.guard.drafting else self.plain
        return self.t


def guarded(draft: float, plain: float) -> tuple[DraftGuard, Clock]:
    clock = Clock(draft, plain)
    g = DraftGuard(True, clock)
    clock.guard = g
    return g, clock


def feed(g: DraftGuard, n: int, tokens_drafting: int, all_decoding=True, n_active=1, depth=1) -> list[bool]:
    """n windows; each gives tokens_drafting tokens while drafting, 1 while paused. Returns drafting per window."""
    seen = []
    for _ in range(n):
        seen.append(g.drafting)
        g.committed(tokens_drafting if g.drafting else 1, all_decoding, n_active, depth)
    return seen


def test_drafts_that_cost_more_than_they_give_are_paused_and_measured_again_later():
    g, _ = guarded(draft=2.5e-3, plain=0.8e-3)       # 1.7 tokens a 2.5 ms window against 1 a 0.8 ms one
    first = feed(g, 1 + draft_guard.SETTLE + draft_guard.DRAFT_SPAN + 1, 2)
    assert all(first) and not g.drafting               # the drafting span measured: now without
    assert g.rate[1] == pytest.approx(2 / 2.5e-3)
    feed(g, draft_guard.SETTLE + draft_guard.PLAIN_SPAN + 1, 2)
    assert g.rate[0] == pytest.approx(1 / 0.8e-3) and not g.drafting
    assert "paused: 800 tok/s with them, 1250 without" in g.note
    paused = g.paused_windows
    far = draft_guard.FAR_HOLD * draft_guard.HOLD            # 1,250 is FAR ahead of 800: held four times as long
    assert g.hold == far
    seen = feed(g, far - 1, 2)
    assert not any(seen)
    seen += feed(g, draft_guard.SETTLE + draft_guard.DRAFT_SPAN + 3, 2)
    assert seen.count(True) >= draft_guard.DRAFT_SPAN and not g.drafting    # measured again, paused again
    assert g.hold == 2 * far                                                  # the same side won: held longer
    assert g.paused_windows - paused == seen.count(False)
    g, _ = guarded(draft=0.9e-3, plain=0.8e-3)       # 1,111 tok/s against 1,250: close, the usual hold
    feed(g, 2 * draft_guard.SETTLE + draft_guard.DRAFT_SPAN + draft_guard.PLAIN_SPAN + 3, 1)
    assert not g.drafting and g.hold == draft_guard.HOLD


def test_a_hold_is_counted_in_each_sequences_tokens():
    """Four sequences share the windows: drafts lose and pause, and the next trial comes after as many
    windows as it would for one sequence (the hold is a sequence's tokens), so trials cost the same share of
    the windows at any count (H100, four edit streams: holds of 64 windows between trials of 10 cost 10%)."""
    g, _ = guarded(draft=2.5e-3, plain=0.8e-3)
    seen = []
    for _ in range(3000):
        seen.append(g.drafting)
        g.committed(4 * 1.7 if g.drafting else 4, True, 4)
    first_pause = seen.index(False)
    back = seen.index(True, first_pause)
    paused = back - first_pause
    far = draft_guard.FAR_HOLD * draft_guard.HOLD
    assert far <= paused <= far + draft_guard.SETTLE + draft_guard.PLAIN_SPAN + 2


def test_drafts_that_pay_stay_on():
    g, _ = guarded(draft=1.2e-3, plain=0.8e-3)       # 2.4 tokens a 1.2 ms window: 2,000 tok/s against 1,250
    seen = feed(g, 200, 3)
    assert g.drafting and g.rate[1] > g.rate[0] and g.note.startswith("drafts on")
    # without drafts only while measured: once at first, and only EARLY windows of it (2,000 tok/s is FAR ahead of
    # 1,250 from the first of them); so held four times as long
    assert seen.count(False) <= draft_guard.SETTLE + draft_guard.EARLY + 1
    assert g.hold == draft_guard.FAR_HOLD * draft_guard.HOLD
    assert g.paused_windows == seen.count(False)
    g, _ = guarded(draft=1.5e-3, plain=0.8e-3)       # 2.1 tokens a 1.5 ms window: 1,400 tok/s, ahead but not FAR
    seen = feed(g, 60, 2.1)
    assert g.drafting and seen.count(False) == draft_guard.SETTLE + draft_guard.PLAIN_SPAN + 1   # the whole span


def test_held_drafts_pause_as_soon_as_their_recent_windows_fall_behind():
    """Drafts win their trial, then the text stops being predictable (1.2 tokens a 1.2 ms window: 1,000 tok/s
    against 1,250 without): they pause within CHECK windows, long before their hold would end."""
    g, _ = guarded(draft=1.2e-3, plain=0.8e-3)
    feed(g, 200, 3)
    assert g.drafting and not g._todo and g.hold == draft_guard.FAR_HOLD * draft_guard.HOLD
    g.committed(3, True, 1)
    seen = feed(g, 2 * draft_guard.CHECK, 1)
    # (within the CHECK block the fall lands in and the next one, long before the hold's 1,024 tokens)
    assert not g.drafting and seen.count(True) <= 2 * draft_guard.CHECK
    assert g.rate[1] < g.rate[0] and g.note.startswith("drafts paused")
    assert not g._todo and g._last_best == 0          # plain windows held now, drafts tried again later


class Depths:
    """A window at depth d (0: no drafts) costs cost[d] seconds and gives tokens[d] tokens (a table the test
    may change as the text would)."""

    def __init__(self, cost: dict, tokens: dict):
        self.t, self.cost, self.tokens, self.guard = 0.0, cost, tokens, None

    def __call__(self) -> float:
        self.t += self.cost[self.guard.level]
        return self.t


def depths_guarded(cost: dict, tokens: dict) -> tuple[DraftGuard, Depths]:
    clock = Depths(cost, tokens)
    g = DraftGuard(True, clock, top=max(cost))
    clock.guard = g
    return g, clock


def run_levels(g: DraftGuard, clock: Depths, n: int) -> list[int]:
    return run_levels_at(g, clock, n, max(clock.cost))


def run_levels_at(g: DraftGuard, clock: Depths, n: int, plan_depth: int) -> list[int]:
    """n windows of one sequence at the plan's depth; the level of each."""
    seen = []
    for _ in range(n):
        seen.append(g.level)
        g.committed(clock.tokens[g.level], True, 1, plan_depth)
    return seen


# an H100's window costs on the default model (ms: no drafts, then depths 1-4; 2026-12-05's --spec 2-4 figures)
COST = {0: 0.77e-3, 1: 1.03e-3, 2: 1.2e-3, 3: 1.38e-3, 4: 1.54e-3}


PROSE = {0: 1, 1: 1.45, 2: 1.65, 3: 1.74, 4: 1.78}       # 45% of proposals kept at each position
CODE = {0: 1, 1: 1.76, 2: 2.37, 3: 2.86, 4: 3.25}        # 76% of first proposals, then 80% at each position


def first_seen(levels: list[int]) -> list[int]:
    return list(dict.fromkeys(levels))


def test_a_fresh_guard_measures_depth_1_first_and_goes_no_deeper_where_it_keeps_little():
    """Prose: depth 1 (1,408 tok/s) wins against none (1,299) and keeps 45% of its proposals, short of UP:
    it is held, measured against none now and then, and no deeper window is ever run (depth 4 would have
    cost 1,156 tok/s). Edits (27% kept) lose at depth 1 and pause without trying a deeper depth."""
    g, clock = depths_guarded(COST, PROSE)
    seen = run_levels(g, clock, 2000)
    assert first_seen(seen) == [1, 0] and set(g.rate) == {0, 1}
    assert g.level == 1 and g.note.startswith("drafts on: 1408 tok/s with them (depth 1 of 4), 1299 without")
    last = seen[len(seen) // 2:]
    assert last.count(1) > 0.95 * len(last)
    g, clock = depths_guarded(COST, {0: 1, 1: 1.27, 2: 1.34, 3: 1.36, 4: 1.37})
    seen = run_levels(g, clock, 2000)
    assert first_seen(seen) == [1, 0] and not g.drafting and seen.count(1) < 0.05 * len(seen)


def test_a_fresh_guard_climbs_where_drafts_keep_most_and_drafts_that_fall_behind_are_tried_shallower():
    """Code: depth 1 (1,709 tok/s) beats none and keeps 76%, so depth 2 (1,975) is measured at once, keeps
    1.37 of 2, and depth 4 (2,110) at once after it: the plan's depth within a few trials, not after a hold
    (1,024 tokens at depth 1). Then the text turns to prose: depth 4 (1,156) falls behind none within CHECK
    windows, half of it (1,375) is tried before drafts pause and wins, and at its hold's end depth 1 (1,408)."""
    g, clock = depths_guarded(COST, CODE)
    seen = run_levels(g, clock, 100)
    assert first_seen(seen) == [1, 0, 2, 4] and g.level == 4 and seen[-30:] == [4] * 30
    clock.tokens = PROSE
    seen = run_levels(g, clock, 3000)
    assert first_seen(seen)[:3] == [4, 2, 1] and seen[-500:].count(1) > 450


def test_held_drafts_go_deeper_when_their_windows_keep_most_proposals():
    """Depth 2 keeps 1.37 of its 2 proposals but depth 4 gains too little to pay for its window (1,688 tok/s
    against 1,975): depth 2 is held, and at each hold's end twice it is measured again (the text may have
    turned more predictable), not half of it. Prose turning to code while depth 1 is held ends at the plan's
    depth; a drop back to prose brings the depth down again within CHECK windows."""
    g, clock = depths_guarded(COST, {0: 1, 1: 1.76, 2: 2.37, 3: 2.5, 4: 2.6})
    seen = run_levels(g, clock, 3000)
    held = seen.index(2, seen.index(4))                  # depth 4 measured once, lost: depth 2 held
    assert first_seen(seen) == [1, 0, 2, 4] and set(seen[held:]) == {2, 4}
    assert seen[held:].count(4) >= 2 * (draft_guard.SETTLE + draft_guard.DRAFT_SPAN)
    g, clock = depths_guarded(COST, PROSE)
    run_levels(g, clock, 600)
    assert g.level == 1
    clock.tokens = CODE
    seen = run_levels(g, clock, 3000)
    assert 2 in seen and g.level == 4 and seen[-500:].count(4) > 450
    clock.tokens = PROSE
    seen = run_levels(g, clock, 2 * draft_guard.CHECK + draft_guard.SETTLE + draft_guard.DRAFT_SPAN + 1)
    assert seen[-1] < 4 and g.level < 4


def test_a_new_plan_depth_starts_the_guard_afresh_and_no_guard_keeps_the_plans_depth():
    """Configure can change --spec on a loaded model: the guard's levels follow the plan's new depth from its
    next window; a layout without a guard drafts at the plan's depth whatever it was built with."""
    g, clock = depths_guarded(COST, PROSE)
    run_levels(g, clock, 600)
    assert g.level == 1 and g.depth(4) == 1
    g.committed(1, True, 1, 2)                      # --spec 3 now
    assert g.top == 2 and g.level == 1 and g.rate == {} and g.depth(2) == 1
    clock.tokens = CODE                             # code climbs to the new plan's depth, not the old one's
    seen = run_levels_at(g, clock, 400, 2)
    assert first_seen(seen) == [1, 0, 2] and g.level == 2 and g.depth(2) == 2
    off = DraftGuard(False, top=1)
    off.committed(1, True, 1, 3)
    assert off.depth(3) == 3 and off.drafting


def test_prompt_windows_restart_a_span_and_each_count_of_sequences_keeps_its_own_measurements():
    g, _ = guarded(draft=2.5e-3, plain=0.8e-3)
    feed(g, 6, 1)
    feed(g, 1, 1, all_decoding=False)                 # a prompt read beside: the span starts again
    assert g._span is None
    feed(g, draft_guard.DRAFT_SPAN - 2, 1)
    assert 1 not in g.rate and g.drafting
    feed(g, 200, 1)
    assert not g.drafting and 0 in g.rate
    one = dict(g.rate)
    feed(g, 1, 1, n_active=2)                          # two sequences share the windows: measured apart,
    assert not g.drafting and g.rate == {}       # starting paused like one
    feed(g, 1 + draft_guard.SETTLE + draft_guard.PLAIN_SPAN, 1, n_active=2)
    assert 0 in g.rate and 1 not in g.rate and g.drafting       # then drafts measured
    feed(g, 1, 1, n_active=1)                          # alone again: where it left off, still paused
    assert not g.drafting and g.rate == one
    # the hold's tokens add up across requests (short ones, each with its prompt windows), so drafts are
    # measured again after the hold's tokens however the requests are cut
    probes = []
    for _ in range(2 * draft_guard.FAR_HOLD * draft_guard.HOLD // 20):
        feed(g, 2, 1, all_decoding=False)
        probes += feed(g, 20, 1)
    assert any(probes) and not all(probes)
    g2, _ = guarded(draft=2.5e-3, plain=0.8e-3)
    feed(g2, 200, 1, depth=0)                  # --spec 1: nothing to guard
    assert g2.drafting and g2.paused_windows == 0 and g2.note == ""


def engine_guard(monkeypatch, hold: int = 12, clock=lambda: Clock(3e-3, 1e-3)) -> type:
    """The engine's DraftGuard made on a test clock (a draft window three times a plain one by default), with
    spans of 4 windows and holds of `hold` tokens; returns its class (subclass it to watch it)."""
    monkeypatch.setattr(draft_guard, "DRAFT_SPAN", 4)
    monkeypatch.setattr(draft_guard, "PLAIN_SPAN", 4)
    monkeypatch.setattr(draft_guard, "HOLD", hold)

    class Guard(DraftGuard):
        def __init__(self, enabled, clock_=None, top=1):
            c = clock()
            super().__init__(enabled, c, top)
            c.guard = self
    monkeypatch.setattr(scheduler, "DraftGuard", Guard)
    return Guard


def _plain_then_guarded(monkeypatch, model: str, reqs, before_guarded):
    """The requests decoded without drafts, then (after before_guarded()) at --spec 3 under the guard, windows
    chained on the CPU stage (STRATA_CHAIN=1): (the plain result, the guarded result, its engine's guard)."""
    monkeypatch.setenv("STRATA_CHAIN", "1")
    monkeypatch.setenv("STRATA_DRAFT_GUARD", "0")
    with local_client(EngineConfig(model=model, parallel=1)) as eng:
        plain = run_together(eng, reqs)["a"]
    before_guarded()
    monkeypatch.setenv("STRATA_DRAFT_GUARD", "1")
    with local_client(EngineConfig(model=model, parallel=1, spec=3)) as eng:
        got = run_together(eng, reqs)["a"]
        guard = eng.transport.core.scheduler.guard
    return plain, got, guard


def test_a_guarded_engine_pauses_costly_drafts_chains_meanwhile_and_gives_the_same_tokens(
        synthetic, monkeypatch):
    """A random MTP layer (nearly every proposal rejected) whose windows cost three times a plain one: the
    guard pauses drafts, the paused windows chain and skip the drafter, drafts come back to be measured
    again, and every token is the one decoded without drafts."""
    seen = []

    class Guard(engine_guard(monkeypatch)):
        def committed(self, tokens, all_decoding, n_active, depth=1):
            seen.append(all_decoding)
            super().committed(tokens, all_decoding, n_active, depth)
    monkeypatch.setattr(scheduler, "DraftGuard", Guard)
    chained, advanced = [0], [0]
    real_chain, real_advance = scheduler.Scheduler._launch_chained, drafts.MtpDrafter.advance

    def chain(self, w):
        chained[0] += 1
        return real_chain(self, w)

    def advance(self, *a):
        advanced[0] += 1
        return real_advance(self, *a)
    monkeypatch.setattr(scheduler.Scheduler, "_launch_chained", chain)
    monkeypatch.setattr(drafts.MtpDrafter, "advance", advance)
    model = str(synthetic("llama", mtp=1))
    reqs = [AddRequest(request_id="a", prompt="a lone request", sampling=SamplingParams(max_tokens=60))]
    plain, got, guard = _plain_then_guarded(monkeypatch, model, reqs, lambda: (chained.__setitem__(0, 0),
                                                                              advanced.__setitem__(0, 0)))
    assert got.tokens == plain.tokens
    # the window that reads the prompt (and picks the first token) is not a decode window to the guard: it
    # restarts the span, so neither the prompt nor the idle time before a request counts as the drafts' (H200,
    # 2026-12-05: a span run on across 214 ms between two requests measured drafts at 39 tok/s)
    assert seen[0] is False and seen[-1] is True
    assert guard.paused_windows >= 8             # (the guard's own count: telemetry may lag)
    assert chained[0] >= guard.paused_windows    # paused windows chain
    assert 0 < got.done.drafts_offered < 2 * 60  # drafts ran in the measured spans only
    assert advanced[0] <= got.done.windows - guard.paused_windows     # and the drafter skipped the paused windows


def test_a_guarded_engine_drafts_at_the_depth_that_pays_and_gives_the_same_tokens(synthetic, monkeypatch, tmp_path):
    """A real engine at --spec 3 (depth 2) on chained windows, whose clock makes a depth-1 window pay: the
    windows run at depth 1, then none, then depth 1 again and stay there (a random layer keeps too few of
    its proposals to climb), each with the rows of the guard's depth (the window log's), never the plan's,
    and the tokens are those decoded without drafts."""
    engine_guard(monkeypatch, clock=lambda: Depths({0: 1e-3, 1: 0.5e-3, 2: 3e-3}, {}))
    model = str(synthetic("llama", mtp=1))
    reqs = [AddRequest(request_id="a", prompt="a lone request", sampling=SamplingParams(max_tokens=80))]
    log = tmp_path / "windows.jsonl"
    plain, got, guard = _plain_then_guarded(monkeypatch, model, reqs,
                                            lambda: monkeypatch.setenv("STRATA_WINDOW_LOG", str(log)))
    assert got.tokens == plain.tokens
    windows = list(map(json.loads, log.read_text().splitlines()))
    assert windows[0]["proposed"] == 0 and windows[0]["rows"] == got.done.prompt_tokens    # reads the prompt
    rows = [w["rows"] for w in windows[1:]]
    first_plain = rows.index(1)
    after = "".join(map(str, rows[first_plain:]))
    assert set(rows[:first_plain]) == {2} and 3 not in rows and "2" * 40 in after
    assert "(depth 1 of 2)" in guard.note


def _drafter_kv(monkeypatch, model: str, script, ring: bool):
    """Tokens and the drafter's keys at slot 0 after one request at --spec 3 on chained windows (the
    CPU stage forced to chain), the guard drafting in the windows where script(window) is true."""
    class Scripted(DraftGuard):
        def __init__(self, enabled, clock=None, top=1):
            super().__init__(enabled, top=top)
            self.n = 0
            self.level = self.top if script(0) else 0

        def committed(self, tokens, all_decoding, n_active, depth=1):
            self.n += 1
            self.level = self.top if script(self.n) else 0
            if not self.drafting:
                self.paused_windows += 1
    monkeypatch.setattr(scheduler, "DraftGuard", Scripted)
    if not ring:
        monkeypatch.setattr(loader, "ring_rows", lambda *a: 0)
    monkeypatch.setenv("STRATA_CHAIN", "1")
    monkeypatch.setenv("STRATA_DRAFT_GUARD", "1")
    reqs = [AddRequest(request_id="a", prompt="a lone request", sampling=SamplingParams(max_tokens=48))]
    devices = "cuda:0" if torch.cuda.is_available() else "cpu"
    with local_client(EngineConfig(model=model, devices=devices, parallel=1, spec=3)) as eng:
        got = run_together(eng, reqs)["a"]
        k = eng.transport.core.model.drafter.k[0].float().cpu()
    return got, k


def test_paused_windows_keep_their_hidden_states_only_near_the_next_trial(synthetic, monkeypatch):
    """Drafts held paused for a long while: the paused windows put their rows into the drafter's ring only
    while the guard measures (drafts come back right after) and within GAP_MAX tokens of the hold's end
    (a catch-up reads no older positions), not through the whole hold; the tokens are the same."""
    engine_guard(monkeypatch, hold=20)         # FAR behind: held 80 tokens
    monkeypatch.setattr(scheduler, "GAP_MAX", 16)
    kept = []
    real = drafts.MtpDrafter.remember

    def remember(self, hidden, slots, pos):
        kept.extend(pos)
        return real(self, hidden, slots, pos)
    monkeypatch.setattr(drafts.MtpDrafter, "remember", remember)
    model = str(synthetic("llama", mtp=1))
    reqs = [AddRequest(request_id="a", prompt="a lone request", sampling=SamplingParams(max_tokens=90))]
    plain, got, guard = _plain_then_guarded(monkeypatch, model, reqs, kept.clear)
    assert got.tokens == plain.tokens
    n0 = got.done.prompt_tokens
    measuring = draft_guard.SETTLE + draft_guard.PLAIN_SPAN + 2
    assert guard.paused_windows >= 80 and 0 < len(kept) <= measuring + 16 + 2
    hold = [p for p in kept if p > n0 + 40]          # inside the hold: only its last GAP_MAX positions
    assert hold and min(hold) >= n0 + 80 - 16 - 2


def test_drafts_resumed_after_a_pause_first_catch_the_drafter_up_on_the_paused_positions(synthetic, monkeypatch):
    """Windows the guard pauses chain without the drafter; their hidden states wait in the drafter's ring,
    and the first window with drafts again runs the drafter over them first: its keys at the paused
    positions are those of a drafter that followed every window (not zeros), and the tokens are the same."""
    model = str(synthetic("llama", mtp=1))
    every, k_every = _drafter_kv(monkeypatch, model, lambda n: True, ring=True)
    script = lambda n: n < 3 or n >= 25            # noqa: E731 - drafts, a pause of 22 windows, drafts again
    resumed, k_resumed = _drafter_kv(monkeypatch, model, script, ring=True)
    _, k_holes = _drafter_kv(monkeypatch, model, script, ring=False)
    assert resumed.tokens == every.tokens
    n = resumed.done.prompt_tokens + 40                 # positions both drafters saw
    paused = [p for p in range(n) if k_holes[p].abs().sum() == 0]
    assert len(paused) >= 15                             # the pause left that many holes without the ring
    err = (k_resumed[:n] - k_every[:n]).norm() / k_every[:n].norm()
    assert err < 0.05, err                               # (a GPU's catch-up rows run in other tiles)
    assert all(k_resumed[p].abs().sum() > 0 for p in paused)


def test_a_cpu_stage_is_guarded_by_default_and_its_paused_windows_skip_the_drafter(synthetic, monkeypatch):
    """The default (STRATA_DRAFT_GUARD unset) on a CPU stage, whose windows do not chain: drafts that cost
    three times what they give are paused; paused windows skip the drafter and leave their rows in its
    ring, the first window with drafts again catches it up from there (before 2026-12-06 every paused window
    ran the drafter's layer: a lone request on prose or edit prompts lost 8-16% on 2 cores), and the tokens
    are the ones decoded without drafts. Two groups have no guard."""
    engine_guard(monkeypatch, hold=6)      # FAR behind: held 24 tokens, then measured again
    monkeypatch.delenv("STRATA_DRAFT_GUARD")
    monkeypatch.delenv("STRATA_CHAIN", raising=False)
    assert draft_guard.guards(1) and not draft_guard.guards(2)
    followed, caught_up = [0], [0]
    real_advance, real_catch_up = drafts.MtpDrafter.advance, drafts.MtpDrafter.catch_up

    def advance(self, *a, **k):
        followed[0] += 1
        return real_advance(self, *a, **k)

    def catch_up(self, gaps):
        caught_up[0] += sum(len(p) for _, p, _ in gaps)
        return real_catch_up(self, gaps)
    monkeypatch.setattr(drafts.MtpDrafter, "advance", advance)
    monkeypatch.setattr(drafts.MtpDrafter, "catch_up", catch_up)
    model = str(synthetic("llama", mtp=1))
    reqs = [AddRequest(request_id="a", prompt="a lone request", sampling=SamplingParams(max_tokens=60))]
    with local_client(EngineConfig(model=model, parallel=1)) as eng:
        plain = run_together(eng, reqs)["a"]
    with local_client(EngineConfig(model=model, parallel=1, spec=3)) as eng:
        assert eng.transport.core.model.drafter.ring is not None
        got = run_together(eng, reqs)["a"]
        paused = eng.transport.core.scheduler.guard.paused_windows
    assert got.tokens == plain.tokens
    assert 0 < got.done.drafts_offered < 2 * 60 and paused >= 8
    assert followed[0] <= got.done.windows - paused + 1        # paused windows ran no drafter
    assert caught_up[0] >= 8                                   # drafts came back and caught up on them
