"""`strata --selftest` in this venv: the real worker process, the default model, one chat reply."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

STRATA = Path(sys.executable).with_name("strata")            # the console script `make` installs


def headless_env() -> dict:
    """No display at all: the self-test must not need one."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    return env


def check_selftest_output(out: str) -> dict[str, str]:
    """The lines a passing self-test prints, by their label."""
    lines = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    assert out.rstrip().splitlines()[-1].startswith("SELFTEST PASS"), out
    assert "Paris" in lines["reply"], out
    assert lines["devices (this machine)"].startswith("cpu") or "cuda:" in lines["devices (this machine)"], out
    assert lines["devices (engine)"].startswith("cpu RAM"), out
    assert lines["stages"].startswith("0: cpu layers 0-29 + head"), out
    figures = lines["figures"]
    assert "worker start" in figures and " s | load " in figures and "tok/s" in figures, out
    return lines


def test_selftest_passes_headless():
    cmd = [str(STRATA)] if STRATA.exists() else [sys.executable, "-m", "app.cli"]
    r = subprocess.run([*cmd, "--selftest"], capture_output=True, text=True, timeout=300, env=headless_env())
    assert r.returncode == 0, r.stdout + r.stderr
    lines = check_selftest_output(r.stdout)
    assert lines["worker"].startswith("pid ") and "not frozen" in r.stdout.splitlines()[0]


def test_selftest_failure_is_one_clear_line_and_imports_neither_qt_nor_torch(tmp_path):
    code = ("import sys; from app.cli import main; rc = main(['--selftest', '--model', sys.argv[1]]); "
            "print('imported:', sorted(m for m in ('PySide6', 'torch') if m in sys.modules)); sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "missing.gguf")], capture_output=True,
                       text=True, timeout=120, env=headless_env())
    assert r.returncode == 1, r.stdout + r.stderr
    fail = [line for line in r.stdout.splitlines() if line.startswith("SELFTEST")]
    assert fail == [f"SELFTEST FAIL: model_file: {tmp_path / 'missing.gguf'}: file not found"], r.stdout
    assert "imported: []" in r.stdout           # the worker holds torch; nothing here needs Qt or a display
