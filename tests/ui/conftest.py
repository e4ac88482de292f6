"""Fixtures for the desktop app tests: offscreen Qt, a private data directory, the real app with the
real engine worker process on the bundled default model (SmolLM2-135M on CPU)."""
from __future__ import annotations

import os
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")    # before any QApplication exists

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LOAD_TIMEOUT_S = 120


@pytest.fixture
def home(tmp_path, monkeypatch):
    """STRATA_STUDIO_HOME: settings and chats of this test only."""
    d = tmp_path / "home"
    d.mkdir()
    monkeypatch.setenv("STRATA_STUDIO_HOME", str(d))
    return d


@pytest.fixture
def artifacts_dir() -> Path:
    d = Path(os.environ.get("STRATA_ARTIFACTS", ROOT / "tmp" / "artifacts"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def wait_until(qtbot, cond, timeout_s: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        qtbot.wait(20)


def wait_ready(qtbot, app, timeout_s: float = LOAD_TIMEOUT_S):
    """Until the engine has a model (or the app shows an engine error, which fails the test)."""
    seen = len(app.window.engine.errors)

    def ok():
        errs = app.window.engine.errors[seen:]
        assert not errs, f"engine error while waiting for the model: {errs}"
        return app.bridge.state in ("ready", "busy") and app.window.engine.ready is not None
    return wait_until(qtbot, ok, timeout_s, "the engine to load the model")


def wait_reply(qtbot, app, timeout_s: float = 120.0):
    wait_until(qtbot, lambda: not app.window.chats.active, timeout_s, "the reply to finish")
    return app.store.messages(app.window.chats.current)[-1]


@pytest.fixture
def studio(qtbot, home):
    """Factory: `studio()` starts the app (window shown, worker started, model loaded) in `home`.
    Every app made is closed (engine process stopped) at teardown."""
    from app.gui_main import App

    made = []

    def start(args=None, wait: bool = True):
        app = App(args)
        made.append(app)
        qtbot.addWidget(app.window, before_close_func=lambda w: None)
        app.window.show()
        if wait:
            wait_ready(qtbot, app)
        return app

    yield start
    for app in made:
        try:
            app.close()
        except Exception:  # noqa: BLE001 - teardown must reach every app
            pass


def send(qtbot, app, text: str):
    """Type `text` in the composer and press Ctrl+Enter, as a user would."""
    from PySide6.QtCore import Qt

    from PySide6.QtWidgets import QApplication

    w = app.window
    if QApplication.activeWindow() is not w:           # e.g. just after a dialog closed (shortcuts need it)
        w.activateWindow()
        wait_until(qtbot, lambda: QApplication.activeWindow() is w, 5, "the window to be active")
    w.chat.composer.setFocus()
    w.chat.composer.setPlainText(text)
    qtbot.keyClick(w.chat.composer, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)


def set_sampling(app, **kw):
    """Change the current conversation's sampling through its settings widgets."""
    cs = app.window.chat.conv_settings
    for k, v in kw.items():
        w = getattr(cs, k)
        w.setChecked(v) if k == "ignore_eos" else w.setValue(v)
