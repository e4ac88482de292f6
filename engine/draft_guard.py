"""Drafts only while they pay: the solo path's guard against a draft window that costs more than it gives.

Where windows chain (one GPU stage) a window without drafts can be three times cheaper than one with them
(H200, SmolLM2's shape: 0.68 ms against 2.0 ms at --spec 2 and 2.6 at --spec 4 while draft windows waited
for the host, tests/gpu/run_draft_cost.sh, 2026-12-04). Chained draft windows (engine.draft_chain) take the
host's wait away but not the window's GPU work: 1.38 ms at --spec 4 against 0.77-0.91 without drafts on that
shape (H100, 2026-12-05, the drafter's work in one graph). A drafter that gets 1.3-1.6 tokens a window there
(prose, edits) then makes a lone request slower than no drafter at all; a user who turned drafts on expects
the opposite.

So the guard measures: decode tokens per second of wall time with drafts (a span of DRAFT_SPAN windows)
and without them (PLAIN_SPAN windows, chained; EARLY where drafts are FAR ahead), keeps the faster, and
measures again after holding the choice for a while (HOLD tokens, doubled each time the same level wins
again, up to HOLD_MAX; at least FAR_HOLD times HOLD where the winner was FAR ahead), since acceptance
follows the text.
Drafts run at a depth (the guard's `level`; 0: none) up to the plan's (`top`: --spec minus one). A shallower
window costs less and needs fewer of its proposals kept to pay (H100, the default model: 1.03 ms at depth 1,
1.38 at depth 3, 0.77 without drafts; prose keeps 36-44% of first proposals, which pays at depth 1 and not at
3), so a fresh guard measures depth 1 first (against none) and climbs: a depth that wins its trial and whose
windows kept UP of their proposals on average is measured at once against twice it (up to the plan's).
Starting at the plan's depth had cost most where drafts do not pay: on an H100 four streams at --spec 4 ran
depth-3 windows of 16 rows at 2.7 ms against 1.0 without drafts for a whole trial, 3% of a 512-token edit
request. Drafts that lose to none at a depth are tried at half of it before they pause. A held depth is
measured after its hold against half of it, or twice it where its windows kept UP of their proposals (the
text turned predictable), and depth 1 against none.
While drafts are held their rate is looked at every CHECK windows, and they go to half their depth (or
pause) as soon as it falls below the rate without them: a request whose text stops being predictable (an
edit prompt after its verbatim start: 26% of first proposals kept, 978 tok/s at --spec 4 against
1,080-1,300 without drafts, H100, 2026-12-05) no longer runs the rest of a long hold at the slower rate.
Spans skip the SETTLE windows after a switch and count only windows in which every slot decodes. Rates
depend on how many sequences share the windows: the guard keeps its state for each count and takes it up
again when that count returns (the next request alone starts where the last one left off, without
measuring drafts again first); a count it has not seen starts on the side the nearest count it has seen
holds, and measures that side first. (Started with drafts, four edit requests together drafted through
their prompts' windows and each new count at the end: 2,228 tok/s against 3,224 without drafts; after the
change 3,318 against 3,242, H100, 2026-12-05.) Paused windows don't run the drafter; they leave their hidden states in its
ring, and the first window with drafts again catches the drafter's KV up on them
(engine.drafts.MtpDrafter.catch_up), so drafts after a pause propose as well as before it (without that
the H200 measured them at 472 tok/s where drafts every window made 976). Tokens never depend on it: every
draft is verified.
A CPU stage (and any layout of one group whose windows do not chain) has the guard too: there a window's
rows cost more than on a GPU, so drafts pay only where they are kept often (the default model on 2 cores,
2026-12-05, `strata bench --model default --devices cpu --streams 1 --max-tokens 256`: code at --spec 2
82-83 tok/s against 66-70 without drafts, prose at --spec 4 63 against 74-75). Paused windows there skip
the drafter too and leave their rows in its ring (until 2026-12-06 they ran its layer, which cost a lone
request on prose or edit prompts 8-16% on 2 cores); windows that read prompt rows are followed everywhere.
"""
from __future__ import annotations

import os
import sys
import time

DRAFT_SPAN = 8           # windows a measurement with drafts spans
PLAIN_SPAN = 32          # and without (chained windows are shorter)
SETTLE = 2               # windows after a switch left out of the measurement
HOLD = 256               # tokens a sequence gets from the faster level before another is measured again...
HOLD_MAX = 8192          # ...doubled while the same side keeps winning
FAR = 1.25               # a side this many times faster than the other holds at least FAR_HOLD * HOLD tokens: a
FAR_HOLD = 4             # trial of the slower side costs most when it is far behind, and it catches up least often
CHECK = 32               # windows with drafts between two looks at their recent rate while drafts are held
EARLY = 8                # a span without drafts ends after this many windows where drafts are FAR ahead of it so far
UP = 0.5                 # drafts held at a depth whose windows kept this share of its proposals try twice the depth


LOG = os.environ.get("STRATA_DRAFT_GUARD_LOG", "") == "1"     # each measurement to stderr (tests/gpu/run_guard.sh)


def guard_mode() -> str:
    """STRATA_DRAFT_GUARD: auto or 1 (on where there is one group), 0 (off: drafts every window)."""
    return os.environ.get("STRATA_DRAFT_GUARD", "auto")


def guards(n_groups: int) -> bool:
    """Whether a layout of n_groups groups has a guard: one group, unless STRATA_DRAFT_GUARD=0. (Pipelined
    groups draft inside the pipeline: piped MTP, which the guard does not measure.)"""
    return n_groups == 1 and guard_mode() != "0"


class DraftGuard:
    """Levels: 0 (no drafts) and the draft depths 1..top; `level` is the one the next window runs at."""

    def __init__(self, enabled: bool, clock=time.monotonic, top: int = 1):
        self.enabled, self.clock, self.top = enabled, clock, max(top, 1)
        self.paused_windows = 0            # windows run without drafts while drafts were on (monotonic)
        self._known: dict = {}             # n_active -> where the guard left that count (_start)
        self._n_active = None
        self._start(None)

    @property
    def drafting(self) -> bool:
        return self.level > 0

    def depth(self, top: int) -> int:
        """The depth a window drafts at where the plan's is top: the guard's level (0 while it pauses drafts),
        or top where there is no guard."""
        return min(top, self.level) if self.enabled else top

    def keeps(self, within: int) -> bool:
        """Whether a paused window's hidden states may yet serve a catch-up of `within` positions: drafts may
        come back within that many tokens a sequence (a trial under way, or the hold's end near). Keeping
        them cost every paused window 2-3% (H100, the default model, edit prompts: 734-744 us a token
        against 722-724 without the ring, 718-720 in a process without drafts, 2026-12-06)."""
        return not self.enabled or bool(self._todo) or self.hold - self._held <= within

    def _start(self, n_active) -> None:
        """Measure for n_active sequences: from where the guard left that count, else from scratch."""
        if self._n_active is not None:
            self._known[self._n_active] = (self.level, self.rate, self.kept, self.hold, self._last_best,
                                           self._todo, self._pair, self._held, self._cand)
        self._n_active = n_active
        if n_active in self._known:
            (self.level, self.rate, self.kept, self.hold, self._last_best, self._todo, self._pair, self._held,
             self._cand) = self._known[n_active]
        else:       # a new count starts on the level the nearest known count holds (depth 1 in a fresh guard)
            near = min(self._known, key=lambda n: abs(n - n_active), default=None) if n_active else None
            self.level, self._cand = (self._known[near][0], self._known[near][-1]) if near is not None else (
                1, 1)
            self.rate: dict[int, float] = {}
            self.kept: dict[int, float] = {}      # level -> proposals a sequence kept a window (its last span)
            self.hold, self._last_best, self._held = HOLD, None, 0
            other = 0 if self.level else self._cand
            self._try(self.level, other)
            self._todo.append(other)                 # (its rate not known either: measured next)
        self._settle, self._span, self._recent = SETTLE, None, None

    def _switch(self, level: int) -> None:
        if level != self.level:
            self.level, self._settle = level, SETTLE
        self._span = None

    def _try(self, level: int, against: int) -> None:
        """A trial: measure `level`, then decide between it and `against` (whose rate is known)."""
        self._todo, self._pair = [level], (min(level, against), max(level, against))
        self._switch(level)

    @property
    def note(self) -> str:
        """What the guard does, for telemetry: '' while it has nothing to say."""
        d = self.level or self._cand
        if not self.enabled or d not in self.rate or 0 not in self.rate:
            return ""
        state = "on" if self.drafting else "paused"
        depth = f" (depth {d} of {self.top})" if self.top > 1 else ""
        return f"drafts {state}: {self.rate[d]:.0f} tok/s with them{depth}, {self.rate[0]:.0f} without"

    def _measured(self, span: list, now: float) -> None:
        self.rate[self.level] = span[1] / max(now - span[0], 1e-9)
        self.kept[self.level] = span[1] / (span[2] * self._n_active) - 1
        if LOG:
            print(f"draft guard: {self._n_active} active, {f'depth {self.level}' if self.level else 'plain'} "
                  f"{self.rate[self.level]:.0f} tok/s ({span[1]} tokens, {span[2]} windows, "
                  f"{(now - span[0]) * 1e3:.2f} ms)", file=sys.stderr)

    def committed(self, tokens: int, all_decoding: bool, n_active: int, depth: int = 1) -> None:
        """A window came back with `tokens` decode tokens; all_decoding: every slot in it decoded (none read
        a prompt); n_active: the sequences in the slots now; depth: the plan's draft depth (0: no drafts,
        nothing to do; a new one, as Configure sets, starts the guard afresh at it)."""
        if not self.enabled:
            return
        if not depth or depth != self.top:
            self._known.clear()
            self.top = max(depth, 1)
            if self._n_active is not None:
                self._n_active = None
                self._start(None)
            if not depth:
                return
        if n_active != self._n_active:
            self._start(n_active)
            return
        if not self.drafting:
            self.paused_windows += 1
        if not all_decoding:
            self._span, self._settle = None, SETTLE
            return
        if self._settle:
            self._settle -= 1
            return
        now = self.clock()
        if self._span is None:                    # this window's end starts the clock
            self._span, self._recent = [now, 0, 0], [now, 0, 0]
            return
        span, recent = self._span, self._recent
        for s in (span, recent):
            s[1] += tokens
            s[2] += 1
        measured = span[2] >= (DRAFT_SPAN if self.drafting else PLAIN_SPAN) or self._far_behind(span, now)
        if not self._todo:                         # holding the fastest level (its tokens count across requests)
            self._held += tokens / n_active     # (a sequence's: the trials' share of windows the same at any count)
            if self.drafting and recent[2] >= CHECK:     # drafts held: their last CHECK windows' rate
                self._recent = [now, 0, 0]
                if recent[1] / max(now - recent[0], 1e-9) < self.rate[0]:
                    self._measured(recent, now)          # acceptance fell with the text: a lower depth at once
                    self._pair = (0, self.level)
                    self._decide()
                    return
            if self._held < self.hold:
                return
            if measured:
                self._measured(span, now)
            self._try(self._challenger(), self.level)     # held long enough: measure another level again
            return
        if not measured:
            return
        self._measured(span, now)
        self._todo.pop(0)
        if self._todo:                             # the first measurement: now the other level's
            self._switch(self._todo[0])
            return
        self._decide()

    def _challenger(self) -> int:
        """The level measured against the one held for a while (its rate and kept proposals just measured
        over the hold): without drafts, the last depth that was held; with them, twice the depth where it
        _climbs, else half of it, and at depth 1 none. (The rate without
        drafts follows the context and the machine but not the text, so it is measured again less often.)"""
        d = self.level
        if not d:
            return self._cand
        return min(2 * d, self.top) if self._climbs(d) else d // 2

    def _climbs(self, d: int) -> bool:
        """Whether twice depth d is worth measuring: d's last measured windows kept UP of their proposals on
        average (a deeper window may keep more), and the plan goes deeper."""
        return 0 < d < self.top and self.kept.get(d, 0) >= UP * d

    def _far_behind(self, span: list, now: float) -> bool:
        """A span without drafts that has run EARLY windows at a rate drafts are FAR ahead of: it ends there
        (counting model, 4 streams on two stages of an H100, 2026-12-06: drafts 3,598 tok/s, plain 1,620, and
        the PLAIN_SPAN windows of the first trial were 64% of a 128-token bench's windows)."""
        d = self._pair[1]
        return (not self.drafting and span[2] >= EARLY and d in self.rate
                and span[1] / max(now - span[0], 1e-9) * FAR <= self.rate[d])

    def _decide(self) -> None:
        """Both levels of the pair measured: hold the faster (longer while the same level keeps winning), or
        climb from it (_climbs); drafts that lose to none at all are tried again at half their depth before
        they pause."""
        low, high = self._pair
        if self.rate[high] <= self.rate[low] and low == 0 and high > 1:
            self._cand = high // 2
            self._try(self._cand, 0)
            return
        best = high if self.rate[high] > self.rate[low] else low
        if best == high and self._climbs(high):          # a depth that wins and keeps most: twice it, now
            self._try(min(2 * high, self.top), high)
            return
        hold = self.hold * 2 if best == self._last_best else HOLD
        lead = max(self.rate[low], self.rate[high]) / max(min(self.rate[low], self.rate[high]), 1e-9)
        self.hold = min(max(hold, HOLD * FAR_HOLD) if lead >= FAR else hold, HOLD_MAX)
        self._last_best, self._todo, self._held = best, [], 0
        if best:
            self._cand = best
        self._switch(best)
