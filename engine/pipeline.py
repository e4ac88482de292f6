"""The stages as a pipeline: one executor per stage, windows handed from stage to stage.

Every stage has its own worker thread (and, on a GPU, its own CUDA stream). A window is a list of
rows; stage k runs all of the window's tiles through its layers, then hands the hidden states to
stage k+1 and is free for the next window, so while stage k+1 runs group g's window stage k runs
group g+1's. The last stage computes the logits and calls the window's `finish` function in its
own thread, so the verdict and the drafter of group g run while other windows occupy the earlier
stages. The host never waits on a whole device: it waits on one window's future.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import torch

from engine.block import Tile
from engine.stage import Stage


@dataclass
class Rows:
    """The rows of one window, padded to whole tiles. Rows [0, n) are real."""
    tokens: torch.Tensor      # [N] long
    slot: torch.Tensor        # [N] long
    pos: torch.Tensor         # [N] long
    n: int
    tile_rows: int

    @classmethod
    def build(cls, tokens: list[int], slots: list[int], positions: list[int], tile_rows: int, scratch_slot: int):
        n = len(tokens)
        pad = -n % tile_rows
        return cls(torch.tensor(tokens + [0] * pad, dtype=torch.long),
                   torch.tensor(slots + [scratch_slot] * pad, dtype=torch.long),
                   torch.tensor(positions + [0] * pad, dtype=torch.long), n, tile_rows)

    def tiles(self):
        T = self.tile_rows
        for a in range(0, self.tokens.shape[0], T):
            yield a, Tile(self.slot[a:a + T], self.pos[a:a + T], max(0, min(T, self.n - a)))


class BusyMeter:
    """Per-stage busy time: a monotonic total and the share of the last second."""

    def __init__(self):
        self.total = 0.0
        self._spans: deque = deque()
        self._lock = threading.Lock()

    def add(self, start: float, end: float) -> None:
        with self._lock:
            self.total += end - start
            self._spans.append((start, end))

    def recent(self, window: float = 1.0) -> float:
        now = time.monotonic()
        lo = now - window
        with self._lock:
            while self._spans and self._spans[0][1] < lo:
                self._spans.popleft()
            busy = sum(min(e, now) - max(s, lo) for s, e in self._spans)
        return max(0.0, min(1.0, busy / window))


class Pipeline:
    def __init__(self, stages: list[Stage], tile_rows: int):
        self.stages, self.tile_rows = stages, tile_rows
        self.executors = [ThreadPoolExecutor(1, thread_name_prefix=f"stage{s.index}") for s in stages]
        self.busy = [BusyMeter() for _ in stages]
        self.streams = [torch.cuda.Stream(s.device) if s.device.type == "cuda" else None for s in stages]

    @property
    def scratch_slot(self) -> int:
        return self.stages[0].scratch_slot

    def submit(self, rows: Rows, finish: Callable[[torch.Tensor, Callable], object]) -> Future:
        """Queue a window on stage 0. `finish(hidden, logits_of)` runs on the last stage's thread;
        `logits_of(row_indices)` gives float32 CPU logits of those rows. Returns its result's future."""
        fut: Future = Future()
        self.executors[0].submit(self._run_stage, 0, rows, None, None, finish, fut)
        return fut

    def _run_stage(self, k: int, rows: Rows, x, event, finish, fut: Future) -> None:
        if fut.done():
            return
        stage, stream = self.stages[k], self.streams[k]
        t0 = time.monotonic()
        try:
            with torch.cuda.stream(stream) if stream is not None else _nullctx():
                if event is not None:
                    stream.wait_event(event)
                if x is None:
                    x = stage.embed(rows.tokens)
                else:
                    x = x.to(stage.device, non_blocking=True)
                with torch.inference_mode():
                    outs = [stage.forward(x[a:a + rows.tile_rows], tile) for a, tile in rows.tiles()]
                    y = torch.cat(outs) if len(outs) > 1 else outs[0]
                if k + 1 < len(self.stages):
                    ev = None
                    if stream is not None:
                        ev = torch.cuda.Event()
                        ev.record(stream)
                    self.executors[k + 1].submit(self._run_stage, k + 1, rows, y, ev, finish, fut)
                else:
                    result = finish(y, lambda idx: self._logits(stage, rows, y, idx))
                    fut.set_result(result)
        except BaseException as e:  # noqa: BLE001 - handed to the waiting scheduler
            if not fut.done():
                fut.set_exception(e)
        finally:
            if stream is not None:
                stream.synchronize()
            self.busy[k].add(t0, time.monotonic())

    def _logits(self, stage: Stage, rows: Rows, y: torch.Tensor, idx: list[int]) -> torch.Tensor:
        """Logits for the given rows, computed per whole tile (row-invariant), returned on the CPU."""
        T = rows.tile_rows
        out = {}
        with torch.inference_mode():
            for a in sorted({i // T * T for i in idx}):
                lg = stage.logits(y[a:a + T]).cpu()
                for i in idx:
                    if a <= i < a + T:
                        out[i] = lg[i - a]
        return torch.stack([out[i] for i in idx]) if idx else torch.empty(0)

    def score(self, tokens: list[int], slot: int = 0, start: int = 0) -> torch.Tensor:
        """Logits [n, vocab] at every row of one slot's tokens (tests and scoring; uses the slot's KV)."""
        rows = Rows.build(tokens, [slot] * len(tokens), list(range(start, start + len(tokens))),
                          self.tile_rows, self.scratch_slot)
        return self.submit(rows, lambda h, logits_of: logits_of(list(range(len(tokens))))).result()

    def close(self) -> None:
        for ex in self.executors:
            ex.shutdown(wait=True, cancel_futures=True)


class _nullctx:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False
