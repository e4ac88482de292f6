"""The app's API toggle: serve the loaded model, show and copy the address, answer an OpenAI client,
stop; a taken port is refused with a message and the switch goes back off."""
from __future__ import annotations

import socket

import openai
import pytest
from PySide6.QtWidgets import QApplication

from tests.ui.conftest import wait_ready

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_toggle_serves_the_loaded_model(qtbot, studio):
    app = studio()
    wait_ready(qtbot, app)
    panel = app.window.api_panel
    app.window.side.setCurrentWidget(panel)
    port = free_port()
    panel.port.setValue(port)
    panel.serve.setChecked(True)
    assert panel.address.text() == f"http://127.0.0.1:{port}/v1" and panel.copy_btn.isEnabled()
    panel.copy_btn.click()
    assert QApplication.clipboard().text() == panel.address.text()
    client = openai.OpenAI(base_url=panel.address.text(), api_key="unused", max_retries=0, timeout=120)
    r = client.chat.completions.create(model="default", max_tokens=4, temperature=0,
                                       messages=[{"role": "user", "content": "Say hi"}])
    assert r.usage.completion_tokens == 4 and r.choices[0].message.content
    panel.serve.setChecked(False)
    assert panel.address.text() == "" and not app.api.running
    with pytest.raises(openai.APIConnectionError):
        client.models.list()


def test_taken_port_is_refused_with_a_message(qtbot, studio):
    app = studio()
    panel = app.window.api_panel
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        panel.port.setValue(busy.getsockname()[1])
        panel.serve.setChecked(True)
        assert not panel.serve.isChecked() and "Cannot serve on" in panel.status.text()
        assert panel.port.isEnabled() and not app.api.running
