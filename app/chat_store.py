"""Conversations in SQLite, with a versioned schema (PRAGMA user_version) and migrations.

Every message is written (and committed) the moment it is final. A reply cut short keeps its text
with `status` "stopped" (the user pressed Stop), "interrupted" (engine crash or app exit; `reason`
says why) or "error". Stats and the effective configuration a reply ran with are kept as JSON.
Before migrating an existing file it is copied to `chats.sqlite3.v<N>.bak`.
"""
from __future__ import annotations

import json
import shutil
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from app.settings import data_dir

SCHEMA_VERSION = 3
FINAL_STATUSES = ("final", "stopped", "interrupted", "error")


# from-version -> SQL that brings the schema to the next version (run inside one transaction)
MIGRATIONS = {
    0: """
        CREATE TABLE conversations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            title TEXT NOT NULL DEFAULT 'New chat',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL);
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            created_at REAL NOT NULL);
    """,
    # v2: message status, the reason a reply was cut, its stats and the effective config it ran with
    1: """
        ALTER TABLE messages ADD COLUMN status TEXT NOT NULL DEFAULT 'final';
        ALTER TABLE messages ADD COLUMN reason TEXT NOT NULL DEFAULT '';
        ALTER TABLE messages ADD COLUMN stats TEXT NOT NULL DEFAULT '{}';
        ALTER TABLE messages ADD COLUMN config TEXT NOT NULL DEFAULT '{}';
    """,
    # v3: system prompt and sampling per conversation; index for loading a conversation
    2: """
        ALTER TABLE conversations ADD COLUMN system_prompt TEXT NOT NULL DEFAULT '';
        ALTER TABLE conversations ADD COLUMN sampling TEXT NOT NULL DEFAULT '{}';
        CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, id);
    """,
}



@dataclass
class Conversation:
    id: int
    title: str
    created_at: float
    updated_at: float
    system_prompt: str = ""
    sampling: dict = field(default_factory=dict)


@dataclass
class Message:
    id: int
    conversation_id: int
    role: str
    content: str
    created_at: float
    status: str = "final"
    reason: str = ""
    stats: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)


def schema_version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def migrate(db: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Bring `db` up to `target`, one transaction per step. Returns the version it started at."""
    start = v = schema_version(db)
    if v > SCHEMA_VERSION:
        raise RuntimeError(f"chat database is schema v{v}, newer than this app (v{SCHEMA_VERSION})")
    while v < target:
        try:
            # executescript commits any open transaction first, so BEGIN/COMMIT go inside the script
            db.executescript(f"BEGIN; {MIGRATIONS[v]} PRAGMA user_version = {v + 1}; COMMIT;")
        except Exception:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        v += 1
    return start


class StoreFull(RuntimeError):
    """The disk under the chat store is full: the change in hand was not saved (everything before it is)."""


class _Connection(sqlite3.Connection):
    """sqlite3's connection, whose writes report a full disk as StoreFull with the file and what to do."""

    def execute(self, *args):
        try:
            return super().execute(*args)
        except sqlite3.OperationalError as e:
            if getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "full" in str(e):
                raise StoreFull(f"the disk under the chat store is full ({self.store_path}): this change was not "
                                f"saved; earlier messages are safe. Free some space and try again.") from e
            raise


class ChatStore:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else data_dir() / "chats.sqlite3"
        self.notes: list[str] = []    # what happened while opening (a damaged file moved aside)
        try:
            self._open()
        except sqlite3.DatabaseError as e:        # not a database, or damaged past reading: keep it, start anew
            if getattr(self, "db", None) is not None:
                self.db.close()
            stamp = int(time.time())
            aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
            shutil.move(self.path, aside)
            for extra in ("-wal", "-shm"):
                side = self.path.with_name(self.path.name + extra)
                if side.exists():
                    shutil.move(side, aside.with_name(aside.name + extra))
            self.notes.append(f"the chat database was unreadable ({e}); moved to {aside.name}, a new one started")
            self._open()

    def _open(self) -> None:
        existed = self.path.exists() and self.path.stat().st_size > 0
        self.db = sqlite3.connect(self.path, isolation_level=None, factory=_Connection)  # autocommit; BEGIN in migrate
        self.db.store_path = self.path
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA foreign_keys = ON")
        self.db.execute("PRAGMA journal_mode = WAL")
        check = [r[0] for r in self.db.execute("PRAGMA quick_check").fetchall()]   # damage shows here, not mid-chat
        if check != ["ok"]:
            raise sqlite3.DatabaseError("; ".join(map(str, check[:3])))
        v = schema_version(self.db)
        if existed and 0 < v < SCHEMA_VERSION:
            self.db.execute("PRAGMA wal_checkpoint(FULL)")
            shutil.copy2(self.path, self.path.with_name(f"{self.path.name}.v{v}.bak"))
        self.migrated_from = migrate(self.db)

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------ conversations
    def create_conversation(self, title: str = "New chat", system_prompt: str = "",
                            sampling: dict | None = None) -> Conversation:
        now = time.time()
        cur = self.db.execute(
            "INSERT INTO conversations(title, created_at, updated_at, system_prompt, sampling) VALUES (?,?,?,?,?)",
            (title, now, now, system_prompt, json.dumps(sampling or {})))
        return self.get_conversation(cur.lastrowid)

    def _conv(self, r: sqlite3.Row) -> Conversation:
        return Conversation(r["id"], r["title"], r["created_at"], r["updated_at"], r["system_prompt"],
                            json.loads(r["sampling"] or "{}"))

    def get_conversation(self, conv_id: int) -> Conversation | None:
        r = self.db.execute("SELECT * FROM conversations WHERE id=?", (conv_id,)).fetchone()
        return self._conv(r) if r else None

    def list_conversations(self) -> list[Conversation]:
        rows = self.db.execute("SELECT * FROM conversations ORDER BY updated_at DESC, id DESC")
        return [self._conv(r) for r in rows]

    def update_conversation(self, conv_id: int, *, title: str | None = None, system_prompt: str | None = None,
                            sampling: dict | None = None) -> None:
        sets, args = ["updated_at=?"], [time.time()]
        for col, val in (("title", title), ("system_prompt", system_prompt)):
            if val is not None:
                sets.append(f"{col}=?")
                args.append(val)
        if sampling is not None:
            sets.append("sampling=?")
            args.append(json.dumps(sampling))
        self.db.execute(f"UPDATE conversations SET {', '.join(sets)} WHERE id=?", (*args, conv_id))

    def delete_conversation(self, conv_id: int) -> None:
        self.db.execute("DELETE FROM conversations WHERE id=?", (conv_id,))

    # ------------------------------------------------------------ messages
    def add_message(self, conv_id: int, role: str, content: str, *, status: str = "final", reason: str = "",
                    stats: dict | None = None, config: dict | None = None) -> Message:
        assert status in FINAL_STATUSES, status
        now = time.time()
        cur = self.db.execute(
            "INSERT INTO messages(conversation_id, role, content, created_at, status, reason, stats, config)"
            " VALUES (?,?,?,?,?,?,?,?)",
            (conv_id, role, content, now, status, reason, json.dumps(stats or {}), json.dumps(config or {})))
        self.db.execute("UPDATE conversations SET updated_at=? WHERE id=?", (now, conv_id))
        return self.get_message(cur.lastrowid)

    def _msg(self, r: sqlite3.Row) -> Message:
        return Message(r["id"], r["conversation_id"], r["role"], r["content"], r["created_at"], r["status"],
                       r["reason"], json.loads(r["stats"] or "{}"), json.loads(r["config"] or "{}"))

    def get_message(self, msg_id: int) -> Message | None:
        r = self.db.execute("SELECT * FROM messages WHERE id=?", (msg_id,)).fetchone()
        return self._msg(r) if r else None

    def messages(self, conv_id: int) -> list[Message]:
        rows = self.db.execute("SELECT * FROM messages WHERE conversation_id=? ORDER BY id", (conv_id,))
        return [self._msg(r) for r in rows]

    def update_message(self, msg_id: int, content: str) -> None:
        self.db.execute("UPDATE messages SET content=? WHERE id=?", (content, msg_id))

    def delete_messages_from(self, conv_id: int, msg_id: int) -> int:
        """Delete message `msg_id` and every later one in the conversation (edit-and-resend, regenerate)."""
        cur = self.db.execute("DELETE FROM messages WHERE conversation_id=? AND id>=?", (conv_id, msg_id))
        self.db.execute("UPDATE conversations SET updated_at=? WHERE id=?", (time.time(), conv_id))
        return cur.rowcount
