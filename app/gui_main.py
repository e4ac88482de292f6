"""`strata` (no subcommand): the desktop app.

Starts Qt, the settings and the chat store (in $STRATA_STUDIO_HOME or the platformdirs user data
directory), then the engine worker process on the last model used, or the bundled default.
Engine flags given on the command line override the saved ones for this start. This process never
imports torch: the engine runs in its own process (app/engine_process.py).
"""
from __future__ import annotations

import argparse
import sys

from app.engine_flags import ENGINE_FIELDS, add_engine_flags, engine_config_from_args
from engine.messages import EngineConfig
from engine.model_info import probe_model

def add_arguments(p: argparse.ArgumentParser) -> None:
    add_engine_flags(p, model_default=None)
    p.set_defaults(**{f: None for f in ENGINE_FIELDS})          # None = "not given": keep the saved value
    p.add_argument("--theme", choices=["system", "light", "dark"], default=None,
                   help="colour theme (default: follow the system)")


def startup_config(saved: EngineConfig, args: argparse.Namespace | None) -> EngineConfig:
    """The saved configuration with whatever the command line gives on top."""
    return engine_config_from_args(args, saved) if args is not None else saved


class App:
    """Everything one run of the app holds; tests build it the same way `run` does."""

    def __init__(self, args: argparse.Namespace | None = None, start_engine: bool = True, transport_options=None):
        from PySide6.QtWidgets import QApplication

        from app.api_control import ApiServerControl
        from app.chat_store import ChatStore
        from app.instance_lock import InstanceLock
        from app.settings import Settings, data_dir
        from ui.engine_bridge import EngineBridge
        from ui.main_window import MainWindow
        from ui.theme import ThemeManager, app_icon

        self.qapp = QApplication.instance() or QApplication(sys.argv[:1])
        self.qapp.setApplicationName("Strata Studio")
        self.qapp.setOrganizationName("Strata Studio")
        self.qapp.setDesktopFileName("strata-studio")
        self.qapp.setWindowIcon(app_icon())
        self.lock = InstanceLock(data_dir()).acquire()       # AlreadyRunning: another app owns this folder
        self.settings = Settings()
        theme_mode = getattr(args, "theme", None) or self.settings.data.get("theme", "system")
        self.theme = ThemeManager(self.qapp, theme_mode)
        self.store = ChatStore()
        self.bridge = EngineBridge()
        self.api = ApiServerControl(self.bridge)
        self.window = MainWindow(self.settings, self.store, self.bridge, probe=probe_model,
                                 theme_manager=self.theme, api_control=self.api)
        for note in self.settings.notes + self.store.notes:
            self.window.flash(note, 15000)
        self._show_store_errors()
        self.config = startup_config(self.settings.engine_config(), args)
        self.window.settings_panel.set_config(self.config)
        self._transport_options = transport_options or {}
        if start_engine:
            self.window.engine.start(self.config, **self._transport_options)

    def _show_store_errors(self) -> None:
        """A chat-store write that fails in a Qt slot (a full disk) is said in the window, not only printed:
        the app stays up and the action can be tried again once there is room. Other errors go on to the
        previous hook."""
        from app.chat_store import StoreFull

        previous, window = sys.excepthook, self.window

        def hook(kind, value, tb):
            if isinstance(value, StoreFull):
                window.flash(str(value), 30000)
            else:
                previous(kind, value, tb)
        sys.excepthook = hook
        self._previous_hook = previous

    def close(self, timeout: float = 10.0) -> None:
        """Close the window (saves layout, marks cut replies), stop the engine, close the store."""
        self.window.close()
        self.window.finish()                 # idempotent: closeEvent already did it when the window was shown
        self.bridge.shutdown().join(timeout)
        self.store.close()
        self.theme.setParent(None)           # stop following the system scheme for this (closed) app
        self.lock.release()
        sys.excepthook = getattr(self, "_previous_hook", sys.excepthook)


def run(args: argparse.Namespace) -> int:
    from app.instance_lock import AlreadyRunning

    try:
        app = App(args)
    except AlreadyRunning as e:              # a second app on the same data: say so, change nothing
        from PySide6.QtWidgets import QMessageBox

        print(e, file=sys.stderr)
        QMessageBox.warning(None, "Strata Studio", str(e))
        return 1
    app.window.show()
    try:
        return app.qapp.exec()
    finally:
        app.close()
