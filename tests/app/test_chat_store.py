"""Chat store: schema migrations from every older version, and messages saved with their status."""
from __future__ import annotations

import sqlite3

import pytest

from app.chat_store import MIGRATIONS, SCHEMA_VERSION, ChatStore, migrate, schema_version


@pytest.fixture
def store(tmp_path):
    s = ChatStore(tmp_path / "chats.sqlite3")
    yield s
    s.close()


def test_new_database_is_current(store):
    assert schema_version(store.db) == SCHEMA_VERSION
    assert store.migrated_from == 0


def test_env_home_is_used(tmp_path, monkeypatch):
    monkeypatch.setenv("STRATA_STUDIO_HOME", str(tmp_path / "home"))
    s = ChatStore()
    assert s.path == tmp_path / "home" / "chats.sqlite3"
    s.close()


@pytest.mark.parametrize("start", range(1, SCHEMA_VERSION))
def test_migrates_old_file_and_keeps_messages(tmp_path, start):
    path = tmp_path / "chats.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    migrate(db, target=start)
    db.execute("INSERT INTO conversations(title, created_at, updated_at) VALUES ('old chat', 1, 1)")
    db.execute("INSERT INTO messages(conversation_id, role, content, created_at) VALUES (1, 'user', 'hi', 1)")
    db.close()

    s = ChatStore(path)
    assert s.migrated_from == start
    assert schema_version(s.db) == SCHEMA_VERSION
    assert (tmp_path / f"chats.sqlite3.v{start}.bak").exists()
    [conv] = s.list_conversations()
    assert conv.title == "old chat" and conv.system_prompt == "" and conv.sampling == {}
    [m] = s.messages(conv.id)
    assert (m.role, m.content, m.status, m.stats) == ("user", "hi", "final", {})
    s.close()


def test_failed_migration_rolls_back(tmp_path, monkeypatch):
    path = tmp_path / "chats.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    migrate(db, target=1)
    monkeypatch.setitem(MIGRATIONS, 1, "ALTER TABLE messages ADD COLUMN status TEXT; SELECT * FROM nope;")
    with pytest.raises(sqlite3.OperationalError):
        migrate(db)
    assert schema_version(db) == 1
    cols = [r[1] for r in db.execute("PRAGMA table_info(messages)")]
    assert "status" not in cols
    db.close()


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "chats.sqlite3"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(RuntimeError, match="newer"):
        ChatStore(path)


def test_messages_roundtrip_and_truncate(store, tmp_path):
    c = store.create_conversation("t", system_prompt="be brief", sampling={"temperature": 0.5})
    u = store.add_message(c.id, "user", "hello")
    a = store.add_message(c.id, "assistant", "Hi the", status="interrupted",
                          reason="engine crashed: killed by signal 9", stats={"completion_tokens": 2},
                          config={"parallel": 1})
    store.add_message(c.id, "user", "again")
    store.close()

    s2 = ChatStore(tmp_path / "chats.sqlite3")       # reopen: everything was committed
    conv = s2.get_conversation(c.id)
    assert conv.system_prompt == "be brief" and conv.sampling == {"temperature": 0.5}
    msgs = s2.messages(c.id)
    assert [m.role for m in msgs] == ["user", "assistant", "user"]
    assert msgs[1].status == "interrupted" and "signal 9" in msgs[1].reason
    assert msgs[1].stats == {"completion_tokens": 2} and msgs[1].config == {"parallel": 1}
    assert s2.delete_messages_from(c.id, a.id) == 2
    assert [m.id for m in s2.messages(c.id)] == [u.id]
    s2.update_message(u.id, "hello there")
    s2.update_conversation(c.id, title="renamed")
    assert s2.get_conversation(c.id).title == "renamed"
    assert s2.messages(c.id)[0].content == "hello there"
    s2.delete_conversation(c.id)
    assert s2.list_conversations() == [] and s2.messages(c.id) == []
    s2.close()


def test_list_orders_by_last_activity(store):
    a = store.create_conversation("a")
    b = store.create_conversation("b")
    store.add_message(a.id, "user", "x")
    assert [c.title for c in store.list_conversations()] == ["a", "b"]
    assert b.id > a.id


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_unreadable_database_is_moved_aside_and_a_new_one_started(tmp_path, damage):
    """Crash drill: a chat database that is not one (or was cut short) is kept beside, untouched, the
    store starts empty and says so (the app flashes the note); nothing raises at startup."""
    path = tmp_path / "chats.sqlite3"
    s = ChatStore(path)
    c = s.create_conversation("kept")
    s.add_message(c.id, "user", "hello")
    s.close()
    raw = path.read_bytes()
    bad = b"this is not a database " * 200 if damage == "garbage" else raw[:len(raw) // 3]
    path.write_bytes(bad)
    for side in tmp_path.glob("chats.sqlite3-*"):
        side.unlink()
    s2 = ChatStore(path)
    try:
        assert s2.list_conversations() == []
        assert len(s2.notes) == 1 and "unreadable" in s2.notes[0] and "moved to chats.sqlite3.corrupt-" in s2.notes[0]
        aside = list(tmp_path.glob("chats.sqlite3.corrupt-*"))
        assert [p.read_bytes() for p in aside if not p.name.endswith(("-wal", "-shm"))] == [bad]
        c2 = s2.create_conversation("new")
        s2.add_message(c2.id, "user", "again")
        assert [m.content for m in s2.messages(c2.id)] == ["again"]
    finally:
        s2.close()
