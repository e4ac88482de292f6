"""Frozen entry point: the same dispatch as the `strata` console command."""
import multiprocessing
import os
import sys
from pathlib import Path

from app.cli import main


def triton_environment() -> None:
    """The GPU build: Triton finds its backends in its own folder (the frozen app has no entry-point
    scan to offer), and its C launcher finds the Python headers the bundle carries (packaging/strata.spec)."""
    if not hasattr(sys, "_MEIPASS"):
        return
    os.environ.setdefault("TRITON_BACKENDS_IN_TREE", "1")
    headers = Path(sys._MEIPASS) / "include" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    if (headers / "Python.h").exists():
        os.environ["CPATH"] = os.pathsep.join(p for p in (str(headers), os.environ.get("CPATH")) if p)


if __name__ == "__main__":
    multiprocessing.freeze_support()
    triton_environment()
    sys.exit(main())
