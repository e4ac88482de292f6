"""The chat: messages of one conversation, the streaming reply, the composer, and per-chat settings.

A view only: it shows what it is given and emits what the user asks for (send, stop, regenerate,
edit-and-resend, settings changed). ui/chat_controller.py does the engine and the store.
"""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QScrollArea, QSizePolicy,
                               QToolButton, QVBoxLayout, QWidget)

from app.chat_store import Message
from ui.conversation_settings import ConversationSettings
from ui.message_widget import MessageWidget


class ElidedLabel(QLabel):
    """A one-line label that shortens its text with … instead of widening the layout."""

    def __init__(self, text: str = ""):
        super().__init__()
        self._full = ""
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setText(text)

    def setText(self, text: str) -> None:
        self._full = text
        self.setToolTip(text)
        self._elide()

    def text(self) -> str:
        return self._full

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        self._elide()

    def _elide(self) -> None:
        super().setText(self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, max(self.width(), 40)))


class ChatView(QWidget):
    sendRequested = Signal(str)
    stopRequested = Signal()
    regenerateRequested = Signal(int)            # id of the assistant message to replace
    editResendRequested = Signal(int, str)       # id of the user message, its new text

    def __init__(self, parent=None):
        super().__init__(parent)
        self.widgets: list[MessageWidget] = []
        self.streaming: MessageWidget | None = None
        self._busy = False
        self._engine_ready = False
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)

        head = QHBoxLayout()
        head.setContentsMargins(12, 8, 12, 4)
        self.title = ElidedLabel("New chat")
        self.title.setObjectName("heading")
        head.addWidget(self.title, 1)
        self.settings_toggle = QToolButton()
        self.settings_toggle.setText("System prompt && sampling")
        self.settings_toggle.setCheckable(True)
        self.settings_toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.settings_toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.settings_toggle.toggled.connect(self._toggle_settings)
        head.addWidget(self.settings_toggle)
        lay.addLayout(head)
        self.conv_settings = ConversationSettings()
        self.conv_settings.hide()
        lay.addWidget(self.conv_settings)

        self.scroll = QScrollArea()
        self.scroll.setObjectName("messageScroll")
        self.scroll.setWidgetResizable(True)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.column = QWidget()
        self.column.setObjectName("messageColumn")
        self.col_lay = QVBoxLayout(self.column)
        self.col_lay.setContentsMargins(16, 8, 16, 8)
        self.col_lay.setSpacing(10)
        self.empty = QLabel("Send a message to start. Ctrl+Enter sends, Esc stops the reply.")
        self.empty.setObjectName("muted")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.col_lay.addWidget(self.empty)
        self.col_lay.addStretch(1)
        self.scroll.setWidget(self.column)
        self.scroll.verticalScrollBar().rangeChanged.connect(self._follow)
        self._stick_to_bottom = True
        self.scroll.verticalScrollBar().valueChanged.connect(self._user_scrolled)
        lay.addWidget(self.scroll, 1)

        comp = QHBoxLayout()
        comp.setContentsMargins(12, 6, 12, 10)
        self.composer = QPlainTextEdit()
        self.composer.setObjectName("composer")
        self.composer.setPlaceholderText("Message Strata…  (Ctrl+Enter to send)")
        self.composer.setFixedHeight(76)
        comp.addWidget(self.composer, 1)
        buttons = QVBoxLayout()
        self.send_btn = QPushButton("Send")
        self.send_btn.setObjectName("sendButton")
        self.send_btn.setToolTip("Send (Ctrl+Enter)")
        self.stop_btn = QPushButton("Stop")
        self.stop_btn.setObjectName("stopButton")
        self.stop_btn.setToolTip("Stop the reply (Esc)")
        self.send_btn.clicked.connect(self.send)
        self.stop_btn.clicked.connect(self.stopRequested.emit)
        buttons.addWidget(self.send_btn)
        buttons.addWidget(self.stop_btn)
        comp.addLayout(buttons)
        lay.addLayout(comp)
        self._update_buttons()

    # ------------------------------------------------------------ composer
    def send(self) -> None:
        text = self.composer.toPlainText().strip()
        if not text or not self.send_btn.isEnabled():
            return
        self.composer.clear()
        self.sendRequested.emit(text)

    def set_busy(self, busy: bool) -> None:
        self._busy = busy
        self._update_buttons()

    def set_engine_ready(self, ready: bool) -> None:
        self._engine_ready = ready
        self._update_buttons()

    def _update_buttons(self) -> None:
        self.send_btn.setEnabled(self._engine_ready and not self._busy)
        self.stop_btn.setEnabled(self._busy)
        for w in self.widgets:
            w.edit_btn.setEnabled(not self._busy)
            w.regen_btn.setEnabled(not self._busy)

    def _toggle_settings(self, on: bool) -> None:
        self.conv_settings.setVisible(on)
        self.settings_toggle.setArrowType(Qt.ArrowType.DownArrow if on else Qt.ArrowType.RightArrow)

    # ------------------------------------------------------------ messages
    def clear(self) -> None:
        for w in self.widgets:
            w.setParent(None)
            w.deleteLater()
        self.widgets = []
        self.streaming = None
        self.empty.show()

    def show_messages(self, title: str, messages: list[Message]) -> None:
        self.clear()
        self.title.setText(title)
        for m in messages:
            self.add_message(m)
        self._stick_to_bottom = True
        self._refresh_regenerate()

    def _insert(self, w: MessageWidget) -> MessageWidget:
        self.empty.hide()
        self.col_lay.insertWidget(self.col_lay.count() - 1, w)
        self.widgets.append(w)
        w.copyRequested.connect(lambda mw: mw.copy_to_clipboard())
        w.editResend.connect(self._on_edit_resend)
        w.regenerateRequested.connect(lambda mw: mw.message_id is not None
                                      and self.regenerateRequested.emit(mw.message_id))
        self._update_buttons()
        return w

    def add_message(self, m: Message) -> MessageWidget:
        w = self._insert(MessageWidget(m.role, m.content, m.id))
        if m.role == "assistant":
            w.set_stats(m.stats, m.config)
        w.set_status(m.status, m.reason)
        self._refresh_regenerate()
        return w

    def begin_reply(self, text: str = "") -> MessageWidget:
        w = self._insert(MessageWidget("assistant", text))
        w.set_streaming(True)
        self.streaming = w
        self._stick_to_bottom = True
        self._refresh_regenerate()
        return w

    def finish_reply(self, m: Message) -> None:
        w = self.streaming
        self.streaming = None
        if w is None:
            self.add_message(m)
            return
        w.message_id = m.id
        w.set_text(m.content)
        w.set_streaming(False)
        w.set_stats(m.stats, m.config)
        w.set_status(m.status, m.reason)
        self._refresh_regenerate()

    def _refresh_regenerate(self) -> None:
        last = self.widgets[-1] if self.widgets else None
        for w in self.widgets:
            w.set_can_regenerate(w is last and self.streaming is None and w.message_id is not None)

    def _on_edit_resend(self, w: MessageWidget, text: str) -> None:
        if text and w.message_id is not None and not self._busy:
            self.editResendRequested.emit(w.message_id, text)

    # ------------------------------------------------------------ scrolling
    def _user_scrolled(self, value: int) -> None:
        bar = self.scroll.verticalScrollBar()
        self._stick_to_bottom = value >= bar.maximum() - 24

    def _follow(self, _lo: int, hi: int) -> None:
        if self._stick_to_bottom:
            self.scroll.verticalScrollBar().setValue(hi)
