"""The list of conversations: new, select, rename, delete (a view; the controller owns the store)."""
from __future__ import annotations

import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QInputDialog, QListWidget, QListWidgetItem, QMenu, QMessageBox, QPushButton,
                               QVBoxLayout, QWidget)

from app.chat_store import Conversation


def _when(ts: float) -> str:
    d = time.time() - ts
    if d < 60:
        return "just now"
    if d < 3600:
        return f"{int(d // 60)} min ago"
    if d < 86400:
        return time.strftime("%H:%M", time.localtime(ts))
    return time.strftime("%d %b", time.localtime(ts))


class ConversationList(QWidget):
    newRequested = Signal()
    selected = Signal(int)
    renameRequested = Signal(int, str)
    deleteRequested = Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self._busy: set[int] = set()
        self._updating = False
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 8, 4, 8)
        self.new_btn = QPushButton("+  New chat")
        self.new_btn.setToolTip("New chat (Ctrl+N)")
        self.new_btn.clicked.connect(self.newRequested.emit)
        lay.addWidget(self.new_btn)
        self.list = QListWidget()
        self.list.setObjectName("conversationList")
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setWordWrap(False)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._menu)
        self.list.currentItemChanged.connect(self._current_changed)
        self.list.itemDoubleClicked.connect(lambda it: self._rename(it))
        lay.addWidget(self.list, 1)

    def set_conversations(self, convs: list[Conversation], current_id: int | None) -> None:
        self._updating = True
        try:
            self.list.clear()
            for c in convs:
                dot = "● " if c.id in self._busy else ""
                it = QListWidgetItem(f"{dot}{c.title}\n{_when(c.updated_at)}")
                it.setData(Qt.ItemDataRole.UserRole, c.id)
                it.setToolTip(c.title)
                self.list.addItem(it)
                if c.id == current_id:
                    self.list.setCurrentItem(it)
        finally:
            self._updating = False

    def set_busy(self, conv_ids: set[int]) -> None:
        self._busy = set(conv_ids)

    def current_id(self) -> int | None:
        it = self.list.currentItem()
        return it.data(Qt.ItemDataRole.UserRole) if it else None

    def ids(self) -> list[int]:
        return [self.list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.list.count())]

    def _current_changed(self, cur, _prev) -> None:
        if cur is not None and not self._updating:
            self.selected.emit(cur.data(Qt.ItemDataRole.UserRole))

    def _menu(self, pos) -> None:
        it = self.list.itemAt(pos)
        if it is None:
            return
        m = QMenu(self)
        m.addAction("Rename…", lambda: self._rename(it))
        m.addAction("Delete", lambda: self._delete(it))
        m.exec(self.list.mapToGlobal(pos))

    def _rename(self, it: QListWidgetItem) -> None:
        old = it.toolTip()
        text, ok = QInputDialog.getText(self, "Rename conversation", "Title:", text=old)
        if ok and text.strip():
            self.renameRequested.emit(it.data(Qt.ItemDataRole.UserRole), text.strip())

    def _delete(self, it: QListWidgetItem) -> None:
        if QMessageBox.question(self, "Delete conversation", f"Delete “{it.toolTip()}” and all its messages?") \
                == QMessageBox.StandardButton.Yes:
            self.deleteRequested.emit(it.data(Qt.ItemDataRole.UserRole))
