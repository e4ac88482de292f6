"""The engine client: one API over an in-process engine or a supervised worker process.

No torch, no Qt. One reader thread per client takes every message off the transport and routes it:
request messages to their RequestHandle, load messages to the pending load(), Pong to ping(),
everything (telemetry too) to the listeners. Every wait has a short poll that checks liveness, so a
dead engine surfaces as EngineDead (with the worker's last stderr lines) instead of a hang.

State (`client.state`): stopped (no model) -> loading -> ready <-> busy; crashed when the engine dies;
starting while restart() brings up a fresh worker.
"""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import queue
import sys
import threading
import time
from typing import Callable

from engine.messages import (AddRequest, Abort, Configure, EngineConfig, EngineOut, ErrorReply, LoadModel,
                             LoadProgress, MeasureWindows, Ping, Pong, Ready, RequestDone, Telemetry, WindowCosts)

_POLL = 0.1


class EngineFailure(Exception):
    """A typed error from the engine: `reply.kind` is model_file | config | oom | request | protocol | internal."""

    def __init__(self, reply: ErrorReply):
        super().__init__(f"{reply.kind}: {reply.message}")
        self.reply = reply


class EngineDead(EngineFailure):
    """The engine process died or hung; `stderr_tail` holds its last lines of output."""

    def __init__(self, message: str, stderr_tail: str = ""):
        super().__init__(ErrorReply(kind="dead", message=message))
        self.stderr_tail = stderr_tail


_Dead = object()                         # sentinel put in every waiting queue when the engine dies


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + timeout


def _wait(client: "EngineClient", q: queue.Queue, deadline: float | None, what: str):
    """Next item of q; raises EngineDead once the engine is dead, TimeoutError after the deadline."""
    while True:
        left = _POLL if deadline is None else min(_POLL, deadline - time.monotonic())
        try:
            item = q.get(timeout=max(left, 0))
        except queue.Empty:
            if client.error is not None:
                raise client.error from None
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"{what}: no answer from the engine in time") from None
            continue
        if item is _Dead:
            raise client.error
        return item


class RequestHandle:
    """One request's stream: iterate it (sync or `aiter()`), or take `result()`; `done` is its RequestDone."""

    def __init__(self, client: "EngineClient", request_id: str):
        self.request_id = request_id
        self.done: RequestDone | None = None
        self._client = client
        self._q: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._wake: Callable[[], None] | None = None

    def _put(self, item) -> None:
        self._q.put(item)
        with self._lock:
            wake = self._wake
        if wake is not None:
            with contextlib.suppress(RuntimeError):         # the consumer's event loop is closed
                wake()

    def _step(self, item):
        """The item to yield, or None at the end; raises for errors and for a dead engine."""
        if item is _Dead:
            raise self._client.error
        if isinstance(item, ErrorReply):
            raise EngineFailure(item)
        if isinstance(item, RequestDone):
            self.done = item
            return None
        return item

    def __iter__(self):
        while (item := self._step(_wait(self._client, self._q, None, f"request {self.request_id}"))) is not None:
            yield item

    async def aiter(self):
        loop, event = asyncio.get_running_loop(), asyncio.Event()
        with self._lock:
            self._wake = lambda: loop.call_soon_threadsafe(event.set)
        try:
            while self.done is None:
                event.clear()
                try:
                    item = self._q.get_nowait()
                except queue.Empty:
                    self._client._check_alive()
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(event.wait(), _POLL * 5)
                    continue
                if (item := self._step(item)) is None:
                    return
                yield item
        finally:
            with self._lock:
                self._wake = None

    def cancel(self) -> None:
        self._client.abort(self.request_id)

    def result(self, timeout: float | None = None) -> tuple[str, RequestDone]:
        deadline, parts = _deadline(timeout), []
        while self.done is None:
            item = self._step(_wait(self._client, self._q, deadline, f"request {self.request_id}"))
            if item is not None and hasattr(item, "text"):
                parts.append(item.text)
        return "".join(parts), self.done


class EngineClient:
    def __init__(self, transport):
        self.transport = transport
        self.latest_telemetry: Telemetry | None = None
        self.ready: Ready | None = None
        self.state = "stopped"
        self.error: EngineFailure | None = None        # set (an EngineDead) once the engine is dead
        self.last_config: EngineConfig | None = None
        self._handles: dict[str, RequestHandle] = {}
        self._listeners: list[Callable[[EngineOut], None]] = []
        self._state_listeners: list[Callable[[str], None]] = []
        self._pings: dict[int, queue.Queue] = {}
        self._nonces = itertools.count(1)
        self._load_q: queue.Queue | None = None
        self._load_lock = threading.Lock()
        self._lock = threading.Lock()
        self._state_lock = threading.RLock()
        self._closing = False
        self._start_reader()

    # ------------------------------------------------------------ public API
    def load(self, config: EngineConfig, on_progress=None, timeout: float | None = None) -> Ready:
        with self._load_lock:
            self._check_alive()
            self.last_config, self.ready = config, None
            self._load_q = q = queue.Queue()
            self._set_state("loading")
            try:
                self.transport.send(LoadModel(config=config))
                deadline = _deadline(timeout)
                while True:
                    msg = _wait(self, q, deadline, "load")
                    if isinstance(msg, LoadProgress) and on_progress is not None:
                        on_progress(msg)
                    elif isinstance(msg, Ready):
                        return msg
                    elif isinstance(msg, ErrorReply):
                        self._set_state("stopped")
                        raise EngineFailure(msg)
            finally:
                self._load_q = None

    def submit(self, req: AddRequest) -> RequestHandle:
        self._check_alive()
        handle = RequestHandle(self, req.request_id)
        with self._lock:
            self._handles[req.request_id] = handle
        self._update_busy()
        try:
            self.transport.send(req)
        except EngineFailure:
            self._finish(req.request_id)
            raise
        return handle

    def abort(self, request_id: str) -> None:
        if self.error is None:
            self.transport.send(Abort(request_id=request_id))

    def configure(self, msg: Configure) -> None:
        self._check_alive()
        self.transport.send(msg)

    def ping(self, timeout: float = 5.0) -> float:
        """Round trip to the engine and back through this client's reader thread, in seconds."""
        self._check_alive()
        nonce, q = next(self._nonces), queue.Queue()
        self._pings[nonce] = q
        try:
            t0 = time.monotonic()
            self.transport.send(Ping(nonce=nonce))
            _wait(self, q, _deadline(timeout), "ping")
            return time.monotonic() - t0
        finally:
            self._pings.pop(nonce, None)

    def measure_windows(self, rows: list[int], timeout: float = 300.0) -> WindowCosts:
        """What decode windows of these row counts cost by part (engine.window_cost), measured by the engine
        while no request runs (else EngineFailure)."""
        self._check_alive()
        nonce, q = next(self._nonces), queue.Queue()
        self._pings[nonce] = q
        try:
            self.transport.send(MeasureWindows(rows=list(rows), nonce=nonce))
            reply = _wait(self, q, _deadline(timeout), "window costs")
            if reply.error:
                raise EngineFailure(ErrorReply(kind="request", message=reply.error))
            return reply
        finally:
            self._pings.pop(nonce, None)

    def add_listener(self, fn: Callable[[EngineOut], None]) -> None:
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[EngineOut], None]) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(fn)

    def add_state_listener(self, fn: Callable[[str], None]) -> None:
        """fn(state) on every state change, from whichever thread made the change."""
        self._state_listeners.append(fn)

    def restart(self, on_progress=None, timeout: float | None = None) -> Ready | None:
        """A fresh engine (the transport must support restart()) with the last configuration reloaded."""
        self._closing = True
        self._reader.join(2.0)
        self._fail_all(EngineDead("the engine was restarted"))
        self._set_state("starting")
        self.transport.restart()
        self.error, self.ready, self.latest_telemetry, self._closing = None, None, None, False
        self._start_reader()
        self._set_state("stopped")
        return self.load(self.last_config, on_progress, timeout) if self.last_config is not None else None

    def close(self) -> None:
        self._closing = True
        self.transport.close()
        self._reader.join(2.0)
        self._fail_all(EngineDead("the engine client was closed"))
        self._set_state("stopped")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------ reader thread
    def _start_reader(self) -> None:
        self._reader = threading.Thread(target=self._read_loop, name="strata-engine-client", daemon=True)
        self._reader.start()

    def _read_loop(self) -> None:
        while not self._closing:
            try:
                msg = self.transport.recv(_POLL)
            except EngineDead as e:
                return self._die(e)
            if msg is None:
                if not self.transport.alive and not self._closing:
                    reason = getattr(self.transport, "death_reason", "") or "the engine stopped"
                    tail = self.transport.stderr_tail() if hasattr(self.transport, "stderr_tail") else ""
                    return self._die(EngineDead(reason, tail))
                continue
            self._dispatch(msg)

    def _dispatch(self, msg) -> None:
        rid = getattr(msg, "request_id", "")
        if isinstance(msg, Telemetry):
            self.latest_telemetry = msg
        elif rid:
            if (handle := self._handles.get(rid)) is not None:
                handle._put(msg)
                if isinstance(msg, (RequestDone, ErrorReply)):
                    self._finish(rid)
        elif isinstance(msg, (Pong, WindowCosts)):
            if (q := self._pings.get(msg.nonce)) is not None:
                q.put(msg)
        elif isinstance(msg, (LoadProgress, Ready, ErrorReply)):
            if isinstance(msg, Ready):
                self.ready = msg
                self._update_busy()
            if self._load_q is not None:
                self._load_q.put(msg)
        _notify(self._listeners, msg)

    def _die(self, err: EngineDead) -> None:
        with self._state_lock:                           # whoever sees the error also sees "crashed"
            self.state, self.error = "crashed", err
            _notify(self._state_listeners, "crashed")
        self._fail_all(err)

    def _fail_all(self, err: EngineFailure) -> None:
        if self.error is None:
            self.error = err
        with self._lock:
            handles, self._handles = list(self._handles.values()), {}
        for h in handles:
            h._put(_Dead)
        for q in [self._load_q, *self._pings.values()]:
            if q is not None:
                q.put(_Dead)

    # ------------------------------------------------------------ state
    def _check_alive(self) -> None:
        if self.error is not None:
            raise self.error

    def _finish(self, rid: str) -> None:
        with self._lock:
            self._handles.pop(rid, None)
        self._update_busy()

    def _update_busy(self) -> None:
        if self.ready is not None and self.state in ("ready", "busy", "loading"):
            self._set_state("busy" if self._handles else "ready")

    def _set_state(self, state: str) -> None:
        with self._state_lock:                           # listeners see the changes in order
            if state != self.state:
                self.state = state
                _notify(self._state_listeners, state)


def _notify(fns: list[Callable], arg) -> None:
    for fn in list(fns):
        try:
            fn(arg)
        except Exception as e:  # noqa: BLE001 - a bad listener must not kill the reader thread
            print(f"strata: engine listener {fn!r} failed: {e!r}", file=sys.stderr)


def connect_worker(config: EngineConfig | None = None, *, on_progress=None, timeout: float | None = None,
                   **transport_options) -> EngineClient:
    """Spawn a supervised worker process (app/engine_process.py), connect, and load `config` if given."""
    from app.engine_process import WorkerTransport

    client = EngineClient(WorkerTransport(**transport_options))
    if config is not None:
        try:
            client.load(config, on_progress, timeout)
        except BaseException:
            client.close()
            raise
    return client
