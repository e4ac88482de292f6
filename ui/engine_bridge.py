"""The engine as Qt signals: EngineClient messages and state changes, delivered on the GUI thread.

The client's reader thread calls our listeners; they only emit `_incoming`, whose queued connection
runs `_on_incoming` in the thread this object lives in (the GUI thread), which re-emits typed
signals. Anything that can block (starting the worker, loading, restarting, shutting down) runs on
a short-lived background thread; its outcome comes back as signals. Nothing here blocks the GUI.
Imports: Qt, app.engine_client and engine.messages only (never torch, never engine internals).
"""
from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Qt, Signal

from app.engine_client import EngineClient, EngineDead, EngineFailure, RequestHandle, connect_worker
from engine.messages import (AddRequest, Configure, EngineConfig, ErrorReply, LoadProgress, PromptProgress, Ready,
                             RequestDone, Telemetry, TokenDelta)


class EngineBridge(QObject):
    message = Signal(object)            # every EngineOut, telemetry included
    telemetry = Signal(object)          # Telemetry (~10 Hz)
    loadProgress = Signal(object)       # LoadProgress
    ready = Signal(object)              # Ready (effective configuration + model metadata)
    promptProgress = Signal(object)     # PromptProgress
    tokenDelta = Signal(object)         # TokenDelta
    requestDone = Signal(object)        # RequestDone
    error = Signal(object)              # ErrorReply (typed engine error) or an exception
    stateChanged = Signal(str)          # stopped | starting | loading | ready | busy | crashed
    engineDead = Signal(str, str)       # why, the worker's last stderr lines
    _incoming = Signal(object)

    _BY_TYPE = {Telemetry: "telemetry", LoadProgress: "loadProgress", Ready: "ready",
                PromptProgress: "promptProgress", TokenDelta: "tokenDelta", RequestDone: "requestDone",
                ErrorReply: "error"}

    def __init__(self, client: EngineClient | None = None, parent: QObject | None = None):
        super().__init__(parent)
        self.client: EngineClient | None = None
        self.state = "stopped"
        self._incoming.connect(self._on_incoming, Qt.ConnectionType.QueuedConnection)
        if client is not None:
            self.attach(client)

    # ------------------------------------------------------------ wiring
    def attach(self, client: EngineClient, announce: bool = True) -> None:
        """Safe from any thread: the listeners only emit the queued `_incoming` signal."""
        self.client = client
        client.add_listener(lambda msg: self._incoming.emit(("msg", msg)))
        client.add_state_listener(lambda state: self._incoming.emit(("state", state)))
        if announce:
            self._incoming.emit(("state", client.state))

    def _on_incoming(self, item) -> None:
        kind, payload = item
        if kind == "msg":
            self.message.emit(payload)
            name = self._BY_TYPE.get(type(payload))
            if name is not None:
                getattr(self, name).emit(payload)
        elif kind == "state":
            if payload != self.state:
                self.state = payload
                self.stateChanged.emit(payload)
            if payload == "crashed" and self.client is not None and isinstance(self.client.error, EngineDead):
                self.engineDead.emit(str(self.client.error.reply.message), self.client.error.stderr_tail)
        elif kind == "dead":
            self.engineDead.emit(str(payload.reply.message), payload.stderr_tail)
        elif kind == "error":
            self.error.emit(payload)

    def _background(self, fn, name: str) -> threading.Thread:
        def body():
            try:
                fn()
            except EngineDead as e:
                if self.client is None or self.client.error is not e:
                    self._incoming.emit(("dead", e))      # the state listener has not reported this one
            except EngineFailure:
                pass                                       # its ErrorReply already came through the listener
            except Exception as e:  # noqa: BLE001 - shown to the user, never raised into Qt
                self._incoming.emit(("error", e))
        t = threading.Thread(target=body, name=f"strata-bridge-{name}", daemon=True)
        t.start()
        return t

    # ------------------------------------------------------------ actions (all return at once)
    def start(self, config: EngineConfig | None = None, **transport_options) -> threading.Thread:
        """Spawn a worker, attach to it, then load `config` (if given)."""
        self.state = "starting"
        self.stateChanged.emit("starting")

        old = self.client

        def body():
            if old is not None:
                old.close()                                     # one worker per bridge
            client = connect_worker(**transport_options)
            self.attach(client, announce=config is None)       # listeners in place before the load starts
            if config is not None:
                client.load(config)
        return self._background(body, "start")

    def load(self, config: EngineConfig) -> threading.Thread:
        return self._background(lambda: self.client.load(config), "load")

    def restart(self) -> threading.Thread:
        return self._background(lambda: self.client.restart(), "restart")

    def shutdown(self) -> threading.Thread:
        client = self.client
        return self._background(lambda: client is not None and client.close(), "shutdown")

    def submit(self, req: AddRequest) -> RequestHandle:
        """Sends at once; the request's messages arrive as tokenDelta/promptProgress/requestDone."""
        return self.client.submit(req)

    def abort(self, request_id: str) -> None:
        self.client.abort(request_id)

    def configure(self, msg: Configure) -> None:
        self.client.configure(msg)
