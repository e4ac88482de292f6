"""The engine error dialog: names the cause (load error or crash), shows the engine's last output,
and offers "Restart with the same settings". Non-blocking (`open()`), so the app keeps running."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton,
                               QStyle, QToolButton, QVBoxLayout)

KIND_TITLES = {
    "model_file": "The model file cannot be used",
    "config": "The configuration cannot be used",
    "oom": "Out of memory",
    "dead": "The engine stopped",
    "internal": "The engine failed",
    "protocol": "The engine could not be reached",
}

KIND_HINTS = {
    "model_file": "Pick another GGUF file in Settings, or go back to the previous model.",
    "config": "Change the layer split, slots or groups in Settings.",
    "oom": "Move layers to another device, lower the context or the number of slots.",
    "dead": "Your conversations are saved; a reply that was being written is kept and marked interrupted.",
}


class EngineErrorDialog(QDialog):
    restartRequested = Signal()
    settingsRequested = Signal()
    previousRequested = Signal()

    def __init__(self, kind: str, message: str, details: str = "", previous: str = "", parent=None):
        super().__init__(parent)
        self.kind, self.message = kind, message
        self.setWindowTitle("Strata Studio — engine error")
        self.setMinimumWidth(520)
        lay = QVBoxLayout(self)
        head = QHBoxLayout()
        icon = QLabel()
        icon.setPixmap(self.style().standardIcon(QStyle.StandardPixmap.SP_MessageBoxCritical).pixmap(40, 40))
        head.addWidget(icon, 0, Qt.AlignmentFlag.AlignTop)
        text = QVBoxLayout()
        self.title = QLabel(KIND_TITLES.get(kind, "Engine error"))
        self.title.setObjectName("heading")
        self.cause = QLabel(message)
        self.cause.setObjectName("errorText")
        self.cause.setWordWrap(True)
        self.cause.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        text.addWidget(self.title)
        text.addWidget(self.cause)
        hint = QLabel(KIND_HINTS.get(kind, ""))
        hint.setObjectName("muted")
        hint.setWordWrap(True)
        text.addWidget(hint)
        head.addLayout(text, 1)
        lay.addLayout(head)

        self.details = QPlainTextEdit(details.strip())
        self.details.setReadOnly(True)
        self.details.setMinimumHeight(140)
        self.details.hide()
        if details.strip():
            toggle = QToolButton()
            toggle.setText("Engine output")
            toggle.setCheckable(True)
            toggle.setArrowType(Qt.ArrowType.RightArrow)
            toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
            toggle.toggled.connect(lambda on: (self.details.setVisible(on), toggle.setArrowType(
                Qt.ArrowType.DownArrow if on else Qt.ArrowType.RightArrow), self.adjustSize()))
            lay.addWidget(toggle)
        lay.addWidget(self.details)

        buttons = QDialogButtonBox()
        self.restart_btn = QPushButton("Restart with the same settings")
        self.restart_btn.setDefault(True)
        buttons.addButton(self.restart_btn, QDialogButtonBox.ButtonRole.AcceptRole)
        self.restart_btn.clicked.connect(lambda: (self.restartRequested.emit(), self.accept()))
        self.previous_btn = None
        if previous:
            self.previous_btn = QPushButton(f"Load {previous} instead")
            buttons.addButton(self.previous_btn, QDialogButtonBox.ButtonRole.ActionRole)
            self.previous_btn.clicked.connect(lambda: (self.previousRequested.emit(), self.accept()))
        settings_btn = QPushButton("Open settings")
        buttons.addButton(settings_btn, QDialogButtonBox.ButtonRole.ActionRole)
        settings_btn.clicked.connect(lambda: (self.settingsRequested.emit(), self.accept()))
        buttons.addButton(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
