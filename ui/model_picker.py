"""Model picker: the bundled default, recent models, a file dialog; shows the GGUF's metadata.

Metadata comes from the engine's Ready.model once loaded. For a file not loaded yet, an optional
`probe(path) -> ModelInfo` (given by app/gui_main.py; it reads the GGUF header) runs on a thread.
"""
from __future__ import annotations

import os
import threading

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QComboBox, QFileDialog, QFormLayout, QGroupBox, QHBoxLayout, QLabel, QPushButton,
                               QVBoxLayout)

from engine.messages import ModelInfo
from ui.devices import fmt_bytes

DEFAULT_LABEL = "Bundled default — SmolLM2-135M-Instruct (Q4_1)"
FIELDS = [("name", "Name"), ("arch", "Architecture"), ("layers", "Layers"), ("width", "Embedding / heads"),
          ("vocab", "Vocabulary"), ("context", "Trained context"), ("quant", "Tensor types"), ("size", "File size"),
          ("mtp", "MTP draft layers"), ("template", "Chat template"), ("source", "")]


class ModelPicker(QGroupBox):
    modelChanged = Signal(str)
    _probed = Signal(str, object)             # path, ModelInfo | Exception (from the probe thread)

    def __init__(self, probe=None, parent=None):
        super().__init__("Model", parent)
        self.probe = probe
        self.infos: dict[str, ModelInfo] = {}  # path or "default" -> metadata
        self.loaded: set[str] = set()          # keys whose metadata came from the engine's Ready
        self._probed.connect(self._on_probed)
        lay = QVBoxLayout(self)
        row = QHBoxLayout()
        self.combo = QComboBox()
        self.combo.setMinimumContentsLength(24)
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.combo.currentIndexChanged.connect(self._picked)
        row.addWidget(self.combo, 1)
        self.browse = QPushButton("Open GGUF…")
        self.browse.clicked.connect(self._browse)
        row.addWidget(self.browse)
        lay.addLayout(row)
        self.form = QFormLayout()
        self.values: dict[str, QLabel] = {}
        for key, label in FIELDS:
            v = QLabel("—")
            v.setWordWrap(True)
            if key == "source":
                v.setObjectName("muted")
            self.values[key] = v
            self.form.addRow(label, v)
        lay.addLayout(self.form)
        self._recent: list[str] = []
        self._fill(["default"], "default")

    # ------------------------------------------------------------ choices
    def _fill(self, models: list[str], current: str) -> None:
        self.combo.blockSignals(True)
        self.combo.clear()
        seen = []
        for m in ["default", *models, current]:
            if m and m not in seen:
                seen.append(m)
        for m in seen:
            label = DEFAULT_LABEL if m == "default" else f"{os.path.basename(m)}  —  {os.path.dirname(m)}"
            self.combo.addItem(label, m)
            self.combo.setItemData(self.combo.count() - 1, m, 3)     # tooltip
        self.combo.setCurrentIndex(max(self.combo.findData(current), 0))
        self.combo.blockSignals(False)
        self._show(current)

    def set_recent(self, recent: list[str]) -> None:
        self._recent = list(recent)
        self._fill(self._recent, self.model())

    def set_model(self, model: str) -> None:
        self._fill(self._recent, model or "default")

    def model(self) -> str:
        return self.combo.currentData() or "default"

    def _picked(self, _i: int) -> None:
        self._show(self.model())
        self.modelChanged.emit(self.model())

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a GGUF model", os.path.expanduser("~"),
                                              "GGUF models (*.gguf);;All files (*)")
        if path:
            self.choose_file(path)

    def choose_file(self, path: str) -> None:
        if path not in self._recent:
            self._recent.insert(0, path)
        self._fill(self._recent, path)
        self.modelChanged.emit(path)

    # ------------------------------------------------------------ metadata
    def set_info(self, key: str, info: ModelInfo, loaded: bool = True) -> None:
        self.infos[key] = info
        if loaded:
            self.loaded.add(key)
        if key == self.model():
            self._show(key)

    def _show(self, key: str) -> None:
        info = self.infos.get(key)
        if info is not None:
            self._render(info, "from the loaded model" if key in self.loaded else "")
            return
        for v in self.values.values():
            v.setText("—")
        if self.probe is not None:
            self.values["source"].setText("reading the file header…")
            threading.Thread(target=self._run_probe, args=(key,), daemon=True, name="strata-probe").start()
        else:
            self.values["source"].setText("shown once the model is loaded")

    def _run_probe(self, key: str) -> None:
        try:
            self._probed.emit(key, self.probe(key))
        except Exception as e:  # noqa: BLE001 - shown in the form
            self._probed.emit(key, e)

    def _on_probed(self, key: str, result) -> None:
        if isinstance(result, ModelInfo):
            self.infos.setdefault(key, result)
            if key == self.model():
                self._render(self.infos[key], "")
        elif key == self.model():
            self.values["source"].setText(f"could not read this file: {result}")

    def _render(self, info: ModelInfo, source: str) -> None:
        quant = info.quant_mix() or ", ".join(f"{k} ×{n}" for k, n in sorted(info.quant_types.items(),
                                                                             key=lambda kv: -kv[1]))
        if info.unsupported:
            quant += f"\n⚠ cannot load: {info.unsupported}"
        text = {
            "name": info.name, "arch": info.arch, "layers": str(info.n_layers),
            "width": f"{info.n_embd} · {info.n_heads} heads / {info.n_kv_heads} KV heads",
            "vocab": f"{info.vocab_size:,}", "context": f"{info.context_length:,} tokens", "quant": quant or "—",
            "size": fmt_bytes(info.file_bytes) if info.file_bytes else "—",
            "mtp": info.mtp_text(),
            "template": ("yes" if info.has_chat_template else "no (base model: raw prompt)")
                        + f" · function calls: {info.tool_format}",
            "source": source or "read from the file header",
        }
        for k, v in text.items():
            self.values[k].setText(v)
        self.values["name"].setToolTip(info.path)
