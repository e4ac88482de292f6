"""Light and dark themes that follow the system colour scheme.

The system's choice comes from `QStyleHints.colorScheme()` (Qt 6.5+); where the platform does not
say (offscreen, some X11 desktops) the palette's window colour decides. The Fusion style gets a
matching palette, `resources/style.qss` is filled with the theme's colours (`@name` tokens), and
pyqtgraph gets the same background. `ThemeManager.changed` fires when the system switches.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources as ires

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QIcon, QPalette
from PySide6.QtWidgets import QApplication

# curves: one distinct colour per stage / slot / device (Okabe-Ito, readable on light and dark)
SERIES = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999"]


@dataclass(frozen=True)
class Theme:
    dark: bool
    bg: str
    surface: str          # panels, input fields
    fg: str
    muted: str
    border: str
    accent: str
    button: str           # filled buttons (white text on it)
    user_bubble: str
    assistant_bubble: str
    code_bg: str
    warn: str
    error: str
    ok: str

    def series(self, i: int) -> str:
        return SERIES[i % len(SERIES)]


LIGHT = Theme(False, bg="#f6f7f9", surface="#ffffff", fg="#1d2329", muted="#68717c", border="#d5dae0",
              accent="#2f6fdd", button="#2f6fdd", user_bubble="#e4edfc", assistant_bubble="#ffffff", code_bg="#f0f2f5",
              warn="#a35f00", error="#c62828", ok="#2e7d32")
DARK = Theme(True, bg="#1c1f24", surface="#252930", fg="#e3e6ea", muted="#9aa3ad", border="#3a404a",
             accent="#6ea0ff", button="#3763c4", user_bubble="#2b3a55", assistant_bubble="#252930", code_bg="#16181c",
             warn="#f0b050", error="#ff6b6b", ok="#66bb6a")


def palette_for(t: Theme) -> QPalette:
    p = QPalette()
    R = QPalette.ColorRole
    for role, c in ((R.Window, t.bg), (R.WindowText, t.fg), (R.Base, t.surface), (R.AlternateBase, t.bg),
                    (R.Text, t.fg), (R.Button, t.surface), (R.ButtonText, t.fg), (R.Highlight, t.accent),
                    (R.HighlightedText, "#ffffff"), (R.ToolTipBase, t.surface), (R.ToolTipText, t.fg),
                    (R.PlaceholderText, t.muted), (R.Link, t.accent), (R.Mid, t.border), (R.Dark, t.border)):
        p.setColor(role, QColor(c))
    for role in (R.Text, R.ButtonText, R.WindowText):
        p.setColor(QPalette.ColorGroup.Disabled, role, QColor(t.muted))
    return p


def style_sheet(t: Theme) -> str:
    qss = ires.files("resources").joinpath("style.qss").read_text("utf-8")
    # longest names first so @fg does not eat @fg_something
    for name in sorted(Theme.__dataclass_fields__, key=len, reverse=True):
        val = getattr(t, name)
        if isinstance(val, str):
            qss = qss.replace("@" + name, val)
    return qss


def app_icon() -> QIcon:
    return QIcon(str(ires.files("resources").joinpath("strata.svg")))


class ThemeManager(QObject):
    changed = Signal(object)          # Theme

    def __init__(self, app: QApplication, mode: str = "system"):
        super().__init__(app)
        self.app = app
        self.mode = mode
        self._system_palette = QPalette(app.palette())
        self.theme = LIGHT
        app.setStyle("Fusion")
        app.styleHints().colorSchemeChanged.connect(self._scheme_changed)
        self.apply()

    def _scheme_changed(self, *_):
        if self.mode == "system":
            self.apply()

    def _wanted(self) -> Theme:
        if self.mode == "dark":
            return DARK
        if self.mode == "light":
            return LIGHT
        scheme = self.app.styleHints().colorScheme()
        if scheme == Qt.ColorScheme.Dark:
            return DARK
        if scheme == Qt.ColorScheme.Light:
            return LIGHT
        return DARK if self._system_palette.color(QPalette.ColorRole.Window).lightness() < 128 else LIGHT

    def apply(self) -> None:
        self.theme = self._wanted()
        set_current(self.theme)
        self.app.setPalette(palette_for(self.theme))
        self.app.setStyleSheet(style_sheet(self.theme))
        try:
            import pyqtgraph as pg
            pg.setConfigOptions(background=self.theme.surface, foreground=self.theme.fg, antialias=True)
        except ImportError:
            pass
        self.changed.emit(self.theme)


_current: list[Theme] = [LIGHT]


def current() -> Theme:
    return _current[0]


def set_current(t: Theme) -> None:
    _current[0] = t
