"""EngineCore: messages in, events out. The same core runs in-process (tests, bench, CLI) and inside
the worker process (behind ZeroMQ)."""
from __future__ import annotations

import gc
import os
import time
import traceback

import psutil
import torch

from engine.errors import ConfigError, EngineError, ModelFileError, OutOfMemoryError, RequestError
from engine.messages import (PROTOCOL_VERSION, Abort, AddRequest, Configure, DeviceMemory, ErrorReply, Hello,
                             HelloReply, LoadModel, LoadProgress, MeasureWindows, Ping, Pong, Ready, RequestDone,
                             Shutdown, Telemetry, WindowCosts)
from engine.grammar import constraint
from engine.sequence import Sequence
from engine.tool_format import template_inputs

CAPABILITIES = ["stages", "groups", "piped-mtp", "lookup-drafts", "prefix-reuse", "tools"]


def error_kind(e: BaseException) -> str:
    if isinstance(e, ModelFileError):
        return "model_file"
    if isinstance(e, (OutOfMemoryError, torch.OutOfMemoryError, MemoryError)):
        return "oom"
    if isinstance(e, ConfigError):
        return "config"
    if isinstance(e, RequestError):
        return "request"
    return "internal"


class EngineCore:
    def __init__(self, emit):
        self.emit = emit
        self.model = None
        self.scheduler = None
        self.stats = None
        self.state = "idle"

    # ------------------------------------------------------------------ messages
    def handle(self, msg) -> bool:
        """Handle one message; False after Shutdown."""
        if isinstance(msg, Shutdown):
            self.unload()
            return False
        try:
            if isinstance(msg, Hello):
                self.emit(HelloReply(protocol=PROTOCOL_VERSION, engine_version="0.1.0",
                                     capabilities=CAPABILITIES, pid=os.getpid()))
            elif isinstance(msg, Ping):
                self.emit(Pong(nonce=msg.nonce))
            elif isinstance(msg, LoadModel):
                self.load(msg.config)
            elif isinstance(msg, AddRequest):
                self.add_request(msg)
            elif isinstance(msg, Abort):
                if self.scheduler is not None:
                    self.scheduler.abort(msg.request_id)
            elif isinstance(msg, Configure):
                self.configure(msg)
            elif isinstance(msg, MeasureWindows):
                self.emit(self.measure_windows(msg))
        except Exception as e:  # noqa: BLE001 - every failure becomes a typed reply
            rid = getattr(msg, "request_id", "")
            detail = str(e) if isinstance(e, EngineError) else f"{type(e).__name__}: {e}"
            if error_kind(e) == "internal":
                traceback.print_exc()
            self.emit(ErrorReply(kind=error_kind(e), message=detail, request_id=rid))
            if rid and isinstance(msg, AddRequest):
                self.emit(RequestDone(request_id=rid, finish_reason="error", error=detail))
        return True

    def load(self, config) -> None:
        from engine.loader import load_model
        from engine.scheduler import Scheduler
        from engine.stats import EngineStats

        self.unload()
        self.state = "loading"
        try:
            m = load_model(config, lambda f, text: self.emit(LoadProgress(fraction=f, message=text)))
        finally:
            self.state = "idle"
        self.model = m
        self.stats = EngineStats(m.effective.parallel)
        self.scheduler = Scheduler(m.pipeline, m.groups, m.effective.ctx, m.drafter, m.plan, self.emit,
                                   self.stats, m.cfg.ssm_conv)
        # the objects alive now (the model's, the runtime's) left out of Python's collections from here on:
        # a full collection looked at ~180,000 of them, 90-120 ms in the middle of a 0.5 s one-stream request
        # on an H100 host (135 ms here), with drafts paused and resumed by the guard (tests/gpu/gc_trace.py)
        gc.collect()
        gc.freeze()
        self.emit(Ready(config=m.effective, model=m.info, load_seconds=m.load_seconds))

    def measure_windows(self, msg: MeasureWindows) -> WindowCosts:
        """What decode windows of msg.rows rows cost (engine.window_cost): only while no request runs."""
        from engine import window_cost

        why = ("no model is loaded" if self.model is None else
               "window costs are measured while no request runs" if self.has_work else
               "window costs: give row counts of at least 1" if not msg.rows or min(msg.rows) < 1 else "")
        if why:
            return WindowCosts(nonce=msg.nonce, error=why)
        m = self.model
        depth = m.plan.depth(pipelined=len(m.groups) > 1) if m.drafter is not None else 0
        parts = window_cost.by_rows(m.pipeline, m.drafter, list(msg.rows), depth, m.pipeline.stages[0].scratch_slot)
        return WindowCosts(nonce=msg.nonce, rows=list(msg.rows), trunk_ms=parts["trunk"], pick_ms=parts["pick"],
                           draft_ms=parts.get("draft", []), depth=depth if "draft" in parts else 0)

    def unload(self, reason: str = "abort", error: str = "") -> None:
        had = self.model is not None
        if had:
            self.model.pipeline.close()
        if self.scheduler is not None:
            self.scheduler.abort_all(reason, error)
        self.model = self.scheduler = None
        gc.unfreeze()            # (the model's objects collectable again)
        if had:                  # its GPU memory back to the driver: the next model's check of what is free,
            gc.collect()         # the memory figures and other processes see it (torch keeps freed blocks)
            if torch.cuda.is_initialized():
                torch.cuda.empty_cache()

    def add_request(self, msg: AddRequest) -> None:
        if self.model is None:
            raise RequestError("no model is loaded")
        tok, sp = self.model.tokenizer, msg.sampling
        if msg.token_ids is not None:
            ids = list(msg.token_ids)
        elif msg.messages is not None:
            messages, tools = template_inputs(msg.messages, msg.tools, tok.tool_format)
            ids = tok.apply_chat(messages, prefix=msg.assistant_prefix, tools=tools,
                                 enable_thinking=msg.enable_thinking)
        else:
            ids = tok.encode(msg.prompt or "")
        ctx = self.model.effective.ctx
        if not ids:
            raise RequestError("the prompt is empty")
        if len(ids) >= ctx:
            raise RequestError(f"the prompt has {len(ids)} tokens but the context holds {ctx} per slot (the model "
                               f"was loaded with --ctx {ctx}; it was trained on {self.model.cfg.context_length}): "
                               f"shorten it or load with a larger --ctx")
        if sp.max_tokens < 1 or sp.temperature < 0 or not (0 < sp.top_p <= 1) or sp.top_k < 0:
            raise RequestError("sampling values out of range (max_tokens >= 1, temperature >= 0, 0 < top_p <= 1, top_k >= 0)")
        bad = [t for t in ids if not 0 <= t < self.model.cfg.vocab_size]
        if bad:
            raise RequestError(f"token id {bad[0]} is outside the vocabulary (0..{self.model.cfg.vocab_size - 1})")
        seq = Sequence(msg.request_id, ids, sp, tok.eos_ids, tok.stream_decoder(), ctx, msg.return_logits)
        if sp.grammar:
            seq.constraint = constraint(tok, sp.grammar)
        self.scheduler.add(seq)

    def configure(self, msg: Configure) -> None:
        if self.model is None:
            return
        plan = self.model.plan
        if msg.spec is not None:
            plan.spec = max(1, msg.spec)
        if msg.spec_min_p is not None:
            plan.min_p = msg.spec_min_p
        if msg.piped_mtp is not None:
            plan.piped = max(0, msg.piped_mtp)
        if msg.draft is not None:
            plan.source = msg.draft
        eff = self.model.effective
        eff.spec, eff.spec_min_p, eff.piped_mtp, eff.draft = plan.spec, plan.min_p, plan.piped, plan.source

    # ------------------------------------------------------------------ loop
    @property
    def has_work(self) -> bool:
        return self.scheduler is not None and self.scheduler.has_work

    def step(self) -> None:
        self.scheduler.step()

    def telemetry(self) -> Telemetry:
        if self.scheduler is None:
            return Telemetry(t=time.monotonic(), state=self.state, memory=memory_figures([]))
        p = self.model.pipeline
        return self.stats.telemetry(
            "busy" if self.has_work else "idle", [b.recent() for b in p.busy], [b.total for b in p.busy],
            self.scheduler.slots, len(self.scheduler.waiting), memory_figures([str(s.device) for s in p.stages]),
            tuple(p.chained), self.scheduler.guard)


def memory_figures(devices: list[str]) -> list[DeviceMemory]:
    vm = psutil.virtual_memory()
    out = [DeviceMemory(device="cpu", name="RAM", used_bytes=vm.total - vm.available, total_bytes=vm.total)]
    for d in dict.fromkeys(devices):
        if d.startswith("cuda"):
            free, total = torch.cuda.mem_get_info(torch.device(d))
            out.append(DeviceMemory(device=d, name=torch.cuda.get_device_name(torch.device(d)),
                                    used_bytes=total - free, total_bytes=total))
    return out


def run_engine_loop(core: EngineCore, get_msg, telemetry_hz: float = 10.0) -> None:
    """Until Shutdown: take messages (waiting only when idle), step the scheduler, publish telemetry."""
    period = 1.0 / telemetry_hz if telemetry_hz > 0 else float("inf")
    next_tel = time.monotonic()
    while True:
        while True:
            msg = get_msg(0 if core.has_work else max(0.0, min(period, next_tel - time.monotonic())))
            if msg is None:
                break
            if not core.handle(msg):
                return
        if core.has_work:
            try:
                core.step()
            except Exception as e:  # noqa: BLE001 - never let the loop die silently
                traceback.print_exc()
                core.emit(ErrorReply(kind=error_kind(e), message=f"{type(e).__name__}: {e}"))
                core.unload("error", f"{type(e).__name__}: {e}")
        if time.monotonic() >= next_tel:
            core.emit(core.telemetry())
            next_tel = time.monotonic() + period
