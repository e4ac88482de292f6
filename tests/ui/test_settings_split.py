"""Settings panel on the real engine: two CPU stages and two groups, Apply, and the monitor's curves."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt

from tests.ui.conftest import send, set_sampling, wait_ready, wait_reply, wait_until

pytestmark = pytest.mark.slow


def test_two_cpu_stages_two_groups_feed_two_stage_curves(qtbot, studio):
    app = studio()
    w, panel = app.window, app.window.settings_panel
    w.show_settings()                                            # as Ctrl+, does
    assert w.side.currentWidget() is panel
    split = panel.split
    assert split.n_layers == 30 and len(split.devices) == 1

    # two stages on cpu,cpu; drag the boundary on the bar, then type an exact value
    split.n_stages.setValue(2)
    assert split.devices_string() == "cpu,cpu" and split.split_string() == "auto"
    bar = split.bar
    x = int(bar._x(split.bounds[0]))
    qtbot.mousePress(bar, Qt.MouseButton.LeftButton, pos=QPoint(x, 10))
    qtbot.mouseMove(bar, QPoint(int(bar._x(20)), 10))
    qtbot.mouseRelease(bar, Qt.MouseButton.LeftButton, pos=QPoint(int(bar._x(20)), 10))
    assert split.split_string() == "20" and not split.auto.isChecked()
    _combo, spin, mem = split.rows[1]
    spin.setValue(15)
    assert split.split_string() == "15"
    assert "layers 0–14" in split.rows[0][2].text() and "layers 15–29" in mem.text()
    w0, kv0 = split.predicted()[0]
    assert w0 > 0 and kv0 > 0

    # two slots in two groups; the diagram shows slot 0 in G0 and slot 1 in G1
    panel.parallel.setValue(2)
    panel.groups.setCurrentIndex(panel.groups.findData("2"))
    assert panel.diagram.groups == [[0], [1]] and panel.diagram.n_stages == 2
    cfg = panel.config()
    assert (cfg.devices, cfg.layer_split, cfg.parallel, cfg.batch_groups) == ("cpu,cpu", "15", 2, "2")

    progress = []
    app.bridge.loadProgress.connect(lambda p: progress.append(p.fraction))
    panel.apply_btn.click()
    wait_until(qtbot, lambda: app.window.engine.ready is not None and len(app.window.engine.ready.config.stages) == 2,
               120, "the reload with two stages")
    wait_ready(qtbot, app)
    assert progress and max(progress) == pytest.approx(1.0)
    eff = app.window.engine.ready.config
    assert [(s.first_layer, s.end_layer) for s in eff.stages] == [(0, 15), (15, 30)]
    assert eff.groups == [[0], [1]]
    text = panel.effective.text()
    assert "Stage 1" in text and "layers 15–29" in text and "G1 = slots 1" in text
    assert panel.diagram.caption == "effective"
    assert "Loaded in" in panel.status.text()
    # the settings were saved: the next start uses them
    assert app.settings.engine_config().layer_split == "15"

    # two conversations at once: both groups decode, both stages work
    w.side.setCurrentWidget(w.monitor)
    for text in ("Count from one to twenty.", "List ten fruits."):
        w.chats.new_conversation()
        set_sampling(app, temperature=0.0, max_tokens=48)
        send(qtbot, app, text)
    wait_until(qtbot, lambda: not w.chats.active, 180, "both replies")
    qtbot.wait(400)                                              # a few more telemetry ticks and redraws
    for stage in (0, 1):
        _x, y = w.monitor.curves[f"stage:{stage}"].getData()
        assert w.monitor.curve_points(f"stage:{stage}") > 5
        assert np.nanmax(y) > 0, f"stage {stage} never showed work"
    assert w.monitor.curve_points("slot_tok_s:0") > 0 and w.monitor.curve_points("slot_tok_s:1") > 0
    assert w.monitor.table.rowCount() == 2
    assert w.monitor.table.item(1, 1).text() == "1"              # slot 1 is in group 1
    for m in (wait_reply(qtbot, app),):
        assert m.config["groups"] == [[0], [1]] and "2 slots / 2 groups" in w.chat.widgets[-1].stats_label.text()
