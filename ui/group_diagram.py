"""A small diagram of the slot groups: which slots travel together, and how groups pipeline
through the stages (while stage k runs group g's window, stage k+1 runs group g-1's)."""
from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QSizePolicy, QWidget

from ui import theme

GROUP_COLOURS = ["#7E57C2", "#26A69A", "#EF6C00", "#5C6BC0", "#8D6E63", "#EC407A", "#9CCC65", "#78909C"]


def predict_groups(parallel: int, batch_groups: str, n_stages: int) -> list[list[int]]:
    """The layout the engine is asked for (engine/layout.py slot_groups): `auto` = the most groups,
    up to one per stage, that divide the slots; slots are split into contiguous groups."""
    parallel = max(parallel, 1)
    if batch_groups.strip().isdigit() and int(batch_groups) > 0 and parallel % int(batch_groups) == 0:
        g = int(batch_groups)
    else:
        g = max(d for d in range(1, min(max(n_stages, 1), parallel) + 1) if parallel % d == 0)
    per = parallel // g
    return [list(range(i * per, (i + 1) * per)) for i in range(g)]


def stage_group_at(step: int, stage: int, n_groups: int, n_stages: int) -> int | None:
    """The group whose window stage `stage` runs at `step` (None = the stage idles: a bubble).
    Group g enters stage 0 at step g and moves one stage per step; it can start its next window
    once its previous one left the last stage, so the cycle is max(groups, stages) steps."""
    j, cycle = step - stage, max(n_groups, n_stages)
    return j % cycle if j >= 0 and j % cycle < n_groups else None


class GroupDiagram(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.groups: list[list[int]] = [[0]]
        self.n_stages = 1
        self.caption = "predicted"
        self.setMinimumHeight(90)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_layout(self, groups: list[list[int]], n_stages: int, caption: str) -> None:
        self.groups, self.n_stages, self.caption = groups or [[0]], max(n_stages, 1), caption
        rows = max(len(self.groups), self.n_stages)
        self.setFixedHeight(30 + 20 * rows)
        self.update()

    def paintEvent(self, _ev) -> None:
        t = theme.current()
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setPen(QColor(t.muted))
        half = self.width() * 0.5
        p.drawText(QRectF(0, 0, half, 16), Qt.AlignmentFlag.AlignLeft, f"Slots per group ({self.caption})")
        p.drawText(QRectF(half + 8, 0, half, 16), Qt.AlignmentFlag.AlignLeft, "Pipeline: stage × step")
        # groups and their slots
        for g, slots in enumerate(self.groups):
            y = 22 + 20 * g
            p.setPen(QColor(t.fg))
            p.drawText(QRectF(0, y, 30, 16), Qt.AlignmentFlag.AlignVCenter, f"G{g}")
            c = QColor(GROUP_COLOURS[g % len(GROUP_COLOURS)])
            box = min(28.0, (half - 40) / max(len(slots), 1) - 3)
            for i, s in enumerate(slots):
                r = QRectF(32 + i * (box + 3), y, box, 16)
                p.setBrush(c)
                p.setPen(Qt.PenStyle.NoPen)
                p.drawRoundedRect(r, 3, 3)
                if box >= 14:
                    p.setPen(QColor("#ffffff"))
                    p.drawText(r, Qt.AlignmentFlag.AlignCenter, str(s))
        # which group each stage runs at each step
        n_g, n_s = len(self.groups), self.n_stages
        steps = min(n_s + n_g + 1, 10)
        cw = (half - 44) / steps
        for s in range(n_s):
            y = 22 + 20 * s
            p.setPen(QColor(t.fg))
            p.drawText(QRectF(half + 8, y, 30, 16), Qt.AlignmentFlag.AlignVCenter, f"S{s}")
            for k in range(steps):
                r = QRectF(half + 40 + k * cw, y, cw - 2, 16)
                g = stage_group_at(k, s, n_g, n_s)
                p.setBrush(QColor(t.border) if g is None else QColor(GROUP_COLOURS[g % len(GROUP_COLOURS)]))
                p.setPen(Qt.PenStyle.NoPen)
                p.drawRect(r)
                if g is not None and cw >= 18:
                    p.setPen(QColor("#ffffff"))
                    p.drawText(r, Qt.AlignmentFlag.AlignCenter, f"G{g}")
