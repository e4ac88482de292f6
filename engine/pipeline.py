"""The stages as a pipeline: one executor per stage, windows handed from stage to stage.

Every stage has its own worker thread (and, on a GPU, its own CUDA stream). A window is a list of
rows; stage k runs all of the window's tiles through its layers, then hands the hidden states to
stage k+1 and is free for the next window, so while stage k+1 runs group g's window stage k runs
group g+1's. The last stage computes the logits and calls the window's `finish` function in its
own thread, so the verdict and the drafter of group g run while other windows occupy the earlier
stages. The host never waits on a whole device: it waits on one window's future.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import torch

from engine import cpu_thread
from engine.block import Tile
from engine.graphs import first_of_run, on_device, rows_at
from engine.stage import Stage

CHAIN_POLL_S = 2e-4      # how often a chained window waiting for its successor looks at its own kernels


@dataclass(frozen=True)
class TileSizes:
    """Rows per tile for each kind of row, and how many prompt rows a slot reads per window. A row's kind
    depends only on the row itself (is its position inside its request's prompt?), so a row is always
    computed at the same tile size whatever else runs.
    CPU: prompt rows in 32-row GEMMs (measured here: 17 us per row against 26 at 16 rows, while a short
    prompt still fits one tile), decode rows one per call (a lone decode is not padded at all); in the
    fast mode (int4 matrices, Stage.rows_free) prompt rows take 128-row tiles (the int4 kernel's rows per
    unpacked weight; a tile's real rows only) and decode rows share 8-row tiles (a lone one: 1 row).
    GPU: prompt rows in 512-row tiles, decode rows in 16-row tiles (a lone one in a 1-row tile), each
    size its own CUDA graph. Prompt tiles dequantize each weight once for the tile and multiply on
    cuBLAS (engine.kernels.stream_matmul.PROMPT_KERNEL; a row's result is its own at the tile's fixed
    size), decode tiles run the int8 kernel (engine.kernels.dp4a_gemv; the tile's real rows only,
    row-invariant at any row count, so a decode tile's head may stop at its last wanted row)."""
    prompt: int
    decode: int
    chunk: int                     # prompt rows a slot reads per window
    same_numerics: bool = False    # a row's result is the same at either tile size
    # GPU: a decode row alone in its tile runs in a 1-row tile instead (its own graph), where the int8
    # kernel takes one x row per pass; a row's bits are the same in either tile (engine.kernels.dp4a_gemv)
    solo: int = 0

    def decode_sizes(self) -> set[int]:
        return {self.decode, self.solo} - {0}

    def tiles(self, n: int, prompt: bool) -> list[tuple[int, int, int]]:
        """(first row, tile rows, real rows) of the tiles that hold n rows of one kind: prompt or decode
        tiles, a lone decode row in the solo tile where there is one."""
        size = self.prompt if prompt else self.decode
        out = []
        for a in range(0, n, size):
            real = min(size, n - a)
            out.append((a, self.solo if not prompt and real == 1 and self.solo else size, real))
        return out


class WindowLogits:
    """A window's logits_of (see Pipeline.submit): the logits of the given real rows, made once per row
    list (a chained window's pick and the verdicts ask for the same rows), and their greedy argmax on
    the device, also made once."""

    def __init__(self, make: Callable[[list[int]], torch.Tensor]):
        self._make = make
        self._made: dict[tuple, torch.Tensor] = {}

    def __call__(self, idx: list[int]) -> torch.Tensor:
        key = tuple(idx)
        if key not in self._made:
            self._made[key] = self._make(list(idx))
        return self._made[key]

    def argmax(self, idx: list[int]) -> torch.Tensor:
        key = ("argmax", *idx)
        if key not in self._made:
            with torch.inference_mode():
                self._made[key] = torch.argmax(self(idx), dim=-1)
        return self._made[key]

    def picks(self, idx: list[int], params: torch.Tensor | None) -> torch.Tensor:
        """The rows' picks on the device, made as the window's verdicts would make them from these logits
        (they take them from here: made_picks): their argmax, or (params: engine.kernels.sample's on the
        host, row i for idx[i]) the seeded sampler's at the sampled rows (1 / temperature > 0) and the
        argmax at the greedy ones."""
        key = ("picks", *idx)
        if key not in self._made:
            greedy = params[:, 1] == 0 if params is not None else None
            if greedy is None or bool(greedy.all()):
                self._made[key] = self.argmax(idx)
            else:
                from engine.kernels import sample
                with torch.inference_mode():
                    logits = self(idx)
                    picks = sample.sample(logits, on_device(params, logits.device)).long()
                    if bool(greedy.any()):
                        picks = torch.where(on_device(greedy, logits.device), self.argmax(idx), picks)
                self._made[key] = picks
        return self._made[key]

    def made_picks(self, idx: list[int]) -> torch.Tensor | None:
        """The rows' picks if `picks` made them (a chaining window's), else None."""
        return self._made.get(("picks", *idx))


@dataclass
class Rows:
    """The rows of one window packed into fixed-size tiles: the prompt rows' tiles first, then the
    decode rows' tiles (a slot's prompt positions always precede its decode positions)."""
    tokens: torch.Tensor      # [N] long, padded
    slot: torch.Tensor        # [N] long
    pos: torch.Tensor         # [N] long
    n: int                    # real rows
    bounds: list[tuple[int, int, int]]   # (start, size, real rows) of each tile
    index: list[int]          # padded index of real row i (rows keep their given order within a kind)
    # chaining (Pipeline.chain): a window whose rows are all device picks (greedy, or sampled there:
    # `pick_params`) leaves them on the device
    # (`picks`, for the real rows `pick_idx`) and a window built on it (`feed`) embeds them as its tokens
    pick_idx: list[int] | None = None
    pick_params: torch.Tensor | None = None   # sampled picks: engine.kernels.sample's params, on the host
                                              # (None: argmax)
    picks: torch.Tensor | None = None
    feed: Rows | None = None
    successor: tuple | None = None       # (rows, finish, future) queued on this window, not launched yet
    pre: tuple | None = None             # (y, made, marks): launched early, while its feeding window finished
    decode_from: int = 0                 # the padded index where the decode rows' tiles begin
    keep: Callable | None = None         # keep(hidden): called on the last stage before a successor is queued
    # chained draft windows (engine.draft_chain): device_next(hidden, logits_of) queues the window's verdict
    # and the drafter on the device and returns the next window's token ids and positions there (`picks`,
    # `next_pos`, for its real rows), so a window built on this one needs no host wait
    device_next: Callable | None = None
    next_pos: torch.Tensor | None = None

    @classmethod
    def build(cls, tokens: list[int], slots: list[int], positions: list[int], sizes: TileSizes,
              scratch_slot: int, is_prompt: list[bool] | None = None):
        kinds = is_prompt if is_prompt is not None else [True] * len(tokens)
        toks, sl, ps, bounds, index = [], [], [], [], [0] * len(tokens)
        decode_from = 0
        for want in (True, False):
            rows = [i for i, k in enumerate(kinds) if k == want]
            decode_from = len(toks)
            for a, n, real in sizes.tiles(len(rows), want):
                chunk = rows[a:a + real]
                start = len(toks)
                for j, i in enumerate(chunk):
                    index[i] = start + j
                pad = n - len(chunk)
                toks += [tokens[i] for i in chunk] + [0] * pad
                sl += [slots[i] for i in chunk] + [scratch_slot] * pad
                ps += [positions[i] for i in chunk] + [0] * pad
                bounds.append((start, n, len(chunk)))
        t = lambda v: torch.tensor(v, dtype=torch.long)  # noqa: E731
        return cls(t(toks), t(sl), t(ps), len(tokens), bounds, index, decode_from=decode_from)

    def tiles(self):
        for a, size, real in self.bounds:
            yield a, size, Tile(self.slot[a:a + size], self.pos[a:a + size], real, per_row=a >= self.decode_from)


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


def fed_in(fed: tuple[list[int], torch.Tensor] | None, a: int, size: int):
    """The part of fed (padded row numbers, device token ids) that lands in the tile [a, a + size), with
    row numbers counted from a; None where none does."""
    if fed is None:
        return None
    at, ids = fed
    first = first_of_run(at)
    if first is not None:               # consecutive rows: the overlap, a slice of ids
        lo, hi = max(a, first), min(a + size, first + len(at))
        return (list(range(lo - a, hi - a)), ids[lo - first:hi - first]) if lo < hi else None
    inside = [i for i, p in enumerate(at) if a <= p < a + size]
    if not inside:
        return None
    sel = ids[on_device(inside, ids.device)] if len(inside) < len(at) else ids
    return [at[i] - a for i in inside], sel


def chain_mode(devices: list[str]) -> bool:
    """Whether decode windows whose picks the device makes (greedy; sampled where engine.window.samples_on)
    chain on the device (STRATA_CHAIN=auto|1|0): one stage only; by
    default on a GPU, where it hides the host's part of every step behind the next window's kernels (on a
    CPU it saves nothing: the tests turn it on there to check the logic)."""
    mode = os.environ.get("STRATA_CHAIN", "auto")
    if len(devices) != 1 or mode == "0":
        return False
    return mode == "1" or devices[0].startswith("cuda")


class Pipeline:
    def __init__(self, stages: list[Stage], tiles: TileSizes, cpu_threads: int = 0, lone_cpu: bool = False):
        """cpu_threads: intra-op threads of each CPU stage's thread (0: torch's default). lone_cpu: the one
        stage runs on engine.cpu_thread's thread (the one that loaded it), which outlives the pipeline."""
        self.stages, self.tiles = stages, tiles
        self.shared = cpu_thread.executor() if lone_cpu else None
        self.closed = False
        if self.shared is not None:
            if cpu_threads:
                cpu_thread.on_compute_thread(torch.set_num_threads, cpu_threads)
            self.executors = [self.shared]
        else:
            self.executors = [ThreadPoolExecutor(1, thread_name_prefix=f"stage{s.index}",
                                                 initializer=torch.set_num_threads if s.device.type == "cpu"
                                                 and cpu_threads else None, initargs=(cpu_threads,))
                              for s in stages]
        self.busy = [BusyMeter() for _ in stages]
        self.streams = [torch.cuda.Stream(s.device) if s.device.type == "cuda" else None for s in stages]
        # the finish of a window whose successor is already queued runs on a side stream, so that its
        # host copies wait for its own kernels and not for the successor's
        self.side = [torch.cuda.Stream(s.device) if s.device.type == "cuda" else None for s in stages]
        self.chain = chain_mode([str(s.device) for s in stages])
        self._chain_cond = threading.Condition()
        # chained windows launched while their feeding window's kernels still ran (the device never ran
        # dry between them), and those that came after it had ended (the host's part of a window was
        # longer than the window's kernels): monotonic counts, for the telemetry
        self.chained = [0, 0]

    @property
    def scratch_slot(self) -> int:
        return self.stages[0].scratch_slot

    def submit(self, rows: Rows, finish: Callable[[torch.Tensor, Callable], object], feed: Rows | None = None) -> Future:
        """Queue a window on stage 0. `finish(hidden, logits_of)` runs on the last stage's thread;
        `logits_of(row_indices)` gives float32 logits of those rows, on the last stage's device (a greedy
        pick then moves one integer to the host, not a vocabulary of floats). Returns its result's future.
        feed (with `chain`): a window still in flight, one device pick row per slot, whose picks are this
        window's tokens (one row per slot, in the same order); the stage thread launches this window's
        kernels as soon as feed's are queued, before feed's picks reach the host."""
        fut: Future = Future()
        if feed is not None:
            rows.feed = feed
            with self._chain_cond:
                feed.successor = (rows, finish, fut)
                self._chain_cond.notify_all()
        self.executors[0].submit(self._run_stage, 0, rows, None, None, finish, fut)
        return fut

    def _launch(self, k: int, rows: Rows, x, event) -> tuple:
        """Queue a window's work on stage k (its stream current): (y, logits made by graphs, busy marks)."""
        stage, stream = self.stages[k], self.streams[k]
        marks = None
        if event is not None:
            stream.wait_event(event)
        if stream is not None:      # GPU busy time: events around this window's work on the stream
            marks = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            marks[0].record(stream)
        fed = fed_pos = None
        if x is None and rows.feed is not None:      # the feeding window's picks, on the device, at the real rows
            fed = (rows.index, rows.feed.picks)
            if rows.feed.next_pos is not None:       # and a chained draft window's positions
                fed_pos = (rows.index, rows.feed.next_pos)
            rows.feed = None               # (windows would otherwise hold every earlier one of a chain)
        elif x is not None:
            x = x.to(stage.device, non_blocking=True)
        with torch.inference_mode():
            # the first stage embeds each tile's token ids itself (inside the tile's graph where it has one)
            outs = [stage.forward_logits(x[a:a + size], tile) if x is not None else
                    stage.forward_logits(None, tile, rows.tokens[a:a + size], fed_in(fed, a, size),
                                         fed_in(fed_pos, a, size))
                    for a, size, tile in rows.tiles()]
            y = torch.cat([o[0] for o in outs]) if len(outs) > 1 else outs[0][0]
            # logits the graphs already made (last stage, decode tiles), by tile start
            made = {a: o[1] for (a, _, _), o in zip(rows.bounds, outs) if o[1] is not None}
        return y, made, marks

    def _run_stage(self, k: int, rows: Rows, x, event, finish, fut: Future) -> None:
        if self.closed and not fut.done():
            fut.set_exception(RuntimeError("the model was unloaded"))
        if fut.done():
            return
        stage, stream = self.stages[k], self.streams[k]
        t0 = time.monotonic()
        marks = done = None
        try:
            with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                if rows.pre is not None:
                    y, made, marks = rows.pre
                    rows.pre = None
                else:
                    if rows.feed is not None:
                        self.chained[1] += 1
                    y, made, marks = self._launch(k, rows, x, event)
                if k + 1 < len(self.stages):
                    ev = None
                    if stream is not None:
                        ev = torch.cuda.Event()
                        ev.record(stream)
                    self.executors[k + 1].submit(self._run_stage, k + 1, rows, y, ev, finish, fut)
                else:
                    hidden = rows_at(y, rows.index)
                    if rows.keep is not None:         # (a chained successor overwrites a graph's y)
                        rows.keep(hidden)
                    logits_of = WindowLogits(lambda idx: self._logits(stage, rows, y, idx, made))
                    nxt = None
                    if self.chain and (rows.pick_idx is not None or rows.device_next is not None):
                        if rows.device_next is not None:      # a draft window's verdict and drafts, queued
                            rows.picks, rows.next_pos = rows.device_next(hidden, logits_of)
                        else:
                            rows.picks = logits_of.picks(rows.pick_idx, rows.pick_params)
                        if stream is not None:
                            marks[1].record(stream)
                            done = torch.cuda.Event()
                            done.record(stream)
                        nxt = self._successor(rows, done)
                        if nxt is not None:
                            nrows, nfinish, nfut = nxt
                            try:
                                self.chained[0] += 1
                                nrows.pre = self._launch(k, nrows, None, None)
                            except BaseException as e:  # noqa: BLE001 - the successor's own failure
                                nfut.set_exception(e)
                    if nxt is not None and stream is not None:
                        side = self.side[k]
                        with torch.cuda.stream(side):
                            side.wait_event(done)
                            result = finish(hidden, logits_of)
                    else:
                        result = finish(hidden, logits_of)
                    fut.set_result(result)
        except BaseException as e:  # noqa: BLE001 - handed to the waiting scheduler
            if not fut.done():
                fut.set_exception(e)
        finally:
            if stream is not None:
                if done is None:
                    if marks is not None:
                        marks[1].record(stream)
                    stream.synchronize()
                else:                       # this window's own work, not its successor's
                    done.synchronize()
            t1 = time.monotonic()
            if marks is not None and marks[1].query():
                # the stage's GPU time, placed at the end of the host span (what the monitor shows)
                self.busy[k].add(max(t0, t1 - marks[0].elapsed_time(marks[1]) / 1e3), t1)
            else:
                self.busy[k].add(t0, t1)

    def _successor(self, rows: Rows, done) -> tuple | None:
        """The window queued on top of a chained one, taken off it to launch now. The scheduler queues it
        once it has committed the window before this one, which it can do only when that window's kernels
        end, so a few hundred us after this one's began: on a GPU (done: this window's end on its
        stream) wait for it while this window's kernels run, so that the device never runs dry between
        windows; stop when they end (then no successor is coming soon, or the device is idle anyway)."""
        with self._chain_cond:
            while rows.successor is None and done is not None and not done.query():
                self._chain_cond.wait(CHAIN_POLL_S)
            nxt, rows.successor = rows.successor, None
        return nxt

    def _logits(self, stage: Stage, rows: Rows, y: torch.Tensor, idx: list[int],
                made: dict | None = None) -> torch.Tensor:
        """Logits of the given (real) rows, computed per whole tile (row-invariant), on the stage's device.
        made: the logits a tile's graph already computed (its real rows), by tile start."""
        at = [rows.index[i] for i in idx]
        first = first_of_run(at)
        if made and first is not None:          # one tile's graph made them all, in order: a view
            for start, size, _ in rows.bounds:
                if start in made and start <= first and first + len(at) <= start + size:
                    return made[start][first - start:first - start + len(at)]
        want = set(at)
        out = {}
        with torch.inference_mode():
            for a, size, _ in rows.bounds:
                inside = sorted(p for p in want if a <= p < a + size)
                if inside and made and a in made:
                    first, last = inside[0] - a, inside[-1] - a
                    lg = (made[a][first:last + 1] if last - first + 1 == len(inside)
                          else made[a][on_device(inside, made[a].device) - a])
                    out.update(zip(inside, lg))
                elif inside and stage.row_count_free:      # the wanted rows only, at the tile's row count
                    out.update(zip(inside, stage.logits(y[on_device(inside, y.device)], rows=size)))
                elif inside:   # the head runs on the whole tile; only the wanted rows travel to the host
                    # (a decode tile's rows are row-invariant at any count: stop at the last wanted row)
                    end = a + size if size not in self.tiles.decode_sizes() else inside[-1] + 1
                    lg = stage.logits(y[a:end])[on_device(inside, y.device) - a]
                    out.update(zip(inside, lg))
        return torch.stack([out[rows.index[i]] for i in idx]) if idx else torch.empty(0)

    def score(self, tokens: list[int], slot: int = 0, start: int = 0) -> torch.Tensor:
        """Logits [n, vocab] at every row of one slot's tokens (tests and scoring; uses the slot's KV)."""
        rows = Rows.build(tokens, [slot] * len(tokens), list(range(start, start + len(tokens))),
                          self.tiles, self.scratch_slot)
        return self.submit(rows, lambda h, logits_of: logits_of(list(range(len(tokens)))).cpu()).result()

    def score_hidden(self, tokens: list[int], slot: int = 0, then: Callable | None = None):
        """(last stage's hidden states [n, d] before the output norm, float32 logits [n, vocab]) at every
        row of one slot's tokens from position 0 (what a nextn layer joins, and the trunk's picks), on the
        host; or then(hidden, logits) run where they are, on the last stage's thread (a GPU's vocabulary
        of floats per row need not travel)."""
        rows = Rows.build(tokens, [slot] * len(tokens), list(range(len(tokens))), self.tiles, self.scratch_slot)
        every = list(range(len(tokens)))
        then = then or (lambda h, lg: (h.cpu(), lg.cpu()))
        return self.submit(rows, lambda h, logits_of: then(h.float(), logits_of(every))).result()

    def close(self) -> None:
        """Windows not started never run (their futures fail); returns when the one running has ended."""
        self.closed = True
        for ex in self.executors:
            if ex is self.shared:
                cpu_thread.on_compute_thread(lambda: None)      # after what it already holds
            else:
                ex.shutdown(wait=True, cancel_futures=True)
