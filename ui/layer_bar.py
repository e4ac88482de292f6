"""The layer bar of the split editor: every layer coloured by its stage; stage boundaries drag."""
from __future__ import annotations

from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import QWidget

from ui import theme


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
            label = self.labels[s] if s < len(self.labels) else f"S{s}"
            label = p.fontMetrics().elidedText(label, Qt.TextElideMode.ElideRight, int(seg.width()) - 8)
            box = p.fontMetrics().boundingRect(label).adjusted(-4, -1, 4, 1)
            box.moveCenter(seg.center().toPoint())
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(QColor(0, 0, 0, 110))               # a dark chip keeps the label readable on any colour
            p.drawRoundedRect(box, 3, 3)
            p.setPen(QColor("#ffffff"))
            p.drawText(seg, Qt.AlignmentFlag.AlignCenter, label)
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
