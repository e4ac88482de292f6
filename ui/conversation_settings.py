"""System prompt and sampling settings of one conversation (shown above the messages, collapsible)."""
from __future__ import annotations

import msgspec
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QCheckBox, QDoubleSpinBox, QFormLayout, QFrame, QGridLayout, QLabel, QPlainTextEdit,
                               QSpinBox, QVBoxLayout)

from engine.messages import SamplingParams


def _dspin(lo: float, hi: float, step: float, decimals: int = 2) -> QDoubleSpinBox:
    s = QDoubleSpinBox()
    s.setRange(lo, hi)
    s.setSingleStep(step)
    s.setDecimals(decimals)
    return s


def _ispin(lo: int, hi: int) -> QSpinBox:
    s = QSpinBox()
    s.setRange(lo, hi)
    return s


class ConversationSettings(QFrame):
    """Edits emit `changed(system_prompt, sampling_dict)`; `set_values` does not emit."""

    changed = Signal(str, dict)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("conversationSettings")
        self._loading = False
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 8)
        form = QFormLayout()
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setPlaceholderText("System prompt for this conversation")
        self.system_prompt.setFixedHeight(64)
        form.addRow("System prompt", self.system_prompt)
        lay.addLayout(form)

        grid = QGridLayout()
        self.temperature = _dspin(0, 5, 0.05)
        self.top_k = _ispin(0, 100_000)
        self.top_p = _dspin(0, 1, 0.01)
        self.min_p = _dspin(0, 1, 0.01)
        self.repetition_penalty = _dspin(0.5, 3, 0.01)
        self.seed = _ispin(0, 2 ** 31 - 1)
        self.max_tokens = _ispin(1, 1_000_000)
        self.ignore_eos = QCheckBox("ignore EOS")
        fields = [("Temperature", self.temperature), ("Top-k", self.top_k), ("Top-p", self.top_p),
                  ("Min-p", self.min_p), ("Repeat penalty", self.repetition_penalty), ("Seed", self.seed),
                  ("Max tokens", self.max_tokens)]
        for i, (name, w) in enumerate(fields):
            r, c = divmod(i, 4)
            grid.addWidget(QLabel(name), r, 2 * c)
            grid.addWidget(w, r, 2 * c + 1)
            sig = getattr(w, "valueChanged")
            sig.connect(self._emit)
        grid.addWidget(self.ignore_eos, 1, 6, 1, 2)
        self.ignore_eos.toggled.connect(self._emit)
        self.system_prompt.textChanged.connect(self._emit)
        lay.addLayout(grid)
        hint = QLabel("Temperature 0 = greedy. Changes apply to the next reply and are saved with the conversation.")
        hint.setObjectName("muted")
        lay.addWidget(hint)

    def set_values(self, system_prompt: str, sampling: SamplingParams) -> None:
        self._loading = True
        try:
            self.system_prompt.setPlainText(system_prompt)
            for name in ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "seed", "max_tokens"):
                getattr(self, name).setValue(getattr(sampling, name))
            self.ignore_eos.setChecked(sampling.ignore_eos)
        finally:
            self._loading = False

    def sampling(self, base: SamplingParams | None = None) -> SamplingParams:
        d = msgspec.structs.asdict(base or SamplingParams())
        for name in ("temperature", "top_p", "min_p", "repetition_penalty"):
            d[name] = float(getattr(self, name).value())
        for name in ("top_k", "seed", "max_tokens"):
            d[name] = int(getattr(self, name).value())
        d["ignore_eos"] = self.ignore_eos.isChecked()
        return SamplingParams(**d)

    def _emit(self, *_):
        if not self._loading:
            self.changed.emit(self.system_prompt.toPlainText(), msgspec.structs.asdict(self.sampling()))
