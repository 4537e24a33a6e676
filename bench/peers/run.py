"""Conversation-memory benchmarks: mindstore against the libraries users would otherwise pick.

Run from the repository root::

    python bench/peers/run.py            # full run, ~5-8 minutes on 2 cores
    python bench/peers/run.py --quick    # small version, ~1 minute
    python bench/peers/run.py --json     # JSON document on stdout instead of tables

The script creates ``bench/peers/.venv`` (git-ignored), installs the pinned peers from
``bench/peers/requirements.txt`` plus mindstore (editable, from this checkout) into it, and
re-executes itself there. The peers are never dependencies of mindstore.

Systems (every one on a real SQLite file in a temporary directory):

* ``sqlite3`` – the floor: the same rows through the stdlib driver, no library.
* ``sqlite3+fts5`` – the floor plus a plain FTS5 index written in the same transaction.
* ``mindstore`` – ``SQLiteStore`` + ``Session`` (public API).
* ``agents.SQLiteSession`` / ``agents.AdvancedSQLiteSession`` – the OpenAI Agents SDK.
* ``llama.Memory`` – LlamaIndex ``Memory`` on its SQLite chat store (SQLAlchemy + aiosqlite).
* ``llama.SQLiteChatStore`` – the ``llama-index-storage-chat-store-sqlite`` package.
* ``langgraph.SqliteSaver`` – a one-node ``MessagesState`` graph checkpointed by ``SqliteSaver``.

Workloads are defined precisely in ``bench/peers/README.md``. Every system runs every workload
interleaved with the others in the same process; the whole table is produced ``--rounds``
times (default 2) to show the noise.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
VENV = HERE / ".venv"
REQUIREMENTS = HERE / "requirements.txt"

# --------------------------------------------------------------------------------------------
# virtual environment bootstrap (stdlib only above this line's callers)
# --------------------------------------------------------------------------------------------


def _venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _in_venv() -> bool:
    return Path(sys.prefix).resolve() == VENV.resolve()


def ensure_venv_and_reexec(argv: list[str], *, reinstall: bool) -> None:
    """Create/refresh bench/peers/.venv and re-execute this script inside it."""
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:16]
    marker = VENV / f".installed-{digest}"
    py = _venv_python()
    if reinstall and VENV.exists():
        shutil.rmtree(VENV)
    if not py.exists():
        _log(f"creating {VENV.relative_to(REPO)} ...")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    if not marker.exists():
        _log("installing pinned peers + editable mindstore into the benchmark venv ...")
        pip = [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, "-r", str(REQUIREMENTS)], check=True)
        subprocess.run([*pip, "-e", str(REPO)], check=True)
        for old in VENV.glob(".installed-*"):
            old.unlink()
        marker.touch()
    os.execv(str(py), [str(py), str(Path(__file__).resolve()), *argv])


# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Config:
    quick: bool
    w1_messages: int  # W1..W4, W7 history length
    w1_budget_s: float  # per system: appends stop here, the rest is seeded in bulk (marked)
    w1_chunk: int  # interleaving granularity
    recent: int  # W3
    w5_sessions: int
    w5_messages: int
    w6_sessions: int
    w6_messages: int  # per session
    w6_limit: int
    reps_w2: int
    reps_w3: int
    reps_w4: int
    reps_w5: int
    reps_w6: int  # per query
    reps_w7: int

    @property
    def branch_at(self) -> int:
        """1-based message number the W7 branch hangs from (its parent): the end of a turn
        (a multiple of 4), because AdvancedSQLiteSession branches only at user turns."""
        return self.w1_messages // 2 // 4 * 4


FULL = Config(
    quick=False,
    w1_messages=5_000,
    w1_budget_s=12.0,
    w1_chunk=250,
    recent=50,
    w5_sessions=200,
    w5_messages=100,
    w6_sessions=100,
    w6_messages=1_000,
    w6_limit=10,
    reps_w2=11,
    reps_w3=21,
    reps_w4=9,
    reps_w5=31,
    reps_w6=5,
    reps_w7=7,
)
QUICK = Config(
    quick=True,
    w1_messages=400,
    w1_budget_s=4.0,
    w1_chunk=50,
    recent=50,
    w5_sessions=20,
    w5_messages=50,
    w6_sessions=10,
    w6_messages=1_000,
    w6_limit=10,
    reps_w2=5,
    reps_w3=15,
    reps_w4=5,
    reps_w5=15,
    reps_w6=2,
    reps_w7=3,
)

# --------------------------------------------------------------------------------------------
# deterministic conversation text
# --------------------------------------------------------------------------------------------

# fmt: off
_SYL = [
    "ka", "lo", "mi", "ru", "ten", "sa", "vor", "di", "pe", "nu", "qua", "bel", "ro", "fi",
    "zan", "te", "mo", "lix", "dra", "gu", "sen", "pa", "tri", "ov",
]
_REAL = [
    "deploy", "deployment", "deploying", "database", "latency", "rollback", "migration",
    "customer", "invoice", "outage", "kubernetes", "cluster", "timeout", "backup", "pipeline",
    "release", "incident", "metrics", "alert", "schema", "upgrade", "cache", "region",
    "replica", "billing", "ticket", "staging", "production", "error", "retry",
]
# fmt: on


def _vocabulary() -> tuple[list[str], list[float]]:
    rng = random.Random(7)
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < 3_000:
        w = "".join(rng.choice(_SYL) for _ in range(rng.randint(1, 3)))
        if w not in seen:
            seen.add(w)
            words.append(w)
    # interleave real words at fixed ranks so queries hit known frequencies
    for k, w in enumerate(_REAL):
        words.insert(5 + k * 37, w)
    weights = [1.0 / (r + 1) for r in range(len(words))]  # Zipf, s=1
    cum: list[float] = []
    acc = 0.0
    for w8 in weights:
        acc += w8
        cum.append(acc)
    return words, cum


VOCAB, CUM = _vocabulary()
_POOL: list[str] = []


def _pool() -> list[str]:
    """One seeded Zipf word stream; messages are slices of it at seeded offsets (fast)."""
    if not _POOL:
        _POOL.extend(random.Random(11).choices(VOCAB, cum_weights=CUM, k=1_000_000))
    return _POOL


TARGET_CHARS = {"user": 200, "assistant": 800, "tool": 2_000}
ROLE_CYCLE = ("user", "assistant", "tool", "assistant")


@dataclass(frozen=True, slots=True)
class Msg:
    """One logical message; each adapter converts it to its library's native shape."""

    id: str
    role: str  # user | assistant | tool
    text: str
    call_id: str | None  # tool results only


def _text(rng: random.Random, n_chars: int) -> str:
    pool = _pool()
    k = n_chars // 5 + 4
    start = rng.randrange(len(pool) - k)
    out = " ".join(pool[start : start + k])
    return out[:n_chars].rstrip() + "."


def conversation(tag: str, n: int) -> list[Msg]:
    """``n`` messages of session ``tag``: user ~200 chars, assistant ~800, tool ~2,000."""
    msgs: list[Msg] = []
    rng = random.Random(tag)
    for i in range(n):
        role = ROLE_CYCLE[i % 4]
        text = _text(rng, TARGET_CHARS[role])
        call_id = f"call_{tag}_{i // 4}" if role == "tool" else None
        msgs.append(Msg(id=f"m{i}", role=role, text=text, call_id=call_id))
    return msgs


def branch_message(k: int) -> Msg:
    rng = random.Random(f"branch:{k}")
    return Msg(id=f"b{k}", role="user", text=_text(rng, 200), call_id=None)


# W6 queries: (label, words, phrase?) — rank = position in the Zipf vocabulary
def search_queries() -> list[tuple[str, list[str], bool]]:
    def w(rank: int) -> str:
        return VOCAB[rank]

    return [
        ("common word", [w(5)], False),  # 'deploy' (rank 5): in most messages
        ("mid word", [w(300)], False),
        ("rare word", [w(2_500)], False),
        ("two words", [w(60), w(400)], False),
        ("two mid words", [w(250), w(900)], False),
        ("phrase", [w(0), w(1)], True),
    ]


# --------------------------------------------------------------------------------------------
# adapters
# --------------------------------------------------------------------------------------------

NOT_OFFERED = "not offered"


class System:
    """One library under test. Subclasses implement the hooks; all paths are per round."""

    name = "?"
    durability = "?"
    offers_search = False
    offers_branch = False

    def __init__(self, root: Path, shared: Path) -> None:
        slug = re.sub(r"[^A-Za-z0-9]+", "_", self.name)
        self.root = root / slug
        self.root.mkdir(parents=True, exist_ok=True)
        # W5/W6 databases are only read: built once, shared by every round
        self.shared = shared / slug
        self.shared.mkdir(parents=True, exist_ok=True)

    # paths
    @property
    def w1_path(self) -> Path:
        return self.root / "w1.db"

    @property
    def w5_path(self) -> Path:
        return self.shared / "w5.db"

    @property
    def w6_path(self) -> Path:
        return self.shared / "w6.db"

    def prepare(self, msgs: list[Msg]) -> list[Any]:
        """Convert to native objects before timing (users build these anyway)."""
        return list(msgs)

    # W1
    async def open_w1(self) -> None: ...
    async def append(self, native: Any) -> None:
        raise NotImplementedError

    async def mark_branch_point(self) -> None:
        """Called (untimed) right after message ``branch_at`` was appended."""

    async def seed(self, natives: list[Any]) -> None:
        """Bulk-append to the W1 history (untimed; used when W1 hit its time budget)."""
        raise NotImplementedError

    async def close_w1(self) -> None: ...

    # W2/W3 on a warm handle over the W1 file
    async def open_reader(self) -> None: ...
    async def read_all(self) -> int:
        raise NotImplementedError

    async def read_recent(self, n: int) -> int:
        raise NotImplementedError

    async def close_reader(self) -> None: ...

    # W4
    async def cold_read(self) -> int:
        raise NotImplementedError

    # W5
    async def setup_many(self, path: Path, sessions: list[tuple[str, list[Any]]]) -> None:
        raise NotImplementedError

    async def open_session(self, path: Path, session_id: str) -> None:
        raise NotImplementedError

    async def read_session(self) -> int:
        raise NotImplementedError

    async def close_session(self) -> None: ...

    # W6
    async def open_search(self) -> None:
        raise NotImplementedError

    async def search(self, words: list[str], phrase: bool, limit: int) -> int:
        raise NotImplementedError

    async def close_search(self) -> None: ...

    # W7
    async def branch(self, k: int, new: Any) -> None:
        """Create a branch whose history is messages 1..k plus ``new``."""
        raise NotImplementedError

    async def read_branch(self, new: Any) -> int:
        raise NotImplementedError

    async def after_branch(self) -> None: ...


def _msg_json(m: Msg) -> dict[str, Any]:
    """The mindstore (AI SDK UIMessage) shape — also what the floor stores."""
    if m.role == "tool":
        part = {
            "type": "tool-search_docs",
            "toolCallId": m.call_id,
            "state": "output-available",
            "input": {"query": "status"},
            "output": m.text,
        }
        return {"id": m.id, "role": "tool", "parts": [part]}
    return {"id": m.id, "role": m.role, "parts": [{"type": "text", "text": m.text}]}


# ---- the floor ------------------------------------------------------------------------------


class PlainSQLite(System):
    """The same rows through the stdlib driver: one table, parent pointers, no library."""

    name = "sqlite3"
    fts = False
    synchronous = "NORMAL"  # matched to mindstore's SQLite store (see README)

    @property
    def durability(self) -> str:  # type: ignore[override]
        return f"WAL, synchronous={self.synchronous}"

    def _connect(self, path: Path) -> sqlite3.Connection:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        conn.executescript(
            """
            CREATE TABLE IF NOT EXISTS messages (
                seq INTEGER PRIMARY KEY,
                session_id TEXT NOT NULL,
                id TEXT NOT NULL,
                parent_id TEXT,
                body TEXT NOT NULL,
                UNIQUE (session_id, id)
            );
            CREATE INDEX IF NOT EXISTS messages_session ON messages (session_id, seq);
            """
        )
        if self.fts:
            conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5("
                "text, tokenize='porter unicode61')"
            )
        return conn

    def prepare(self, msgs: list[Msg]) -> list[Any]:
        return [(m.id, m.text, json.dumps(_msg_json(m))) for m in msgs]

    def _insert(self, conn: sqlite3.Connection, sid: str, rows: Sequence[Any]) -> None:
        last = conn.execute(
            "SELECT id FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT 1", (sid,)
        ).fetchone()
        parent = last[0] if last else None
        for mid, text, body in rows:
            cur = conn.execute(
                "INSERT INTO messages (session_id, id, parent_id, body) VALUES (?, ?, ?, ?)",
                (sid, mid, parent, body),
            )
            if self.fts:
                conn.execute(
                    "INSERT INTO messages_fts (rowid, text) VALUES (?, ?)", (cur.lastrowid, text)
                )
            parent = mid

    async def open_w1(self) -> None:
        self.conn = self._connect(self.w1_path)

    async def append(self, native: Any) -> None:
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        self._insert(c, "s", [native])
        c.execute("COMMIT")

    async def seed(self, natives: list[Any]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self._insert(self.conn, "s", natives)
        self.conn.execute("COMMIT")

    async def close_w1(self) -> None:
        self.conn.close()

    async def open_reader(self) -> None:
        self.conn = self._connect(self.w1_path)

    async def read_all(self) -> int:
        rows = self.conn.execute(
            "SELECT body FROM messages WHERE session_id = ? ORDER BY seq", ("s",)
        ).fetchall()
        return len([json.loads(b) for (b,) in rows])

    async def read_recent(self, n: int) -> int:
        rows = self.conn.execute(
            "SELECT body FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT ?", ("s", n)
        ).fetchall()
        return len([json.loads(b) for (b,) in reversed(rows)])

    async def close_reader(self) -> None:
        self.conn.close()

    async def cold_read(self) -> int:
        conn = sqlite3.connect(self.w1_path, isolation_level=None)
        try:
            rows = conn.execute(
                "SELECT body FROM messages WHERE session_id = ? ORDER BY seq", ("s",)
            ).fetchall()
            return len([json.loads(b) for (b,) in rows])
        finally:
            conn.close()

    async def setup_many(self, path: Path, sessions: list[tuple[str, list[Any]]]) -> None:
        conn = self._connect(path)
        for sid, rows in sessions:
            conn.execute("BEGIN IMMEDIATE")
            self._insert(conn, sid, rows)
            conn.execute("COMMIT")
        conn.close()

    async def open_session(self, path: Path, session_id: str) -> None:
        self.sconn = self._connect(path)
        self.sid = session_id

    async def read_session(self) -> int:
        rows = self.sconn.execute(
            "SELECT body FROM messages WHERE session_id = ? ORDER BY seq", (self.sid,)
        ).fetchall()
        return len([json.loads(b) for (b,) in rows])

    async def close_session(self) -> None:
        self.sconn.close()

    async def branch(self, k: int, new: Any) -> None:
        mid, text, body = new
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        cur = c.execute(
            "INSERT INTO messages (session_id, id, parent_id, body) VALUES (?, ?, ?, ?)",
            ("s", mid, f"m{k - 1}", body),
        )
        if self.fts:
            c.execute("INSERT INTO messages_fts (rowid, text) VALUES (?, ?)", (cur.lastrowid, text))
        c.execute("COMMIT")

    async def read_branch(self, new: Any) -> int:
        rows = self.conn.execute(
            """
            WITH RECURSIVE path(id, parent_id, body, depth) AS (
                SELECT id, parent_id, body, 0 FROM messages WHERE session_id = ?1 AND id = ?2
                UNION ALL
                SELECT m.id, m.parent_id, m.body, p.depth + 1
                FROM messages m JOIN path p ON m.session_id = ?1 AND m.id = p.parent_id
            )
            SELECT body FROM path ORDER BY depth DESC
            """,
            ("s", new[0]),
        ).fetchall()
        return len([json.loads(b) for (b,) in rows])

    offers_branch = True


class PlainSQLiteFull(PlainSQLite):
    """The floor with ``synchronous=FULL``: what the peers' default durability costs."""

    name = "sqlite3[sync=FULL]"
    synchronous = "FULL"


class PlainFTS(PlainSQLite):
    """The floor plus a plain FTS5 table (porter unicode61) written in the same transaction."""

    name = "sqlite3+fts5"
    fts = True
    offers_search = True

    async def open_search(self) -> None:
        self.qconn = self._connect(self.w6_path)

    async def search(self, words: list[str], phrase: bool, limit: int) -> int:
        q = '"' + " ".join(words) + '"' if phrase else " ".join(f'"{w}"' for w in words)
        rows = self.qconn.execute(
            """
            SELECT m.session_id, m.id, f.text, snippet(messages_fts, 0, '[', ']', '…', 12),
                   bm25(messages_fts) AS score
            FROM messages_fts f JOIN messages m ON m.seq = f.rowid
            WHERE messages_fts MATCH ?
            ORDER BY score, m.seq DESC
            LIMIT ?
            """,
            (q, limit),
        ).fetchall()
        return len(rows)

    async def close_search(self) -> None:
        self.qconn.close()


# ---- mindstore ------------------------------------------------------------------------------


class Mindstore(System):
    name = "mindstore"
    synchronous = "NORMAL"  # SQLiteStore's default
    offers_search = True
    offers_branch = True

    def __init__(self, root: Path, shared: Path) -> None:
        super().__init__(root, shared)
        import mindstore
        from mindstore import Session, SQLiteStore
        from mindstore.messages import validate_message
        from mindstore.search import parse_query
        from mindstore.store.base import NewMessage, SessionKey

        self.version = getattr(mindstore, "__version__", "?")
        self.Session = Session
        self.SQLiteStore = SQLiteStore
        self.NewMessage = NewMessage
        self.SessionKey = SessionKey
        self.validate = validate_message
        self.parse_query = parse_query
        self.durability = f"WAL, synchronous={self.synchronous}"

    def prepare(self, msgs: list[Msg]) -> list[Any]:
        return [_msg_json(m) for m in msgs]

    async def _open(self, path: Path, sid: str) -> tuple[Any, Any]:
        store = self.SQLiteStore(str(path), synchronous=self.synchronous)
        return store, self.Session.create(store, sid)

    async def _bulk(self, store: Any, sid: str, natives: list[Any]) -> None:
        # Store.append takes a batch in one transaction (the Store protocol, DESIGN §3).
        key = self.SessionKey(namespace="default", session_id=sid)
        sess = self.Session.create(store, sid)
        for i in range(0, len(natives), 500):
            items = []
            for msg in natives[i : i + 500]:
                m = self.validate(dict(msg))
                items.append(self.NewMessage(message=m, tokens=sess.count_message_tokens([m])))
            await store.append(key, items)

    async def open_w1(self) -> None:
        self.store, self.sess = await self._open(self.w1_path, "s")

    async def append(self, native: Any) -> None:
        await self.sess.append_message(dict(native))

    async def seed(self, natives: list[Any]) -> None:
        await self._bulk(self.store, "s", natives)

    async def close_w1(self) -> None:
        await self.store.aclose()

    async def open_reader(self) -> None:
        self.store, self.sess = await self._open(self.w1_path, "s")

    async def read_all(self) -> int:
        return len(await self.sess.get_history())

    async def read_recent(self, n: int) -> int:
        # No count-based window in the API: a 1-token budget with min_messages=n is exactly n.
        window = await self.sess.get_recent_history(max_tokens=1, min_messages=n)
        return len(window.messages)

    async def close_reader(self) -> None:
        await self.store.aclose()

    async def cold_read(self) -> int:
        store, sess = await self._open(self.w1_path, "s")
        try:
            return len(await sess.get_history())
        finally:
            await store.aclose()

    async def setup_many(self, path: Path, sessions: list[tuple[str, list[Any]]]) -> None:
        store = self.SQLiteStore(str(path), synchronous=self.synchronous)
        try:
            for sid, natives in sessions:
                await self._bulk(store, sid, natives)
        finally:
            await store.aclose()

    async def open_session(self, path: Path, session_id: str) -> None:
        self.sstore, self.ssess = await self._open(path, session_id)

    async def read_session(self) -> int:
        return len(await self.ssess.get_history())

    async def close_session(self) -> None:
        await self.sstore.aclose()

    async def open_search(self) -> None:
        self.qstore = self.SQLiteStore(str(self.w6_path))
        try:
            from mindstore import SessionManager

            self.manager: Any = SessionManager(self.qstore)
            self.search_api = "SessionManager.search"
        except Exception:  # the manager may not exist yet in this checkout
            self.manager = None
            self.search_api = "Store.search"

    async def search(self, words: list[str], phrase: bool, limit: int) -> int:
        q = '"' + " ".join(words) + '"' if phrase else " ".join(words)
        if self.manager is not None:
            return len(await self.manager.search(q, limit=limit))
        parsed = self.parse_query(q)
        return len(await self.qstore.search("default", parsed, limit=limit))

    async def close_search(self) -> None:
        await self.qstore.aclose()

    async def branch(self, k: int, new: Any) -> None:
        await self.sess.append_message(dict(new), parent_id=f"m{k - 1}")

    async def read_branch(self, new: Any) -> int:
        return len(await self.sess.get_history(leaf_id=new["id"]))


class MindstoreFull(Mindstore):
    """``SQLiteStore(path, synchronous="FULL")``: the peers' durability, for a like-for-like W1."""

    name = "mindstore[sync=FULL]"
    synchronous = "FULL"
    offers_search = False  # W6 does not depend on the commit mode; saves its 100k-message setup


# ---- OpenAI Agents SDK ------------------------------------------------------------------------


def _agents_item(m: Msg) -> dict[str, Any]:
    if m.role == "tool":
        return {"type": "function_call_output", "call_id": m.call_id, "output": m.text}
    return {"role": m.role, "content": m.text}


class AgentsSession(System):
    name = "agents.SQLiteSession"
    durability = "WAL, synchronous=FULL (driver default)"

    def _make(self, path: Path, sid: str) -> Any:
        from agents import SQLiteSession

        return SQLiteSession(sid, str(path))

    def prepare(self, msgs: list[Msg]) -> list[Any]:
        return [_agents_item(m) for m in msgs]

    async def open_w1(self) -> None:
        self.s = self._make(self.w1_path, "s")

    async def append(self, native: Any) -> None:
        await self.s.add_items([native])

    async def seed(self, natives: list[Any]) -> None:
        await self.s.add_items(natives)

    async def close_w1(self) -> None:
        self.s.close()

    async def open_reader(self) -> None:
        self.s = self._make(self.w1_path, "s")

    async def read_all(self) -> int:
        return len(await self.s.get_items())

    async def read_recent(self, n: int) -> int:
        return len(await self.s.get_items(limit=n))

    async def close_reader(self) -> None:
        self.s.close()

    async def cold_read(self) -> int:
        s = self._make(self.w1_path, "s")
        try:
            return len(await s.get_items())
        finally:
            s.close()

    async def setup_many(self, path: Path, sessions: list[tuple[str, list[Any]]]) -> None:
        for sid, natives in sessions:
            s = self._make(path, sid)
            await s.add_items(natives)
            s.close()

    async def open_session(self, path: Path, session_id: str) -> None:
        self.ss = self._make(path, session_id)

    async def read_session(self) -> int:
        return len(await self.ss.get_items())

    async def close_session(self) -> None:
        self.ss.close()


class AgentsAdvanced(AgentsSession):
    name = "agents.AdvancedSQLiteSession"
    offers_branch = True

    def _make(self, path: Path, sid: str) -> Any:
        from agents.extensions.memory import AdvancedSQLiteSession

        return AdvancedSQLiteSession(session_id=sid, db_path=str(path), create_tables=True)

    async def branch(self, k: int, new: Any) -> None:
        # Branches start at a user turn and copy every earlier message into the new branch.
        # Message k+1 (1-based) is the user message of turn k/4 + 1, so the branch holds 1..k.
        turn = k // 4 + 1
        self.branches = getattr(self, "branches", 0) + 1
        await self.s.create_branch_from_turn(turn, branch_name=f"bench-{self.branches}")
        await self.s.add_items([new])

    async def read_branch(self, new: Any) -> int:
        return len(await self.s.get_items())

    async def after_branch(self) -> None:
        await self.s.switch_to_branch("main")


# ---- LlamaIndex -----------------------------------------------------------------------------


def _offline_tokenizer(text: str) -> list[int]:
    """Offline stand-in for tiktoken: ~4 characters per token, no download."""
    return [0] * (len(text) // 4 + 1)


def _llama_msg(m: Msg) -> Any:
    from llama_index.core.llms import ChatMessage

    if m.role == "tool":
        return ChatMessage(
            role="tool", content=m.text, additional_kwargs={"tool_call_id": m.call_id}
        )
    return ChatMessage(role=m.role, content=m.text)


class LlamaMemory(System):
    name = "llama.Memory"
    durability = "rollback journal (DELETE), synchronous=FULL (aiosqlite defaults)"

    def prepare(self, msgs: list[Msg]) -> list[Any]:
        return [_llama_msg(m) for m in msgs]

    def _store(self, path: Path) -> Any:
        from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

        return SQLAlchemyChatStore(
            table_name="llama_index_memory", async_database_uri=f"sqlite+aiosqlite:///{path}"
        )

    def _memory(self, store: Any, sid: str) -> Any:
        from llama_index.core.memory import Memory

        return Memory.from_defaults(
            session_id=sid, chat_store=store, tokenizer_fn=_offline_tokenizer
        )

    @staticmethod
    async def _dispose(store: Any) -> None:
        engine = getattr(store, "_async_engine", None)
        if engine is not None:
            await engine.dispose()

    async def open_w1(self) -> None:
        self.store = self._store(self.w1_path)
        self.mem = self._memory(self.store, "s")

    async def append(self, native: Any) -> None:
        await self.mem.aput(native)

    async def seed(self, natives: list[Any]) -> None:
        await self.mem.aput_messages(natives)

    async def close_w1(self) -> None:
        await self._dispose(self.store)

    async def open_reader(self) -> None:
        await self.open_w1()

    async def read_all(self) -> int:
        # aget() returns only the token-limited active queue; aget_all() is the whole history.
        return len(await self.mem.aget_all())

    async def read_recent(self, n: int) -> int:
        total = await self.store.count_messages("s", status=None)
        return len(
            await self.store.get_messages("s", status=None, offset=max(0, total - n), limit=n)
        )

    async def close_reader(self) -> None:
        await self._dispose(self.store)

    async def cold_read(self) -> int:
        store = self._store(self.w1_path)
        try:
            return len(await self._memory(store, "s").aget_all())
        finally:
            await self._dispose(store)

    async def setup_many(self, path: Path, sessions: list[tuple[str, list[Any]]]) -> None:
        store = self._store(path)
        try:
            for sid, natives in sessions:  # straight to the store: no queue management
                await store.add_messages(sid, natives)
        finally:
            await self._dispose(store)

    async def open_session(self, path: Path, session_id: str) -> None:
        self.sstore = self._store(path)
        self.smem = self._memory(self.sstore, session_id)

    async def read_session(self) -> int:
        return len(await self.smem.aget_all())

    async def close_session(self) -> None:
        await self._dispose(self.sstore)


class LlamaSQLiteChatStore(System):
    name = "llama.SQLiteChatStore"
    durability = "rollback journal (DELETE), synchronous=FULL (pysqlite defaults)"

    prepare = LlamaMemory.prepare

    def _store(self, path: Path) -> Any:
        from llama_index.storage.chat_store.sqlite import SQLiteChatStore

        return SQLiteChatStore.from_params(database=str(path))

    @staticmethod
    def _dispose(store: Any) -> None:
        store._session.kw["bind"].dispose()

    async def open_w1(self) -> None:
        self.store = self._store(self.w1_path)

    async def append(self, native: Any) -> None:
        self.store.add_message("s", native)

    async def seed(self, natives: list[Any]) -> None:
        self.store.set_messages("s", natives)  # this store's set_messages appends

    async def close_w1(self) -> None:
        self._dispose(self.store)

    async def open_reader(self) -> None:
        await self.open_w1()

    async def read_all(self) -> int:
        return len(self.store.get_messages("s"))

    async def read_recent(self, n: int) -> int:
        return len(self.store.get_messages("s")[-n:])  # no windowed read in the API

    async def close_reader(self) -> None:
        self._dispose(self.store)

    async def cold_read(self) -> int:
        store = self._store(self.w1_path)
        try:
            return len(store.get_messages("s"))
        finally:
            self._dispose(store)

    async def setup_many(self, path: Path, sessions: list[tuple[str, list[Any]]]) -> None:
        store = self._store(path)
        for sid, natives in sessions:
            store.set_messages(sid, natives)
        self._dispose(store)

    async def open_session(self, path: Path, session_id: str) -> None:
        self.sstore = self._store(path)
        self.sid = session_id

    async def read_session(self) -> int:
        return len(self.sstore.get_messages(self.sid))

    async def close_session(self) -> None:
        self._dispose(self.sstore)


# ---- LangGraph ----------------------------------------------------------------------------------


def _lc_msg(m: Msg) -> Any:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    if m.role == "tool":
        return ToolMessage(content=m.text, tool_call_id=m.call_id or "", id=m.id)
    if m.role == "assistant":
        return AIMessage(content=m.text, id=m.id)
    return HumanMessage(content=m.text, id=m.id)


class LangGraph(System):
    name = "langgraph.SqliteSaver"
    durability = "WAL, synchronous=FULL (driver default)"
    offers_branch = True

    def prepare(self, msgs: list[Msg]) -> list[Any]:
        return [_lc_msg(m) for m in msgs]

    def _graph(self, path: Path) -> tuple[Any, sqlite3.Connection]:
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, MessagesState, StateGraph

        def agent(state: MessagesState) -> dict[str, Any]:
            return {}  # the model call would go here; the input message is the append

        builder = StateGraph(MessagesState)
        builder.add_node("agent", agent)
        builder.add_edge(START, "agent")
        builder.add_edge("agent", END)
        conn = sqlite3.connect(str(path), check_same_thread=False)
        return builder.compile(checkpointer=SqliteSaver(conn)), conn

    @staticmethod
    def _cfg(sid: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": sid}}

    async def open_w1(self) -> None:
        self.g, self.conn = self._graph(self.w1_path)
        self.branch_cfg: Any = None

    async def append(self, native: Any) -> None:
        self.g.invoke({"messages": [native]}, self._cfg("s"))

    async def mark_branch_point(self) -> None:
        self.branch_cfg = self.g.get_state(self._cfg("s")).config

    async def seed(self, natives: list[Any]) -> None:
        self.g.invoke({"messages": natives}, self._cfg("s"))

    async def close_w1(self) -> None:
        self.conn.close()

    async def open_reader(self) -> None:
        g, self.conn = self._graph(self.w1_path)
        self.g = g

    async def read_all(self) -> int:
        return len(self.g.get_state(self._cfg("s")).values["messages"])

    async def read_recent(self, n: int) -> int:
        # the checkpoint holds the whole list; there is no windowed read
        return len(self.g.get_state(self._cfg("s")).values["messages"][-n:])

    async def close_reader(self) -> None:
        self.conn.close()

    async def cold_read(self) -> int:
        g, conn = self._graph(self.w1_path)
        try:
            return len(g.get_state(self._cfg("s")).values["messages"])
        finally:
            conn.close()

    async def setup_many(self, path: Path, sessions: list[tuple[str, list[Any]]]) -> None:
        g, conn = self._graph(path)
        for sid, natives in sessions:
            g.invoke({"messages": natives}, self._cfg(sid))
        conn.close()

    async def open_session(self, path: Path, session_id: str) -> None:
        self.sg, self.sconn = self._graph(path)
        self.sid = session_id

    async def read_session(self) -> int:
        return len(self.sg.get_state(self._cfg(self.sid)).values["messages"])

    async def close_session(self) -> None:
        self.sconn.close()

    async def branch(self, k: int, new: Any) -> None:
        # time travel: fork the thread from the checkpoint whose state ends at message k
        self.fork_cfg = self.g.update_state(self.branch_cfg, {"messages": [new]})

    async def read_branch(self, new: Any) -> int:
        return len(self.g.get_state(self.fork_cfg).values["messages"])


ALL_SYSTEMS: list[type[System]] = [
    PlainSQLite,
    PlainSQLiteFull,
    PlainFTS,
    Mindstore,
    MindstoreFull,
    AgentsSession,
    AgentsAdvanced,
    LlamaMemory,
    LlamaSQLiteChatStore,
    LangGraph,
]

# --------------------------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------------------------


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _disk_bytes(path: Path) -> int:
    total = 0
    for suffix in ("", "-wal", "-journal"):
        p = Path(str(path) + suffix)
        if p.exists():
            total += p.stat().st_size
    return total


def _journal_mode(path: Path) -> str:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return f"? ({exc})"


@dataclass
class Cell:
    value: float | None = None  # W1: messages/s; others: median ms; bytes: bytes
    note: str = ""  # "not offered", "partial: ..." etc.
    samples: list[float] = field(default_factory=list)


async def _timed(fn: Callable[[], Awaitable[int]]) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = await fn()
    return (time.perf_counter() - t0) * 1000.0, n


def _rot(items: list[Any], k: int) -> list[Any]:
    k %= len(items)
    return items[k:] + items[:k]


async def run_round(
    cfg: Config, systems: list[System], data: dict[str, Any], rnd: int
) -> dict[str, dict[str, Cell]]:
    res: dict[str, dict[str, Cell]] = {s.name: {} for s in systems}
    n = cfg.w1_messages
    k = cfg.branch_at
    msgs: list[Msg] = data["w1"]

    # ---- W1: append one at a time, interleaved in chunks -----------------------------------
    _log(f"[round {rnd}] W1 append {n} messages one at a time ...")
    natives = {s.name: s.prepare(msgs) for s in systems}
    done = {s.name: 0 for s in systems}
    spent = {s.name: 0.0 for s in systems}
    stopped: set[str] = set()
    for s in systems:
        await s.open_w1()
    for ci, start in enumerate(range(0, n, cfg.w1_chunk)):
        for s in _rot(systems, ci + rnd):
            if s.name in stopped:
                continue
            nat = natives[s.name]
            t_chunk = 0.0
            for i in range(start, min(start + cfg.w1_chunk, n)):
                t0 = time.perf_counter()
                await s.append(nat[i])
                t_chunk += time.perf_counter() - t0
                done[s.name] = i + 1
                if i + 1 == k:
                    await s.mark_branch_point()
            spent[s.name] += t_chunk
            if spent[s.name] > cfg.w1_budget_s and done[s.name] < n:
                stopped.add(s.name)
                _log(f"  {s.name}: W1 time budget reached after {done[s.name]} messages")
    for s in systems:
        d = done[s.name]
        cell = Cell(value=d / spent[s.name] if spent[s.name] else None)
        if d < n:
            cell.note = f"first {d} of {n} (time budget {cfg.w1_budget_s:.0f} s)"
            nat = natives[s.name]
            if d < k:  # keep the branch point a real boundary for W7
                await s.seed(nat[d:k])
                await s.mark_branch_point()
                d = k
            await s.seed(nat[d:n])
        res[s.name]["W1"] = cell
        await s.close_w1()
        res[s.name]["bytes"] = Cell(
            value=float(_disk_bytes(s.w1_path)),
            note="after the bulk seed" if done[s.name] < n else "",
        )
        res[s.name]["journal"] = Cell(note=_journal_mode(s.w1_path))

    # ---- W2/W3: warm handle over the W1 file --------------------------------------------------
    _log(f"[round {rnd}] W2 read all / W3 read last {cfg.recent} ...")
    for s in systems:
        await s.open_reader()
        got = await s.read_all()  # warm-up + correctness check
        if got != n:
            raise AssertionError(f"{s.name}: W2 read {got} messages, expected {n}")
        got = await s.read_recent(cfg.recent)
        if got != cfg.recent:
            raise AssertionError(f"{s.name}: W3 read {got} messages, expected {cfg.recent}")
    workloads: list[tuple[str, int, Callable[[System], Awaitable[int]]]] = [
        ("W2", cfg.reps_w2, lambda s: s.read_all()),
        ("W3", cfg.reps_w3, lambda s: s.read_recent(cfg.recent)),
    ]
    for wl, reps, op in workloads:
        samples: dict[str, list[float]] = {s.name: [] for s in systems}
        for r in range(reps):
            for s in _rot(systems, r):
                ms, _ = await _timed(lambda s=s, op=op: op(s))
                samples[s.name].append(ms)
        for s in systems:
            res[s.name][wl] = Cell(
                value=statistics.median(samples[s.name]), samples=samples[s.name]
            )

    # ---- W4: cold open + read everything ------------------------------------------------------
    _log(f"[round {rnd}] W4 cold open + read ...")
    samples = {s.name: [] for s in systems}
    for r in range(cfg.reps_w4):
        for s in _rot(systems, r):
            ms, got = await _timed(s.cold_read)
            if got != n:
                raise AssertionError(f"{s.name}: W4 read {got}, expected {n}")
            samples[s.name].append(ms)
    for s in systems:
        res[s.name]["W4"] = Cell(value=statistics.median(samples[s.name]), samples=samples[s.name])

    # ---- W7: branch at message k and read the branch ------------------------------------------
    _log(f"[round {rnd}] W7 branch at message {k} of {n} ...")
    samples = {s.name: [] for s in systems}
    create: dict[str, list[float]] = {s.name: [] for s in systems}
    brs = [branch_message(1000 * rnd + r) for r in range(cfg.reps_w7)]
    for r in range(cfg.reps_w7):
        for s in _rot(systems, r):
            if not s.offers_branch:
                continue
            new = s.prepare([brs[r]])[0]
            t0 = time.perf_counter()
            await s.branch(k, new)
            t1 = time.perf_counter()
            got = await s.read_branch(new)
            t2 = time.perf_counter()
            if got != k + 1:
                raise AssertionError(f"{s.name}: W7 branch has {got} messages, expected {k + 1}")
            samples[s.name].append((t2 - t0) * 1000.0)
            create[s.name].append((t1 - t0) * 1000.0)
            await s.after_branch()
    for s in systems:
        if s.offers_branch:
            res[s.name]["W7"] = Cell(
                value=statistics.median(samples[s.name]), samples=samples[s.name]
            )
            res[s.name]["W7_create"] = Cell(
                value=statistics.median(create[s.name]), samples=create[s.name]
            )
        else:
            res[s.name]["W7"] = Cell(note=NOT_OFFERED)
        await s.close_reader()

    # ---- W5: many sessions, read one ----------------------------------------------------------
    _log(f"[round {rnd}] W5 {cfg.w5_sessions} sessions x {cfg.w5_messages} messages (setup) ...")
    w5: list[tuple[str, list[Msg]]] = data["w5"]
    target = w5[len(w5) // 2 + 7][0]
    for s in systems:
        if not s.w5_path.exists():
            t0 = time.perf_counter()
            await s.setup_many(s.w5_path, [(sid, s.prepare(ms)) for sid, ms in w5])
            _log(f"  {s.name}: setup {time.perf_counter() - t0:.1f} s")
        await s.open_session(s.w5_path, target)
        got = await s.read_session()
        if got != cfg.w5_messages:
            raise AssertionError(f"{s.name}: W5 read {got}, expected {cfg.w5_messages}")
    samples = {s.name: [] for s in systems}
    for r in range(cfg.reps_w5):
        for s in _rot(systems, r):
            ms, _ = await _timed(s.read_session)
            samples[s.name].append(ms)
    for s in systems:
        res[s.name]["W5"] = Cell(value=statistics.median(samples[s.name]), samples=samples[s.name])
        await s.close_session()

    # ---- W6: search over many sessions ----------------------------------------------------------
    searchers = [s for s in systems if s.offers_search]
    total6 = cfg.w6_sessions * cfg.w6_messages
    _log(f"[round {rnd}] W6 search over {total6} messages (setup) ...")
    w6: list[tuple[str, list[Msg]]] = data["w6"]
    for s in searchers:
        if not s.w6_path.exists():
            t0 = time.perf_counter()
            await s.setup_many(s.w6_path, [(sid, s.prepare(ms)) for sid, ms in w6])
            _log(f"  {s.name}: setup {time.perf_counter() - t0:.1f} s")
        await s.open_search()
        for _, words, phrase in search_queries():  # warm-up
            await s.search(words, phrase, cfg.w6_limit)
    samples = {s.name: [] for s in searchers}
    queries = search_queries()
    per_query: dict[str, dict[str, float]] = {s.name: {} for s in searchers}
    for qi, (label, words, phrase) in enumerate(queries):
        qs: dict[str, list[float]] = {s.name: [] for s in searchers}
        for r in range(cfg.reps_w6):
            for s in _rot(searchers, qi + r):
                ms, got = await _timed(lambda s=s, w=words, p=phrase: s.search(w, p, cfg.w6_limit))
                if got == 0:
                    raise AssertionError(f"{s.name}: W6 query {label!r} found nothing")
                qs[s.name].append(ms)
        for s in searchers:
            samples[s.name].extend(qs[s.name])
            per_query[s.name][label] = statistics.median(qs[s.name])
    for s in systems:
        if s.offers_search:
            res[s.name]["W6"] = Cell(
                value=statistics.median(samples[s.name]), samples=samples[s.name]
            )
            res[s.name]["W6_queries"] = Cell(note=json.dumps(per_query[s.name]))
            await s.close_search()
        else:
            res[s.name]["W6"] = Cell(note=NOT_OFFERED)
    return res


# --------------------------------------------------------------------------------------------
# reporting
# --------------------------------------------------------------------------------------------

COLUMNS = [
    ("W1", "W1 append msg/s"),
    ("W2", "W2 read all ms"),
    ("W3", "W3 last 50 ms"),
    ("W4", "W4 cold ms"),
    ("W5", "W5 1 of many ms"),
    ("W6", "W6 search ms"),
    ("W7", "W7 branch ms"),
    ("bytes", "disk MB after W1"),
]


def _fmt_num(v: float) -> str:
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def _ratio(col: str, v: float, floor: float | None) -> str:
    if not floor:
        return ""
    # "x floor": how many times the floor's cost (>1 = slower/bigger than the floor)
    r = floor / v if col == "W1" else v / floor
    return f" ({r:.1f}×)" if r < 100 else f" ({r:,.0f}×)"


def table(res: dict[str, dict[str, Cell]], names: list[str]) -> str:
    floor_name = {c: "sqlite3" for c, _ in COLUMNS}
    floor_name["W6"] = "sqlite3+fts5"
    lines = ["| system | " + " | ".join(h for _, h in COLUMNS) + " |"]
    lines.append("|---" * (len(COLUMNS) + 1) + "|")
    notes: list[str] = []
    for name in names:
        row = [f"`{name}`"]
        for col, _ in COLUMNS:
            cell = res[name].get(col, Cell(note="—"))
            if cell.value is None:
                row.append(cell.note or "—")
                continue
            v = cell.value / 1e6 if col == "bytes" else cell.value
            fl = res.get(floor_name[col], {}).get(col)
            fv = None
            if fl is not None and fl.value is not None:
                fv = fl.value / 1e6 if col == "bytes" else fl.value
            txt = _fmt_num(v) + _ratio(col, v, fv)
            if cell.note:
                notes.append(f"{name} {col}: {cell.note}")
                txt += f" [{len(notes)}]"
            row.append(txt)
        lines.append("| " + " | ".join(row) + " |")
    out = "\n".join(lines)
    if notes:
        out += "\n\n" + "\n".join(f"[{i}] {t}" for i, t in enumerate(notes, 1))
    return out


def targets(res: dict[str, dict[str, Cell]]) -> list[dict[str, Any]]:
    def v(name: str, col: str) -> float | None:
        cell = res.get(name, {}).get(col)
        return cell.value if cell is not None else None

    ms, ag, adv = "mindstore", "agents.SQLiteSession", "agents.AdvancedSQLiteSession"
    out: list[dict[str, Any]] = []

    def add(label: str, measured: float | None, need: str, met: bool | None) -> None:
        out.append({"target": label, "measured": measured, "need": need, "met": met})

    a, b = v(ms, "W1"), v(ag, "W1")
    r = a / b if a and b else None
    add("W1 mindstore / SQLiteSession rate", r, "≥ 3×", None if r is None else r >= 3)
    a, b = v("mindstore[sync=FULL]", "W1"), v(ag, "W1")
    r = a / b if a and b else None
    add("W1 same durability: mindstore[sync=FULL] / SQLiteSession rate", r, "info", None)
    for col in ("W2", "W3", "W4", "W5"):
        a, b = v(ms, col), v(ag, col)
        r = a / b if a and b else None
        add(f"{col} mindstore / SQLiteSession time", r, "≤ 1×", None if r is None else r <= 1)
    a, b = v(ms, "W7"), v(adv, "W7")
    r = b / a if a and b else None
    add("W7 AdvancedSQLiteSession / mindstore time", r, "≥ 10×", None if r is None else r >= 10)
    a, b = v(ms, "W7_create"), v(adv, "W7_create")
    r = b / a if a and b else None
    add("W7 create only (no read): AdvancedSQLiteSession / mindstore", r, "info", None)
    a, b = v(ms, "W6"), v("sqlite3+fts5", "W6")
    r = a / b if a and b else None
    add("W6 mindstore / plain FTS5 time", r, "≤ 3×", None if r is None else r <= 3)
    a, b = v(ms, "bytes"), v("sqlite3+fts5", "bytes")
    r = a / b if a and b else None
    add("disk mindstore / sqlite3+FTS5 bytes", r, "≤ 2×", None if r is None else r <= 2)
    return out


def targets_md(rows: list[dict[str, Any]]) -> str:
    lines = ["| target | measured | need | met |", "|---|---|---|---|"]
    for t in rows:
        m = "—" if t["measured"] is None else f"{t['measured']:.2f}×"
        met = "—" if t["met"] is None else ("yes" if t["met"] else "**no**")
        lines.append(f"| {t['target']} | {m} | {t['need']} | {met} |")
    return "\n".join(lines)


def environment() -> dict[str, Any]:
    from importlib import metadata

    versions = {}
    for dist in (
        "mindstore",
        "openai-agents",
        "llama-index-core",
        "llama-index-storage-chat-store-sqlite",
        "SQLAlchemy",
        "aiosqlite",
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-sqlite",
        "langchain-core",
    ):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": mem,
        "versions": versions,
    }


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------


def build_data(cfg: Config, need_search: bool) -> dict[str, Any]:
    t0 = time.perf_counter()
    data: dict[str, Any] = {
        "w1": conversation("w1", cfg.w1_messages),
        "w5": [
            (f"s{j:03d}", conversation(f"w5-{j}", cfg.w5_messages)) for j in range(cfg.w5_sessions)
        ],
    }
    data["w6"] = (
        [(f"s{j:03d}", conversation(f"w6-{j}", cfg.w6_messages)) for j in range(cfg.w6_sessions)]
        if need_search
        else []
    )
    _log(f"generated the conversations in {time.perf_counter() - t0:.1f} s")
    return data


async def amain(args: argparse.Namespace) -> int:
    cfg = QUICK if args.quick else FULL
    wanted = [c for c in ALL_SYSTEMS if not args.systems or c.name in args.systems.split(",")]
    env = environment()
    data = build_data(cfg, any(c.offers_search for c in wanted))
    rounds: list[dict[str, dict[str, Cell]]] = []
    names: list[str] = []
    t_start = time.perf_counter()
    shared = Path(tempfile.mkdtemp(prefix="mindstore-peers-shared-", dir=args.workdir))
    durab: dict[str, str] = {}
    search_api = None
    try:
        for rnd in range(1, args.rounds + 1):
            work = Path(tempfile.mkdtemp(prefix=f"mindstore-peers-r{rnd}-", dir=args.workdir))
            try:
                systems = [c(work, shared) for c in wanted]
                names = [s.name for s in systems]
                rounds.append(await run_round(cfg, systems, data, rnd))
                durab = {s.name: s.durability for s in systems}
                search_api = getattr(
                    next((s for s in systems if s.name == "mindstore"), None), "search_api", None
                )
            finally:
                shutil.rmtree(work, ignore_errors=True)
            _log(f"[round {rnd}] done at {time.perf_counter() - t_start:.0f} s")
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    elapsed = time.perf_counter() - t_start
    cfg_dict = {k: getattr(cfg, k) for k in cfg.__dataclass_fields__}
    doc = {
        "config": cfg_dict,
        "environment": env,
        "elapsed_s": elapsed,
        "durability": durab,
        "mindstore_search_api": search_api,
        "rounds": [
            {
                name: {
                    col: {"value": c.value, "note": c.note, "samples": c.samples}
                    for col, c in cols.items()
                }
                for name, cols in rnd_res.items()
            }
            for rnd_res in rounds
        ],
        "targets": [targets(r) for r in rounds],
    }
    if args.save:
        with open(args.save, "w", encoding="utf-8") as fh:  # noqa: ASYNC230 - once, at the end
            fh.write(json.dumps(doc, indent=2) + "\n")
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    mode = "--quick" if cfg.quick else "full"
    print(f"# mindstore vs peers ({mode}; {args.rounds} rounds; {elapsed:.0f} s)\n")
    print(
        f"- machine: {env['cpu']}, {env['cores']} cores, {env['memory']}; "
        f"Python {env['python']}, SQLite {env['sqlite']}; {env['platform']}"
    )
    print("- versions: " + ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v))
    print(
        "\nCells: median (×floor: the floor's cost multiple; W1 as time per message). "
        "Floor = `sqlite3` (W6: `sqlite3+fts5`)."
    )
    for i, rnd_res in enumerate(rounds, 1):
        print(f"\n## round {i}\n")
        print(table(rnd_res, names))
        w7c = [
            f"`{n}` {_fmt_num(rnd_res[n]['W7_create'].value or 0)}"
            for n in names
            if "W7_create" in rnd_res[n]
        ]
        if w7c:
            print("\nW7 split — creating the branch alone (median ms): " + ", ".join(w7c))
        print("\ntargets:\n")
        print(targets_md(targets(rnd_res)))
    print("\n## durability (journal mode read back from each W1 file)\n")
    last = rounds[-1]
    for name in names:
        print(f"- `{name}`: {durab[name]}; file journal_mode={last[name]['journal'].note}")
    if search_api:
        print(f"\nmindstore W6 via {search_api}.")
    if "mindstore" in names and "W6_queries" in last.get("mindstore", {}):
        print("\nW6 per query (last round, median ms):\n")
        for name in names:
            if "W6_queries" in last[name]:
                pq = json.loads(last[name]["W6_queries"].note)
                print(f"- `{name}`: " + ", ".join(f"{k} {v:.2f}" for k, v in pq.items()))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small version (~1 minute)")
    parser.add_argument(
        "--json", action="store_true", help="print a JSON document instead of tables"
    )
    parser.add_argument("--rounds", type=int, default=2, help="how many times to produce the table")
    parser.add_argument("--systems", default="", help="comma-separated subset of system names")
    parser.add_argument("--save", default=None, help="also write the JSON document to this file")
    parser.add_argument("--workdir", default=None, help="where the temporary databases go")
    parser.add_argument("--no-venv", action="store_true", help="run in the current interpreter")
    parser.add_argument("--reinstall", action="store_true", help="rebuild bench/peers/.venv")
    args = parser.parse_args()
    if not args.no_venv and not _in_venv():
        argv = [a for a in sys.argv[1:] if a != "--reinstall"]
        ensure_venv_and_reexec(argv, reinstall=args.reinstall)
    return asyncio.run(amain(args))


if __name__ == "__main__":
    sys.exit(main())
