"""One chat message: a bubble with rendered Markdown, actions (copy, edit, regenerate) and a stats line."""
from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (QApplication, QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QSizePolicy,
                               QToolButton, QVBoxLayout, QWidget)

from ui import theme
from ui.chat_format import format_stats, render_markdown

NOTICES = {"stopped": ("info", "Stopped"), "interrupted": ("error", "Interrupted"), "error": ("error", "Error")}


class MessageWidget(QFrame):
    copyRequested = Signal(object)          # self
    editResend = Signal(object, str)        # self, new text
    regenerateRequested = Signal(object)    # self

    def __init__(self, role: str, text: str = "", message_id: int | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.role, self.text, self.message_id = role, text, message_id
        self.streaming = False
        self.setObjectName("bubble")
        self.setProperty("role", role)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 8, 12, 6)
        lay.setSpacing(4)

        head = QHBoxLayout()
        self.role_label = QLabel({"user": "You", "assistant": "Assistant", "system": "System"}.get(role, role))
        self.role_label.setObjectName("roleLabel")
        head.addWidget(self.role_label)
        self.progress_label = QLabel("")
        self.progress_label.setObjectName("statsLabel")
        head.addWidget(self.progress_label)
        head.addStretch(1)
        lay.addLayout(head)

        self.body = QLabel()
        self.body.setObjectName("messageBody")
        self.body.setWordWrap(True)
        self.body.setTextFormat(Qt.TextFormat.RichText)
        self.body.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.body.setOpenExternalLinks(True)
        self.body.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        lay.addWidget(self.body)

        self.editor = QPlainTextEdit()
        self.editor.setObjectName("editBox")
        self.editor.hide()
        lay.addWidget(self.editor)
        self.edit_buttons = QWidget()
        eb = QHBoxLayout(self.edit_buttons)
        eb.setContentsMargins(0, 0, 0, 0)
        eb.addStretch(1)
        cancel, resend = QPushButton("Cancel"), QPushButton("Save && resend")
        resend.setObjectName("resendButton")
        cancel.clicked.connect(self.cancel_edit)
        resend.clicked.connect(lambda: self.editResend.emit(self, self.editor.toPlainText().strip()))
        eb.addWidget(cancel)
        eb.addWidget(resend)
        self.edit_buttons.hide()
        lay.addWidget(self.edit_buttons)

        self.notice = QLabel("")
        self.notice.setObjectName("noticeLabel")
        self.notice.setWordWrap(True)
        self.notice.hide()
        lay.addWidget(self.notice)

        foot = QHBoxLayout()
        foot.setSpacing(2)
        self.stats_label = QLabel("")
        self.stats_label.setObjectName("statsLabel")
        self.stats_label.setWordWrap(True)
        self.stats_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.stats_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        foot.addWidget(self.stats_label, 1)
        self.copy_btn = self._action("Copy", lambda: self.copyRequested.emit(self))
        self.edit_btn = self._action("Edit", self.begin_edit)
        self.regen_btn = self._action("Regenerate", lambda: self.regenerateRequested.emit(self))
        for b in (self.copy_btn, self.edit_btn, self.regen_btn):
            foot.addWidget(b, 0, Qt.AlignmentFlag.AlignBottom)
        lay.addLayout(foot)
        self.edit_btn.setVisible(role == "user")
        self.regen_btn.setVisible(False)

        self._render_timer = QTimer(self)             # coalesce re-renders while tokens stream in
        self._render_timer.setSingleShot(True)
        self._render_timer.setInterval(50)
        self._render_timer.timeout.connect(self.render)
        self.render()

    def _action(self, text: str, slot) -> QToolButton:
        b = QToolButton()
        b.setObjectName("msgAction")
        b.setText(text)
        b.setCursor(Qt.CursorShape.PointingHandCursor)
        b.clicked.connect(slot)
        return b

    # ------------------------------------------------------------ content
    def render(self) -> None:
        t = theme.current()
        if not self.text and self.streaming:
            self.body.setText(f'<span style="color:{t.muted}">…</span>')
            return
        self.body.setText(render_markdown(self.text, t.code_bg, streaming=self.streaming, dark=t.dark, muted=t.muted))

    def set_text(self, text: str) -> None:
        self.text = text
        self.render()

    def append_text(self, delta: str) -> None:
        self.text += delta
        if not self._render_timer.isActive():
            self._render_timer.start()

    def set_streaming(self, on: bool) -> None:
        self.streaming = on
        self.copy_btn.setEnabled(not on)
        if not on:
            self._render_timer.stop()
            self.progress_label.setText("")
            self.render()

    def set_prompt_progress(self, read: int, total: int, cached: int = 0) -> None:
        extra = f", {cached} cached" if cached else ""
        self.progress_label.setText(f"reading prompt {read}/{total}{extra}" if read < total else "")

    def set_stats(self, stats: dict, config: dict) -> None:
        self.stats_label.setText(format_stats(stats, config))
        self.stats_label.setToolTip(self.stats_label.text())

    def set_status(self, status: str, reason: str = "") -> None:
        kind, title = NOTICES.get(status, (None, ""))
        if kind is None:
            self.notice.hide()
            return
        self.notice.setProperty("kind", kind)
        self.notice.setText(f"{title}: {reason}" if reason else title)
        self.notice.style().unpolish(self.notice)
        self.notice.style().polish(self.notice)
        self.notice.show()

    def set_can_regenerate(self, on: bool) -> None:
        self.regen_btn.setVisible(on and self.role == "assistant")

    # ------------------------------------------------------------ edit in place
    def begin_edit(self) -> None:
        self.editor.setPlainText(self.text)
        self.body.hide()
        self.editor.setFixedHeight(max(80, min(240, self.body.sizeHint().height() + 30)))
        self.editor.show()
        self.edit_buttons.show()
        self.editor.setFocus()

    def cancel_edit(self) -> None:
        self.editor.hide()
        self.edit_buttons.hide()
        self.body.show()

    def copy_to_clipboard(self) -> None:
        QApplication.clipboard().setText(self.text)
