"""DESIGN.md import rules: `ui` never imports torch, triton or engine internals (only engine.messages);
`engine` never imports PySide6, pyqtgraph or ui. Checked on every module's import statements, and by
importing the app's GUI modules in a fresh interpreter."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
            if node.module in ("engine", "ui"):          # `from engine import quant` imports engine.quant
                out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def offenders(package: str, banned) -> list[str]:
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for mod in imports(path):
            if banned(mod):
                bad.append(f"{path.relative_to(ROOT)} imports {mod}")
    return bad


def test_ui_imports_no_torch_and_only_engine_messages():
    def banned(mod: str) -> bool:
        top = mod.split(".")[0]
        return top in ("torch", "triton") or (top == "engine" and mod not in ("engine", "engine.messages"))
    assert offenders("ui", banned) == []


def test_engine_imports_no_qt_and_no_ui():
    assert offenders("engine", lambda m: m.split(".")[0] in ("PySide6", "pyqtgraph", "ui", "shiboken6")) == []


def test_gui_process_modules_load_without_torch():
    code = ("import sys, importlib, pkgutil, ui\n"
            "for m in pkgutil.iter_modules(ui.__path__): importlib.import_module('ui.' + m.name)\n"
            "import app.gui_main, app.engine_client, app.chat_store, app.settings\n"
            "bad = [m for m in ('torch', 'triton') if m in sys.modules]\n"
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={"QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stdout + r.stderr
