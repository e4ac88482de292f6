"""Load errors and engine crashes on the real worker: a dialog names the cause and offers a restart."""
from __future__ import annotations

import os
import signal

import pytest

from tests.ui.conftest import send, set_sampling, wait_ready, wait_until

pytestmark = pytest.mark.slow


def test_bad_model_file_shows_error_dialog(qtbot, studio, tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"this is not a GGUF file at all" * 100)
    app = studio()
    panel = app.window.settings_panel
    panel.model_picker.choose_file(str(bad))
    assert panel.config().model == str(bad)
    panel.apply_btn.click()
    dlg = wait_until(qtbot, lambda: app.window.engine.dialog, 60, "the error dialog")
    assert dlg.isVisible()
    assert dlg.kind == "model_file"
    assert dlg.title.text() == "The model file cannot be used"
    assert "broken.gguf" in dlg.cause.text()
    assert dlg.restart_btn.text() == "Restart with the same settings"
    assert "failed to load" in app.window.windowTitle()
    assert "broken.gguf" in panel.status.text()
    # the bad file is not remembered as the model to start with
    assert app.settings.engine_config().model == "default"
    # go back to the model that worked
    assert dlg.previous_btn is not None
    dlg.previous_btn.click()
    title = "Strata Studio — SmolLM2-135M-Instruct.Q4_1"
    wait_until(qtbot, lambda: app.window.windowTitle() == title, 120, "the previous model to load again")
    wait_ready(qtbot, app)


def test_engine_crash_keeps_reply_interrupted_and_restarts(qtbot, studio):
    app = studio()
    w = app.window
    set_sampling(app, temperature=0.7, seed=1, max_tokens=2000, ignore_eos=True)
    send(qtbot, app, "Write a long poem about rivers.")
    wait_until(qtbot, lambda: w.chat.streaming and len(w.chat.streaming.text) > 10, 60, "some streamed text")
    os.kill(app.bridge.client.transport.pid, signal.SIGKILL)            # the engine dies mid-reply
    dlg = wait_until(qtbot, lambda: w.engine.dialog, 30, "the crash dialog")
    assert dlg.kind == "dead" and "SIGKILL" in dlg.cause.text()
    assert "crashed" in w.state_label.text()
    m = app.store.messages(w.chats.current)[-1]
    assert m.role == "assistant" and m.status == "interrupted" and m.content
    assert "SIGKILL" in m.reason
    bubble = w.chat.widgets[-1]
    assert bubble.notice.isVisibleTo(w) and "Interrupted" in bubble.notice.text()
    assert not w.chat.send_btn.isEnabled()
    dlg.restart_btn.click()                                               # same settings, fresh worker
    wait_ready(qtbot, app)
    assert w.chat.send_btn.isEnabled()
    set_sampling(app, max_tokens=8, ignore_eos=False)
    send(qtbot, app, "Hello again.")
    wait_until(qtbot, lambda: not w.chats.active, 60, "a reply after the restart")
    last = app.store.messages(w.chats.current)[-1]
    assert last.status == "final", (last.reason, w.engine.errors)


def test_missing_last_model_at_startup_offers_the_default(qtbot, studio, home, tmp_path):
    from app.settings import Settings
    from engine.messages import EngineConfig

    s = Settings()
    s.set_engine_config(EngineConfig(model=str(tmp_path / "deleted.gguf")))
    s.save()
    app = studio(wait=False)                                   # `strata` starts on the last model used
    dlg = wait_until(qtbot, lambda: app.window.engine.dialog, 60, "the error dialog")
    assert dlg.kind == "model_file" and "deleted.gguf" in dlg.cause.text()
    assert dlg.previous_btn.text() == "Load SmolLM2-135M-Instruct (default) instead"
    dlg.previous_btn.click()
    wait_ready(qtbot, app)
    assert app.settings.engine_config().model == "default"
