"""Import rule: ui/ never imports torch, triton or engine internals (only engine.messages)."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

UI = Path(__file__).resolve().parents[2] / "ui"
ALLOWED_ENGINE = {"engine.messages"}
FORBIDDEN_TOP = {"torch", "triton"}


def _imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
            if node.module == "engine":
                out += [f"engine.{a.name}" for a in node.names]
    return out


def test_ui_sources_import_only_engine_messages():
    bad = []
    for f in sorted(UI.glob("*.py")):
        for mod in _imports(f):
            top = mod.split(".")[0]
            if top in FORBIDDEN_TOP or (top == "engine" and mod not in ALLOWED_ENGINE and mod != "engine"):
                bad.append(f"{f.name}: {mod}")
    assert not bad, bad


def test_whole_window_loads_without_torch():
    code = ("import sys, ui.main_window, app.gui_main; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton')); print(bad)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=UI.parent, env={"QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
