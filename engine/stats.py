"""Engine figures as data: monotonic totals, last-second rates, per-slot state; and the events that
carry a request's progress to its client. The same names everywhere (PIPED_MTP.md, Figures)."""
from __future__ import annotations

import time
from collections import deque

from engine.messages import PromptProgress, RequestDone, SlotState, Telemetry, TokenDelta
from engine.sequence import Sequence

MAX_DRAFT_POS = 16


class Rate:
    """Events in the last `window` seconds."""

    def __init__(self, window: float = 1.0):
        self.window, self._ev = window, deque()

    def add(self, n: float, now: float | None = None) -> None:
        self._ev.append((now or time.monotonic(), n))

    def per_s(self, now: float | None = None) -> float:
        now = now or time.monotonic()
        while self._ev and self._ev[0][0] < now - self.window:
            self._ev.popleft()
        return sum(n for _, n in self._ev) / self.window


class EngineStats:
    def __init__(self, n_slots: int):
        self.tokens_total = self.prompt_tokens_total = self.requests_total = self.windows_total = 0
        self.rows_total = 0
        self.window_rate, self.row_rate = Rate(), Rate()
        self.drafts_offered_total = self.drafts_accepted_total = 0
        self.offered_by_pos = [0] * MAX_DRAFT_POS
        self.accepted_by_pos = [0] * MAX_DRAFT_POS
        self.tok_rate, self.prompt_rate = Rate(), Rate()
        self.slot_window_rate = Rate()
        self.slot_rates = [Rate(2.0) for _ in range(n_slots)]

    # ---------------------------------------------------------------- events
    def admitted(self, seq: Sequence, emit) -> None:
        if seq.stats.cached:
            emit(PromptProgress(request_id=seq.request_id, read=seq.stats.cached, total=seq.prompt_len,
                                cached=seq.stats.cached))

    def prompt_read(self, seq: Sequence, n: int, read: int, emit) -> None:
        self.prompt_tokens_total += n
        self.prompt_rate.add(n)
        emit(PromptProgress(request_id=seq.request_id, read=read, total=seq.prompt_len, cached=seq.stats.cached))

    def window(self, n_rows: int) -> None:
        self.windows_total += 1
        self.rows_total += n_rows
        self.window_rate.add(1)
        self.row_rate.add(n_rows)

    def decoded(self, seq: Sequence, slot: int, taken: list[int], offered: int, accepted: int, emit) -> None:
        seq.stats.windows += 1
        seq.stats.drafts_offered += offered
        seq.stats.drafts_accepted += accepted
        self.drafts_offered_total += offered
        self.drafts_accepted_total += accepted
        for i in range(min(offered, MAX_DRAFT_POS)):
            self.offered_by_pos[i] += 1
            if i < accepted:
                self.accepted_by_pos[i] += 1
        self.tokens_total += len(taken)
        self.tok_rate.add(len(taken))
        self.slot_window_rate.add(1)
        self.slot_rates[slot].add(len(taken))
        text = seq.take_text()
        if taken or text:
            emit(TokenDelta(request_id=seq.request_id, token_ids=taken, text=text))

    def finish(self, seq: Sequence, slot: int, emit) -> None:
        st = seq.stats
        st.t_done = time.monotonic()
        self.requests_total += 1
        text = seq.take_text()
        if text:
            emit(TokenDelta(request_id=seq.request_id, token_ids=[], text=text))
        t_start = st.t_start or st.t_arrive
        emit(RequestDone(
            request_id=seq.request_id, finish_reason=seq.finish_reason or "stop", prompt_tokens=seq.prompt_len,
            cached_tokens=st.cached, completion_tokens=seq.n_generated,
            ttft_s=(st.t_first - st.t_arrive) if st.t_first else 0.0,
            prompt_s=((st.t_first or st.t_done) - t_start), decode_s=(st.t_done - st.t_first) if st.t_first else 0.0,
            drafts_offered=st.drafts_offered, drafts_accepted=st.drafts_accepted, windows=st.windows,
            slot=slot, error=seq.error, logits=seq.logits or []))

    # ---------------------------------------------------------------- telemetry
    @staticmethod
    def _per(num: Rate, den: Rate) -> float:
        d = den.per_s()
        return num.per_s() / d if d else 0.0

    def slot_states(self, slots) -> list[SlotState]:
        out = []
        for s in slots:
            seq = s.seq
            st = SlotState(slot=s.index, group=s.group, state="idle", position=s.n_cached)
            if seq is not None:
                st.request_id = seq.request_id
                st.state = "reading" if s.reading else "decoding"
                st.prompt_read, st.prompt_total = min(s.n_cached, seq.prompt_len), seq.prompt_len
                st.generated = seq.n_generated
                st.tok_s = self.slot_rates[s.index].per_s()
                st.drafts_offered, st.drafts_accepted = seq.stats.drafts_offered, seq.stats.drafts_accepted
            out.append(st)
        return out

    def telemetry(self, state: str, busy: list[float], busy_total: list[float], slots, queue_depth: int,
                  memory, chained: tuple[int, int] = (0, 0), guard=None) -> Telemetry:
        n = max((i + 1 for i, v in enumerate(self.offered_by_pos) if v), default=0)
        return Telemetry(
            t=time.monotonic(), state=state, stage_busy=busy, stage_busy_s_total=busy_total,
            tok_s=self.tok_rate.per_s(), prompt_tok_s=self.prompt_rate.per_s(), tokens_total=self.tokens_total,
            prompt_tokens_total=self.prompt_tokens_total, requests_total=self.requests_total,
            windows_total=self.windows_total, drafts_offered_total=self.drafts_offered_total,
            drafts_accepted_total=self.drafts_accepted_total, drafts_offered_by_pos=self.offered_by_pos[:n],
            drafts_accepted_by_pos=self.accepted_by_pos[:n],
            tokens_per_window=self._per(self.tok_rate, self.slot_window_rate),
            rows_total=self.rows_total, rows_per_window=self._per(self.row_rate, self.window_rate),
            chained_total=chained[0], chained_late_total=chained[1],
            drafts_paused_total=guard.paused_windows if guard else 0, draft_guard=guard.note if guard else "",
            slots=self.slot_states(slots), queue_depth=queue_depth, memory=memory)
