"""The main window: conversations | chat | (monitor, settings), status bar, shortcuts, layout memory."""
from __future__ import annotations

from PySide6.QtCore import QByteArray, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QLabel, QMainWindow, QSplitter, QTabWidget

from app.chat_store import ChatStore
from app.settings import Settings
from ui import theme
from ui.chat_controller import ChatController
from ui.chat_view import ChatView
from ui.conversation_list import ConversationList
from ui.engine_controller import EngineController, model_label
from ui.api_panel import ApiPanel
from ui.monitor import MonitorView
from ui.settings_panel import SettingsPanel

APP_NAME = "Strata Studio"
STATE_COLOURS = {"ready": "ok", "busy": "accent", "loading": "warn", "starting": "warn", "crashed": "error",
                 "stopped": "muted"}


class MainWindow(QMainWindow):
    def __init__(self, settings: Settings, store: ChatStore, bridge, probe=None, theme_manager=None,
                 api_control=None):
        super().__init__()
        self.settings, self.store, self.bridge = settings, store, bridge
        self.setWindowIcon(theme.app_icon())
        self.conversations = ConversationList()
        self.chat = ChatView()
        self.monitor = MonitorView()
        self.settings_panel = SettingsPanel(probe)
        self.side = QTabWidget()
        self.side.addTab(self.monitor, "Monitor")
        self.side.addTab(self.settings_panel, "Settings")
        self.api_panel = ApiPanel(api_control) if api_control is not None else None
        if self.api_panel is not None:
            self.side.addTab(self.api_panel, "API")
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("mainSplitter")
        for w in (self.conversations, self.chat, self.side):
            self.splitter.addWidget(w)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setChildrenCollapsible(False)
        self.setCentralWidget(self.splitter)

        # permanent widgets only: showMessage() would hide the engine state while a message shows
        self.state_label, self.model_label, self.note_label, self.speed_label = QLabel(), QLabel(), QLabel(), QLabel()
        self.note_label.setObjectName("muted")
        self.statusBar().addPermanentWidget(self.state_label)
        self.statusBar().addPermanentWidget(self.model_label)
        self.statusBar().addPermanentWidget(self.note_label, 1)
        self.statusBar().addPermanentWidget(self.speed_label)
        self._note_timer = QTimer(self)
        self._note_timer.setSingleShot(True)
        self._note_timer.timeout.connect(lambda: self.note_label.setText(""))

        self.chats = ChatController(store, settings, bridge, self.chat, self.conversations)
        self.engine = EngineController(bridge, settings, self)
        self.chats.message.connect(lambda m: self.flash(m, 8000))
        self.engine.titleChanged.connect(self._set_title)
        self.engine.showSettings.connect(self.show_settings)
        self.settings_panel.applyRequested.connect(self.apply_config)
        bridge.stateChanged.connect(self._on_state)
        bridge.loadProgress.connect(lambda p: self.settings_panel.set_loading(p.fraction, p.message))
        bridge.ready.connect(self._on_ready)
        bridge.error.connect(self._on_error)
        bridge.telemetry.connect(self._on_telemetry)
        if theme_manager is not None:
            theme_manager.changed.connect(self._theme_changed)
        self._actions()
        self._set_title("no model")
        self._on_state(bridge.state)
        self.settings_panel.model_picker.set_recent(settings.recent_models)
        self.settings_panel.set_config(settings.engine_config())
        self.restore_layout()
        self._open_last_conversation()

    # ------------------------------------------------------------ setup
    def _actions(self) -> None:
        def act(text, keys, slot, menu=None):
            a = QAction(text, self)
            a.setShortcuts([QKeySequence(k) for k in keys])
            a.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            a.triggered.connect(slot)
            self.addAction(a)
            if menu is not None:
                menu.addAction(a)
            return a
        bar = self.menuBar()
        chat_menu, engine_menu = bar.addMenu("&Chat"), bar.addMenu("&Engine")
        self.new_action = act("New chat", ["Ctrl+N"], self.chats.new_conversation, chat_menu)
        self.send_action = act("Send", ["Ctrl+Return", "Ctrl+Enter"], self.chat.send, chat_menu)
        self.stop_action = act("Stop reply", ["Esc"], self.chats.stop, chat_menu)
        chat_menu.addSeparator()
        act("Quit", ["Ctrl+Q"], self.close, chat_menu)
        self.settings_action = act("Settings…", ["Ctrl+,"], self.show_settings, engine_menu)
        act("Monitor", ["Ctrl+M"], lambda: self.side.setCurrentWidget(self.monitor), engine_menu)
        act("Restart engine with the same settings", [], self.engine.restart, engine_menu)

    def _open_last_conversation(self) -> None:
        convs = self.store.list_conversations()
        last = self.settings.data.get("last_conversation")
        ids = [c.id for c in convs]
        if last in ids:
            self.chats.select(last)
        elif convs:
            self.chats.select(convs[0].id)
        else:
            self.chats.new_conversation()

    # ------------------------------------------------------------ engine feedback
    def _set_title(self, model: str) -> None:
        self.setWindowTitle(f"{APP_NAME} — {model}")
        self.model_label.setText(model)

    def _on_state(self, state: str) -> None:
        colour = getattr(theme.current(), STATE_COLOURS.get(state, "muted"))
        self.state_label.setText(f"<span style='color:{colour}'>●</span> Engine: {state}")
        self.chat.set_engine_ready(state in ("ready", "busy"))
        if state in ("loading", "starting"):
            self.settings_panel.set_loading(0.0, "starting the engine" if state == "starting" else "loading")

    def _on_ready(self, ready) -> None:
        cfg = self.engine.good
        self.settings_panel.set_ready(ready, cfg.model if cfg else None)
        self.settings_panel.model_picker.set_recent(self.settings.recent_models)
        self.monitor.reset()
        n_fb = len(ready.config.fallbacks)
        self.flash(f"Loaded {model_label(ready.config.model_path)} in {ready.load_seconds:.1f} s"
                   + (f" — {n_fb} fallback(s), see Settings" if n_fb else ""), 10000)

    def flash(self, text: str, ms: int = 8000) -> None:
        """A passing note in the status bar (the engine state stays visible)."""
        self.note_label.setText(text)
        self._note_timer.start(ms)

    def _on_error(self, err) -> None:
        if not getattr(err, "request_id", ""):
            self.settings_panel.set_error(getattr(err, "message", str(err)))

    def _on_telemetry(self, tel) -> None:
        self.monitor.add_telemetry(tel)
        busy = " ".join(f"S{i} {b:.0%}" for i, b in enumerate(tel.stage_busy))
        self.speed_label.setText(f"{tel.tok_s:.1f} tok/s   {busy}")

    def _theme_changed(self, t) -> None:
        self.monitor.apply_theme(t)
        for w in self.chat.widgets:
            w.render()
        self._on_state(self.bridge.state)

    def apply_config(self, config) -> None:
        """Apply: replies still being written are stopped (kept, marked interrupted), then the engine reloads."""
        for rid in list(self.chats.active):
            try:
                self.bridge.abort(rid)
            except Exception:  # noqa: BLE001 - no engine to tell
                pass
        self.chats.interrupt_all("the engine was reloaded with new settings")
        self.engine.apply(config)

    def show_settings(self) -> None:
        sizes = self.splitter.sizes()
        if sizes[2] < 200:
            self.splitter.setSizes([sizes[0], max(sizes[1] - 480, 300), 480])
        self.side.setCurrentWidget(self.settings_panel)
        self.settings_panel.apply_btn.setFocus()

    # ------------------------------------------------------------ layout memory
    def restore_layout(self) -> None:
        w = self.settings.window
        if w.get("geometry"):
            self.restoreGeometry(QByteArray.fromBase64(w["geometry"].encode()))
        else:
            self.resize(1440, 900)
        self.splitter.setSizes([240, 680, 520])
        self._splitter_state = w.get("splitters", {}).get("main", "")   # applied once shown, at its real size
        self.side.setCurrentIndex(int(w.get("side_tab", 0)))

    def showEvent(self, ev) -> None:
        super().showEvent(ev)
        if self._splitter_state:
            self.layout().activate()
            self.splitter.restoreState(QByteArray.fromBase64(self._splitter_state.encode()))
            self._splitter_state = ""

    def save_layout(self) -> None:
        w = self.settings.window
        w["geometry"] = bytes(self.saveGeometry().toBase64()).decode()
        w.setdefault("splitters", {})["main"] = bytes(self.splitter.saveState().toBase64()).decode()
        w["side_tab"] = self.side.currentIndex()

    def finish(self) -> None:
        """Mark cut replies, remember the layout, save the settings (once)."""
        if getattr(self, "_finished", False):
            return
        self._finished = True
        self.chats.interrupt_all("the app was closed during the reply")
        self.save_layout()
        self.settings.save()
        self.monitor.timer.stop()
        if self.api_panel is not None:
            self.api_panel.shutdown()

    def closeEvent(self, ev) -> None:
        self.finish()
        super().closeEvent(ev)
