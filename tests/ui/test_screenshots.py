"""Screenshots of the chat, settings and monitor views (light and dark) on the real engine, saved as
PNG under tmp/artifacts (or $STRATA_ARTIFACTS) for a person to look at."""
from __future__ import annotations

import pytest
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QScrollArea

from tests.ui.conftest import send, set_sampling, wait_reply, wait_until

pytestmark = pytest.mark.slow


def _save(widget, path) -> None:
    assert widget.grab().save(str(path)), path
    img = QImage(str(path))
    assert img.width() > 200 and img.height() > 200
    colours = {img.pixel(x, y) for x in range(0, img.width(), 23) for y in range(0, img.height(), 23)}
    assert len(colours) > 8, f"{path.name} looks blank"


def test_screenshots(qtbot, studio, artifacts_dir):
    app = studio()
    w = app.window
    w.resize(1440, 900)
    set_sampling(app, temperature=0.0, max_tokens=160)
    send(qtbot, app, "Write a Python function that adds two numbers, in a code block, then explain it in one line.")
    wait_until(qtbot, lambda: w.chat.streaming and len(w.chat.streaming.text) > 30, 60, "streamed text")
    _save(w.chat, artifacts_dir / "chat_streaming.png")
    m = wait_reply(qtbot, app, 180)
    assert m.status in ("final", "stopped")
    w.side.setCurrentWidget(w.monitor)
    qtbot.wait(300)
    _save(w, artifacts_dir / "chat.png")
    _save(w.monitor, artifacts_dir / "monitor.png")

    w.show_settings()
    panel = w.settings_panel
    panel.split.n_stages.setValue(2)                  # show a two-stage split and two groups (not applied)
    panel.parallel.setValue(4)
    panel.groups.setCurrentIndex(panel.groups.findData("2"))
    panel.spec.setValue(3)
    qtbot.wait(100)
    _save(w, artifacts_dir / "settings.png")
    _save(panel, artifacts_dir / "settings_panel.png")

    # apply a layout the engine must adjust: 3 slots on 2 stages (groups auto), MTP window 3 on a model
    # without MTP; the effective configuration then lists every fallback with its reason
    panel.parallel.setValue(3)
    panel.groups.setCurrentIndex(panel.groups.findData("auto"))
    panel.apply_btn.click()
    wait_until(qtbot, lambda: w.engine.ready is not None and w.engine.ready.config.parallel == 3, 120, "the reload")
    fallbacks = w.engine.ready.config.fallbacks
    assert len(fallbacks) >= 2 and "Fallbacks" in panel.effective.text()
    panel.findChild(QScrollArea).ensureWidgetVisible(panel.effective)
    qtbot.wait(100)
    _save(panel, artifacts_dir / "settings_effective.png")

    app.theme.mode = "dark"                           # what a dark system palette gives
    app.theme.apply()
    w.side.setCurrentWidget(w.monitor)
    qtbot.wait(300)
    _save(w, artifacts_dir / "chat_dark.png")
    w.show_settings()
    qtbot.wait(100)
    _save(panel, artifacts_dir / "settings_dark.png")
    app.theme.mode = "system"
    app.theme.apply()
