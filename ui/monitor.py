"""Live monitor: per-stage utilisation, draft acceptance (overall and by position), tok/s (total and
per slot), tokens per window, memory per device, and a table of slot states.

Telemetry only appends to fixed-size ring buffers (ui/monitor_data.py); ONE QTimer redraws every
plot, at most 10 times a second and only when new data came in and the view is visible.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QGridLayout, QHeaderView, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from ui import theme
from ui.devices import fmt_bytes
from ui.monitor_data import MonitorData
from ui.ring_buffer import CAPACITY, HZ

REDRAW_MS = 100
VIEW_S = 120

PLOTS = [  # key, title, y label, y range (None = auto), series prefixes
    ("stages", "Stage utilisation", "%", (0, 100), ["stage:"]),
    ("accept", "Draft acceptance (1 s window)", "rate", (0, 1.05), ["accept", "accept_pos:"]),
    ("toks", "Decode speed", "tok/s", None, ["tok_s", "slot_tok_s:"]),
    ("tpw", "Tokens per window", "tokens", None, ["tokens_per_window"]),
    ("mem", "Memory per device", "GiB", None, ["mem:"]),
]


def _label(name: str, data: MonitorData) -> str:
    kind, _, idx = name.partition(":")
    return {"stage": f"stage {idx}", "accept": "overall", "accept_pos": f"draft {idx}", "tok_s": "total",
            "slot_tok_s": f"slot {idx}", "tokens_per_window": "per slot-window",
            "mem": f"{idx} {data.device_names.get(idx, '')}".strip()}.get(kind, name)


class MonitorView(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.data = MonitorData(CAPACITY)
        self.curves: dict[str, pg.PlotDataItem] = {}
        self.plots: dict[str, pg.PlotWidget] = {}
        self.notes: dict[str, pg.TextItem] = {}     # "no data" text per plot
        self._curve_plot: dict[str, str] = {}
        self._curve_index: dict[str, int] = {}
        self._drawn_version = -1
        self.redraws = 0
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        self.totals = QLabel("no telemetry yet")
        self.totals.setObjectName("muted")
        self.totals.setWordWrap(True)
        lay.addWidget(self.totals)
        grid = QGridLayout()
        grid.setSpacing(6)
        for i, (key, title, unit, yr, _prefixes) in enumerate(PLOTS):
            pw = pg.PlotWidget()
            pw.setObjectName(f"plot_{key}")
            pw.setTitle(title, size="9pt")
            pw.setLabel("left", unit)
            pw.setLabel("bottom", "seconds")
            pw.setMinimumHeight(130)
            pw.showGrid(x=True, y=True, alpha=0.2)
            pw.setXRange(-VIEW_S, 0, padding=0.02)
            pw.setMouseEnabled(x=False, y=False)
            pw.setMenuEnabled(False)
            pw.hideButtons()
            pw.setYRange(*(yr or (0, 1)), padding=0.03)     # auto plots: 0..max, set on redraw
            pw.getPlotItem().addLegend(offset=(4, 4), labelTextSize="8pt", verSpacing=-6)
            self.plots[key] = pw
            note = pg.TextItem("", color=theme.current().muted, anchor=(0.5, 0.5))
            note.setPos(-VIEW_S / 2, (yr[1] / 2) if yr else 0.5)
            pw.addItem(note, ignoreBounds=True)
            self.notes[key] = note
            grid.addWidget(pw, i // 2, i % 2, 1, 2 if key == "mem" else 1)
        self.table = QTableWidget(0, 7)
        self.table.setHorizontalHeaderLabels(["Slot", "Group", "State", "Progress", "Tokens", "Drafts", "tok/s"])
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setMinimumHeight(90)
        self.table.setMaximumHeight(190)
        grid.addWidget(self.table, 3, 0, 1, 2)
        lay.addLayout(grid, 1)
        self.timer = QTimer(self)                     # the one redraw timer
        self.timer.setInterval(REDRAW_MS)
        self.timer.timeout.connect(self.redraw)
        self.timer.start()

    # ------------------------------------------------------------ input
    def add_telemetry(self, tel) -> None:
        self.data.add(tel)

    def reset(self) -> None:
        self.data.reset()
        for name, c in self.curves.items():
            item = self.plots[self._curve_plot[name]].getPlotItem()
            item.removeItem(c)
            if item.legend is not None:
                item.legend.removeItem(c)
        self.curves.clear()
        self._drawn_version = -1

    def apply_theme(self, t) -> None:
        for name, c in self.curves.items():
            c.setPen(self._pen(name, self._curve_index[name]))
        for key, pw in self.plots.items():
            self.notes[key].setColor(t.muted)
            legend = pw.getPlotItem().legend
            if legend is not None:
                legend.setLabelTextColor(t.fg)
                for _sample, label in legend.items:            # setLabelTextColor does not re-render
                    label.setText(label.text, color=t.fg)
            pw.setBackground(t.surface)
            for ax in ("left", "bottom"):
                pw.getAxis(ax).setPen(t.muted)
                pw.getAxis(ax).setTextPen(t.fg)
            pw.getPlotItem().titleLabel.setText(pw.getPlotItem().titleLabel.text, color=t.fg, size="9pt")
        self._drawn_version = -1

    # ------------------------------------------------------------ drawing
    def _curve(self, plot_key: str, name: str, index: int) -> pg.PlotDataItem:
        c = self.curves.get(name)
        if c is None:
            c = self.plots[plot_key].plot([], [], pen=self._pen(name, index), name=_label(name, self.data),
                                          connect="finite")
            self._curve_index[name] = index
            legend = self.plots[plot_key].getPlotItem().legend
            if legend is not None:
                legend.setLabelTextColor(theme.current().fg)
            c.setDownsampling(auto=True, method="peak")
            c.setClipToView(True)
            self.curves[name] = c
            self._curve_plot[name] = plot_key
        return c

    @staticmethod
    def _pen(name: str, index: int):
        t = theme.current()
        if name in ("accept", "tok_s"):                 # the totals: thick, in the text colour
            return pg.mkPen(t.fg, width=2.5)
        return pg.mkPen(t.series(index), width=1.6)

    def redraw(self) -> None:
        if self.data.version == self._drawn_version or not self.isVisible():
            return
        self._drawn_version = self.data.version
        self.redraws += 1
        x = self.data.x()
        for key, _title, _unit, _yr, prefixes in PLOTS:
            names = []
            for p in prefixes:
                names += [p] if not p.endswith(":") else self.data.names(p)
            finite, top = 0, 0.0
            for i, name in enumerate(n for n in names if n in self.data.data.series):
                y = self.data.series(name)
                self._curve(key, name, i).setData(x[-len(y):] if len(y) else y, y)
                ok = np.isfinite(y)
                finite += int(ok.sum())
                top = max(top, float(y[ok].max())) if ok.any() else top
            self.notes[key].setText("" if finite else self._empty_text(key))
            if _yr is None:                              # from zero, so a flat line does not look like a cliff
                self.plots[key].setYRange(0, max(top * 1.15, 1e-3 if key == "mem" else 1.0), padding=0.03)
        self.totals.setText(self.data.totals_text() + self._memory_text())
        self._fill_table()

    def _empty_text(self, key: str) -> str:
        if self.data.latest is None:
            return "waiting for telemetry"
        if key == "accept":
            return "no drafts offered yet\n(window 1, or no MTP layer)"
        if key == "tpw":
            return "no windows yet"
        return "no data"

    def _memory_text(self) -> str:
        t = self.data.latest
        if t is None or not t.memory:
            return ""
        return "  ·  memory: " + ", ".join(f"{m.device} {fmt_bytes(m.used_bytes)}"
                                          + (f" of {fmt_bytes(m.total_bytes)}" if m.total_bytes else "")
                                          for m in t.memory)

    def _fill_table(self) -> None:
        slots = self.data.slots
        self.table.setRowCount(len(slots))
        for r, s in enumerate(slots):
            if s.state == "reading":
                prog = f"reading {s.prompt_read}/{s.prompt_total}"
            elif s.state == "decoding":
                prog = f"position {s.position}"
            else:
                prog = ""
            drafts = f"{s.drafts_accepted}/{s.drafts_offered}" if s.drafts_offered else ""
            vals = [str(s.slot), str(s.group), s.state, prog, str(s.generated) if s.state != "idle" else "",
                    drafts, f"{s.tok_s:.1f}" if s.state == "decoding" else ""]
            for c, v in enumerate(vals):
                item = self.table.item(r, c)
                if item is None:
                    item = QTableWidgetItem()
                    item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                    self.table.setItem(r, c, item)
                if item.text() != v:
                    item.setText(v)

    # ------------------------------------------------------------ for tests
    def curve_points(self, name: str) -> int:
        """Finite points a curve holds now."""
        c = self.curves.get(name)
        if c is None:
            return 0
        _x, y = c.getData()
        return int(np.isfinite(y).sum()) if y is not None else 0


assert CAPACITY >= 120 * HZ, "the monitor keeps at least two minutes"
