"""Monitoring: /health, /slots and /metrics (Prometheus, read from the engine's latest Telemetry at scrape time).

Engine counters are monotonic totals in Telemetry, so they map straight onto Prometheus counters;
rates (tok/s, busy fraction) are gauges over the engine's last second. HTTP-side figures (requests
answered by status, requests in flight, rejections) are counted by the server itself.
Each app gets its own registry, so several servers can live in one process (tests, the GUI).
"""
from __future__ import annotations

import threading
from collections import Counter
from typing import Callable

import msgspec
from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from app import openai_types as T

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class HttpStats:
    """What the HTTP layer counts: answered requests by endpoint and status, in-flight, rejected."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.responses: Counter = Counter()   # (endpoint, status) -> count
        self.rejected = 0                     # 503 because the queue bound was reached
        self.disconnects = 0                  # clients that left before their reply was complete
        self.in_flight = 0

    def count(self, endpoint: str, status: int) -> None:
        with self._lock:
            self.responses[(endpoint, str(status))] += 1

    def add_disconnect(self) -> None:
        with self._lock:
            self.disconnects += 1


class StrataCollector(Collector):
    def __init__(self, get_telemetry: Callable, get_ready: Callable, http: HttpStats):
        self._telemetry = get_telemetry
        self._ready = get_ready
        self._http = http

    def collect(self):
        ready = self._ready()
        yield _gauge("strata_engine_ready", "1 when the model is loaded and serving", 1.0 if ready else 0.0)
        yield from self._http_metrics()
        t = self._telemetry()
        if t is None:
            return
        yield _gauge("strata_decode_tokens_per_second", "decode tok/s over the last second, all slots", t.tok_s)
        yield _gauge("strata_prompt_tokens_per_second", "prompt-read tok/s over the last second", t.prompt_tok_s)
        yield _counter("strata_generated_tokens", "tokens emitted", t.tokens_total)
        yield _counter("strata_prompt_tokens", "prompt tokens read", t.prompt_tokens_total)
        yield _counter("strata_requests", "requests finished by the engine", t.requests_total)
        yield _counter("strata_windows", "windows run (one group through all stages)", t.windows_total)
        yield _counter("strata_drafts_offered", "draft tokens proposed", t.drafts_offered_total)
        yield _counter("strata_drafts_accepted", "draft tokens accepted", t.drafts_accepted_total)
        yield _gauge("strata_tokens_per_window", "tokens kept per slot-window over the last second",
                     t.tokens_per_window)
        yield _gauge("strata_queue_depth", "requests waiting in the engine for a slot", t.queue_depth)
        yield _by_label(CounterMetricFamily, "strata_drafts_offered_by_position",
                        "draft tokens proposed, by draft position", "position",
                        {str(i + 1): v for i, v in enumerate(t.drafts_offered_by_pos)})
        yield _by_label(CounterMetricFamily, "strata_drafts_accepted_by_position",
                        "draft tokens accepted, by draft position", "position",
                        {str(i + 1): v for i, v in enumerate(t.drafts_accepted_by_pos)})
        yield _by_label(GaugeMetricFamily, "strata_stage_busy_ratio",
                        "fraction of the last second each stage was busy", "stage",
                        {str(i): v for i, v in enumerate(t.stage_busy)})
        yield _by_label(CounterMetricFamily, "strata_stage_busy_seconds", "busy seconds per stage", "stage",
                        {str(i): v for i, v in enumerate(t.stage_busy_s_total)})
        states = Counter(s.state for s in t.slots)
        yield _by_label(GaugeMetricFamily, "strata_slots", "request slots by state", "state",
                        {**dict.fromkeys(("idle", "reading", "decoding"), 0), **states})
        used = GaugeMetricFamily("strata_memory_used_bytes", "memory in use per device", labels=["device"])
        total = GaugeMetricFamily("strata_memory_total_bytes", "memory per device", labels=["device"])
        for m in t.memory:
            used.add_metric([m.device], m.used_bytes)
            total.add_metric([m.device], m.total_bytes)
        yield used
        yield total

    def _http_metrics(self):
        h = self._http
        with h._lock:
            responses = dict(h.responses)
            rejected, disconnects, in_flight = h.rejected, h.disconnects, h.in_flight
        c = CounterMetricFamily("strata_http_responses", "HTTP responses by endpoint and status",
                                labels=["endpoint", "status"])
        for (endpoint, status), n in sorted(responses.items()):
            c.add_metric([endpoint, status], n)
        yield c
        yield _gauge("strata_http_in_flight", "completion requests the server holds (running + waiting)", in_flight)
        yield _counter("strata_http_rejected", "completion requests refused with 503 (queue full)", rejected)
        yield _counter("strata_http_client_disconnects", "clients that left before their reply was complete",
                       disconnects)


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


def _by_label(cls, name: str, doc: str, label: str, values: dict):
    fam = cls(name, doc, labels=[label])
    for k, v in values.items():
        fam.add_metric([k], v)
    return fam


def make_registry(get_telemetry: Callable, get_ready: Callable, http: HttpStats) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(StrataCollector(get_telemetry, get_ready, http))
    return reg


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)


def add_monitoring_routes(app: FastAPI, client, http: HttpStats, max_queue: Callable[[], int]) -> None:
    """/health (no key needed: 200 ok, 503 loading or error), /slots (per-slot state), /metrics."""
    registry = make_registry(lambda: client.latest_telemetry, lambda: client.ready, http)

    @app.get("/health", response_model=T.Health, tags=["monitoring"], responses={503: {"model": T.Health}})
    async def health():
        r, state, err = client.ready, client.state, client.error
        if r is not None and state in ("ready", "busy"):
            return {"status": "ok", "model": r.config.model_name or r.model.name}
        if app.state.load_error or state == "crashed":
            msg = app.state.load_error or f"the engine crashed: {err.reply.message if err else ''}"
            return JSONResponse({"status": "error", "message": msg}, status_code=503)
        return JSONResponse({"status": "loading", "message": "the model is loading"}, status_code=503)

    @app.get("/slots", response_model=T.Slots, tags=["monitoring"])
    async def slots():
        t, r = client.latest_telemetry, client.ready
        views = [{"id": s.slot, **{k: v for k, v in msgspec.structs.asdict(s).items() if k != "slot"}}
                 for s in (t.slots if t else [])]
        return {"slots": views, "queue_depth": t.queue_depth if t else 0, "in_flight": http.in_flight,
                "max_in_flight": (r.config.parallel + max_queue()) if r else 0}

    @app.get("/metrics", tags=["monitoring"], response_class=Response,
             responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}})
    async def metrics():
        return Response(render(registry), media_type=CONTENT_TYPE)
