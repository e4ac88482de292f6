"""Settings panel: model, devices and layer split, slots and groups, drafts, context; Apply reloads
the engine with a progress bar, then shows the effective configuration and every fallback reason."""
from __future__ import annotations

import html
import os

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QComboBox, QDoubleSpinBox, QFormLayout, QGroupBox, QHBoxLayout, QLabel, QProgressBar,
                               QPushButton, QScrollArea, QSpinBox, QVBoxLayout, QWidget)

from engine.messages import EngineConfig, Ready
from ui import theme
from ui.devices import Device, fmt_bytes, list_devices
from ui.group_diagram import GroupDiagram, predict_groups
from ui.model_picker import ModelPicker
from ui.split_editor import SplitEditor


def effective_html(ready: Ready) -> str:
    """The effective configuration as rich text; fallbacks in the warning colour."""
    t, c, m = theme.current(), ready.config, ready.model
    rows = [("Model", f"{html.escape(c.model_name)} ({c.arch}, {c.n_layers} layers)"),
            ("File", html.escape(c.model_path).replace("/", "/\u200b"))]     # may wrap after each /
    for s in c.stages:
        head = " + output head" + (", MTP drafter" if c.mtp_layers else "") if s.has_head else ""
        rows.append((f"Stage {s.index}", f"{s.device}: layers {s.first_layer}–{s.end_layer - 1}{head} · "
                                        f"weights {fmt_bytes(s.weight_bytes)}, KV {fmt_bytes(s.kv_bytes)}"))
    rows.append(("Slots / groups", f"{c.parallel} slots in {len(c.groups)} group(s): "
                 + "; ".join(f"G{i} = slots {', '.join(map(str, g))}" for i, g in enumerate(c.groups))))
    rows.append(("Drafts", f"{c.draft}, window {c.spec} (current + up to {c.spec - 1} proposals), "
                           f"spec-min-p {c.spec_min_p:g}, piped MTP depth {c.piped_mtp}"
                           + (f" · MTP layer from {os.path.basename(c.mtp_file)} (trained for this model)"
                              if c.mtp_file else "")))
    rows.append(("Context", f"{c.ctx:,} tokens per slot (model trained for {m.context_length:,})"))
    rows.append(("Precision", c.dtype + (f" · decode rows on the {c.decode_kernel} kernel" if c.decode_kernel else "")))
    if c.weights:
        rows.append(("Weights", html.escape(c.weights)))
    rows.append(("Load time", f"{ready.load_seconds:.1f} s"))
    body = "".join(f"<tr><td style='color:{t.muted}; padding-right:10px'>{k}</td><td>{v}</td></tr>" for k, v in rows)
    out = f"<table cellspacing='2'>{body}</table>"
    if c.fallbacks:
        items = "".join(f"<li>{html.escape(f)}</li>" for f in c.fallbacks)
        out += (f"<p style='color:{t.warn}'><b>Fallbacks ({len(c.fallbacks)}):</b></p>"
                f"<ul style='color:{t.warn}'>{items}</ul>")
    else:
        out += f"<p style='color:{t.ok}'>Everything as asked: no fallbacks.</p>"
    return out


class SettingsPanel(QWidget):
    applyRequested = Signal(object)         # EngineConfig

    def __init__(self, probe=None, parent=None):
        super().__init__(parent)
        self.devices_found: list[Device] = []
        self.ready: Ready | None = None
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        body = QWidget()
        lay = QVBoxLayout(body)
        scroll.setWidget(body)
        outer.addWidget(scroll, 1)

        self.model_picker = ModelPicker(probe)
        self.model_picker.modelChanged.connect(self._model_changed)
        self.model_picker._probed.connect(self._probe_done)
        lay.addWidget(self.model_picker)

        dev_box = QGroupBox("Devices and layer split")
        dl = QVBoxLayout(dev_box)
        self.devices_label = QLabel()
        self.devices_label.setObjectName("muted")
        self.devices_label.setWordWrap(True)
        dl.addWidget(self.devices_label)
        self.split = SplitEditor()
        self.split.changed.connect(self._layout_changed)
        dl.addWidget(self.split)
        lay.addWidget(dev_box)

        slot_box = QGroupBox("Slots and groups")
        sl = QVBoxLayout(slot_box)
        row = QHBoxLayout()
        row.addWidget(QLabel("Parallel slots"))
        self.parallel = QSpinBox()
        self.parallel.setRange(1, 256)
        self.parallel.valueChanged.connect(self._parallel_changed)
        row.addWidget(self.parallel)
        row.addSpacing(16)
        row.addWidget(QLabel("Groups"))
        self.groups = QComboBox()
        self.groups.currentIndexChanged.connect(self._layout_changed)
        row.addWidget(self.groups)
        row.addStretch(1)
        sl.addLayout(row)
        self.diagram = GroupDiagram()
        sl.addWidget(self.diagram)
        lay.addWidget(slot_box)

        draft_box = QGroupBox("Speculative drafts")
        df = QFormLayout(draft_box)
        self.draft = QComboBox()
        self.draft.addItems(["mtp", "lookup", "both"])
        self.spec = QSpinBox()
        self.spec.setRange(1, 16)
        self.spec.setToolTip("Window size: the current token + up to N-1 proposals (1 = no drafts)")
        self.spec_min_p = QDoubleSpinBox()
        self.spec_min_p.setRange(0, 1)
        self.spec_min_p.setSingleStep(0.05)
        self.spec_min_p.setToolTip("A further proposal is made only while the drafter gave the one before "
                                   "at least this probability")
        self.piped_mtp = QSpinBox()
        self.piped_mtp.setRange(0, 16)
        self.piped_mtp.setToolTip("Draft depth inside pipelined groups (0 = off; env STRATA_PIPED_MTP)")
        df.addRow("Draft source", self.draft)
        df.addRow("Window (--spec)", self.spec)
        df.addRow("spec-min-p", self.spec_min_p)
        df.addRow("Piped MTP depth", self.piped_mtp)
        self.mtp_note = QLabel("")
        self.mtp_note.setObjectName("muted")
        self.mtp_note.setWordWrap(True)
        df.addRow("", self.mtp_note)
        lay.addWidget(draft_box)

        ctx_box = QGroupBox("Context and precision")
        cf = QFormLayout(ctx_box)
        self.ctx = QSpinBox()
        self.ctx.setRange(128, 1 << 20)
        self.ctx.setSingleStep(1024)
        self.ctx.setSuffix(" tokens per slot")
        self.ctx.valueChanged.connect(self._layout_changed)
        self.dtype = QComboBox()
        self.dtype.addItems(["auto", "float32", "bfloat16"])
        self.dtype.currentIndexChanged.connect(self._layout_changed)
        self.decode_kernel = QComboBox()
        self.decode_kernel.addItems(["auto", "q4k-mma", "dp4a", "imma", "bf16"])
        self.decode_kernel.setToolTip("GPU stages: the matmul every decode row runs. q4k-mma (auto on RTX 30xx / "
                                      "A100 and newer: Q4_K on int8 tensor cores) gives ~1.27x more in total with "
                                      "8 streams than dp4a and ~0.9x alone; dp4a (int8 dot products) is fastest "
                                      "for one stream; bf16 and imma are for comparing")
        self.decode_kernel.currentIndexChanged.connect(self._layout_changed)
        cf.addRow("Context", self.ctx)
        cf.addRow("Precision", self.dtype)
        cf.addRow("Decode kernel (GPU)", self.decode_kernel)
        lay.addWidget(ctx_box)

        eff_box = QGroupBox("Effective configuration")
        el = QVBoxLayout(eff_box)
        self.effective = QLabel("Not loaded yet.")
        self.effective.setWordWrap(True)
        self.effective.setTextFormat(Qt.TextFormat.RichText)
        self.effective.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        el.addWidget(self.effective)
        lay.addWidget(eff_box)
        lay.addStretch(1)

        foot = QHBoxLayout()
        foot.setContentsMargins(8, 6, 8, 8)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(True)
        self.progress.hide()
        self.status = QLabel("")
        self.status.setWordWrap(True)
        foot.addWidget(self.status, 1)
        foot.addWidget(self.progress, 1)
        self.apply_btn = QPushButton("Apply and reload")
        self.apply_btn.setObjectName("applyButton")
        self.apply_btn.clicked.connect(lambda: self.applyRequested.emit(self.config()))
        foot.addWidget(self.apply_btn)
        outer.addLayout(foot)
        self.set_devices(list_devices())

    # ------------------------------------------------------------ values
    def set_devices(self, devices: list[Device]) -> None:
        self.devices_found = devices
        self.devices_label.setText("Found: " + "; ".join(f"<b>{d.id}</b> {html.escape(d.name)} "
                                                        f"({fmt_bytes(d.total_bytes)})" for d in devices))
        self.split.set_available_devices(devices)

    def set_config(self, cfg: EngineConfig) -> None:
        self.model_picker.set_model(cfg.model)
        self.split.set_config(cfg.devices, cfg.layer_split)
        self.parallel.setValue(cfg.parallel)
        self._fill_groups(cfg.batch_groups)
        self.draft.setCurrentText(cfg.draft)
        self.spec.setValue(cfg.spec)
        self.spec_min_p.setValue(cfg.spec_min_p)
        self.piped_mtp.setValue(cfg.piped_mtp)
        self.ctx.setValue(cfg.ctx)
        self.dtype.setCurrentText(cfg.dtype)
        self.decode_kernel.setCurrentText(cfg.decode_kernel)
        self._model_changed(cfg.model)

    def config(self) -> EngineConfig:
        return EngineConfig(model=self.model_picker.model(), devices=self.split.devices_string(),
                            layer_split=self.split.split_string(), parallel=self.parallel.value(),
                            batch_groups=self.groups.currentData() or "auto", ctx=self.ctx.value(),
                            draft=self.draft.currentText(), spec=self.spec.value(),
                            spec_min_p=round(self.spec_min_p.value(), 4), piped_mtp=self.piped_mtp.value(),
                            dtype=self.dtype.currentText(), decode_kernel=self.decode_kernel.currentText())

    def _fill_groups(self, current: str = "auto") -> None:
        self.groups.blockSignals(True)
        self.groups.clear()
        self.groups.addItem("auto (one per stage)", "auto")
        n = self.parallel.value()
        for g in (d for d in range(1, n + 1) if n % d == 0):
            self.groups.addItem(f"{g} group{'s' if g > 1 else ''} of {n // g}", str(g))
        self.groups.setCurrentIndex(max(self.groups.findData(str(current)), 0))
        self.groups.blockSignals(False)
        self._layout_changed()

    def _parallel_changed(self, _v: int) -> None:
        self._fill_groups(self.groups.currentData() or "auto")

    def _model_changed(self, key: str) -> None:
        self.split.set_model(self.model_picker.infos.get(key))
        self._update_mtp_note()

    def _probe_done(self, key: str, _result) -> None:
        if key == self.model_picker.model():
            self.split.set_model(self.model_picker.infos.get(key))
            self._update_mtp_note()

    def _update_mtp_note(self) -> None:
        info = self.model_picker.infos.get(self.model_picker.model())
        if info is None:
            self.mtp_note.setText("")
        elif info.mtp_file:
            self.mtp_note.setText(f"MTP drafts load the layer trained for this model "
                                  f"({os.path.basename(info.mtp_file)}).")
        elif info.mtp_layers:
            self.mtp_note.setText(f"This model has {info.mtp_layers} MTP layer(s).")
        else:
            why = f" ({info.mtp_note})" if info.mtp_note else ""
            self.mtp_note.setText(f"This model has no MTP layer{why}: MTP drafts fall back to none "
                                  "(lookup still works).")

    def _layout_changed(self, *_):
        self.split.set_kv_params(self.ctx.value(), self.parallel.value(), self.dtype.currentText())
        n_stages = len(self.split.devices)
        c = self.ready.config if self.ready else None
        if c is not None and c.parallel == self.parallel.value() and len(c.stages) == n_stages:
            self.diagram.set_layout(c.groups, n_stages, "effective")
        else:
            self.diagram.set_layout(predict_groups(self.parallel.value(), self.groups.currentData() or "auto",
                                                   n_stages), n_stages, "predicted")

    # ------------------------------------------------------------ engine feedback
    def set_loading(self, fraction: float | None, message: str = "") -> None:
        """fraction None = not loading."""
        loading = fraction is not None
        self.progress.setVisible(loading)
        self.apply_btn.setEnabled(not loading)
        if loading:
            self.progress.setValue(int(1000 * max(0.0, min(1.0, fraction))))
            self.progress.setFormat(f"{message or 'loading'} — %p%")
            self.status.setObjectName("muted")
            self.status.setText("Loading…")

    def set_ready(self, ready: Ready, key: str | None = None) -> None:
        self.ready = ready
        key = key or self.model_picker.model()
        self.model_picker.set_info(key, ready.model)
        self.split.set_model(ready.model)
        self.split.calibrate(ready.config.stages)
        self._update_mtp_note()
        self.effective.setText(effective_html(ready))
        self.set_loading(None)
        n_fb = len(ready.config.fallbacks)
        self.status.setText(f"Loaded in {ready.load_seconds:.1f} s" + (f" with {n_fb} fallback(s)" if n_fb else ""))
        self._layout_changed()

    def set_error(self, text: str) -> None:
        self.set_loading(None)
        self.status.setText(f"<span style='color:{theme.current().error}'>{html.escape(text)}</span>")
