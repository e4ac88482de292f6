"""The chat, driven like a user would, on the real app with the real engine worker (default model)."""
from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from tests.ui.conftest import send, set_sampling, wait_reply, wait_until

pytestmark = pytest.mark.slow


def test_send_streams_reply_and_shows_stats(qtbot, studio):
    app = studio()
    w = app.window
    assert w.windowTitle() == "Strata Studio — SmolLM2-135M-Instruct.Q4_1"
    assert "ready" in w.state_label.text()
    set_sampling(app, temperature=0.0, max_tokens=40)
    send(qtbot, app, "Name three colours of the rainbow.")
    assert w.chat.composer.toPlainText() == ""
    streaming = wait_until(qtbot, lambda: w.chat.streaming, 10, "the reply bubble")
    seen = set()
    while w.chats.active:                        # the text grows while the reply is written
        seen.add(streaming.text)
        qtbot.wait(10)
    assert len([s for s in seen if s]) >= 3, "the reply did not stream"
    m = wait_reply(qtbot, app)
    assert m.role == "assistant" and m.status == "final" and m.content.strip()
    assert m.stats["completion_tokens"] > 0 and m.stats["ttft_s"] > 0
    assert m.config["stages"][0]["device"] == "cpu"
    bubble = w.chat.widgets[-1]
    assert bubble.text == m.content and bubble.message_id == m.id
    stats = bubble.stats_label.text()
    for part in ("tokens", "TTFT", "tok/s", "drafts", "cpu L0–29", "1 slot"):
        assert part in stats, stats
    # the conversation got its title from the first message, and the list shows it
    assert w.chat.title.text().startswith("Name three colours")
    assert "Name three colours" in w.conversations.list.item(0).text()
    # copy puts the reply on the clipboard
    bubble.copy_btn.click()
    assert QApplication.clipboard().text() == m.content


def test_stop_mid_reply_keeps_partial_text(qtbot, studio):
    app = studio()
    w = app.window
    set_sampling(app, temperature=0.8, seed=3, max_tokens=2000, ignore_eos=True)
    send(qtbot, app, "Tell me a very long story about a lighthouse keeper.")
    wait_until(qtbot, lambda: w.chat.streaming and len(w.chat.streaming.text) > 20, 60, "some streamed text")
    assert w.chat.stop_btn.isEnabled() and not w.chat.send_btn.isEnabled()
    qtbot.keyClick(w.chat.composer, Qt.Key.Key_Escape)          # Esc stops
    m = wait_reply(qtbot, app, 30)
    assert m.status == "stopped" and m.content
    assert 0 < m.stats["completion_tokens"] < 2000
    bubble = w.chat.widgets[-1]
    assert bubble.notice.isVisibleTo(w) and "Stopped" in bubble.notice.text()
    assert w.chat.send_btn.isEnabled() and not w.chat.stop_btn.isEnabled()


def test_regenerate_and_edit_resend(qtbot, studio):
    app = studio()
    w = app.window
    set_sampling(app, temperature=0.0, max_tokens=12)
    send(qtbot, app, "Say hello.")
    first = wait_reply(qtbot, app)
    w.chat.widgets[-1].regen_btn.click()                        # greedy: the same reply again
    again = wait_reply(qtbot, app)
    assert again.id != first.id and again.content == first.content
    assert [m.role for m in app.store.messages(w.chats.current)] == ["user", "assistant"]
    user = w.chat.widgets[0]
    user.edit_btn.click()
    assert user.editor.isVisibleTo(w)
    user.editor.setPlainText("Say goodbye.")
    user.edit_buttons.findChild(type(w.chat.send_btn), "resendButton").click()
    wait_reply(qtbot, app)
    msgs = app.store.messages(w.chats.current)
    assert [(m.role, m.status) for m in msgs] == [("user", "final"), ("assistant", "final")]
    assert msgs[0].content == "Say goodbye."


def test_restart_app_finds_conversation_and_layout(qtbot, studio, home):
    app = studio()
    w = app.window
    set_sampling(app, temperature=0.0, max_tokens=8)
    w.chat.conv_settings.system_prompt.setPlainText("You answer in one word.")
    send(qtbot, app, "What colour is the sky?")
    reply = wait_reply(qtbot, app)
    conv_id = w.chats.current
    w.resize(760, 640)                          # fits the offscreen screen (800x800), so geometry restores as is
    wait_until(qtbot, lambda: w.splitter.width() == 760, 5, "the resize")
    w.splitter.setSizes([180, 330, 250])
    qtbot.wait(200)
    sizes, size = w.splitter.sizes(), w.size()
    assert sizes[0] == 180, "a long conversation title must not widen the chat"
    qtbot.keyClick(w, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)   # Ctrl+N: a new, empty chat
    assert w.chats.current != conv_id and w.chat.widgets == []
    app.close()

    app2 = studio()                                             # same data directory, new window and worker
    w2 = app2.window
    assert w2.size() == size and w2.splitter.sizes() == sizes
    titles = [w2.conversations.list.item(i).text() for i in range(w2.conversations.list.count())]
    assert any("What colour is the sky?" in t for t in titles)
    w2.chats.select(conv_id)
    texts = [mw.text for mw in w2.chat.widgets]
    assert texts == ["What colour is the sky?", reply.content]
    assert "tok/s" in w2.chat.widgets[-1].stats_label.text()
    assert w2.chat.conv_settings.system_prompt.toPlainText() == "You answer in one word."
    assert w2.chat.conv_settings.max_tokens.value() == 8
