"""Layer-split editor: stages (one device each) over the model's layers, set by dragging or typing.

The bar shows every layer coloured by its stage; the handles between stages drag. Each stage row
has its device and the first layer it starts at, and the predicted memory: the weight bytes of its
layers (ModelInfo.layer_bytes), the KV cache of its layers for every slot, and on the last stage
the output head. `auto` balances weight bytes, as the engine's `--layer-split auto` does.
"""
from __future__ import annotations

from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import (QCheckBox, QComboBox, QGridLayout, QHBoxLayout, QLabel, QSpinBox, QVBoxLayout,
                               QWidget)

from engine.messages import ModelInfo
from ui import theme
from ui.devices import Device, fmt_bytes

MAX_STAGES = 8


def balanced_split(layer_bytes: list[int], n_stages: int) -> list[int]:
    """First layer of each next stage so the stages hold about equal weight bytes."""
    n = len(layer_bytes)
    if n_stages <= 1 or n == 0:
        return []
    total, acc, out = float(sum(layer_bytes)) or 1.0, 0.0, []
    for i, b in enumerate(layer_bytes):
        acc += b
        k = len(out) + 1
        if k < n_stages and acc >= total * k / n_stages and n - (i + 1) >= n_stages - k:
            out.append(i + 1)
    while len(out) < n_stages - 1:             # very uneven layers: fall back to even counts
        out = [round(n * k / n_stages) for k in range(1, n_stages)]
    return out


class LayerBar(QWidget):
    boundaryMoved = Signal(int, int)          # boundary index, new first layer

    def __init__(self, parent=None):
        super().__init__(parent)
        self.n_layers, self.bounds, self.labels = 0, [], []
        self._drag: int | None = None
        self.setMinimumHeight(46)
        self.setMouseTracking(True)

    def set_state(self, n_layers: int, bounds: list[int], labels: list[str]) -> None:
        self.n_layers, self.bounds, self.labels = n_layers, list(bounds), labels
        self.update()

    def _x(self, layer: float) -> float:
        return 4 + (self.width() - 8) * layer / max(self.n_layers, 1)

    def paintEvent(self, _ev) -> None:
        t = theme.current()
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        h = self.height() - 16
        if self.n_layers <= 0:
            p.setPen(QColor(t.muted))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "Load a model to see its layers")
            return
        edges = [0, *self.bounds, self.n_layers]
        for s in range(len(edges) - 1):
            c = QColor(t.series(s))
            for layer in range(edges[s], edges[s + 1]):
                r = QRectF(self._x(layer) + 0.5, 2, self._x(layer + 1) - self._x(layer) - 1, h)
                c.setAlpha(150 if layer % 2 else 200)
                p.fillRect(r, c)
            seg = QRectF(self._x(edges[s]), 2, self._x(edges[s + 1]) - self._x(edges[s]), h)
            p.setPen(QColor("#ffffff"))
            label = self.labels[s] if s < len(self.labels) else f"S{s}"
            p.drawText(seg, Qt.AlignmentFlag.AlignCenter, p.fontMetrics().elidedText(label, Qt.TextElideMode.ElideRight,
                                                                                     int(seg.width()) - 4))
        p.setPen(QPen(QColor(t.fg), 3))
        for b in self.bounds:
            p.drawLine(int(self._x(b)), 0, int(self._x(b)), h + 4)
        p.setPen(QColor(t.muted))
        f = p.font()
        f.setPointSizeF(max(f.pointSizeF() - 2, 6))
        p.setFont(f)
        for layer in sorted({0, *self.bounds, self.n_layers}):
            p.drawText(QRectF(self._x(layer) - 20, h + 3, 40, 12), Qt.AlignmentFlag.AlignCenter, str(layer))

    def _hit(self, x: float) -> int | None:
        best = min(range(len(self.bounds)), key=lambda i: abs(self._x(self.bounds[i]) - x), default=None)
        return best if best is not None and abs(self._x(self.bounds[best]) - x) <= 8 else None

    def mousePressEvent(self, ev) -> None:
        self._drag = self._hit(ev.position().x())

    def mouseMoveEvent(self, ev) -> None:
        x = ev.position().x()
        if self._drag is None:
            self.setCursor(Qt.CursorShape.SplitHCursor if self._hit(x) is not None else Qt.CursorShape.ArrowCursor)
            return
        layer = round((x - 4) / max(self.width() - 8, 1) * self.n_layers)
        lo = self.bounds[self._drag - 1] + 1 if self._drag > 0 else 1
        hi = self.bounds[self._drag + 1] - 1 if self._drag + 1 < len(self.bounds) else self.n_layers - 1
        layer = max(lo, min(hi, layer))
        if layer != self.bounds[self._drag]:
            self.boundaryMoved.emit(self._drag, layer)

    def mouseReleaseEvent(self, _ev) -> None:
        self._drag = None


class SplitEditor(QWidget):
    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.info: ModelInfo | None = None
        self.available: list[Device] = []
        self.ctx, self.parallel, self.kv_elem = 2048, 1, 4
        self.devices: list[str] = ["cpu"]
        self.bounds: list[int] = []
        self._sync = False
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        top = QHBoxLayout()
        top.addWidget(QLabel("Stages"))
        self.n_stages = QSpinBox()
        self.n_stages.setRange(1, MAX_STAGES)
        self.n_stages.valueChanged.connect(self._set_stage_count)
        top.addWidget(self.n_stages)
        self.auto = QCheckBox("auto (balance weight bytes)")
        self.auto.setChecked(True)
        self.auto.toggled.connect(self._auto_toggled)
        top.addWidget(self.auto)
        top.addStretch(1)
        lay.addLayout(top)
        self.bar = LayerBar()
        self.bar.boundaryMoved.connect(self._dragged)
        lay.addWidget(self.bar)
        self.grid = QGridLayout()
        lay.addLayout(self.grid)
        self.rows: list[tuple[QComboBox, QSpinBox, QLabel]] = []
        self._rebuild()

    # ------------------------------------------------------------ inputs
    def set_model(self, info: ModelInfo | None) -> None:
        self.info = info
        if self.auto.isChecked() or not self._valid(self.bounds):
            self._auto_bounds()
        self._refresh()

    def set_available_devices(self, devices: list[Device]) -> None:
        self.available = devices
        self._rebuild()

    def set_kv_params(self, ctx: int, parallel: int, dtype: str) -> None:
        on_gpu = any(d.startswith("cuda") for d in self.devices)
        self.ctx, self.parallel = ctx, parallel
        self.kv_elem = 2 if dtype == "bfloat16" or (dtype == "auto" and on_gpu) else 4
        self._refresh()

    def set_config(self, devices: str, layer_split: str) -> None:
        self.devices = [d.strip() for d in devices.split(",") if d.strip()] or ["cpu"]
        auto = layer_split.strip() in ("", "auto")
        self.bounds = [] if auto else [int(x) for x in layer_split.split(",") if x.strip()]
        self._sync = True
        self.auto.setChecked(auto or len(self.bounds) != len(self.devices) - 1)
        self.n_stages.setValue(len(self.devices))
        self._sync = False
        if self.auto.isChecked():
            self._auto_bounds()
        self._rebuild()

    # ------------------------------------------------------------ outputs
    def devices_string(self) -> str:
        return ",".join(self.devices)

    def split_string(self) -> str:
        return "auto" if self.auto.isChecked() or len(self.devices) == 1 else ",".join(map(str, self.bounds))

    @property
    def n_layers(self) -> int:
        return self.info.n_layers if self.info else 0

    def predicted(self) -> list[tuple[int, int, int]]:
        """(weight bytes, KV bytes, head bytes) per stage."""
        if not self.info:
            return [(0, 0, 0)] * len(self.devices)
        lb = list(self.info.layer_bytes) or [0] * self.n_layers
        head = max(self.info.file_bytes - sum(lb), 0)
        head_dim = self.info.n_embd // max(self.info.n_heads, 1)
        kv_layer = 2 * self.info.n_kv_heads * head_dim * self.kv_elem * self.ctx * self.parallel
        edges = [0, *self.bounds, self.n_layers]
        out = []
        for s in range(len(self.devices)):
            a, b = edges[s], edges[s + 1]
            out.append((sum(lb[a:b]), kv_layer * (b - a), head if s == len(self.devices) - 1 else 0))
        return out

    # ------------------------------------------------------------ internals
    def _valid(self, bounds: list[int]) -> bool:
        edges = [0, *bounds, self.n_layers]
        return len(bounds) == len(self.devices) - 1 and all(edges[i] < edges[i + 1] for i in range(len(edges) - 1))

    def _auto_bounds(self) -> None:
        n = len(self.devices)
        lb = list(self.info.layer_bytes) if self.info and self.info.layer_bytes else [1] * max(self.n_layers, n)
        self.bounds = balanced_split(lb, n)

    def _set_stage_count(self, n: int) -> None:
        if self._sync:
            return
        while len(self.devices) < n:
            self.devices.append(self.devices[-1] if self.devices else "cpu")
        self.devices = self.devices[:n]
        if self.auto.isChecked() or not self._valid(self.bounds):
            self._auto_bounds()
        self._rebuild()
        self.changed.emit()

    def _auto_toggled(self, on: bool) -> None:
        if on:
            self._auto_bounds()
        self._refresh()
        if not self._sync:
            self.changed.emit()

    def _dragged(self, idx: int, layer: int) -> None:
        self.auto.setChecked(False)
        self.bounds[idx] = layer
        self._refresh()
        self.changed.emit()

    def _typed(self, stage: int, layer: int) -> None:
        if self._sync:
            return
        b = list(self.bounds)
        b[stage - 1] = layer
        if self._valid(b):
            self.auto.setChecked(False)
            self.bounds = b
            self._refresh()
            self.changed.emit()

    def _device_picked(self, stage: int, dev: str) -> None:
        if not self._sync and dev:
            self.devices[stage] = dev
            self._refresh()
            self.changed.emit()

    def _rebuild(self) -> None:
        while self.grid.count():
            w = self.grid.takeAt(0).widget()
            if w is not None:
                w.deleteLater()
        self.rows = []
        ids = [d.id for d in self.available] or ["cpu"]
        for s, dev in enumerate(self.devices):
            combo = QComboBox()
            combo.addItems(ids if dev in ids else [*ids, dev])
            combo.setCurrentText(dev)
            combo.currentTextChanged.connect(lambda text, s=s: self._device_picked(s, text))
            spin = QSpinBox()
            spin.setRange(0, max(self.n_layers - 1, 0) if self.n_layers else 999)
            spin.setEnabled(s > 0)
            spin.setPrefix("from layer ")
            spin.valueChanged.connect(lambda v, s=s: s > 0 and self._typed(s, v))
            mem = QLabel()
            mem.setObjectName("muted")
            swatch = QLabel("■")
            swatch.setStyleSheet(f"color: {theme.current().series(s)}; font-size: 16px;")
            for col, w in enumerate((swatch, QLabel(f"Stage {s}"), combo, spin, mem)):
                self.grid.addWidget(w, s, col)
            self.rows.append((combo, spin, mem))
        self.grid.setColumnStretch(4, 1)
        self._refresh()

    def _refresh(self) -> None:
        self._sync = True
        try:
            edges = [0, *self.bounds, self.n_layers]
            for s, (combo, spin, mem) in enumerate(self.rows):
                spin.setValue(edges[s] if s < len(edges) else 0)
                spin.setReadOnly(self.auto.isChecked())
        finally:
            self._sync = False
        pred, edges = self.predicted(), [0, *self.bounds, self.n_layers]
        free = {d.id: d.total_bytes for d in self.available}
        for s, (_c, _sp, mem) in enumerate(self.rows):
            if not self.info or s + 1 >= len(edges):
                mem.setText("")
                continue
            w, kv, head = pred[s]
            total = w + kv + head
            cap = free.get(self.devices[s])
            text = (f"layers {edges[s]}–{edges[s + 1] - 1} · weights {fmt_bytes(w)} + KV {fmt_bytes(kv)}"
                    + (f" + head {fmt_bytes(head)}" if head else "") + f" = {fmt_bytes(total)}")
            if cap:
                text += f" of {fmt_bytes(cap)}"
            mem.setText(text)
        self.bar.set_state(self.n_layers, self.bounds, [f"S{s} {d}" for s, d in enumerate(self.devices)])
