"""Run a set of requests at once through an EngineClient and collect each one's tokens, text and record."""
from __future__ import annotations

import queue
from dataclasses import dataclass, field

from engine.messages import AddRequest, RequestDone, Telemetry, TokenDelta


@dataclass
class Outcome:
    request_id: str
    tokens: list[int] = field(default_factory=list)
    text: str = ""
    done: RequestDone | None = None


def run_together(client, requests: list[AddRequest], on_telemetry=None) -> dict[str, Outcome]:
    """Submit every request, then read each stream to its end (the client buffers the others)."""
    def listener(msg):
        if isinstance(msg, Telemetry):
            on_telemetry(msg)

    if on_telemetry is not None:
        client.add_listener(listener)
    try:
        handles = [client.submit(r) for r in requests]
        out = {}
        for h in handles:
            o = out[h.request_id] = Outcome(h.request_id)
            for ev in h:
                if isinstance(ev, TokenDelta):
                    o.tokens += ev.token_ids
                    o.text += ev.text
            o.done = h.done
        return out
    finally:
        if on_telemetry is not None:
            client.remove_listener(listener)


def next_telemetry(client, timeout: float = 5.0) -> Telemetry:
    """The next Telemetry the engine publishes."""
    q: queue.Queue = queue.Queue()
    fn = lambda m: isinstance(m, Telemetry) and q.put(m)  # noqa: E731
    client.add_listener(fn)
    try:
        return q.get(timeout=timeout)
    finally:
        client.remove_listener(fn)
