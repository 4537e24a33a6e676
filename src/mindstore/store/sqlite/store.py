"""SQLiteStore: the embedded default backend — one SQLite file in WAL mode.

Invariants
==========

* **No I/O in the constructor.** ``SQLiteStore(path)`` opens (and migrates) the file on the
  first call or on ``async with``; ``":memory:"`` is a private in-memory database; ``read_only``
  never creates, migrates or writes a file. Opening, pragmas, transactions and the translation
  of ``sqlite3.Error`` into :class:`~mindstore.errors.StoreError` are :mod:`._connection`;
  the schema and its runner are :mod:`.migrations`.
* **One transaction per call.** Every write method is exactly one ``BEGIN IMMEDIATE … COMMIT``
  (a savepoint inside :meth:`SQLiteStore.transaction`): the write lock is taken up front, so an
  auto-parented append reads the session's leaf pointer and inserts under the same lock, and
  concurrent appenders — tasks, threads or processes — form one chain, never a fork. A failed
  call changes nothing. Reads that need one snapshot for several statements use
  ``SAVEPOINT``/``RELEASE``.
* **Calls run inline.** sqlite3 calls run on the calling (event-loop) thread: every operation
  is a handful of indexed statements, one connection serialises them anyway, and a hop to a
  worker thread per call would only add latency. The cost: waiting for another *process's*
  write lock blocks the loop for at most that transaction (or ``busy_timeout``).
* **Arguments are checked before any I/O** (:mod:`mindstore.store._checks`), with the same
  errors as the PostgreSQL backend.

Schema (see :mod:`.migrations`)
===============================

* ``sessions``: one row per (namespace, session_id) with a small integer ``sid``; it is the
  SessionManager registry row and holds ``leaf_seq`` (the latest-leaf pointer, so
  ``latest_leaf`` is O(1) at cold start, recomputed on delete), ``message_count`` and
  ``linear`` (whether the messages in seq order form one chain). Every append upserts it.
  ``sessions_by_update`` serves ``list_sessions`` (newest first) in O(page). Writing blocks,
  prompts or skill state does *not* create a registry row.
* ``messages``: ``seq INTEGER PRIMARY KEY AUTOINCREMENT`` (store-wide monotonic, never reused),
  ``parent_seq`` references ``messages(seq)``; ``content`` is :func:`mindstore.messages.dumps`
  of the message (the Session hands over the JSON it already produced for the row-size check,
  so a message is serialised once); ``nbytes`` its UTF-8 size; ``tokens`` the session's
  estimate; ``created_us`` integer microseconds UTC. Message ids are unique per session.
* Paths: a linear session is read as a range of the ``messages_path`` index (one seek per
  message); a branched one with a recursive CTE over ``parent_seq`` — no depth limit either way.
  ``path_window`` loads the bodies of the window alone: on a linear session the totals are one
  index-only aggregate and the window one newest-first cursor stopped at the budget; on a
  branched one it first walks only ``tokens``/``nbytes`` of the path (index-only).
* ``delete`` re-attaches children to the deleted message's nearest surviving ancestor, drops
  compactions whose from/to message was deleted (an overlay they had superseded applies again),
  removes search rows and recomputes the leaf pointer and count.
* Blocks, prompts and skill states are keyed by strings; a namespace-wide block or entry
  collection (``ScopeKey.session_id=None``) is stored with scope ``''`` — never a valid session
  id, so keys cannot collide.

Search
======

The pure :mod:`mindstore.lexical` package tokenises, scores (BM25 with per-namespace statistics
and a context field) and makes snippets, identically for both backends; this backend keeps the
``search_terms`` / ``search_stats`` rows (:mod:`.lexical`) in the same transaction as the
message or entry they index and reads candidate rows from them. New documents wait in
``search_pending`` and move into ``search_terms`` in batches, so each b-tree page is written
once per batch rather than once per message. Semantic search is :mod:`.vectors`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import types
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, asynccontextmanager
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

from mindstore.embeddings import Embedder
from mindstore.errors import (
    ConflictError,
    InvalidKeyError,
    InvalidMessageError,
    MessageNotFoundError,
)
from mindstore.messages import dumps
from mindstore.search import ParsedQuery, SearchResult
from mindstore.store import _rules
from mindstore.store._checks import (
    check_choice,
    check_entry_key,
    check_id,
    check_int,
    check_key,
    check_name,
    check_scope,
    check_session_fields,
    check_text,
)
from mindstore.store._vectors import VectorMethods, check_embedder
from mindstore.store.base import (
    AUTO,
    UNSET,
    Compaction,
    Entry,
    EntryHit,
    NewMessage,
    PathWindow,
    ScopeKey,
    SessionInfo,
    SessionKey,
    SkillState,
    StoredMessage,
    TokenEstimate,
    _Sentinel,
)
from mindstore.store.sqlite import _entries, _registry, _search, _state, lexical
from mindstore.store.sqlite._connection import SQLiteConnection
from mindstore.store.sqlite.vectors import SQLiteVectors

__all__ = ["SQLiteStore"]


def _now_us() -> int:
    return time.time_ns() // 1000


def _dt(us: int) -> datetime:
    # Exact: the double nearest us/1e6 is within 0.25 µs of it for any date before 2200, and
    # fromtimestamp rounds to the nearest microsecond. ~30% faster than epoch + timedelta.
    return datetime.fromtimestamp(us / 1_000_000, UTC)


def _stored_message_factory() -> Callable[..., StoredMessage]:
    """A fast constructor for :class:`StoredMessage` (path reads build thousands of them).

    The dataclass is frozen with slots; its generated ``__init__`` goes through
    ``object.__setattr__`` per field, which costs about as much as decoding a small message.
    Setting the slots through their member descriptors is ~3x faster and produces an identical
    object. Falls back to the normal constructor if the class ever stops using slots.
    """
    names = ("id", "parent_id", "message", "created_at", "seq", "tokens", "nbytes")
    setters = [StoredMessage.__dict__.get(n) for n in names]
    if not all(isinstance(d, types.MemberDescriptorType) for d in setters):
        return lambda *a: StoredMessage(**dict(zip(names, a, strict=True)))
    new = object.__new__
    s_id, s_parent, s_msg, s_created, s_seq, s_tokens, s_nbytes = (
        d.__set__  # type: ignore[union-attr]
        for d in setters
    )

    def make(
        id: str,
        parent_id: str | None,
        message: dict[str, Any],
        created_at: datetime,
        seq: int,
        tokens: int,
        nbytes: int,
    ) -> StoredMessage:
        obj = new(StoredMessage)
        s_id(obj, id)
        s_parent(obj, parent_id)
        s_msg(obj, message)
        s_created(obj, created_at)
        s_seq(obj, seq)
        s_tokens(obj, tokens)
        s_nbytes(obj, nbytes)
        return obj

    return make


_make_stored = _stored_message_factory()


_scan_json: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _loads(text: str) -> Any:
    """``json.loads`` of a stored message, without its per-call overhead.

    Stored JSON is always our own compact :func:`~mindstore.messages.dumps` output, so the C
    scanner can start at offset 0; ``json.loads``' type checks and two whitespace regex matches
    cost ~40% of decoding a small message. Anything unexpected goes through ``json.loads`` (and
    its error).
    """
    try:
        value, end = _scan_json(text, 0)
    except StopIteration:
        return json.loads(text)
    if end != len(text):
        return json.loads(text)
    return value


def _path_builder() -> Callable[[list[Any], str | None], list[StoredMessage]]:
    """The loop that turns path rows into :class:`StoredMessage` objects, root-most first.

    A path read builds thousands of them: this is :func:`_stored_message_factory`'s slot
    setting and :func:`_loads`' decoding inlined into one loop (no per-row function call),
    ~10% of a 5,000-message read.
    """
    names = ("id", "parent_id", "message", "created_at", "seq", "tokens", "nbytes")
    setters = [StoredMessage.__dict__.get(n) for n in names]
    if not all(isinstance(d, types.MemberDescriptorType) for d in setters):

        def slow(rows: list[Any], parent_id: str | None) -> list[StoredMessage]:
            out = []
            for mid, content, created_us, mseq, tokens, nbytes in reversed(rows):
                out.append(
                    _make_stored(
                        mid, parent_id, _loads(content), _dt(created_us), mseq, tokens, nbytes
                    )
                )
                parent_id = mid
            return out

        return slow
    s_id, s_parent, s_msg, s_created, s_seq, s_tokens, s_nbytes = (
        d.__set__  # type: ignore[union-attr]
        for d in setters
    )
    new = object.__new__
    cls = StoredMessage
    scan = _scan_json
    loads = json.loads
    fromts = datetime.fromtimestamp
    utc = UTC

    def build(rows: list[Any], parent_id: str | None) -> list[StoredMessage]:
        """``rows`` = ``(id, content, created_us, seq, tokens, nbytes)`` leaf first."""
        out: list[StoredMessage] = []
        append = out.append
        for mid, content, created_us, mseq, tokens, nbytes in reversed(rows):
            try:
                message, end = scan(content, 0)
            except StopIteration:
                message, end = loads(content), len(content)
            if end != len(content):
                message = loads(content)
            obj = new(cls)
            s_id(obj, mid)
            s_parent(obj, parent_id)
            s_msg(obj, message)
            s_created(obj, fromts(created_us / 1_000_000, utc))
            s_seq(obj, mseq)
            s_tokens(obj, tokens)
            s_nbytes(obj, nbytes)
            append(obj)
            parent_id = mid
        return out

    return build


def _message_row(row: Sequence[Any], parent_id: str | None) -> StoredMessage:
    return _make_stored(row[1], parent_id, _loads(row[3]), _dt(row[4]), row[0], row[5], row[6])


_build_path = _path_builder()


# seq, id, parent id, content, created_us, tokens, nbytes
_MSG_SELECT = (
    "SELECT m.seq, m.id, p.id, m.content, m.created_us, m.tokens, m.nbytes "
    "FROM messages m LEFT JOIN messages p ON p.seq = m.parent_seq "
)

# Path reads take named parameters :sid and :seq (the session and the message the path ends
# at) and return rows leaf-first. ``{limit}`` is "" or " LIMIT n".
#
# A linear session (``sessions.linear``, see migration m005) is one chain in seq order, so its
# path is a range of ``messages_path``, read like a plain select.
_LINEAR_PATH_SQL = (
    "SELECT id, content, created_us, seq, tokens, nbytes FROM messages INDEXED BY messages_path"
    " WHERE sid = :sid AND seq <= :seq ORDER BY seq DESC{limit}"
)
_LINEAR_COUNT_SQL = (
    "SELECT count(*) FROM messages INDEXED BY messages_path WHERE sid = :sid AND seq <= :seq"
)
# Whole-path totals of a linear session in one index-only aggregate (messages_path carries
# tokens and nbytes), instead of returning every row's sizes to Python.
_LINEAR_TOTALS_SQL = (
    "SELECT count(*), sum(tokens), sum(nbytes) FROM messages INDEXED BY messages_path"
    " WHERE sid = :sid AND seq <= :seq"
)

# A branched session is walked from the message to its root (the CTE queue is FIFO, so rows
# come out leaf-first). The walk carries only seq/parent_seq; bodies are joined afterwards
# (copying content through the CTE queue cost ~30% more). A LIMIT inside a recursive CTE stops
# the walk itself after n rows.
_PATH_SQL = (
    "WITH RECURSIVE up(seq, parent_seq) AS ("
    " SELECT seq, parent_seq FROM messages WHERE seq = :seq"
    " UNION ALL"
    " SELECT m.seq, m.parent_seq FROM up JOIN messages m INDEXED BY messages_path"
    " ON m.sid = :sid AND m.seq = up.parent_seq{limit}"
    ") SELECT m.id, m.content, m.created_us, m.seq, m.tokens, m.nbytes"
    " FROM up CROSS JOIN messages m ON m.seq = up.seq"
)

_PATH_SIZES_SQL = (
    "WITH RECURSIVE up(seq, parent_seq, tokens, nbytes) AS ("
    " SELECT seq, parent_seq, tokens, nbytes FROM messages WHERE seq = :seq"
    " UNION ALL"
    " SELECT m.seq, m.parent_seq, m.tokens, m.nbytes FROM up"
    " JOIN messages m INDEXED BY messages_path ON m.sid = :sid AND m.seq = up.parent_seq"
    ") SELECT tokens, nbytes FROM up"
)

_PATH_COUNT_SQL = (
    "WITH RECURSIVE up(parent_seq) AS ("
    " SELECT parent_seq FROM messages WHERE seq = :seq"
    " UNION ALL"
    " SELECT m.parent_seq FROM up JOIN messages m INDEXED BY messages_path"
    " ON m.sid = :sid AND m.seq = up.parent_seq"
    ") SELECT count(*) FROM up"
)


def _extend_estimate(
    est_seq: int | None, est_tokens: int | None, parent_seq: int | None, seq: int, item: NewMessage
) -> tuple[int | None, int | None]:
    """The running estimate after inserting ``seq`` under ``parent_seq`` (see TokenEstimate):
    a child of the measured leaf extends it, a new root starts it, anything else clears it."""
    if parent_seq is None:
        return seq, item.tokens
    if est_seq is not None and est_tokens is not None and parent_seq == est_seq:
        return seq, est_tokens + item.tokens
    return None, None


def _forget_estimate(conn: sqlite3.Connection, where: str, *args: Any) -> None:
    """Clear the running estimate and the compaction back-off after a path-changing write."""
    conn.execute(
        "UPDATE sessions SET est_seq = NULL, est_tokens = NULL, est_gen = est_gen + 1, "
        f"compact_floor = NULL, compact_margin = NULL WHERE {where}",
        args,
    )


T = TypeVar("T")


class SQLiteStore(VectorMethods):
    """The SQLite backend of the :class:`~mindstore.store.base.Store` protocol.

    Args:
        path: a file path, or ``":memory:"`` for a private in-memory database.
        synchronous: ``"NORMAL"`` (default; WAL commits survive a process crash) or ``"FULL"``
            (commits also survive power loss, slower).
        busy_timeout: seconds to wait for another process's write lock before raising
            :class:`~mindstore.errors.StoreError`.
        read_only: open an existing mindstore file for reading only (a ``file:…?mode=ro``
            URI): nothing is ever created, migrated or written — the file's bytes stay as they
            were. A missing file, a file that is not a mindstore database (e.g. empty) or one
            with an older schema raises :class:`~mindstore.errors.StoreError` on open; every
            write method raises :class:`~mindstore.errors.StoreError`. Used by the CLI's read
            commands.
        embedder: an :class:`~mindstore.embeddings.Embedder` for semantic and hybrid search.
            Appends never call it; :meth:`embed_pending` embeds what is new.

    The constructor does no I/O; the database is opened (and migrated) on first use.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout: float = 30.0,
        read_only: bool = False,
        embedder: Embedder | None = None,
    ) -> None:
        if not isinstance(path, str | os.PathLike):
            raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        check_choice(synchronous, "synchronous", ("NORMAL", "FULL"))
        if (
            isinstance(busy_timeout, bool)
            or not isinstance(busy_timeout, int | float)
            or not busy_timeout >= 0
        ):
            raise ValueError("busy_timeout must be a non-negative number of seconds")
        self._path = os.fspath(path)
        if read_only and self._path == ":memory:":
            raise ValueError("read_only needs a database file; ':memory:' starts empty")
        self._read_only = bool(read_only)
        self._db = SQLiteConnection(
            self._path,
            synchronous=synchronous,
            busy_timeout=float(busy_timeout),
            read_only=self._read_only,
            label=repr(self),
        )
        self._embedder = check_embedder(embedder)
        self._vectors: SQLiteVectors | None = (
            SQLiteVectors(self, self._embedder) if self._embedder else None
        )

    def __repr__(self) -> str:
        ro = ", read_only=True" if self._read_only else ""
        return f"SQLiteStore({self._path!r}{ro})"

    @property
    def database(self) -> str:
        """The database path as given (``":memory:"`` for an in-memory store)."""
        return self._path

    @property
    def read_only(self) -> bool:
        """Whether the store was opened with ``read_only=True``."""
        return self._read_only

    # ---- lifecycle -------------------------------------------------------------------------
    async def __aenter__(self) -> Self:
        with self._tx(write=False):
            pass
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection. Idempotent; later calls raise StoreError."""
        self._db.close()

    # ---- transactions (the plumbing is in _connection.py) ------------------------------------
    def _tx(self, *, write: bool) -> AbstractContextManager[sqlite3.Connection]:
        """The connection inside one transaction (write) or as a read; see
        :meth:`.SQLiteConnection.tx`."""
        return self._db.tx(write=write)

    def _write(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(conn, *args)`` in one write transaction (see :meth:`_tx`). The one write
        style of both backends: a store method validates, then passes a domain function and
        its arguments here (PostgresStore._write is the twin, awaited)."""
        with self._db.tx(write=True) as conn:
            return fn(conn, *args)

    def _read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(conn, *args)`` as a read (see :meth:`_tx`)."""
        with self._db.tx(write=False) as conn:
            return fn(conn, *args)

    @asynccontextmanager
    async def transaction(
        self, *, readonly: bool = False, lock: Sequence[SessionKey] = ()
    ) -> AsyncIterator[None]:
        """See :meth:`mindstore.store.base.Store.transaction`.

        A write transaction is one ``BEGIN IMMEDIATE``: the write lock is held from the start,
        so nothing else writes until the block ends and ``lock`` needs no further statement.
        ``readonly`` begins a deferred transaction: one WAL snapshot for every read, writers
        not blocked. The block holds the connection's lock, so other threads wait for it.
        """
        for k in lock:
            check_key(k)
        with self._db.transaction(readonly=readonly):
            yield

    # ---- helpers (inside a transaction) ------------------------------------------------------
    @staticmethod
    def _sid(conn: sqlite3.Connection, key: SessionKey) -> int | None:
        row = conn.execute(
            "SELECT sid FROM sessions WHERE namespace = ? AND session_id = ?",
            (key.namespace, key.session_id),
        ).fetchone()
        return None if row is None else int(row[0])

    @staticmethod
    def _seq(conn: sqlite3.Connection, sid: int | None, message_id: str) -> int | None:
        if sid is None:
            return None
        row = conn.execute(
            "SELECT seq FROM messages WHERE sid = ? AND id = ?", (sid, message_id)
        ).fetchone()
        return None if row is None else int(row[0])

    def _require_seq(self, conn: sqlite3.Connection, key: SessionKey, message_id: str) -> int:
        seq = self._seq(conn, self._sid(conn, key), message_id)
        if seq is None:
            raise MessageNotFoundError(
                f"no message {message_id!r} in session {key.session_id!r} "
                f"(namespace {key.namespace!r})"
            )
        return seq

    def _path_target(
        self, conn: sqlite3.Connection, key: SessionKey, leaf_id: str | None
    ) -> dict[str, int] | None:
        """Where a path ends: ``{"sid", "seq"}`` of ``leaf_id`` or of the latest leaf (None
        when the session is empty), plus ``linear`` (see migration m005)."""
        if leaf_id is None:
            row = conn.execute(
                "SELECT sid, leaf_seq, linear FROM sessions WHERE namespace = ? AND session_id = ?",
                (key.namespace, key.session_id),
            ).fetchone()
            if row is None or row[1] is None:
                return None
        else:
            check_id(leaf_id, "leaf_id")
            row = conn.execute(
                "SELECT s.sid, m.seq, s.linear FROM sessions s "
                "JOIN messages m ON m.sid = s.sid AND m.id = ? "
                "WHERE s.namespace = ? AND s.session_id = ?",
                (leaf_id, key.namespace, key.session_id),
            ).fetchone()
            if row is None:
                raise MessageNotFoundError(
                    f"no message {leaf_id!r} in session {key.session_id!r} "
                    f"(namespace {key.namespace!r})"
                )
        return {"sid": row[0], "seq": row[1], "linear": row[2]}

    # ---- messages ----------------------------------------------------------------------------
    async def append(
        self,
        key: SessionKey,
        items: Sequence[NewMessage],
        *,
        expected_leaf: str | _Sentinel | None = UNSET,
    ) -> list[bool]:
        """See :meth:`mindstore.store.base.Store.append`."""
        check_key(key)
        prepared: list[tuple[NewMessage, str, str, str, int]] = []
        for item in items:
            if not isinstance(item, NewMessage):
                raise TypeError(f"append takes NewMessage items, got {type(item).__name__}")
            msg = item.message
            if not isinstance(msg, dict):
                raise InvalidMessageError("NewMessage.message must be a validated message dict")
            mid = check_id(msg.get("id"), "message.id")
            role = msg.get("role")
            if not isinstance(role, str):
                raise InvalidMessageError("message.role must be a string")
            parent = item.parent
            if isinstance(parent, str):
                check_id(parent, "parent_id")
            elif parent is not None and parent is not AUTO:
                raise TypeError("parent must be a message id, None (new root) or AUTO")
            if isinstance(item.tokens, bool) or not isinstance(item.tokens, int):
                raise TypeError("NewMessage.tokens must be an integer")
            content = item.content  # dumps(msg) already, from the Session's row-size check
            if not isinstance(content, str):
                try:
                    content = dumps(msg)
                except (TypeError, ValueError) as e:
                    raise InvalidMessageError(
                        f"message {mid!r} is not JSON-serialisable: {e}"
                    ) from e
            nbytes = len(content) if content.isascii() else len(content.encode("utf-8"))
            prepared.append((item, mid, role, content, nbytes))
        if expected_leaf is not UNSET and expected_leaf is not None:
            check_id(expected_leaf, "expected_leaf")
        if not prepared and expected_leaf is UNSET:
            return []

        with self._tx(write=True) as conn:
            now = _now_us()
            row = conn.execute(
                "SELECT sid, leaf_seq, message_count, linear, est_seq, est_tokens FROM sessions "
                "WHERE namespace = ? AND session_id = ?",
                (key.namespace, key.session_id),
            ).fetchone()
            est_seq: int | None = None
            est_tokens: int | None = None
            if row is None:
                sid = conn.execute(
                    "INSERT INTO sessions (namespace, session_id, created_us, updated_us) "
                    "VALUES (?, ?, ?, ?)",
                    (key.namespace, key.session_id, now, now),
                ).lastrowid
                assert sid is not None
                leaf: int | None = None
                count = 0
                linear = 1
            else:
                sid, leaf, count, linear, est_seq, est_tokens = row
            if expected_leaf is not UNSET:
                current = None
                if leaf is not None:
                    current = conn.execute(
                        "SELECT id FROM messages WHERE seq = ?", (leaf,)
                    ).fetchone()[0]
                if current != expected_leaf:
                    raise ConflictError(
                        f"expected the latest leaf of session {key.session_id!r} to be "
                        f"{expected_leaf!r} but it is {current!r}: re-read the history and retry"
                    )
            results: list[bool] = []
            inserted = 0
            own_text: str | None = None  # the text of `leaf` when this call indexed it
            for item, mid, role, content, nbytes in prepared:
                parent = item.parent
                if parent is AUTO:
                    parent_seq = leaf
                elif parent is None:
                    parent_seq = None
                else:
                    assert isinstance(parent, str)
                    parent_seq = self._seq(conn, sid, parent)
                    if parent_seq is None:
                        raise MessageNotFoundError(
                            f"parent message {parent!r} does not exist in session "
                            f"{key.session_id!r}; nothing was written"
                        )
                cur = conn.execute(
                    "INSERT OR IGNORE INTO messages "
                    "(sid, id, parent_seq, role, content, tokens, nbytes, created_us) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (sid, mid, parent_seq, role, content, item.tokens, nbytes, now),
                )
                if cur.rowcount != 1:
                    results.append(False)
                    continue
                seq = cur.lastrowid
                assert seq is not None
                own_text = lexical.index_message(
                    conn,
                    key.namespace,
                    sid,
                    seq,
                    item.message,
                    parent_seq,
                    own_text if parent_seq == leaf and leaf is not None else None,
                )
                if parent_seq != leaf:
                    linear = 0  # not extending the chain's end (leaf = newest message in a chain)
                est_seq, est_tokens = _extend_estimate(est_seq, est_tokens, parent_seq, seq, item)
                leaf = seq
                inserted += 1
                results.append(True)
            if inserted:
                lexical.flush(conn)
                conn.execute(
                    "UPDATE sessions SET leaf_seq = ?, message_count = ?, updated_us = ?, "
                    "linear = ?, est_seq = ?, est_tokens = ? WHERE sid = ?",
                    (leaf, count + inserted, now, linear, est_seq, est_tokens, sid),
                )
            return results

    async def token_estimate(self, key: SessionKey) -> TokenEstimate | None:
        """See :meth:`mindstore.store.base.Store.token_estimate`."""
        check_key(key)
        with self._tx(write=False) as conn:
            row = conn.execute(
                "SELECT m.id, s.est_tokens, s.est_gen, s.compact_floor, s.compact_margin "
                "FROM sessions s LEFT JOIN messages m ON m.seq = s.est_seq "
                "WHERE s.namespace = ? AND s.session_id = ?",
                (key.namespace, key.session_id),
            ).fetchone()
        if row is None:
            return None
        known = row[0] is not None and row[1] is not None
        return TokenEstimate(
            leaf_id=row[0] if known else None,
            tokens=row[1] if known else None,
            version=row[2],
            floor=row[3],
            margin=row[4],
        )

    async def set_token_estimate(
        self,
        key: SessionKey,
        *,
        leaf_id: str,
        tokens: int,
        version: int,
        floor: int | None = None,
        margin: int | None = None,
    ) -> bool:
        """See :meth:`mindstore.store.base.Store.set_token_estimate`."""
        check_key(key)
        check_id(leaf_id, "leaf_id")
        for name, value in (("tokens", tokens), ("version", version)):
            check_int(value, name)
        for name, opt in (("floor", floor), ("margin", margin)):
            if opt is not None:
                check_int(opt, name)
        with self._tx(write=True) as conn:
            cur = conn.execute(
                "UPDATE sessions SET est_seq = (SELECT seq FROM messages "
                "WHERE sid = sessions.sid AND id = ?), est_tokens = ?, compact_floor = ?, "
                "compact_margin = ? WHERE namespace = ? AND session_id = ? AND est_gen = ?",
                (leaf_id, tokens, floor, margin, key.namespace, key.session_id, version),
            )
            return cur.rowcount == 1

    async def get_message(self, key: SessionKey, message_id: str) -> StoredMessage | None:
        check_key(key)
        check_id(message_id)
        with self._tx(write=False) as conn:
            row = conn.execute(
                _MSG_SELECT + "JOIN sessions s ON s.sid = m.sid "
                "WHERE s.namespace = ? AND s.session_id = ? AND m.id = ?",
                (key.namespace, key.session_id, message_id),
            ).fetchone()
        return None if row is None else _message_row(row, row[2])

    async def get_messages(self, key: SessionKey, ids: Sequence[str]) -> list[StoredMessage]:
        check_key(key)
        if isinstance(ids, str):
            raise TypeError("ids must be a sequence of message ids, not a string")
        wanted = [check_id(i) for i in ids]
        if not wanted:
            return []
        with self._tx(write=False) as conn:
            rows = conn.execute(
                _MSG_SELECT + "JOIN sessions s ON s.sid = m.sid "
                "WHERE s.namespace = ? AND s.session_id = ? "
                "AND m.id IN (SELECT value FROM json_each(?)) ORDER BY m.seq",
                (key.namespace, key.session_id, json.dumps(wanted)),
            ).fetchall()
        return [_message_row(r, r[2]) for r in rows]

    async def all_messages(self, key: SessionKey) -> list[StoredMessage]:
        check_key(key)
        with self._tx(write=False) as conn:
            rows = conn.execute(
                _MSG_SELECT + "JOIN sessions s ON s.sid = m.sid "
                "WHERE s.namespace = ? AND s.session_id = ? ORDER BY m.seq",
                (key.namespace, key.session_id),
            ).fetchall()
        return [_message_row(r, r[2]) for r in rows]

    def _path_rows(
        self, conn: sqlite3.Connection, target: dict[str, int], limit: int | None
    ) -> list[StoredMessage]:
        """Rows from ``target`` up to the root (or ``limit`` rows), returned root-most first."""
        sql = _LINEAR_PATH_SQL if target["linear"] else _PATH_SQL
        sql = sql.format(limit="" if limit is None else f" LIMIT {int(limit)}")
        rows = conn.execute(sql, target).fetchall()  # leaf first
        if not rows:
            return []
        # Without a limit the walk ends at the root; with one, the top row may have a parent.
        parent_id: str | None = None
        if limit is not None:
            top = conn.execute(
                "SELECT p.id FROM messages c JOIN messages p ON p.seq = c.parent_seq "
                "WHERE c.seq = ?",
                (rows[-1][3],),
            ).fetchone()
            parent_id = None if top is None else top[0]
        return _build_path(rows, parent_id)

    async def path(self, key: SessionKey, leaf_id: str | None) -> list[StoredMessage]:
        check_key(key)
        with self._tx(write=False) as conn:
            conn.execute("SAVEPOINT mindstore_read")  # one snapshot for the lookup and the walk
            try:
                target = self._path_target(conn, key, leaf_id)
                return [] if target is None else self._path_rows(conn, target, None)
            finally:
                conn.execute("RELEASE mindstore_read")

    async def path_window(
        self,
        key: SessionKey,
        leaf_id: str | None,
        *,
        max_tokens: int | None,
        max_bytes: int | None,
        min_messages: int,
    ) -> PathWindow:
        check_key(key)
        for name, value in (("max_tokens", max_tokens), ("max_bytes", max_bytes)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"{name} must be an integer or None")
        check_int(min_messages, "min_messages")
        with self._tx(write=False) as conn:
            conn.execute("SAVEPOINT mindstore_read")
            try:
                target = self._path_target(conn, key, leaf_id)
                if target is None:
                    return PathWindow(
                        messages=[], truncated=False, total_tokens=0, total_bytes=0, path_length=0
                    )
                if target["linear"]:
                    return self._linear_window(conn, target, max_tokens, max_bytes, min_messages)
                sizes = conn.execute(_PATH_SIZES_SQL, target).fetchall()  # leaf first
                total_tokens = sum(t for t, _ in sizes)
                total_bytes = sum(b for _, b in sizes)
                n = 0
                used_tokens = used_bytes = 0
                for tokens, nbytes in sizes:
                    fits = (max_tokens is None or used_tokens + tokens <= max_tokens) and (
                        max_bytes is None or used_bytes + nbytes <= max_bytes
                    )
                    if not fits and n >= max(1, min_messages):
                        break
                    used_tokens += tokens
                    used_bytes += nbytes
                    n += 1
                window = self._path_rows(conn, target, None if n == len(sizes) else n)
            finally:
                conn.execute("RELEASE mindstore_read")
        return PathWindow(
            messages=window,
            truncated=n < len(sizes),
            total_tokens=total_tokens,
            total_bytes=total_bytes,
            path_length=len(sizes),
        )

    @staticmethod
    def _linear_window(
        conn: sqlite3.Connection,
        target: dict[str, int],
        max_tokens: int | None,
        max_bytes: int | None,
        min_messages: int,
    ) -> PathWindow:
        """:meth:`path_window` of a linear session (see migration m005).

        The path is the session's messages with ``seq <= target``, so the totals are one
        index-only aggregate, and the window is read newest first from one cursor that stops at
        the first row past the budget — only the window's bodies (and that one row) are read.
        That row is the window's parent (in a chain, a message's parent is the one before it).
        Reading every row's sizes into Python to sum them cost ~2 ms at 5,000 messages.
        """
        length, total_tokens, total_bytes = conn.execute(_LINEAR_TOTALS_SQL, target).fetchone()
        need = max(1, min_messages)
        rows: list[Any] = []
        parent_id: str | None = None
        used_tokens = used_bytes = 0
        cursor = conn.execute(_LINEAR_PATH_SQL.format(limit=""), target)
        try:
            for row in cursor:  # id, content, created_us, seq, tokens, nbytes; leaf first
                tokens, nbytes = row[4], row[5]
                used_tokens += tokens
                used_bytes += nbytes
                if len(rows) >= need and (
                    (max_tokens is not None and used_tokens > max_tokens)
                    or (max_bytes is not None and used_bytes > max_bytes)
                ):
                    parent_id = row[0]
                    break
                rows.append(row)
        finally:
            cursor.close()
        return PathWindow(
            messages=_build_path(rows, parent_id) if rows else [],
            truncated=len(rows) < length,
            total_tokens=int(total_tokens),
            total_bytes=int(total_bytes),
            path_length=length,
        )

    async def path_length(self, key: SessionKey, leaf_id: str | None) -> int:
        check_key(key)
        with self._tx(write=False) as conn:
            conn.execute("SAVEPOINT mindstore_read")
            try:
                target = self._path_target(conn, key, leaf_id)
                if target is None:
                    return 0
                sql = _LINEAR_COUNT_SQL if target["linear"] else _PATH_COUNT_SQL
                return int(conn.execute(sql, target).fetchone()[0])
            finally:
                conn.execute("RELEASE mindstore_read")

    async def children(self, key: SessionKey, message_id: str) -> list[StoredMessage]:
        check_key(key)
        check_id(message_id)
        with self._tx(write=False) as conn:
            conn.execute("SAVEPOINT mindstore_read")
            try:
                seq = self._require_seq(conn, key, message_id)
                rows = conn.execute(
                    _MSG_SELECT + "WHERE m.parent_seq = ? ORDER BY m.seq", (seq,)
                ).fetchall()
            finally:
                conn.execute("RELEASE mindstore_read")
        return [_message_row(r, r[2]) for r in rows]

    async def latest_leaf(self, key: SessionKey) -> StoredMessage | None:
        check_key(key)
        with self._tx(write=False) as conn:
            row = conn.execute(
                _MSG_SELECT + "JOIN sessions s ON m.seq = s.leaf_seq "
                "WHERE s.namespace = ? AND s.session_id = ?",
                (key.namespace, key.session_id),
            ).fetchone()
        return None if row is None else _message_row(row, row[2])

    async def update(self, key: SessionKey, message: dict[str, Any], *, tokens: int) -> None:
        check_key(key)
        if not isinstance(message, dict):
            raise InvalidMessageError("update takes a validated message dict")
        mid = check_id(message.get("id"), "message.id")
        role = message.get("role")
        if not isinstance(role, str):
            raise InvalidMessageError("message.role must be a string")
        if isinstance(tokens, bool) or not isinstance(tokens, int):
            raise TypeError("tokens must be an integer")
        try:
            content = dumps(message)
        except (TypeError, ValueError) as e:
            raise InvalidMessageError(f"message {mid!r} is not JSON-serialisable: {e}") from e
        with self._tx(write=True) as conn:
            seq = self._require_seq(conn, key, mid)
            conn.execute(
                "UPDATE messages SET role = ?, content = ?, tokens = ?, nbytes = ? WHERE seq = ?",
                (role, content, tokens, len(content.encode("utf-8")), seq),
            )
            # the message's own rows, and its children's context (the parent's text)
            lexical.reindex_messages(conn, key.namespace, [seq, *lexical.children_of(conn, [seq])])
            _forget_estimate(conn, "sid = (SELECT sid FROM messages WHERE seq = ?)", seq)

    async def delete(self, key: SessionKey, ids: Sequence[str]) -> int:
        check_key(key)
        if isinstance(ids, str):
            raise TypeError("ids must be a sequence of message ids, not a string")
        wanted = list(dict.fromkeys(check_id(i) for i in ids))
        if not wanted:
            return 0
        with self._tx(write=True) as conn:
            sid = self._sid(conn, key)
            rows = (
                conn.execute(
                    "SELECT seq, id, parent_seq FROM messages "
                    "WHERE sid = ? AND id IN (SELECT value FROM json_each(?))",
                    (sid, json.dumps(wanted)),
                ).fetchall()
                if sid is not None
                else []
            )
            if len(rows) != len(wanted):
                found = {r[1] for r in rows}
                missing = [i for i in wanted if i not in found]
                raise MessageNotFoundError(
                    f"cannot delete {missing[0]!r}: no such message in session "
                    f"{key.session_id!r}; nothing was deleted"
                )
            assert sid is not None
            parent_of = {seq: parent for seq, _, parent in rows}
            # children re-attached to another parent: their context (the parent's text) changes
            moved = [c for c in lexical.children_of(conn, list(parent_of)) if c not in parent_of]
            for seq in parent_of:
                survivor = parent_of[seq]
                while survivor in parent_of:
                    survivor = parent_of[survivor]
                conn.execute(
                    "UPDATE messages SET parent_seq = ? WHERE parent_seq = ?", (survivor, seq)
                )

            seqs = json.dumps(list(parent_of))
            lexical.unindex_messages(conn, key.namespace, list(parent_of))
            ids_json = json.dumps(wanted)
            dropped = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM compactions WHERE sid = ? AND ("
                    "from_id IN (SELECT value FROM json_each(?)) OR "
                    "to_id IN (SELECT value FROM json_each(?)))",
                    (sid, ids_json, ids_json),
                )
            ]
            if dropped:
                dropped_json = json.dumps(dropped)
                conn.execute(
                    "DELETE FROM compactions WHERE id IN (SELECT value FROM json_each(?))",
                    (dropped_json,),
                )
                conn.execute(
                    "UPDATE compactions SET superseded_by = NULL "
                    "WHERE sid = ? AND superseded_by IN (SELECT value FROM json_each(?))",
                    (sid, dropped_json),
                )
            conn.execute(
                "DELETE FROM messages WHERE seq IN (SELECT value FROM json_each(?))", (seqs,)
            )
            lexical.reindex_messages(conn, key.namespace, moved)
            leaf = conn.execute(
                "SELECT max(seq) FROM messages m WHERE sid = ? AND NOT EXISTS "
                "(SELECT 1 FROM messages c WHERE c.parent_seq = m.seq)",
                (sid,),
            ).fetchone()[0]
            conn.execute(
                "UPDATE sessions SET leaf_seq = ?, message_count = message_count - ?, "
                "updated_us = ? WHERE sid = ?",
                (leaf, len(rows), _now_us(), sid),
            )
            _forget_estimate(conn, "sid = ?", sid)
            return len(rows)

    async def clear(self, key: SessionKey) -> None:
        check_key(key)
        with self._tx(write=True) as conn:
            self._clear_session(conn, key)

    def _clear_session(self, conn: sqlite3.Connection, key: SessionKey) -> int | None:
        conn.execute(
            "DELETE FROM skill_states WHERE namespace = ? AND session_id = ?",
            (key.namespace, key.session_id),
        )
        sid = self._sid(conn, key)
        if sid is None:
            return None
        lexical.clear_session(conn, key.namespace, sid)
        conn.execute("DELETE FROM compactions WHERE sid = ?", (sid,))
        conn.execute("DELETE FROM messages WHERE sid = ?", (sid,))
        conn.execute(
            "UPDATE sessions SET leaf_seq = NULL, message_count = 0, linear = 1, updated_us = ? "
            "WHERE sid = ?",
            (_now_us(), sid),
        )
        _forget_estimate(conn, "sid = ?", sid)
        return sid

    async def search(
        self,
        namespace: str,
        query: ParsedQuery,
        *,
        session_ids: Sequence[str] | None = None,
        limit: int = 20,
    ) -> list[SearchResult]:
        """See :meth:`mindstore.store.base.Store.search`."""
        ids = _rules.check_search(namespace, query, session_ids, limit)
        if ids == [] or query.empty or limit <= 0:
            return []
        return self._read(_search.search, namespace, query, ids, limit)

    # ---- compaction overlays -----------------------------------------------------------------
    async def add_compaction(
        self,
        key: SessionKey,
        *,
        summary: str,
        from_id: str,
        to_id: str,
        supersedes: Sequence[int] = (),
    ) -> Compaction:
        new = _rules.check_compaction(key, summary, from_id, to_id, supersedes)
        return self._write(_state.add_compaction, key, new)

    async def get_compactions(self, key: SessionKey) -> list[Compaction]:
        return self._read(_state.get_compactions, check_key(key))

    async def revert_compaction(self, key: SessionKey, compaction_id: int) -> Compaction:
        check_key(key)
        check_int(compaction_id, "compaction_id")
        return self._write(_state.revert_compaction, key, compaction_id)

    # ---- context blocks ----------------------------------------------------------------------
    async def get_block(self, key: ScopeKey) -> str | None:
        return self._read(_state.get_block, check_scope(key))

    async def set_block(self, key: ScopeKey, content: str) -> None:
        k = check_scope(key)
        self._write(_state.set_block, k, check_text(content, "content"))

    async def update_block(self, key: ScopeKey, fn: Callable[[str], str]) -> str:
        k = check_scope(key)
        return self._write(_state.update_block, k, _rules.check_block_function(fn))

    async def delete_block(self, key: ScopeKey) -> None:
        self._write(_state.delete_block, check_scope(key))

    async def list_blocks(
        self, namespace: str, session_id: str | None
    ) -> list[tuple[ScopeKey, str]]:
        _rules.check_block_listing(namespace, session_id)
        return self._read(_state.list_blocks, namespace, session_id)

    # ---- frozen system prompt ----------------------------------------------------------------
    async def get_prompt(self, key: SessionKey) -> str | None:
        return self._read(_state.get_prompt, check_key(key))

    async def put_prompt(self, key: SessionKey, prompt: str, *, overwrite: bool) -> str:
        check_key(key)
        return self._write(_state.put_prompt, key, check_text(prompt, "prompt"), overwrite)

    # ---- loaded skills -----------------------------------------------------------------------
    async def get_skill_states(self, key: SessionKey) -> list[SkillState]:
        return self._read(_state.get_skill_states, check_key(key))

    async def set_skill_loaded(
        self, key: SessionKey, label: str, skill_key: str, loaded: bool
    ) -> bool:
        _rules.check_skill_state(key, label, skill_key, loaded)
        return self._write(_state.set_skill_loaded, key, label, skill_key, loaded)

    # ---- keyed entries -----------------------------------------------------------------------
    async def put_entry(
        self,
        key: ScopeKey,
        entry_key: str,
        content: str,
        *,
        description: str | None = None,
        data: str | None = None,
        expires_at: datetime | None = None,
    ) -> None:
        k = check_scope(key)
        new = _rules.check_entry(entry_key, content, description, data, expires_at)
        self._write(_entries.put_entry, k, new)

    async def get_entry(self, key: ScopeKey, entry_key: str) -> Entry | None:
        found = await self.get_entries(key, [entry_key])
        return found[0] if found else None

    async def get_entries(self, key: ScopeKey, entry_keys: Sequence[str]) -> list[Entry]:
        k, keys = _rules.check_entry_lookup(key, entry_keys)
        return self._read(_entries.get_entries, k, keys) if keys else []

    async def list_entries(self, key: ScopeKey, *, limit: int | None = None) -> list[Entry]:
        k = check_scope(key)
        if limit is not None:
            check_int(limit, "limit")
        return self._read(_entries.list_entries, k, limit)

    async def list_entry_labels(self, namespace: str, *, prefix: str = "") -> list[str]:
        check_name(namespace, "namespace")
        check_text(prefix, "prefix", InvalidKeyError)
        return self._read(_entries.list_entry_labels, namespace, prefix)

    async def set_entry_expiry(self, key: ScopeKey, expiries: Mapping[str, datetime | None]) -> int:
        k = check_scope(key)
        items = _rules.check_expiries(expiries)
        return self._write(_entries.set_entry_expiry, k, items) if items else 0

    async def delete_expired_entries(self, namespace: str | None = None) -> int:
        if namespace is not None:
            check_name(namespace, "namespace")
        return self._write(_entries.delete_expired_entries, namespace)

    async def count_entries(self, key: ScopeKey) -> int:
        return self._read(_entries.count_entries, check_scope(key))

    async def delete_entry(self, key: ScopeKey, entry_key: str) -> bool:
        k = check_scope(key)
        return self._write(_entries.delete_entry, k, check_entry_key(entry_key))

    async def search_entries(
        self, key: ScopeKey, query: ParsedQuery, *, limit: int = 10
    ) -> list[EntryHit]:
        k = _rules.check_entry_search(key, query, limit)
        if query.empty or limit <= 0:
            return []
        return self._read(_search.search_entries, k, query, limit)

    # ---- session registry --------------------------------------------------------------------
    async def create_session(
        self,
        key: SessionKey,
        *,
        name: str | None = None,
        parent_session_id: str | None = None,
        model: str | None = None,
        source: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        new = _rules.check_new_session(key, name, parent_session_id, model, source, metadata)
        return self._write(_registry.create_session, key, new)

    async def get_session(self, key: SessionKey) -> SessionInfo | None:
        return self._read(_registry.get_session, check_key(key))

    async def list_sessions(
        self, namespace: str, *, limit: int = 50, before: str | None = None
    ) -> list[SessionInfo]:
        _rules.check_session_listing(namespace, limit, before)
        if limit <= 0:
            return []
        return self._read(_registry.list_sessions, namespace, limit, before)

    async def update_session(self, key: SessionKey, **fields: Any) -> SessionInfo:
        """See :meth:`mindstore.store.base.Store.update_session`."""
        check_key(key)
        return self._write(_registry.update_session, key, check_session_fields(fields))

    async def add_usage(
        self, key: SessionKey, input_tokens: int, output_tokens: int, cost: float
    ) -> SessionInfo:
        check_key(key)
        usd = _rules.check_usage(input_tokens, output_tokens, cost)
        return self._write(_registry.add_usage, key, input_tokens, output_tokens, usd)

    async def reindex(self, *, progress: Callable[[int, int], None] | None = None) -> int:
        """See :meth:`mindstore.store.base.Store.reindex`."""
        return self._write(_registry.reindex, progress)

    async def delete_session(self, key: SessionKey) -> bool:
        check_key(key)
        return self._write(_registry.delete_session, key, self._clear_session)

    async def delete_namespace(self, namespace: str) -> dict[str, int]:
        """See :meth:`mindstore.store.base.Store.delete_namespace`."""
        check_name(namespace, "namespace")
        return self._write(_registry.delete_namespace, namespace)

    async def stats(self) -> dict[str, int]:
        """See :meth:`mindstore.store.base.Store.stats`."""
        return self._read(_registry.stats)

    async def list_namespaces(self) -> list[str]:
        return self._read(_registry.list_namespaces)
