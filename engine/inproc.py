"""The engine in this process, behind the same send/recv interface as the worker-process client.

Used by tests, `strata bench` and `strata generate`. The engine loop runs on its own thread.
"""
from __future__ import annotations

import queue
import threading

from engine.messages import EngineIn, EngineOut, Shutdown


class InProcessEngine:
    def __init__(self, telemetry_hz: float = 10.0):
        from engine.core import EngineCore, run_engine_loop

        self._inbox: queue.Queue = queue.Queue()
        self._outbox: queue.Queue = queue.Queue()
        self.core = EngineCore(self._outbox.put)
        self._thread = threading.Thread(
            target=run_engine_loop, args=(self.core, self._get, telemetry_hz), name="strata-engine", daemon=True)
        self._thread.start()

    def _get(self, timeout: float | None):
        try:
            return self._inbox.get(timeout=timeout) if timeout != 0 else self._inbox.get_nowait()
        except queue.Empty:
            return None

    def send(self, msg: EngineIn) -> None:
        self._inbox.put(msg)

    def recv(self, timeout: float | None = None) -> EngineOut | None:
        """Next message from the engine, or None after `timeout` seconds."""
        try:
            return self._outbox.get(timeout=timeout)
        except queue.Empty:
            return None

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def close(self, timeout: float = 10.0) -> None:
        if self._thread.is_alive():
            self._inbox.put(Shutdown())
            self._thread.join(timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
