"""Engine lifecycle for the window: start, Apply (reload), restart after a crash, the error dialog.

Every action goes through the EngineBridge (ui/engine_bridge.py) and returns at once; outcomes come
back as its signals. `pending` is the configuration being loaded, `good` the last one that loaded
(saved in the settings, so `strata` starts on it next time).
"""
from __future__ import annotations

import os

import msgspec
from PySide6.QtCore import QObject, Signal

from app.settings import Settings
from engine.messages import EngineConfig, ErrorReply
from ui.dialogs import EngineErrorDialog


def model_label(model: str) -> str:
    if model in ("", "default"):
        return "SmolLM2-135M-Instruct (default)"
    base = os.path.basename(model)
    return base[:-5] if base.endswith(".gguf") else base


class EngineController(QObject):
    titleChanged = Signal(str)          # the model name for the window title
    showSettings = Signal()

    def __init__(self, bridge, settings: Settings, window):
        super().__init__(window)
        self.bridge, self.settings, self.window = bridge, settings, window
        self.pending: EngineConfig | None = None
        self.good: EngineConfig | None = None
        self.ready = None
        self.transport_options: dict = {}
        self.dialog: EngineErrorDialog | None = None
        self.fallback: EngineConfig | None = None
        self.errors: list[tuple[str, str]] = []         # (kind, message) shown so far, for tests and logs
        bridge.ready.connect(self._on_ready)
        bridge.error.connect(self._on_error)
        bridge.engineDead.connect(self._on_dead)

    # ------------------------------------------------------------ actions
    def start(self, config: EngineConfig, **transport_options) -> None:
        self.pending = config
        self.transport_options = transport_options
        self.titleChanged.emit(f"loading {model_label(config.model)}")
        self.bridge.start(config, **transport_options)

    def apply(self, config: EngineConfig) -> None:
        """Load `config`: in the running worker, or in a fresh one when there is none or it died."""
        self.pending = config
        self.titleChanged.emit(f"loading {model_label(config.model)}")
        if self.bridge.client is None or self.bridge.state == "crashed":
            if self.bridge.client is not None:
                self.bridge.shutdown()           # the dead one's leftovers (socket dir), off the GUI thread
            self.bridge.start(config, **self.transport_options)
        else:
            self.bridge.load(config)

    def restart(self) -> None:
        """Restart with the same settings: the configuration that failed or the one that was running."""
        config = self.pending or self.good or self.settings.engine_config()
        if self.bridge.client is not None and self.bridge.state == "crashed":
            self.pending = config
            self.titleChanged.emit(f"loading {model_label(config.model)}")
            if self.bridge.client.last_config == config:
                self.bridge.restart()
                return
        self.apply(config)

    def load_previous(self) -> None:
        if self.fallback is not None:
            self.apply(self.fallback)

    # ------------------------------------------------------------ engine feedback
    def _on_ready(self, ready) -> None:
        self.ready = ready
        cfg = self.pending or (self.bridge.client.last_config if self.bridge.client else None)
        if cfg is not None:
            self.good = cfg
            self.settings.set_engine_config(cfg)
            self.settings.save()
        self.pending = None
        self.titleChanged.emit(model_label(ready.config.model_path or (cfg.model if cfg else "")))

    def _on_error(self, err) -> None:
        if isinstance(err, ErrorReply):
            if err.request_id:
                return                      # a request's error: the chat shows it on the reply
            self.show_error(err.kind, err.message)
        else:
            self.show_error("internal", f"{type(err).__name__}: {err}")

    def _on_dead(self, why: str, tail: str) -> None:
        self.show_error("dead", why, tail)

    def show_error(self, kind: str, message: str, details: str = "") -> None:
        self.errors.append((kind, message))
        failed = self.pending
        if failed is not None and kind != "dead":
            self.titleChanged.emit(f"{model_label(failed.model)} failed to load")
        elif kind == "dead":
            self.titleChanged.emit("engine stopped")
        self.fallback = None                    # what "Load … again" loads: the last good config, else the default
        if failed is not None and kind != "dead":
            if self.good is not None and failed != self.good:
                self.fallback = self.good
            elif self.good is None and failed.model not in ("", "default"):
                self.fallback = msgspec.structs.replace(failed, model="default")
        previous = model_label(self.fallback.model) if self.fallback is not None else ""
        if self.dialog is not None:
            self.dialog.close()
        self.dialog = EngineErrorDialog(kind, message, details, previous, self.window)
        self.dialog.restartRequested.connect(self.restart)
        self.dialog.previousRequested.connect(self.load_previous)
        self.dialog.settingsRequested.connect(self.showSettings.emit)
        self.dialog.open()
