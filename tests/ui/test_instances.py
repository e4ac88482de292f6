"""Crash drill (issue 18, item 3): two apps on the same data folder. The second is refused with a
message naming the folder and the first one's process; the first keeps working and loses nothing; once
it is closed (the one action), an app starts there again with every saved message."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest


def test_second_app_on_the_same_data_is_refused_and_the_first_keeps_working(qtbot, home):
    from app.gui_main import App
    from app.instance_lock import AlreadyRunning

    first = App(None, start_engine=False)
    qtbot.addWidget(first.window)
    try:
        with pytest.raises(AlreadyRunning) as e:
            App(None, start_engine=False)
        assert str(home) in str(e.value) and f"process {os.getpid()}" in str(e.value)
        c = first.store.create_conversation("kept")
        first.store.add_message(c.id, "user", "written while the second one was refused")
    finally:
        first.close()
    again = App(None, start_engine=False)
    qtbot.addWidget(again.window)
    try:
        kept = [c for c in again.store.list_conversations() if c.title == "kept"]
        assert [m.content for m in again.store.messages(kept[0].id)] == ["written while the second one was refused"]
    finally:
        again.close()


def test_lock_names_the_other_process_and_dies_with_it(tmp_path):
    """Held by another process: refused naming that process; after a kill -9 of it no stale lock is left."""
    from app.instance_lock import AlreadyRunning, InstanceLock

    code = ("import sys, time; from pathlib import Path; from app.instance_lock import InstanceLock; "
            "lock = InstanceLock(Path(sys.argv[1])).acquire(); print('held', flush=True); time.sleep(60)")
    p = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        with pytest.raises(AlreadyRunning, match=f"process {p.pid}"):
            InstanceLock(tmp_path).acquire()
    finally:
        p.kill()
        p.wait(10)
    t0 = time.monotonic()
    lock = InstanceLock(tmp_path).acquire()
    assert time.monotonic() - t0 < 1.0
    lock.release()


def test_full_disk_under_the_chat_store_is_said_and_loses_nothing(qtbot, home):
    """Crash drill: the chat store's disk fills up (SQLite's page limit stands in for it). A write from
    the window fails with a note in the status bar, the app stays up, earlier messages are kept, and
    the same action works again once there is room."""
    from PySide6.QtCore import QTimer

    from app.gui_main import App

    app = App(None, start_engine=False)
    qtbot.addWidget(app.window)
    try:
        c = app.store.create_conversation("before")
        app.store.add_message(c.id, "user", "saved before the disk filled")
        pages = app.store.db.execute("PRAGMA page_count").fetchone()[0]
        app.store.db.execute(f"PRAGMA max_page_count = {pages}")
        QTimer.singleShot(0, lambda: app.store.add_message(c.id, "assistant", "x" * 200_000))   # as a slot would
        qtbot.waitUntil(lambda: "disk under the chat store is full" in app.window.note_label.text(), timeout=5000)
        assert [m.content for m in app.store.messages(c.id)] == ["saved before the disk filled"]
        app.store.db.execute("PRAGMA max_page_count = 1073741823")                   # room again
        app.store.add_message(c.id, "assistant", "x" * 200_000)
        assert len(app.store.messages(c.id)) == 2
    finally:
        app.close()
