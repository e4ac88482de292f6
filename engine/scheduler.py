"""Scheduler: slots, groups, admission, and the round loop of pipelined windows.

Each group has one window in flight. When a group's window comes back (its verdict and drafts
already made on the last stage), the scheduler commits it, streams the kept tokens, and queues the
group's next window at once, while the other groups' windows are in the earlier stages.

Chaining (Pipeline.chain: one stage): while a group's window is pure greedy decoding (one row per slot,
no drafts, no penalties, no logits wanted), its next window is queued at once on top of it, its tokens
the first window's picks on the device; so the device runs it while the host commits the first. If
the first window ends a sequence, the later ones' rows for that slot are dropped (KV rows past the
sequence's end, never read). Up to CHAIN_DEPTH windows are chained beyond the oldest one in flight.
"""
from __future__ import annotations

import os
import sys
import time
import traceback
from collections import Counter, deque
from dataclasses import dataclass, field

from engine.config import STATE_RING
from engine.draft_chain import DraftStep, chains_drafts
from engine.draft_guard import DraftGuard, guards
from engine.drafts import GAP_MAX, DraftPlan
from engine.graphs import rows_at
from engine.pipeline import Pipeline, Rows
from engine.sampling import argmax_pick, host_picks
from engine.sequence import Sequence
from engine.stats import EngineStats
from engine.window import SlotRows, pick_params, samples_on, verdicts as window_verdicts
from engine.window_log import WindowLog

# chained windows queued beyond the oldest one in flight (STRATA_CHAIN_DEPTH): at 1 the next window can be
# built only once the one before the running window has come back, so the host's part of a window
# (commit, build, launch) must fit in one window's device time; at 2 it has two (H200, 2026-12-02: slower,
# SmolLM2's shape one stream 775 -> 657 tok/s: the host threads then contend for the interpreter)
CHAIN_DEPTH = max(1, int(os.environ.get("STRATA_CHAIN_DEPTH", "1")))


@dataclass
class Slot:
    index: int
    group: int
    seq: Sequence | None = None
    n_cached: int = 0                               # KV valid at positions < n_cached
    cached_tokens: list[int] = field(default_factory=list)
    proposals: list[int] = field(default_factory=list)
    in_flight: int = 0                              # windows in flight with rows of this slot
    ring_pos: list[int] = field(default_factory=list)   # hybrid models: the position each state ring row holds
    drafted: int = 0                                # the MTP drafter's KV holds positions below this one
    kept_at: list[int] = field(default_factory=list)    # the position each row of the drafter's ring holds

    @property
    def reading(self) -> bool:
        return self.seq is not None and self.n_cached < len(self.seq.tokens) - 1


@dataclass
class InFlight:
    group: int
    fut: object
    parts: list[SlotRows]
    seqs: dict                                      # slot -> the sequence its rows were built for
    rows: Rows
    chained: bool = False                           # a chained window is queued on this one's picks
    followed: bool = False                          # the drafter caught up on this window's rows
    launched: float = field(default_factory=time.monotonic)
    via_chain: bool = False                         # queued on an earlier window's device picks
    gap_rows: int = 0                               # positions the drafter caught up on before this window
    step: DraftStep | None = None                   # a draft window whose successor can chain (engine.draft_chain)


class Scheduler:
    def __init__(self, pipeline: Pipeline, groups: list[list[int]], ctx: int, drafter, plan: DraftPlan,
                 emit, stats: EngineStats, conv_kernel: int = 0):
        self.pipeline, self.groups, self.ctx = pipeline, groups, ctx
        self.conv_kernel = conv_kernel                 # > 0: the model keeps delta net state rings (engine.gdn)
        self.slots = [Slot(i, g, ring_pos=[-1] * STATE_RING if conv_kernel else [])
                      for g, members in enumerate(groups) for i in members]
        self.slots.sort(key=lambda s: s.index)
        self.drafter, self.plan, self.emit, self.stats = drafter, plan, emit, stats
        self.chunk = pipeline.tiles.chunk
        self.waiting: deque[Sequence] = deque()
        self.inflight: deque[InFlight] = deque()
        self.guard = DraftGuard(guards(len(groups)), top=plan.depth(pipelined=False))
        self.window_log = WindowLog()
        self.chain_drafts = chains_drafts(pipeline, drafter, plan, conv_kernel)
        if self.guard.enabled and drafter is not None and drafter.ring is not None:   # paused windows' hidden
            for s in self.slots:                                                          # states (the loader's)
                s.kept_at = [-1] * drafter.ring_n

    # ------------------------------------------------------------------ requests
    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def abort(self, request_id: str) -> bool:
        for seq in list(self.waiting):
            if seq.request_id == request_id:
                self.waiting.remove(seq)
                seq.finish_reason = "abort"
                self.stats.finish(seq, -1, self.emit)
                return True
        for s in self.slots:
            if s.seq is not None and s.seq.request_id == request_id:
                s.seq.cancelled = True
                if not s.in_flight:
                    self._release(s, "abort")
                return True
        return False

    def abort_all(self, reason: str = "abort", error: str = "") -> None:
        """End every request (waiting, reading, decoding, in flight): used before unloading."""
        for seq in list(self.waiting):
            self.waiting.remove(seq)
            seq.finish_reason, seq.error = reason, error
            self.stats.finish(seq, -1, self.emit)
        self.inflight.clear()
        for s in self.slots:
            s.in_flight = 0
            if s.seq is not None:
                s.seq.error = error
                self._release(s, reason)

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.inflight or any(s.seq for s in self.slots))

    # ------------------------------------------------------------------ admission
    def _admit(self) -> None:
        while self.waiting:
            free = [s for s in self.slots if s.seq is None and not s.in_flight]
            if not free:
                return
            seq = self.waiting.popleft()
            busy = [0] * len(self.groups)              # active slots per group: join the lightest
            for s in self.slots:
                if s.seq is not None:
                    busy[s.group] += 1
            # re-read at least the last prompt token (its logits give the first pick)
            prefix = {s.index: self._reuse(s, max(0, _common_prefix(s.cached_tokens, seq.tokens) - 1)) for s in free}
            slot = max(free, key=lambda s: (prefix[s.index], -busy[s.group]))
            slot.seq, slot.n_cached, slot.proposals = seq, prefix[slot.index], []
            slot.drafted = min(slot.drafted, slot.n_cached)
            slot.cached_tokens = slot.cached_tokens[:slot.n_cached]
            seq.stats.cached, seq.stats.t_start = slot.n_cached, time.monotonic()
            self.stats.admitted(seq, self.emit)

    def _reuse(self, s: Slot, n: int) -> int:
        """How many cached positions a new sequence may keep (n shares its tokens): all n, except on a
        hybrid model whose state ring no longer holds the state at n-1 and the conv inputs before it
        (the slot then reads the prompt from the start)."""
        back = range(max(0, n - self.conv_kernel + 1), n)
        return n if not self.conv_kernel or all(s.ring_pos[q % STATE_RING] == q for q in back) else 0

    def _wrote(self, slot: int, first: int, n: int) -> None:
        ring = self.slots[slot].ring_pos
        if ring:
            for p in range(first, first + n):
                ring[p % STATE_RING] = p

    # ------------------------------------------------------------------ rounds
    def step(self, wait: float = 0.05) -> None:
        """Admit, queue a window for every idle group, then finish the oldest window if it is done."""
        self._admit()
        busy = Counter(w.group for w in self.inflight)
        for g in range(len(self.groups)):
            if not busy[g]:
                self._launch(g)
        grew = self.pipeline.chain
        while grew:                                     # chain on the windows just chained, up to the depth
            grew = False
            for w in list(self.inflight):
                if busy[w.group] <= CHAIN_DEPTH and (self._chainable(w) or self._drafts_chainable(w)):
                    busy[w.group] += 1
                    self._launch_chained(w)
                    grew = True
        if self.inflight:
            w = self.inflight[0]
            try:
                result = w.fut.result(timeout=wait)
            except TimeoutError:
                return
            except Exception as e:  # noqa: BLE001 - the window failed: its requests end with the reason
                self.inflight.popleft()
                self._fail(w, e)
                return
            self.inflight.popleft()
            self._commit(w, result)

    def _depth(self) -> int:
        active_groups = {s.group for s in self.slots if s.seq is not None}
        pipelined = len(active_groups) > 1
        return self.plan.depth(pipelined) if pipelined else self.guard.depth(self.plan.depth(False))

    def _follows(self) -> bool:
        """Whether the drafter follows this window (drafts on and not paused by the guard)."""
        return self.drafter is not None and self.plan.follows and self.guard.drafting

    def _launch(self, g: int) -> None:
        parts: list[SlotRows] = []
        tokens, slots, poss = [], [], []
        depth = self._depth()
        for s in (self.slots[i] for i in self.groups[g]):
            seq = s.seq
            if seq is None:
                continue
            if seq.cancelled:
                self._release(s, "abort")
                continue
            end = min(len(seq.tokens), s.n_cached + self.chunk)
            base = seq.tokens[s.n_cached:end]
            decoding = end == len(seq.tokens)
            props = []
            if decoding:
                room = min(seq.room() - 1, self.ctx - len(seq.tokens) - 1)
                props = self.plan.choose(s.proposals, seq.tokens, max(0, min(depth, room)), seq)
            sr = SlotRows(s.index, len(tokens), s.n_cached, len(base), decoding, props,
                          list(seq.tokens) if decoding else [], seq.constraint if decoding else None)
            tokens += base + props
            slots += [s.index] * sr.n_rows
            poss += range(s.n_cached, s.n_cached + sr.n_rows)
            parts.append(sr)
            s.in_flight += 1
            self._wrote(s.index, s.n_cached, sr.n_rows)
        if not parts:
            return
        is_prompt = [p < self.slots[sl].seq.prompt_len for sl, p in zip(slots, poss)]
        rows = Rows.build(tokens, slots, poss, self.pipeline.tiles, self.pipeline.scratch_slot, is_prompt)
        seqs = {sr.slot: self.slots[sr.slot].seq for sr in parts}
        if self._chains(depth) and all(self._device_decode(sr, seqs[sr.slot]) for sr in parts):
            rows.pick_idx = [sr.start for sr in parts]      # one row per slot: its pick feeds a chained window
            rows.pick_params = self._pick_params(parts, seqs)
        # the drafter follows while drafts run; a paused window of decode rows alone leaves their hidden
        # states in its ring instead (chained or not), one that reads prompt rows is followed
        follow = self.drafter is not None and self.plan.follows and (self.guard.drafting or (
            rows.pick_idx is None and (self.drafter.ring is None or not self._decode_only(parts))))
        gaps = self._gaps(parts, seqs) if follow else None
        if not follow:
            self._keep(rows, parts)
        step = None
        if follow and self._drafts_chain(parts, seqs, depth):
            step = DraftStep(self.drafter, [sr.slot for sr in parts], [sr.n_rows for sr in parts], depth,
                             tokens=tokens, positions=poss, gaps=gaps)
            rows.device_next = step.run
            fut = self.pipeline.submit(rows, lambda h, logits_of: step.finish(seqs))
        else:
            fut = self.pipeline.submit(rows, lambda h, logits_of: self._finish(parts, seqs, depth, h, logits_of,
                                                                                follow, gaps))
        self.inflight.append(InFlight(g, fut, parts, seqs, rows, followed=follow,
                                      gap_rows=sum(len(p) for _, p, _ in gaps or ()), step=step))

    def _gaps(self, parts: list[SlotRows], seqs: dict) -> list | None:
        """Each slot's positions before the window that the drafter missed and its ring still holds, the
        last GAP_MAX of them: (slot, positions, the token after each), for MtpDrafter.catch_up."""
        out = []
        for sr in parts:
            s, a = self.slots[sr.slot], sr.first_pos
            low = max(s.drafted, a - GAP_MAX)
            while a > low and s.kept_at and s.kept_at[(a - 1) % len(s.kept_at)] == a - 1:
                a -= 1
            if a < sr.first_pos:
                out.append((sr.slot, list(range(a, sr.first_pos)), seqs[sr.slot].tokens[a + 1:sr.first_pos + 1]))
        return out or None

    def _keep(self, rows: Rows, parts: list[SlotRows]) -> None:
        """A window the drafter does not follow: its decode rows' hidden states go to the drafter's ring,
        where drafts may come back before GAP_MAX more positions (a catch-up reads no older ones)."""
        if self.drafter is None or self.drafter.ring is None or not self.guard.keeps(GAP_MAX):
            return
        keep = [(sr.start, sr.slot, sr.first_pos + j) for sr in parts if sr.decoding for j in range(sr.n_rows)]
        if keep:
            idx, slots, pos = (list(c) for c in zip(*keep))
            for sl, p in zip(slots, pos):
                ring = self.slots[sl].kept_at
                ring[p % len(ring)] = p
            last = self.pipeline.stages[-1]
            if not all(last.fills_ring(size) for _, size, _ in rows.bounds):     # (its graphs do it on a GPU)
                rows.keep = lambda hidden: self.drafter.remember(rows_at(hidden, idx), slots, pos)

    @staticmethod
    def _decode_only(parts: list[SlotRows]) -> bool:
        """Every slot of the window decodes its current token and reads no prompt rows."""
        return all(sr.decoding and sr.n_base == 1 for sr in parts)

    def _chains(self, depth: int) -> bool:
        """Chaining is on and nothing drafts (a drafter follows every window's hidden states in order)."""
        return self.pipeline.chain and depth == 0 and not self._follows()

    def _device_decode(self, sr: SlotRows, seq: Sequence) -> bool:
        """One decode row whose pick the device makes: greedy, or sampled without penalties where the
        last stage samples (engine.window.samples_on)."""
        return sr.decoding and sr.n_rows == 1 and not sr.proposals and seq.logits is None and (
            argmax_pick(seq.params) or (not host_picks(seq.params) and samples_on(self.pipeline.stages[-1].device)))

    def _pick_params(self, parts: list[SlotRows], seqs: dict):
        """The sampler's params of a chaining window's pick rows, or None where every one is greedy."""
        if all(argmax_pick(seqs[sr.slot].params) for sr in parts):
            return None
        return pick_params([(i, seqs[sr.slot].params, sr.pick_positions[0]) for i, sr in enumerate(parts)])

    def _drafts_chain(self, parts: list[SlotRows], seqs: dict, depth: int) -> bool:
        """Whether a draft window's successor can chain on it (engine.draft_chain): MTP drafts where they
        chain, every slot decoding its current token with greedy picks and room in the context for the
        next window's rows and drafts."""
        return self.chain_drafts and depth > 0 and self._decode_only(parts) and all(
            argmax_pick(seqs[sr.slot].params) and seqs[sr.slot].logits is None
            and self._drafts_fit(sr.first_pos + sr.n_rows, depth) for sr in parts)

    def _drafts_fit(self, end: int, depth: int) -> bool:
        """A draft window chained on rows ending before `end` has room in the context for its rows and the
        drafter's chain."""
        return end + 2 * depth + 2 < self.ctx

    def _drafts_chainable(self, w: InFlight) -> bool:
        """Whether the group's next draft window can go now, on w's device verdict and drafts: as
        _chainable, with drafts still on at w's depth and room for a window more past those in flight."""
        if w.step is None or w.chained or not self._follows() or self._depth() != w.step.depth:
            return False
        d = w.step.depth
        return self._group_may_chain(w, lambda s: self._drafts_fit(s.n_cached + (s.in_flight + 1) * (d + 1), d))

    def _chainable(self, w: InFlight) -> bool:
        """Whether the group's next window can go now, on w's device picks: w's rows are all decode picks
        the device makes (greedy, or sampled there) and it is the group's latest window, every sequence in
        it may take a token more than its windows in flight give, and no other slot of the group waits for
        a window."""
        if w.rows.pick_idx is None or w.chained or not self._chains(self._depth()):
            return False
        return self._group_may_chain(w)

    def _group_may_chain(self, w: InFlight, room=lambda s: True) -> bool:
        """w is the group's latest window, every sequence in it may take a token more than its windows in
        flight give (and room(slot) holds), and no other slot of the group waits for a window."""
        members = {sr.slot for sr in w.parts}
        for i in self.groups[w.group]:
            s = self.slots[i]
            if i not in members:
                if s.seq is not None:
                    return False
                continue
            seq = w.seqs[i]
            if (s.seq is not seq or seq.cancelled or not 1 <= s.in_flight <= CHAIN_DEPTH
                    or seq.room() < s.in_flight + 1 or not room(s)):
                return False
        return True

    def _launch_chained(self, w: InFlight) -> None:
        """w's group's next window: each slot's next position, its token w's pick (on the device); after a
        draft window, each slot's next rows from w's device verdict and drafts."""
        w.chained = True
        if w.step is not None:
            return self._launch_chained_drafts(w)
        parts = [SlotRows(sr.slot, j, sr.first_pos + 1, 1, True) for j, sr in enumerate(w.parts)]
        for sr in parts:
            self.slots[sr.slot].in_flight += 1
            self._wrote(sr.slot, sr.first_pos, 1)
        rows = Rows.build([0] * len(parts), [sr.slot for sr in parts], [sr.first_pos for sr in parts],
                          self.pipeline.tiles, self.pipeline.scratch_slot, [False] * len(parts))
        rows.pick_idx = list(range(len(parts)))
        seqs = dict(w.seqs)
        rows.pick_params = self._pick_params(parts, seqs)
        self._keep(rows, parts)
        fut = self.pipeline.submit(rows, lambda h, logits_of: self._finish(parts, seqs, 0, h, logits_of, False),
                                   feed=w.rows)
        self.inflight.append(InFlight(w.group, fut, parts, seqs, rows, via_chain=True))

    def _launch_chained_drafts(self, w: InFlight) -> None:
        """The next draft window on w's device verdict and drafts: each slot's rows (its next token, then
        the drafts, at positions the host learns from w's finish) come from the device."""
        step = w.step.chained()
        width = step.depth + 1
        parts = [SlotRows(sl, i * width, -1, 1, True) for i, sl in enumerate(step.slots)]   # (filled by finish)
        for sl in step.slots:
            self.slots[sl].in_flight += 1
        n = width * len(step.slots)
        rows = Rows.build([0] * n, [sl for sl in step.slots for _ in range(width)], [0] * n,
                          self.pipeline.tiles, self.pipeline.scratch_slot, [False] * n)
        rows.device_next = step.run
        seqs = dict(w.seqs)
        fut = self.pipeline.submit(rows, lambda h, logits_of: step.finish(seqs), feed=w.rows)
        self.inflight.append(InFlight(w.group, fut, parts, seqs, rows, followed=True, via_chain=True, step=step))

    def _finish(self, parts: list[SlotRows], seqs: dict, depth: int, hidden, logits_of, follow: bool, gaps=None):
        """Runs on the last stage's thread: verdicts, then (follow) the drafter's catch-up (first on the
        positions it missed: gaps) and next proposals."""
        want = [r for sr in parts for r in sr.pick_rows]
        logits = logits_of(want)
        verdicts = window_verdicts(parts, logits, [seqs[sr.slot].params for sr in parts],
                                   [seqs[sr.slot].logits is not None for sr in parts],
                                   lambda: logits_of.made_picks(want))   # a chaining window's picks: made already
        proposals = {}
        if follow:
            proposals = self.drafter.advance(parts, verdicts, seqs, hidden, depth, self.plan.min_p, gaps)
        return verdicts, proposals

    def _commit(self, w: InFlight, result) -> None:
        verdicts, proposals = result[:2]
        if len(result) > 2:                 # a chained draft window's rows, known from its finish
            w.parts = result[2]
        self.stats.window(sum(sr.n_rows for sr in w.parts))
        if self.window_log:
            self.window_log.write(launched=round(w.launched * 1e6), rows=sum(sr.n_rows for sr in w.parts),
                                  kept=sum(v.kept for sr, v in zip(w.parts, verdicts) if sr.decoding),
                                  proposed=sum(len(sr.proposals) for sr in w.parts), chain=w.via_chain,
                                  followed=w.followed, gaps=w.gap_rows, drafting=self.guard.drafting,
                                  prompt=not all(sr.decoding for sr in w.parts), active=sum(
                                      s.seq is not None for s in self.slots))
        self.guard.committed(sum(v.kept for sr, v in zip(w.parts, verdicts) if sr.decoding),
                             self._decode_only(w.parts),
                             sum(s.seq is not None for s in self.slots),
                             self.plan.depth(pipelined=False))
        for sr, v in zip(w.parts, verdicts):
            s = self.slots[sr.slot]
            s.in_flight -= 1
            seq = s.seq
            if seq is None or seq is not w.seqs[sr.slot]:
                continue            # a chained row past the end of a sequence that ended in the window before
            s.n_cached = sr.first_pos + v.n_valid_rows
            if w.followed:
                s.drafted = s.n_cached
            read_to = min(sr.first_pos + sr.n_base, seq.prompt_len)
            if read_to > sr.first_pos:
                self.stats.prompt_read(seq, read_to - sr.first_pos, read_to, self.emit)
            if sr.decoding:
                offered = min(len(sr.proposals), max(0, seq.room() - 1))    # (a chain's drafts past the end: none)
                taken = seq.accept(v.picks[:v.kept])
                if v.logits is not None:
                    seq.keep_logits(v.logits, len(taken))
                self.stats.decoded(seq, s.index, taken, offered, min(v.kept - 1, offered), self.emit)
                s.proposals = [] if seq.finished else proposals.get(sr.slot, [])
            s.cached_tokens = self._reusable(seq, s.n_cached)
            if seq.cancelled:
                self._release(s, "abort")
            elif seq.finished:
                self._release(s, seq.finish_reason)

    def _reusable(self, seq: Sequence, n_cached: int) -> list[int]:
        """Tokens whose KV a later request may reuse: only rows computed the way that request would
        compute them itself (its prompt rows), so reuse never changes a token."""
        n = n_cached if self.pipeline.tiles.same_numerics else min(n_cached, seq.prompt_len)
        return seq.tokens[:n]

    def _fail(self, w: InFlight, error: Exception) -> None:
        """A window failed: its requests end with the reason (and the worker's log gets the traceback)."""
        traceback.print_exception(error, file=sys.stderr)
        for sr in w.parts:
            s = self.slots[sr.slot]
            s.in_flight = max(0, s.in_flight - 1)
            if s.seq is not None and s.seq is w.seqs[sr.slot]:
                s.n_cached, s.cached_tokens = 0, []
                s.seq.error = f"{type(error).__name__}: {error}"
                self._release(s, "error")

    def _release(self, s: Slot, reason: str) -> None:
        seq = s.seq
        if seq is None:
            return
        seq.finish_reason = seq.finish_reason if seq.finished and reason != "abort" else reason
        s.seq, s.proposals = None, []
        s.cached_tokens = self._reusable(seq, s.n_cached)
        self.stats.finish(seq, s.index, self.emit)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
