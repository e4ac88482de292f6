"""What the monitor plots, computed from Telemetry messages (no Qt).

Each Telemetry message is one tick. Rates of acceptance come from the *deltas* of the monotonic
totals over a sliding window (about one second), so a dropped message loses nothing and the
definitions follow vLLM's spec-decode metrics: acceptance = accepted / offered, per draft position
i = accepted_at_i / offered_at_i; mean accepted length = 1 + accepted / windows.
"""
from __future__ import annotations

from collections import deque

import numpy as np

from engine.messages import SlotState, Telemetry
from ui.ring_buffer import CAPACITY, SeriesSet

WINDOW_S = 1.0
GIB = 1024 ** 3


def _rate(num: int, den: int) -> float:
    return num / den if den > 0 else np.nan


class MonitorData:
    def __init__(self, capacity: int = CAPACITY, window_s: float = WINDOW_S):
        self.data = SeriesSet(capacity)
        self.window_s = window_s
        self._hist: deque[Telemetry] = deque()
        self.latest: Telemetry | None = None
        self.slots: list[SlotState] = []
        self.device_names: dict[str, str] = {}
        self.device_totals: dict[str, int] = {}
        self.ticks = 0
        self.version = 0          # bumps on every change; the view redraws when it moved

    def reset(self) -> None:
        self.data.clear()
        self._hist.clear()
        self.latest = None
        self.slots = []
        self.version += 1

    def add(self, tel: Telemetry) -> None:
        if self.latest is not None and tel.t < self.latest.t:     # a new engine: its clock restarted
            self.reset()
        self._hist.append(tel)
        while len(self._hist) > 2 and tel.t - self._hist[1].t >= self.window_s:
            self._hist.popleft()
        base = self._hist[0]
        values: dict[str, float] = {}
        for i, b in enumerate(tel.stage_busy):
            values[f"stage:{i}"] = 100.0 * b
        values["accept"] = _rate(tel.drafts_accepted_total - base.drafts_accepted_total,
                                 tel.drafts_offered_total - base.drafts_offered_total)
        for i, (off, acc) in enumerate(zip(tel.drafts_offered_by_pos, tel.drafts_accepted_by_pos)):
            b_off = base.drafts_offered_by_pos[i] if i < len(base.drafts_offered_by_pos) else 0
            b_acc = base.drafts_accepted_by_pos[i] if i < len(base.drafts_accepted_by_pos) else 0
            values[f"accept_pos:{i + 1}"] = _rate(acc - b_acc, off - b_off)
        values["tok_s"] = tel.tok_s
        values["prompt_tok_s"] = tel.prompt_tok_s
        for s in tel.slots:
            values[f"slot_tok_s:{s.slot}"] = s.tok_s if s.state == "decoding" else 0.0
        values["tokens_per_window"] = tel.tokens_per_window if tel.windows_total else np.nan
        for m in tel.memory:
            values[f"mem:{m.device}"] = m.used_bytes / GIB
            self.device_names[m.device] = m.name
            self.device_totals[m.device] = m.total_bytes
        self.data.tick(tel.t, values)
        self.latest = tel
        self.slots = list(tel.slots)
        self.ticks += 1
        self.version += 1

    # ------------------------------------------------------------ for the view
    def x(self) -> np.ndarray:
        """Seconds relative to the newest sample (all <= 0)."""
        t = self.data.time.values()
        return t - t[-1] if len(t) else t

    def series(self, name: str) -> np.ndarray:
        buf = self.data.series.get(name)
        return buf.values() if buf is not None else np.array([])

    def names(self, prefix: str) -> list[str]:
        return self.data.names(prefix)

    def totals_text(self) -> str:
        t = self.latest
        if t is None:
            return "no telemetry yet"
        parts = [f"{t.tok_s:.1f} tok/s", f"{t.tokens_total} tokens",
                 f"{t.requests_total} request{'s' if t.requests_total != 1 else ''}"]
        if t.drafts_offered_total:
            acc = t.drafts_accepted_total / t.drafts_offered_total
            mean_len = 1 + t.drafts_accepted_total / t.windows_total if t.windows_total else float("nan")
            parts.append(f"drafts {t.drafts_accepted_total}/{t.drafts_offered_total} accepted ({acc:.0%}), "
                         f"mean accepted length {mean_len:.2f}")
        if t.draft_guard:                   # engine.draft_guard: drafts paused where they cost more than they give
            parts.append(t.draft_guard)
        if t.queue_depth:
            parts.append(f"{t.queue_depth} queued")
        return " · ".join(parts)
