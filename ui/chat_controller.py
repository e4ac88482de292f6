"""Chat logic: the store, the engine bridge and the chat views, wired together.

Each reply is one AddRequest with the conversation's system prompt, history and sampling. Token
deltas stream into the view; the reply is saved once it is final: "final" (stop/length),
"stopped" (the user pressed Stop), "error" (the engine refused it) or "interrupted" (the engine
died, or the app closed, mid-reply; the reason is kept). Several conversations may stream at once
(one reply each), which is how the engine's parallel slots get used from the GUI.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

import msgspec
from PySide6.QtCore import QObject, Signal

from app.chat_store import ChatStore, Conversation
from app.settings import Settings
from engine.messages import AddRequest, ChatMessage, ErrorReply, SamplingParams
from ui.chat_format import config_summary, stats_from_done
from ui.chat_view import ChatView
from ui.conversation_list import ConversationList


@dataclass
class Active:
    request_id: str
    conv_id: int
    text: str = ""
    read: int = 0
    total: int = 0


def _title_from(text: str) -> str:
    line = " ".join(text.split())
    return line[:48] + ("…" if len(line) > 48 else "")


class ChatController(QObject):
    busyChanged = Signal(bool)                  # any reply streaming
    message = Signal(str)                       # a line for the status bar

    def __init__(self, store: ChatStore, settings: Settings, bridge, view: ChatView, clist: ConversationList):
        super().__init__(view)
        self.store, self.settings, self.bridge, self.view, self.clist = store, settings, bridge, view, clist
        self.current: int | None = None
        self.active: dict[str, Active] = {}
        self.effective = None                  # EffectiveConfig of the loaded model
        view.sendRequested.connect(self.send)
        view.stopRequested.connect(self.stop)
        view.regenerateRequested.connect(self.regenerate)
        view.editResendRequested.connect(self.edit_resend)
        view.conv_settings.changed.connect(self._settings_changed)
        clist.newRequested.connect(self.new_conversation)
        clist.selected.connect(self.select)
        clist.renameRequested.connect(self._rename)
        clist.deleteRequested.connect(self._delete)
        bridge.ready.connect(lambda r: setattr(self, "effective", r.config))
        bridge.promptProgress.connect(self._on_progress)
        bridge.tokenDelta.connect(self._on_delta)
        bridge.requestDone.connect(self._on_done)
        bridge.error.connect(self._on_error)
        bridge.engineDead.connect(lambda why, _tail: self.interrupt_all(f"the engine stopped: {why}"))

    # ------------------------------------------------------------ conversations
    def refresh_list(self) -> None:
        self.clist.set_busy({a.conv_id for a in self.active.values()})
        self.clist.set_conversations(self.store.list_conversations(), self.current)

    def new_conversation(self) -> Conversation:
        system_prompt, sampling = self.settings.new_chat_defaults()
        c = self.store.create_conversation("New chat", system_prompt, msgspec.structs.asdict(sampling))
        self.select(c.id)
        self.view.composer.setFocus()
        return c

    def select(self, conv_id: int) -> None:
        c = self.store.get_conversation(conv_id)
        if c is None:
            return
        self.current = c.id
        self.settings.data["last_conversation"] = c.id
        self.view.show_messages(c.title, self.store.messages(c.id))
        self.view.conv_settings.set_values(c.system_prompt, self._sampling(c))
        a = self._active_for(c.id)
        if a is not None:
            w = self.view.begin_reply(a.text)
            w.set_prompt_progress(a.read, a.total)
        self.view.set_busy(a is not None)
        self.refresh_list()

    def _sampling(self, c: Conversation) -> SamplingParams:
        base = msgspec.structs.asdict(self.settings.new_chat_defaults()[1])
        base.update({k: v for k, v in c.sampling.items() if k in base})
        try:
            return msgspec.convert(base, SamplingParams)
        except msgspec.ValidationError:
            return self.settings.new_chat_defaults()[1]

    def _settings_changed(self, system_prompt: str, sampling: dict) -> None:
        if self.current is not None:
            self.store.update_conversation(self.current, system_prompt=system_prompt, sampling=sampling)

    def _rename(self, conv_id: int, title: str) -> None:
        self.store.update_conversation(conv_id, title=title)
        if conv_id == self.current:
            self.view.title.setText(title)
        self.refresh_list()

    def _delete(self, conv_id: int) -> None:
        a = self._active_for(conv_id)
        if a is not None:
            self.bridge.abort(a.request_id)
            self.active.pop(a.request_id, None)
        self.store.delete_conversation(conv_id)
        if conv_id == self.current:
            self.current = None
            rest = self.store.list_conversations()
            self.select(rest[0].id) if rest else self.new_conversation()
        self.refresh_list()

    # ------------------------------------------------------------ sending
    def _active_for(self, conv_id: int) -> Active | None:
        return next((a for a in self.active.values() if a.conv_id == conv_id), None)

    def send(self, text: str) -> None:
        if self.current is None:
            self.new_conversation()
        conv_id = self.current
        if self._active_for(conv_id) is not None:
            return
        m = self.store.add_message(conv_id, "user", text)
        c = self.store.get_conversation(conv_id)
        if c.title == "New chat":
            self.store.update_conversation(conv_id, title=_title_from(text))
            self.view.title.setText(_title_from(text))
        self.view.add_message(m)
        self._start_reply(conv_id)

    def _start_reply(self, conv_id: int) -> None:
        c = self.store.get_conversation(conv_id)
        history = [ChatMessage(role="system", content=c.system_prompt)] if c.system_prompt.strip() else []
        history += [ChatMessage(role=m.role, content=m.content) for m in self.store.messages(conv_id)
                    if m.role in ("user", "assistant") and m.content and m.status != "error"]
        rid = f"chat-{conv_id}-{uuid.uuid4().hex[:10]}"
        req = AddRequest(request_id=rid, messages=history, sampling=self._sampling(c))
        try:
            self.bridge.submit(req)
        except Exception as e:  # noqa: BLE001 - the engine is not there: say so, keep the user's message
            self.message.emit(f"Could not send: {e}")
            return
        self.active[rid] = Active(rid, conv_id)
        if conv_id == self.current:
            self.view.begin_reply()
            self.view.set_busy(True)
        self.refresh_list()
        self.busyChanged.emit(True)

    def stop(self) -> None:
        a = self._active_for(self.current) if self.current is not None else None
        if a is not None:
            try:
                self.bridge.abort(a.request_id)
            except Exception:  # noqa: BLE001 - a dead engine: the crash path saves the reply
                pass

    def regenerate(self, msg_id: int) -> None:
        if self.current is None or self._active_for(self.current):
            return
        self.store.delete_messages_from(self.current, msg_id)
        self.view.show_messages(self.store.get_conversation(self.current).title, self.store.messages(self.current))
        self._start_reply(self.current)

    def edit_resend(self, msg_id: int, text: str) -> None:
        if self.current is None or self._active_for(self.current):
            return
        self.store.update_message(msg_id, text)
        self.store.delete_messages_from(self.current, msg_id + 1)
        self.view.show_messages(self.store.get_conversation(self.current).title, self.store.messages(self.current))
        self._start_reply(self.current)

    # ------------------------------------------------------------ engine messages
    def _on_progress(self, msg) -> None:
        a = self.active.get(msg.request_id)
        if a is not None:
            a.read, a.total = msg.read, msg.total
            if a.conv_id == self.current and self.view.streaming is not None:
                self.view.streaming.set_prompt_progress(msg.read, msg.total, msg.cached)

    def _on_delta(self, msg) -> None:
        a = self.active.get(msg.request_id)
        if a is not None and msg.text:
            a.text += msg.text
            if a.conv_id == self.current and self.view.streaming is not None:
                self.view.streaming.set_prompt_progress(1, 1)
                self.view.streaming.append_text(msg.text)

    def _on_done(self, done) -> None:
        status = {"abort": "stopped", "error": "error"}.get(done.finish_reason, "final")
        self._finish(done.request_id, status, done.error, stats_from_done(done))

    def _on_error(self, err) -> None:
        if isinstance(err, ErrorReply) and err.request_id in self.active:
            self._finish(err.request_id, "error", f"{err.kind}: {err.message}", {})

    def interrupt_all(self, reason: str) -> None:
        for rid in list(self.active):
            self._finish(rid, "interrupted", reason, {})

    def _finish(self, rid: str, status: str, reason: str, stats: dict) -> None:
        a = self.active.pop(rid, None)
        if a is None:
            return
        if self.store.get_conversation(a.conv_id) is not None:
            m = self.store.add_message(a.conv_id, "assistant", a.text, status=status, reason=reason,
                                       stats=stats, config=config_summary(self.effective))
            if a.conv_id == self.current:
                self.view.finish_reply(m)
        if a.conv_id == self.current:
            self.view.set_busy(False)
        self.refresh_list()
        self.busyChanged.emit(bool(self.active))
