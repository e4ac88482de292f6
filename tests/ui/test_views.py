"""Fast tests of the views and their Qt-free models (no engine process)."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

from app.chat_store import Message
from engine.messages import DeviceMemory, EngineConfig, ModelInfo, SlotState, Telemetry
from ui.chat_format import format_stats, render_markdown
from ui.group_diagram import predict_groups, stage_group_at
from ui.monitor_data import MonitorData
from ui.ring_buffer import CAPACITY, HZ, RingBuffer, SeriesSet
from ui.split_editor import balanced_split

INFO = ModelInfo(path="/m/x.gguf", name="x", arch="llama", n_layers=30, n_embd=576, n_heads=9, n_kv_heads=3,
                 vocab_size=49152, context_length=8192, file_bytes=100_000_000, layer_bytes=[2_000_000] * 30)


def test_ring_buffer_keeps_the_last_samples_in_order():
    r = RingBuffer(5)
    for i in range(12):
        r.append(i)
    assert list(r.values()) == [7, 8, 9, 10, 11] and len(r) == 5 and r.last() == 11
    assert CAPACITY >= 120 * HZ                        # at least two minutes at 10 Hz


def test_series_started_late_line_up_with_time():
    s = SeriesSet(10)
    s.tick(0.0, {"a": 1})
    s.tick(0.1, {"a": 2, "b": 5})
    s.tick(0.2, {"b": 6})
    assert np.allclose(s.series["a"].values(), [1, 2, np.nan], equal_nan=True)
    assert np.allclose(s.series["b"].values(), [np.nan, 5, 6], equal_nan=True)


def _tel(t, off, acc, off_pos, acc_pos, busy=(0.5, 0.25)):
    return Telemetry(t=t, stage_busy=list(busy), tok_s=10.0, drafts_offered_total=off, drafts_accepted_total=acc,
                     drafts_offered_by_pos=off_pos, drafts_accepted_by_pos=acc_pos, windows_total=off,
                     tokens_per_window=1.5, slots=[SlotState(slot=0, group=0, state="decoding", tok_s=10.0)],
                     memory=[DeviceMemory(device="cpu", name="RAM", used_bytes=2 << 30, total_bytes=8 << 30)])


def test_acceptance_comes_from_deltas_of_the_totals():
    d = MonitorData(capacity=100, window_s=1.0)
    d.add(_tel(0.0, 100, 90, [60, 40], [55, 35]))      # history before the window does not count
    d.add(_tel(0.5, 110, 95, [66, 44], [58, 37]))
    d.add(_tel(1.0, 120, 100, [72, 48], [61, 39]))
    assert d.series("accept")[-1] == pytest.approx(10 / 20)
    assert d.series("accept_pos:1")[-1] == pytest.approx(6 / 12)
    assert d.series("accept_pos:2")[-1] == pytest.approx(4 / 8)
    assert d.series("stage:1")[-1] == pytest.approx(25.0)
    assert d.series("mem:cpu")[-1] == pytest.approx(2.0)
    d.add(_tel(1.5, 120, 100, [72, 48], [61, 39]))     # nothing offered in the window: a gap, not 0 %
    d.add(_tel(2.6, 120, 100, [72, 48], [61, 39]))
    assert np.isnan(d.series("accept")[-1])
    paused = _tel(3.0, 120, 100, [72, 48], [61, 39])
    paused.draft_guard = "drafts paused: 554 tok/s with them, 1337 without"
    d.add(paused)                                      # the draft guard's verdict is in the totals line
    assert "drafts 100/120 accepted" in d.totals_text() and d.totals_text().endswith(paused.draft_guard)
    d.add(_tel(0.1, 0, 0, [], []))                     # a new engine: its clock restarted
    assert d.ticks == 7 and len(d.x()) == 1


def test_monitor_view_one_timer_and_stage_curves(qtbot):
    from PySide6.QtCore import QTimer

    from ui.monitor import MonitorView

    m = MonitorView()
    qtbot.addWidget(m)
    m.show()
    assert len(m.findChildren(QTimer)) == 1            # the one redraw timer
    for i in range(30):
        m.add_telemetry(_tel(i / 10, 10 * i, 7 * i, [6 * i, 4 * i], [5 * i, 2 * i]))
    assert m.redraws == 0                              # telemetry alone does not redraw
    m.redraw()
    m.redraw()                                         # nothing new since: no second redraw
    assert m.redraws == 1
    assert m.curve_points("stage:0") == 30 and m.curve_points("stage:1") == 30
    assert m.curve_points("accept_pos:2") == 29 and m.table.rowCount() == 1   # the first tick has no rate yet
    assert "drafts" in m.totals.text()
    m.reset()
    assert m.curves == {}


def test_groups_and_pipeline_prediction():
    assert predict_groups(4, "auto", 2) == [[0, 1], [2, 3]]
    assert predict_groups(3, "auto", 2) == [[0, 1, 2]]           # auto: most groups <= stages that divide
    assert predict_groups(4, "4", 2) == [[0], [1], [2], [3]]
    # 2 groups on 2 stages: no bubbles after the first step; 1 group on 2 stages idles every other step
    assert [stage_group_at(k, 1, 2, 2) for k in range(4)] == [None, 0, 1, 0]
    assert [stage_group_at(k, 0, 1, 2) for k in range(4)] == [0, None, 0, None]


def test_balanced_split():
    assert balanced_split([1] * 30, 2) == [15]
    assert balanced_split([1] * 30, 3) == [10, 20]
    assert balanced_split([1] * 4, 4) == [1, 2, 3]
    assert balanced_split([1] * 30, 1) == []


def test_split_editor_typing_and_bounds(qtbot):
    from ui.split_editor import SplitEditor

    e = SplitEditor()
    qtbot.addWidget(e)
    e.set_model(INFO)
    e.set_config("cpu,cpu", "10")
    assert not e.auto.isChecked() and e.split_string() == "10" and e.devices_string() == "cpu,cpu"
    e._typed(1, 40)                                    # past the last layer: refused
    assert e.split_string() == "10"
    e.n_stages.setValue(3)
    assert e.devices_string() == "cpu,cpu,cpu" and len(e.bounds) == 2
    e.auto.setChecked(True)
    assert e.split_string() == "auto"
    (w0, kv0), (w1, kv1), _ = e.predicted()
    assert w0 > 0 and kv0 > 0


def test_a_thinking_replys_reasoning_is_a_muted_block_before_the_answer():
    html = render_markdown("<think>\nIs **this** it? a < b\n</think>\n\n**Paris**", muted="#123456")
    block, answer = html.split("</table>", 1)
    assert "Reasoning" in block and "#123456" in block and "**this** it? a &lt; b" in block   # text, not Markdown
    assert answer == "<p><strong>Paris</strong></p>" and "think" not in html
    assert "Thinking…" in render_markdown("<think>\nstill going", streaming=True)
    opened = render_markdown("the prompt opened it\n</think>\nDone.")                      # Qwen 3.5's way
    assert "Reasoning" in opened and opened.endswith("<p>Done.</p>")
    assert "Reasoning" not in render_markdown("x <think> y </think> z")                      # not at the start


def test_markdown_and_stats_line():
    html = render_markdown("**b** <think>\n\n```python\nx = 1 < 2\n```")
    assert "<strong>b</strong>" in html and "&lt;think&gt;" in html and "<table" in html
    assert "<table" in render_markdown("text\n```\ncode", streaming=True)   # open fence renders while streaming
    line = format_stats({"completion_tokens": 42, "ttft_s": 0.12, "decode_s": 2.0, "drafts_offered": 10,
                         "drafts_accepted": 7},
                        {"model_path": "/m/SmolLM2.gguf", "stages": [{"device": "cpu", "first_layer": 0,
                                                                       "end_layer": 30}],
                         "parallel": 2, "groups": [[0], [1]], "spec": 3, "draft": "mtp", "ctx": 2048})
    assert line.startswith("42 tokens · TTFT 0.12 s · 21.0 tok/s · drafts 7/10 accepted (70%)")
    assert "SmolLM2 · cpu L0–29 · 2 slots / 2 groups · mtp spec 3" in line


def test_chat_view_edit_and_buttons(qtbot):
    from ui.chat_view import ChatView

    v = ChatView()
    qtbot.addWidget(v)
    v.show()
    assert not v.send_btn.isEnabled()                   # no engine yet
    v.set_engine_ready(True)
    assert v.send_btn.isEnabled() and not v.stop_btn.isEnabled()
    v.show_messages("t", [Message(1, 1, "user", "hi", 0), Message(2, 1, "assistant", "yo", 0, "interrupted",
                                                                    "engine died", {"completion_tokens": 1}, {})])
    qtbot.wait(10)                                      # new children of a shown widget show on the next loop
    assert v.widgets[1].regen_btn.isVisibleTo(v) and not v.widgets[0].regen_btn.isVisibleTo(v)
    assert "Interrupted: engine died" in v.widgets[1].notice.text()
    with qtbot.waitSignal(v.editResendRequested) as sig:
        v.widgets[0].begin_edit()
        v.widgets[0].editor.setPlainText("hello")
        v.widgets[0].edit_buttons.findChild(type(v.send_btn), "resendButton").click()
    assert sig.args == [1, "hello"]
    with qtbot.waitSignal(v.sendRequested) as sig:
        v.composer.setPlainText("  question  ")
        v.send()
    assert sig.args == ["question"] and v.composer.toPlainText() == ""


def test_settings_panel_roundtrip(qtbot):
    from ui.settings_panel import SettingsPanel

    p = SettingsPanel()
    qtbot.addWidget(p)
    cfg = EngineConfig(model="default", devices="cpu,cpu", layer_split="12", parallel=4, batch_groups="2",
                       ctx=4096, draft="both", spec=3, spec_min_p=0.25, piped_mtp=2, dtype="float32", decode_kernel="imma")
    p.model_picker.set_info("default", INFO)
    p.set_config(cfg)
    assert p.config() == cfg
    assert p.diagram.groups == [[0, 1], [2, 3]]


def test_error_dialog_offers_restart(qtbot):
    from ui.dialogs import EngineErrorDialog

    d = EngineErrorDialog("model_file", "/x/bad.gguf: not a GGUF file", "trace…", previous="SmolLM2")
    qtbot.addWidget(d)
    assert d.title.text() == "The model file cannot be used" and "bad.gguf" in d.cause.text()
    with qtbot.waitSignal(d.restartRequested):
        d.restart_btn.click()


def test_window_without_engine_shortcuts_and_theme(qtbot, home):
    from app.gui_main import App
    from ui.theme import DARK, style_sheet

    app = App(None, start_engine=False)
    w = app.window
    qtbot.addWidget(w)
    w.show()
    w.activateWindow()
    qtbot.waitUntil(lambda: w.isActiveWindow())
    assert w.windowTitle() == "Strata Studio — no model" and "stopped" in w.state_label.text()
    n = len(app.store.list_conversations())
    qtbot.keyClick(w, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert len(app.store.list_conversations()) == n + 1
    w.side.setCurrentWidget(w.monitor)
    qtbot.keyClick(w, Qt.Key.Key_Comma, Qt.KeyboardModifier.ControlModifier)
    assert w.side.currentWidget() is w.settings_panel
    assert "@" not in style_sheet(DARK).split("*/", 1)[1]
    app.close()
