"""The API tab: serve the loaded model to agents over the OpenAI-compatible HTTP API.

`control` (app/api_control.py) does the serving; this view only asks it to start and stop, shows the
address with a copy button, and warns when the address is reachable from other machines."""
from __future__ import annotations

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (QCheckBox, QFormLayout, QGroupBox, QHBoxLayout, QLabel, QLineEdit, QPushButton,
                               QSpinBox, QVBoxLayout, QWidget)

LOOPBACK = ("127.0.0.1", "localhost", "::1")


class ApiPanel(QWidget):
    def __init__(self, control, parent=None):
        super().__init__(parent)
        self.control = control
        box = QGroupBox("OpenAI-compatible API")
        form = QFormLayout(box)
        self.host = QLineEdit("127.0.0.1")
        self.port = QSpinBox()
        self.port.setRange(1, 65535)
        self.port.setValue(8080)
        self.key = QLineEdit()
        self.key.setPlaceholderText("none (every endpoint open on this address)")
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.serve = QCheckBox("Serve the loaded model")
        self.address = QLineEdit()
        self.address.setReadOnly(True)
        self.address.setPlaceholderText("not serving")
        self.copy_btn = QPushButton("Copy")
        self.copy_btn.setEnabled(False)
        row = QHBoxLayout()
        row.addWidget(self.address, 1)
        row.addWidget(self.copy_btn)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setObjectName("muted")
        form.addRow("Host", self.host)
        form.addRow("Port", self.port)
        form.addRow("API key", self.key)
        form.addRow(self.serve)
        form.addRow("Base URL", row)
        form.addRow(self.status)
        layout = QVBoxLayout(self)
        layout.addWidget(box)
        layout.addStretch(1)
        self.serve.toggled.connect(self._toggle)
        self.copy_btn.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.address.text()))

    def _toggle(self, on: bool) -> None:
        for w in (self.host, self.port, self.key):
            w.setEnabled(not on)
        if not on:
            self.control.stop()
            self._show("", "Stopped.")
            return
        host = self.host.text().strip() or "127.0.0.1"
        try:
            url = self.control.start(host, self.port.value(), self.key.text().strip() or None)
        except OSError as e:
            self.serve.blockSignals(True)
            self.serve.setChecked(False)
            self.serve.blockSignals(False)
            for w in (self.host, self.port, self.key):
                w.setEnabled(True)
            self._show("", f"Cannot serve on {host}:{self.port.value()}: {e.strerror or e}")
            return
        note = "Agents use this base URL with any API key." if not self.key.text().strip() else \
            "Agents send the key as 'Authorization: Bearer …'."
        if host not in LOOPBACK:
            note += " This address is reachable from other machines" + ("." if self.key.text().strip() else
                                                                          ": set an API key.")
        self._show(url, note)

    def _show(self, url: str, text: str) -> None:
        self.address.setText(url)
        self.copy_btn.setEnabled(bool(url))
        self.status.setText(text)

    def shutdown(self) -> None:
        self.control.stop()
