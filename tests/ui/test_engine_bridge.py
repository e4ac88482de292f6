"""The Qt adapter: engine messages and state changes arrive as signals on the GUI thread, and nothing
it does blocks that thread. Uses a real worker process on the default model."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402
from PySide6.QtCore import QThread  # noqa: E402

from engine.messages import AddRequest, EngineConfig, SamplingParams  # noqa: E402
from ui.engine_bridge import EngineBridge  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
SIGNALS = ("message", "telemetry", "loadProgress", "ready", "promptProgress", "tokenDelta", "requestDone",
           "error", "stateChanged", "engineDead")


def record(bridge: EngineBridge) -> list[tuple[str, bool, object]]:
    """(signal, delivered on the GUI thread?, payload) for every signal the bridge emits."""
    seen = []
    gui = threading.get_ident()
    for name in SIGNALS:
        def slot(*args, name=name):
            on_gui = threading.get_ident() == gui and QThread.currentThread() is bridge.thread()
            seen.append((name, on_gui, args))
        getattr(bridge, name).connect(slot)
    return seen


def test_signals_arrive_on_the_gui_thread(qtbot):
    bridge = EngineBridge()
    seen = record(bridge)
    with qtbot.waitSignal(bridge.ready, timeout=60_000):
        worker = bridge.start(EngineConfig(model="default"))
        # spawning and loading happen off the GUI thread: start returned while they still run
        assert worker is not threading.current_thread() and worker.is_alive()
        assert "ready" not in [n for n, _, _ in seen]
    req = AddRequest(request_id="qt-1", prompt="Hello", sampling=SamplingParams(max_tokens=8, ignore_eos=True))
    with qtbot.waitSignal(bridge.requestDone, timeout=30_000) as done:
        bridge.submit(req)
    assert done.args[0].request_id == "qt-1" and done.args[0].completion_tokens == 8
    qtbot.waitUntil(lambda: any(n == "telemetry" for n, _, _ in seen), timeout=5_000)
    names = [n for n, _, _ in seen]
    for name in ("loadProgress", "ready", "tokenDelta", "requestDone", "telemetry", "stateChanged"):
        assert name in names
    assert all(on_gui for _, on_gui, _ in seen)
    states = [a[0] for n, _, a in seen if n == "stateChanged"]
    assert states[:3] == ["starting", "loading", "ready"] and "busy" in states and states[-1] == "ready"
    with qtbot.waitSignal(bridge.stateChanged, timeout=15_000, check_params_cb=lambda s: s == "stopped"):
        bridge.shutdown()


def test_engine_death_becomes_a_signal(qtbot):
    bridge = EngineBridge()
    seen = record(bridge)
    with qtbot.waitSignal(bridge.stateChanged, timeout=60_000, check_params_cb=lambda s: s == "stopped"):
        bridge.start()                                      # worker up, no model
    pid = bridge.client.transport.pid
    with qtbot.waitSignal(bridge.engineDead, timeout=5_000) as dead:
        os.kill(pid, signal.SIGKILL)
    assert "SIGKILL" in dead.args[0] and isinstance(dead.args[1], str)
    assert bridge.state == "crashed" and all(on_gui for _, on_gui, _ in seen)
    bridge.shutdown().join(10)


def test_bridge_imports_neither_torch_nor_engine_internals():
    code = ("import sys, ui.engine_bridge; bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'triton', 'zmq') or (m.startswith('engine.') and m != 'engine.messages')); print(bad)")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
