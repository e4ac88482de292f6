"""Run a set of requests at once on a LocalEngine and collect each one's tokens, text and record."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from engine.messages import AddRequest, ErrorReply, RequestDone, Telemetry, TokenDelta


@dataclass
class Outcome:
    request_id: str
    tokens: list[int] = field(default_factory=list)
    text: str = ""
    done: RequestDone | None = None
    t_first: float = 0.0


def run_together(engine, requests: list[AddRequest], on_telemetry=None) -> dict[str, Outcome]:
    out = {r.request_id: Outcome(r.request_id) for r in requests}
    for r in requests:
        engine.submit(r)
    pending = set(out)
    for msg in engine.events():
        if isinstance(msg, TokenDelta) and msg.request_id in out:
            o = out[msg.request_id]
            o.tokens += msg.token_ids
            o.text += msg.text
            if msg.token_ids and not o.t_first:
                o.t_first = time.monotonic()
        elif isinstance(msg, RequestDone) and msg.request_id in out:
            out[msg.request_id].done = msg
            pending.discard(msg.request_id)
            if not pending:
                break
        elif isinstance(msg, ErrorReply) and msg.request_id in out:
            from app.local_engine import raise_reply
            raise_reply(msg)
        elif isinstance(msg, Telemetry) and on_telemetry is not None:
            on_telemetry(msg)
    return out
