"""One app per data folder: settings and chats are written by one process only.

The app holds `app.lock` in its data folder for its lifetime (an OS file lock through `filelock`, so a
crashed app leaves no stale lock behind). A second app started on the same folder gets AlreadyRunning
with the first one's process id and what to do, instead of two windows writing the same files.
"""
from __future__ import annotations

import os
from pathlib import Path

from filelock import FileLock, Timeout


class AlreadyRunning(RuntimeError):
    pass


class InstanceLock:
    def __init__(self, folder: Path):
        self.path = Path(folder) / "app.lock"
        self.pid_path = Path(folder) / "app.pid"
        self._lock = FileLock(self.path, timeout=0)

    def acquire(self) -> InstanceLock:
        try:
            self._lock.acquire()
        except Timeout:
            try:
                holder = self.pid_path.read_text().strip()
            except OSError:
                holder = "?"
            raise AlreadyRunning(
                f"Strata Studio is already running on this data folder ({self.path.parent}, process {holder}). "
                f"Switch to that window, or close it and start again; to run a second one, give it its own "
                f"folder with STRATA_STUDIO_HOME.") from None
        self.pid_path.write_text(str(os.getpid()))
        return self

    def release(self) -> None:
        if self._lock.is_locked:
            self.pid_path.unlink(missing_ok=True)
            self._lock.release()
