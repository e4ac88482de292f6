"""Layer-split editor: stages (one device each) over the model's layers, set by dragging or typing.

The bar shows every layer coloured by its stage; the handles between stages drag. Each stage row
has its device and the first layer it starts at, and the predicted memory: the weight bytes of its
layers (ModelInfo.layer_bytes), the KV cache of its layers for every slot, and on the last stage
the output head. `auto` balances weight bytes, as the engine's `--layer-split auto` does.
"""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QGridLayout, QHBoxLayout, QLabel, QSpinBox, QVBoxLayout,
                               QWidget)

from engine.messages import ModelInfo
from ui import theme
from ui.devices import Device, fmt_bytes
from ui.layer_bar import LayerBar

MAX_STAGES = 8


def balanced_split(layer_bytes: list[int], n_stages: int, first_extra: int = 0) -> list[int]:
    """First layer of each next stage so the stages hold about equal bytes (the first stage also holds
    the embedding, `first_extra`); the same rule as the engine's `--layer-split auto` on equal devices."""
    n = len(layer_bytes)
    if n_stages <= 1 or n == 0:
        return []
    total = sum(layer_bytes) + first_extra
    starts, acc, k = [0], first_extra, 0
    for i, b in enumerate(layer_bytes):
        target = total * (k + 1) / n_stages
        if k < n_stages - 1 and i > starts[-1] and (acc + b / 2 > target or n - i <= n_stages - 1 - k):
            starts.append(i)
            k += 1
        acc += b
    return starts[1:]


class SplitEditor(QWidget):
    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.info: ModelInfo | None = None
        self.available: list[Device] = []
        self.ctx, self.parallel = 2048, 1
        # in-memory weight bytes per file byte, per device kind; measured from the last Ready
        self.scale = {"cpu": 2.0, "cuda": 1.0}
        self.measured = False
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
        self.other = QLabel("")
        self.other.setObjectName("muted")
        self.other.setWordWrap(True)
        lay.addWidget(self.other)
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
        self.ctx, self.parallel = ctx, parallel
        self._refresh()

    def calibrate(self, stages: list) -> None:
        """Learn bytes-in-memory per file byte from a load's effective stages (StageInfo)."""
        if not self.info:
            return
        lb = self.info.layer_bytes
        for kind in ("cpu", "cuda"):
            mine = [s for s in stages if s.device.split(":")[0] == kind]
            file_b = sum(sum(lb[s.first_layer:s.end_layer]) for s in mine)
            file_b += self.other_bytes() if len(mine) == len(stages) else 0
            if file_b > 0 and mine:
                self.scale[kind] = sum(s.weight_bytes for s in mine) / file_b
                self.measured = True
        self._refresh()

    def set_config(self, devices: str, layer_split: str) -> None:
        self.devices = [d.strip() for d in devices.split(",") if d.strip()] or ["cpu"]
        auto = layer_split.strip() in ("", "auto")
        try:
            self.bounds = [] if auto else [int(x) for x in layer_split.split(",") if x.strip()]
        except ValueError:
            auto, self.bounds = True, []
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

    def predicted(self) -> list[tuple[int, int]]:
        """(weight bytes, KV bytes) per stage: layer file bytes times the bytes-in-memory ratio of the
        device kind (measured at the last load); KV is float32 for every slot plus one, as the engine keeps."""
        if not self.info:
            return [(0, 0)] * len(self.devices)
        lb = list(self.info.layer_bytes[:self.n_layers]) or [0] * self.n_layers
        head_dim = self.info.n_embd // max(self.info.n_heads, 1)
        ctx = min(self.ctx, self.info.context_length or self.ctx)
        kv_layer = 2 * self.info.n_kv_heads * head_dim * 4 * ctx * (self.parallel + 1)
        edges = [0, *self.bounds, self.n_layers]
        out = []
        for s, dev in enumerate(self.devices):
            a, b = edges[s], edges[s + 1]
            scale = self.scale["cpu" if dev == "cpu" else "cuda"]
            out.append((sum(lb[a:b]) * scale, kv_layer * (b - a)))
        return out

    def other_bytes(self) -> int:
        """Embedding, output head, MTP layer and norms: the file bytes outside the trunk's layers."""
        return max(self.info.file_bytes - sum(self.info.layer_bytes[:self.n_layers]), 0) if self.info else 0

    # ------------------------------------------------------------ internals
    def _valid(self, bounds: list[int]) -> bool:
        edges = [0, *bounds, self.n_layers]
        return len(bounds) == len(self.devices) - 1 and all(edges[i] < edges[i + 1] for i in range(len(edges) - 1))

    def _auto_bounds(self) -> None:
        n = len(self.devices)
        if self.info and self.info.layer_bytes:
            self.bounds = balanced_split(list(self.info.layer_bytes[:self.n_layers]), n, self.other_bytes())
        else:
            self.bounds = balanced_split([1] * max(self.n_layers, n), n)

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
                w.hide()
                w.setParent(None)
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
            mem.setWordWrap(True)
            swatch = QLabel("■")
            swatch.setStyleSheet(f"color: {theme.current().series(s)}; font-size: 16px;")
            for col, w in enumerate((swatch, QLabel(f"Stage {s}"), combo, spin)):
                self.grid.addWidget(w, 2 * s, col)
            self.grid.addWidget(mem, 2 * s + 1, 1, 1, 4)
            self.rows.append((combo, spin, mem))
        self.grid.setColumnStretch(4, 1)
        self._refresh()

    def _refresh(self) -> None:
        prev, self._sync = self._sync, True
        try:
            edges = [0, *self.bounds, self.n_layers]
            for s, (combo, spin, mem) in enumerate(self.rows):
                spin.setValue(edges[s] if s < len(edges) else 0)
                spin.setReadOnly(self.auto.isChecked())
        finally:
            self._sync = prev
        pred, edges = self.predicted(), [0, *self.bounds, self.n_layers]
        free = {d.id: d.total_bytes for d in self.available}
        for s, (_c, _sp, mem) in enumerate(self.rows):
            if not self.info or s + 1 >= len(edges):
                mem.setText("")
                continue
            w, kv = pred[s]
            emb = int(self.other_bytes() * self.scale["cpu" if self.devices[0] == "cpu" else "cuda"]) if s == 0 else 0
            cap = free.get(self.devices[s])
            text = (f"layers {edges[s]}–{edges[s + 1] - 1} · weights {fmt_bytes(w)} + KV {fmt_bytes(kv)}"
                    + (f" + embedding ≈{fmt_bytes(emb)}" if emb else "") + f" = {fmt_bytes(w + kv + emb)}")
            if cap:
                text += f" of {fmt_bytes(cap)}"
            mem.setText(text)
        how = "measured at the last load" if self.measured else "estimated"
        self.other.setText(f"Predicted from the file: weights ×{self.scale['cpu']:.1f} on CPU, "
                           f"×{self.scale['cuda']:.1f} on GPU ({how}); the embedding estimate also covers the output "
                           "head and MTP layer (on the last stage)." if self.info else "")
        self.bar.set_state(self.n_layers, self.bounds, [f"S{s} {d}" for s, d in enumerate(self.devices)])
