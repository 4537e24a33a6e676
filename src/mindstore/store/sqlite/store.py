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
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, asynccontextmanager
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

from mindstore.embeddings import Embedder
from mindstore.errors import (
    CompactionError,
    ConflictError,
    InvalidKeyError,
    InvalidMessageError,
    MessageNotFoundError,
    SessionNotFoundError,
)
from mindstore.lexical import bm25
from mindstore.lexical.collections import entry_collection, message_collection
from mindstore.lexical.snippet import SnippetQuery, make_snippet
from mindstore.messages import dumps
from mindstore.search import ParsedQuery, SearchResult, index_text, search_result
from mindstore.store._checks import (
    CREATE_FIELDS,
    check_choice,
    check_entry_key,
    check_expiry,
    check_id,
    check_int,
    check_key,
    check_name,
    check_query,
    check_scope,
    check_session_fields,
    check_text,
    prefix_upper_bound,
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
from mindstore.store.sqlite import lexical
from mindstore.store.sqlite._connection import SQLiteConnection
from mindstore.store.sqlite.vectors import SQLiteVectors

__all__ = ["SQLiteStore"]


def _now_us() -> int:
    return time.time_ns() // 1000


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ENTRY_COLUMNS = "key, content, description, updated_us, data, created_us, expires_us"


def _entry(row: Sequence[Any]) -> Entry:
    updated = _dt(row[3])
    return Entry(
        key=row[0],
        content=row[1],
        description=row[2],
        updated_at=updated,
        data=row[4],
        created_at=updated if row[5] is None else _dt(row[5]),
        expires_at=None if row[6] is None else _dt(row[6]),
    )


def _us(at: datetime | None) -> int | None:
    """Microseconds since the epoch of an aware datetime (naive ones are refused)."""
    at = check_expiry(at)
    return None if at is None else (at - _EPOCH) // timedelta(microseconds=1)


def _dt(us: int) -> datetime:
    # Exact: the double nearest us/1e6 is within 0.25 µs of it for any date before 2200, and
    # fromtimestamp rounds to the nearest microsecond. ~30% faster than epoch + timedelta.
    return datetime.fromtimestamp(us / 1_000_000, UTC)


def _chunks(
    ranked: list[tuple[float, int, int]], limit: int
) -> Iterator[list[tuple[float, int, int]]]:
    """Ranked candidates in growing chunks (phrases may reject some)."""
    size = max(limit, 8)
    i = 0
    while i < len(ranked):
        yield ranked[i : i + size]
        i += size
        size *= 2


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

_SESSION_COLS = (
    "session_id, name, parent_session_id, model, source, metadata, input_tokens, "
    "output_tokens, estimated_cost, end_reason, created_us, updated_us, message_count"
)


def _session_info(row: Sequence[Any]) -> SessionInfo:
    return SessionInfo(
        id=row[0],
        name=row[1],
        parent_session_id=row[2],
        model=row[3],
        source=row[4],
        metadata=json.loads(row[5]) if row[5] is not None else None,
        input_tokens=row[6],
        output_tokens=row[7],
        estimated_cost=row[8],
        end_reason=row[9],
        created_at=_dt(row[10]),
        updated_at=_dt(row[11]),
        message_count=row[12],
    )


def _compaction(row: Sequence[Any]) -> Compaction:
    return Compaction(
        id=row[0],
        from_message_id=row[1],
        to_message_id=row[2],
        summary=row[3],
        created_at=_dt(row[4]),
        superseded_by=row[5],
        reverted=bool(row[6]),
    )


_COMPACTION_COLS = "id, from_id, to_id, summary, created_us, superseded_by, reverted"


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
        """See :meth:`mindstore.store.base.Store.search` and the module docstring."""
        check_name(namespace, "namespace")
        check_query(query)
        check_int(limit)
        if session_ids is not None:
            if isinstance(session_ids, str):
                raise TypeError("session_ids must be a sequence of session ids, not a string")
            session_ids = [check_name(s, "session id") for s in session_ids]
            if not session_ids:
                return []
        if query.empty or limit <= 0:
            return []
        coll = message_collection(namespace)
        snip = SnippetQuery.from_query(query)
        out: list[SearchResult] = []
        with self._tx(write=False) as conn:
            conn.execute("SAVEPOINT mindstore_read")  # one snapshot: probe, ranking, snippets
            try:
                sids: set[int] | None = None
                if session_ids is not None:
                    sids = {
                        r[0]
                        for r in conn.execute(
                            "SELECT sid FROM sessions WHERE namespace = ? "
                            "AND session_id IN (SELECT value FROM json_each(?))",
                            (namespace, json.dumps(session_ids)),
                        )
                    }
                    if not sids:
                        return []
                ranked = lexical.candidates(conn, coll, query, sids, sessions=True, limit=limit)
                for chunk in _chunks(ranked, limit):
                    rows = {
                        r[0]: r
                        for r in conn.execute(
                            "SELECT m.seq, s.session_id, m.id, m.role, m.content, m.created_us "
                            "FROM messages m JOIN sessions s ON s.sid = m.sid "
                            "WHERE m.seq IN (SELECT value FROM json_each(?))",
                            (json.dumps([c[1] for c in chunk]),),
                        )
                    }
                    for score, seq, _ in chunk:
                        r = rows.get(seq)
                        if r is None:
                            continue
                        fields = index_text(json.loads(r[4]))
                        if query.phrases and not bm25.passes_phrases(query, fields):
                            continue
                        out.append(
                            search_result(
                                r[1],
                                r[2],
                                r[3],
                                fields[0] or fields[1],
                                make_snippet(snip, fields),
                                score,
                                _dt(r[5]),
                            )
                        )
                        if len(out) >= limit:
                            break
                    if len(out) >= limit:
                        break
            finally:
                conn.execute("RELEASE mindstore_read")
        return out

    async def add_compaction(
        self,
        key: SessionKey,
        *,
        summary: str,
        from_id: str,
        to_id: str,
        supersedes: Sequence[int] = (),
    ) -> Compaction:
        check_key(key)
        check_text(summary, "summary")
        check_id(from_id, "from_id")
        check_id(to_id, "to_id")
        sup = list(supersedes)
        for c in sup:
            if isinstance(c, bool) or not isinstance(c, int):
                raise TypeError("supersedes must be compaction ids (integers)")
        with self._tx(write=True) as conn:
            self._require_seq(conn, key, from_id)
            self._require_seq(conn, key, to_id)
            sid = self._sid(conn, key)
            if sup:
                known = {
                    r[0]
                    for r in conn.execute(
                        "SELECT id FROM compactions WHERE sid = ? "
                        "AND id IN (SELECT value FROM json_each(?))",
                        (sid, json.dumps(sup)),
                    )
                }
                unknown = [c for c in sup if c not in known]
                if unknown:
                    raise CompactionError(
                        f"cannot supersede compaction {unknown[0]}: not a compaction of "
                        f"session {key.session_id!r}"
                    )
            cid = conn.execute(
                "INSERT INTO compactions (sid, from_id, to_id, summary, created_us) "
                "VALUES (?, ?, ?, ?, ?)",
                (sid, from_id, to_id, summary, _now_us()),
            ).lastrowid
            if sup:
                conn.execute(
                    "UPDATE compactions SET superseded_by = ? "
                    "WHERE id IN (SELECT value FROM json_each(?))",
                    (cid, json.dumps(sup)),
                )
            _forget_estimate(conn, "sid = ?", sid)
            row = conn.execute(
                f"SELECT {_COMPACTION_COLS} FROM compactions WHERE id = ?", (cid,)
            ).fetchone()
        return _compaction(row)

    async def get_compactions(self, key: SessionKey) -> list[Compaction]:
        check_key(key)
        with self._tx(write=False) as conn:
            rows = conn.execute(
                f"SELECT {_COMPACTION_COLS} FROM compactions WHERE sid = "
                "(SELECT sid FROM sessions WHERE namespace = ? AND session_id = ?) ORDER BY id",
                (key.namespace, key.session_id),
            ).fetchall()
        return [_compaction(r) for r in rows]

    async def revert_compaction(self, key: SessionKey, compaction_id: int) -> Compaction:
        check_key(key)
        if isinstance(compaction_id, bool) or not isinstance(compaction_id, int):
            raise TypeError("compaction_id must be an integer")
        with self._tx(write=True) as conn:
            sid = self._sid(conn, key)
            row = conn.execute(
                "SELECT id FROM compactions WHERE id = ? AND sid = ?", (compaction_id, sid)
            ).fetchone()
            if row is None:
                raise CompactionError(
                    f"no compaction {compaction_id} in session {key.session_id!r}"
                )
            conn.execute("UPDATE compactions SET reverted = 1 WHERE id = ?", (compaction_id,))
            conn.execute(
                "UPDATE compactions SET superseded_by = NULL WHERE superseded_by = ?",
                (compaction_id,),
            )
            _forget_estimate(conn, "sid = ?", sid)
            row = conn.execute(
                f"SELECT {_COMPACTION_COLS} FROM compactions WHERE id = ?", (compaction_id,)
            ).fetchone()
        return _compaction(row)

    # ---- context blocks ----------------------------------------------------------------------
    async def get_block(self, key: ScopeKey) -> str | None:
        ns, scope, label = check_scope(key)
        with self._tx(write=False) as conn:
            row = conn.execute(
                "SELECT content FROM blocks WHERE namespace = ? AND scope = ? AND label = ?",
                (ns, scope, label),
            ).fetchone()
        return None if row is None else str(row[0])

    @staticmethod
    def _put_block(conn: sqlite3.Connection, k: tuple[str, str, str], content: str) -> None:
        conn.execute(
            "INSERT INTO blocks (namespace, scope, label, content, updated_us) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (namespace, scope, label) "
            "DO UPDATE SET content = excluded.content, updated_us = excluded.updated_us",
            (*k, content, _now_us()),
        )

    async def set_block(self, key: ScopeKey, content: str) -> None:
        k = check_scope(key)
        check_text(content, "content")
        with self._tx(write=True) as conn:
            self._put_block(conn, k, content)

    async def update_block(self, key: ScopeKey, fn: Callable[[str], str]) -> str:
        """See :meth:`mindstore.store.base.Store.update_block`: ``fn`` runs while this process
        holds the database write lock, so concurrent updates from any process serialise."""
        k = check_scope(key)
        if not callable(fn):
            raise TypeError("fn must be a callable taking the current content")
        with self._tx(write=True) as conn:
            row = conn.execute(
                "SELECT content FROM blocks WHERE namespace = ? AND scope = ? AND label = ?", k
            ).fetchone()
            new = fn("" if row is None else row[0])
            check_text(new, "the block update function's result")
            self._put_block(conn, k, new)
        return new

    async def delete_block(self, key: ScopeKey) -> None:
        k = check_scope(key)
        with self._tx(write=True) as conn:
            conn.execute("DELETE FROM blocks WHERE namespace = ? AND scope = ? AND label = ?", k)

    async def list_blocks(
        self, namespace: str, session_id: str | None
    ) -> list[tuple[ScopeKey, str]]:
        check_name(namespace, "namespace")
        if session_id is not None:
            check_name(session_id, "session_id")
        with self._tx(write=False) as conn:
            rows = conn.execute(
                "SELECT scope, label, content FROM blocks WHERE namespace = ? AND scope IN (?, '')"
                " ORDER BY scope = '', label",
                (namespace, session_id or ""),
            ).fetchall()
        return [
            (ScopeKey(namespace=namespace, session_id=scope or None, label=label), content)
            for scope, label, content in rows
        ]

    # ---- frozen system prompt ----------------------------------------------------------------
    async def get_prompt(self, key: SessionKey) -> str | None:
        check_key(key)
        with self._tx(write=False) as conn:
            row = conn.execute(
                "SELECT prompt FROM prompts WHERE namespace = ? AND session_id = ?",
                (key.namespace, key.session_id),
            ).fetchone()
        return None if row is None else str(row[0])

    async def put_prompt(self, key: SessionKey, prompt: str, *, overwrite: bool) -> str:
        check_key(key)
        check_text(prompt, "prompt")
        with self._tx(write=True) as conn:
            conn.execute(
                "INSERT INTO prompts (namespace, session_id, prompt, updated_us) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (namespace, session_id) DO "
                + (
                    "UPDATE SET prompt = excluded.prompt, updated_us = excluded.updated_us"
                    if overwrite
                    else "NOTHING"
                ),
                (key.namespace, key.session_id, prompt, _now_us()),
            )
            row = conn.execute(
                "SELECT prompt FROM prompts WHERE namespace = ? AND session_id = ?",
                (key.namespace, key.session_id),
            ).fetchone()
        return str(row[0])

    # ---- loaded skills -----------------------------------------------------------------------
    async def get_skill_states(self, key: SessionKey) -> list[SkillState]:
        check_key(key)
        with self._tx(write=False) as conn:
            rows = conn.execute(
                "SELECT label, skill_key, loaded, unloaded_before_seq FROM skill_states "
                "WHERE namespace = ? AND session_id = ? ORDER BY rowid",
                (key.namespace, key.session_id),
            ).fetchall()
        return [
            SkillState(label=r[0], key=r[1], loaded=bool(r[2]), unloaded_before_seq=r[3])
            for r in rows
        ]

    async def set_skill_loaded(
        self, key: SessionKey, label: str, skill_key: str, loaded: bool
    ) -> bool:
        check_key(key)
        check_name(label, "label")
        check_entry_key(skill_key)
        if not isinstance(loaded, bool):
            raise TypeError("loaded must be a bool")
        k = (key.namespace, key.session_id, label, skill_key)
        with self._tx(write=True) as conn:
            row = conn.execute(
                "SELECT loaded FROM skill_states WHERE namespace = ? AND session_id = ? "
                "AND label = ? AND skill_key = ?",
                k,
            ).fetchone()
            if (row is None and not loaded) or (row is not None and bool(row[0]) == loaded):
                return False
            before = None
            if not loaded:
                before = conn.execute(
                    "SELECT max(m.seq) FROM messages m JOIN sessions s ON s.sid = m.sid "
                    "WHERE s.namespace = ? AND s.session_id = ?",
                    (key.namespace, key.session_id),
                ).fetchone()[0]
            conn.execute(
                "INSERT INTO skill_states "
                "(namespace, session_id, label, skill_key, loaded, unloaded_before_seq) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (namespace, session_id, label, skill_key) "
                "DO UPDATE SET loaded = excluded.loaded, "
                # A reload keeps the last unload's mark: results stored before that unload
                # stay hidden; an unload moves the mark to the newest message.
                "unloaded_before_seq = "
                "coalesce(excluded.unloaded_before_seq, skill_states.unloaded_before_seq)",
                (*k, int(loaded), before),
            )
            if not loaded:  # the skill's earlier results now read back shorter: re-measure
                _forget_estimate(
                    conn,
                    "sid = (SELECT sid FROM sessions WHERE namespace = ? AND session_id = ?)",
                    key.namespace,
                    key.session_id,
                )
            return True

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
        check_entry_key(entry_key)
        check_text(content, "content")
        if description is not None:
            check_text(description, "description")
        if data is not None:
            check_text(data, "data")
        expires = _us(expires_at)
        with self._tx(write=True) as conn:
            old = conn.execute(
                "SELECT id, key, content, description, created_us, updated_us FROM entries "
                "WHERE namespace = ? AND scope = ? AND label = ? AND key = ?",
                (*k, entry_key),
            ).fetchone()
            now = _now_us()
            if old is not None:
                # a rewritten entry gets a new id: ids order entries by their last write,
                # which is how equal scores are ordered (most recently written first); the
                # creation time is carried over (NULL in rows older than m007: their updated_us)
                lexical.unindex_entry(conn, *k, old[0])
                conn.execute("DELETE FROM entries WHERE id = ?", (old[0],))
                created = old[4] if old[4] is not None else old[5]
            else:
                created = now
            rowid = conn.execute(
                "INSERT INTO entries (namespace, scope, label, key, content, description, "
                "updated_us, data, created_us, expires_us) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*k, entry_key, content, description, now, data, created, expires),
            ).lastrowid
            assert rowid is not None
            lexical.index_entry(conn, *k, rowid, entry_key, content, description)
            lexical.flush(conn)

    async def get_entry(self, key: ScopeKey, entry_key: str) -> Entry | None:
        found = await self.get_entries(key, [entry_key])
        return found[0] if found else None

    async def get_entries(self, key: ScopeKey, entry_keys: Sequence[str]) -> list[Entry]:
        k = check_scope(key)
        keys = [check_entry_key(e) for e in entry_keys]
        if not keys:
            return []
        found: dict[str, Entry] = {}
        with self._tx(write=False) as conn:
            for i in range(0, len(keys), 500):  # stay under SQLite's bound-parameter limit
                chunk = keys[i : i + 500]
                rows = conn.execute(
                    f"SELECT {_ENTRY_COLUMNS} FROM entries "
                    "WHERE namespace = ? AND scope = ? AND label = ? "
                    f"AND key IN ({', '.join('?' * len(chunk))})",
                    (*k, *chunk),
                ).fetchall()
                found.update((r[0], _entry(r)) for r in rows)
        return [found[e] for e in dict.fromkeys(keys) if e in found]

    async def list_entries(self, key: ScopeKey, *, limit: int | None = None) -> list[Entry]:
        k = check_scope(key)
        if limit is not None:
            check_int(limit)
        with self._tx(write=False) as conn:
            rows = conn.execute(
                f"SELECT {_ENTRY_COLUMNS} FROM entries "
                "WHERE namespace = ? AND scope = ? AND label = ? "
                "ORDER BY updated_us DESC, id DESC LIMIT ?",
                (*k, -1 if limit is None else max(0, limit)),
            ).fetchall()
        return [_entry(r) for r in rows]

    async def list_entry_labels(self, namespace: str, *, prefix: str = "") -> list[str]:
        check_name(namespace, "namespace")
        check_text(prefix, "prefix", InvalidKeyError)
        # A loose index scan: each step seeks the next distinct label in the (namespace, scope,
        # label, key) index, so the cost grows with the labels, not with their entries; the
        # range [prefix, bound) is exactly the labels that start with ``prefix`` (BINARY order).
        bound = prefix_upper_bound(prefix)
        below = "" if bound is None else " AND label < :hi"
        sql = (
            "WITH RECURSIVE l(label) AS ("
            " SELECT (SELECT min(label) FROM entries WHERE namespace = :ns AND scope = ''"
            f" AND label >= :lo{below})"
            " UNION ALL"
            " SELECT (SELECT min(label) FROM entries WHERE namespace = :ns AND scope = ''"
            f" AND label > l.label{below}) FROM l WHERE l.label IS NOT NULL)"
            " SELECT label FROM l WHERE label IS NOT NULL AND EXISTS ("
            "SELECT 1 FROM entries e WHERE e.namespace = :ns AND e.scope = '' "
            "AND e.label = l.label AND (e.expires_us IS NULL OR e.expires_us > :now))"
        )
        with self._tx(write=False) as conn:
            rows = conn.execute(
                sql, {"ns": namespace, "lo": prefix, "hi": bound, "now": _now_us()}
            ).fetchall()
        return [r[0] for r in rows]

    async def set_entry_expiry(self, key: ScopeKey, expiries: Mapping[str, datetime | None]) -> int:
        k = check_scope(key)
        rows = [(_us(at), *k, check_entry_key(e)) for e, at in expiries.items()]
        if not rows:
            return 0
        with self._tx(write=True) as conn:
            n = 0
            for row in rows:
                n += conn.execute(
                    "UPDATE entries SET expires_us = ? "
                    "WHERE namespace = ? AND scope = ? AND label = ? AND key = ?",
                    row,
                ).rowcount
            return n

    async def delete_expired_entries(self, namespace: str | None = None) -> int:
        if namespace is not None:
            check_name(namespace, "namespace")
        with self._tx(write=True) as conn:
            old = conn.execute(
                "SELECT id, namespace, scope, label FROM entries "
                "WHERE expires_us IS NOT NULL AND expires_us <= ? "
                "AND (? IS NULL OR namespace = ?)",
                (_now_us(), namespace, namespace),
            ).fetchall()
            for row in old:
                lexical.unindex_entry(conn, row[1], row[2], row[3], row[0])
                conn.execute("DELETE FROM entries WHERE id = ?", (row[0],))
            return len(old)

    async def count_entries(self, key: ScopeKey) -> int:
        k = check_scope(key)
        with self._tx(write=False) as conn:
            return int(
                conn.execute(
                    "SELECT count(*) FROM entries WHERE namespace = ? AND scope = ? AND label = ?",
                    k,
                ).fetchone()[0]
            )

    async def delete_entry(self, key: ScopeKey, entry_key: str) -> bool:
        k = check_scope(key)
        check_entry_key(entry_key)
        with self._tx(write=True) as conn:
            old = conn.execute(
                "SELECT id, key, content, description FROM entries "
                "WHERE namespace = ? AND scope = ? AND label = ? AND key = ?",
                (*k, entry_key),
            ).fetchone()
            if old is None:
                return False
            lexical.unindex_entry(conn, *k, old[0])
            conn.execute("DELETE FROM entries WHERE id = ?", (old[0],))
            return True

    async def search_entries(
        self, key: ScopeKey, query: ParsedQuery, *, limit: int = 10
    ) -> list[EntryHit]:
        k = check_scope(key)
        check_query(query)
        check_int(limit)
        if query.empty or limit <= 0:
            return []
        coll = entry_collection(*k)
        snip = SnippetQuery.from_query(query)
        out: list[EntryHit] = []
        with self._tx(write=False) as conn:
            conn.execute("SAVEPOINT mindstore_read")  # one snapshot: probe, ranking, snippets
            try:
                ranked = lexical.candidates(conn, coll, query, None, sessions=False, limit=limit)
                for chunk in _chunks(ranked, limit):
                    rows = {
                        r[0]: r
                        for r in conn.execute(
                            "SELECT id, key, content, description FROM entries "
                            "WHERE id IN (SELECT value FROM json_each(?))",
                            (json.dumps([c[1] for c in chunk]),),
                        )
                    }
                    for score, doc, _ in chunk:
                        r = rows.get(doc)
                        if r is None:
                            continue
                        fields = (f"{r[1]}\n{r[2]}", r[3] or "")
                        if query.phrases and not bm25.passes_phrases(query, fields):
                            continue
                        out.append(
                            EntryHit(
                                key=r[1],
                                content=r[2],
                                description=r[3],
                                snippet=make_snippet(snip, (r[2], r[3] or "", r[1])),
                                score=score,
                            )
                        )
                        if len(out) >= limit:
                            break
                    if len(out) >= limit:
                        break
            finally:
                conn.execute("RELEASE mindstore_read")
        return out

    # ---- session registry --------------------------------------------------------------------
    @staticmethod
    def _get_session(conn: sqlite3.Connection, key: SessionKey) -> SessionInfo | None:
        row = conn.execute(
            f"SELECT {_SESSION_COLS} FROM sessions WHERE namespace = ? AND session_id = ?",
            (key.namespace, key.session_id),
        ).fetchone()
        return None if row is None else _session_info(row)

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
        check_key(key)
        meta = check_session_fields(
            {
                "name": name,
                "parent_session_id": parent_session_id,
                "model": model,
                "source": source,
                "metadata": metadata,
            },
            CREATE_FIELDS,
        )["metadata"]
        with self._tx(write=True) as conn:
            if self._sid(conn, key) is not None:
                raise ConflictError(
                    f"session {key.session_id!r} already exists in namespace {key.namespace!r}"
                )
            now = _now_us()
            conn.execute(
                "INSERT INTO sessions (namespace, session_id, name, parent_session_id, model, "
                "source, metadata, created_us, updated_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key.namespace,
                    key.session_id,
                    name,
                    parent_session_id,
                    model,
                    source,
                    meta,
                    now,
                    now,
                ),
            )
            info = self._get_session(conn, key)
        assert info is not None
        return info

    async def get_session(self, key: SessionKey) -> SessionInfo | None:
        check_key(key)
        with self._tx(write=False) as conn:
            return self._get_session(conn, key)

    async def list_sessions(
        self, namespace: str, *, limit: int = 50, before: str | None = None
    ) -> list[SessionInfo]:
        check_name(namespace, "namespace")
        check_int(limit)
        if before is not None:
            check_name(before, "before")
        if limit <= 0:
            return []
        with self._tx(write=False) as conn:
            if before is None:
                rows = conn.execute(
                    f"SELECT {_SESSION_COLS} FROM sessions WHERE namespace = ? "
                    "ORDER BY updated_us DESC, session_id DESC LIMIT ?",
                    (namespace, limit),
                ).fetchall()
            else:
                cursor = conn.execute(
                    "SELECT updated_us, session_id FROM sessions "
                    "WHERE namespace = ? AND session_id = ?",
                    (namespace, before),
                ).fetchone()
                if cursor is None:
                    return []
                rows = conn.execute(
                    f"SELECT {_SESSION_COLS} FROM sessions WHERE namespace = ? "
                    "AND (updated_us, session_id) < (?, ?) "
                    "ORDER BY updated_us DESC, session_id DESC LIMIT ?",
                    (namespace, cursor[0], cursor[1], limit),
                ).fetchall()
        return [_session_info(r) for r in rows]

    async def update_session(self, key: SessionKey, **fields: Any) -> SessionInfo:
        """Set ``name``, ``end_reason``, ``model``, ``source`` and/or ``metadata``; touch
        updated_at. Unknown session → SessionNotFoundError; unknown field → TypeError."""
        check_key(key)
        values = check_session_fields(fields)
        with self._tx(write=True) as conn:
            sid = self._sid(conn, key)
            if sid is None:
                raise SessionNotFoundError(
                    f"no session {key.session_id!r} in namespace {key.namespace!r}"
                )
            sets = "".join(f"{f} = ?, " for f in values)
            conn.execute(
                f"UPDATE sessions SET {sets}updated_us = ? WHERE sid = ?",
                (*values.values(), _now_us(), sid),
            )
            info = self._get_session(conn, key)
        assert info is not None
        return info

    async def add_usage(
        self, key: SessionKey, input_tokens: int, output_tokens: int, cost: float
    ) -> SessionInfo:
        check_key(key)
        for field, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{field} must be an integer")
        if isinstance(cost, bool) or not isinstance(cost, int | float) or cost != cost:
            raise TypeError("cost must be a number")
        with self._tx(write=True) as conn:
            now = _now_us()
            conn.execute(
                "INSERT INTO sessions (namespace, session_id, input_tokens, output_tokens, "
                "estimated_cost, created_us, updated_us) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (namespace, session_id) DO UPDATE SET "
                "input_tokens = input_tokens + excluded.input_tokens, "
                "output_tokens = output_tokens + excluded.output_tokens, "
                "estimated_cost = estimated_cost + excluded.estimated_cost, "
                "updated_us = excluded.updated_us",
                (key.namespace, key.session_id, input_tokens, output_tokens, float(cost), now, now),
            )
            info = self._get_session(conn, key)
        assert info is not None
        return info

    async def reindex(self, *, progress: Callable[[int, int], None] | None = None) -> int:
        """See :meth:`mindstore.store.base.Store.reindex`."""
        with self._tx(write=True) as conn:
            return lexical.rebuild(conn, progress)

    async def delete_session(self, key: SessionKey) -> bool:
        check_key(key)
        with self._tx(write=True) as conn:
            changes_before = conn.total_changes
            sid = self._clear_session(conn, key)
            ns, sess = key.namespace, key.session_id
            conn.execute("DELETE FROM blocks WHERE namespace = ? AND scope = ?", (ns, sess))
            conn.execute("DELETE FROM prompts WHERE namespace = ? AND session_id = ?", (ns, sess))
            entries = conn.execute(
                "SELECT id, label FROM entries WHERE namespace = ? AND scope = ?",
                (ns, sess),
            ).fetchall()
            for doc, label in entries:
                lexical.unindex_entry(conn, ns, sess, label, doc)
            conn.execute("DELETE FROM entries WHERE namespace = ? AND scope = ?", (ns, sess))
            existed = conn.total_changes != changes_before
            if sid is not None:
                conn.execute("DELETE FROM sessions WHERE sid = ?", (sid,))
                existed = True
            return existed

    async def delete_namespace(self, namespace: str) -> dict[str, int]:
        """See :meth:`mindstore.store.base.Store.delete_namespace`.

        One ``BEGIN IMMEDIATE`` transaction removes the rows (search rows through the FTS5
        ``delete`` command first, so the indexes never name a missing row). FTS5 keeps deleted
        terms in its index segments until they are merged, so when anything was deleted a
        second transaction runs ``optimize`` on the four search indexes (a rewrite of each
        index, proportional to its size): afterwards no word of the namespace remains in the
        file's live pages. Free pages may still hold old bytes until ``VACUUM``.
        """
        check_name(namespace, "namespace")
        with self._tx(write=True) as conn:
            counts = self._delete_namespace_rows(conn, namespace)
        return counts

    def _delete_namespace_rows(self, conn: sqlite3.Connection, ns: str) -> dict[str, int]:
        sids = "SELECT sid FROM sessions WHERE namespace = ?"
        counts: dict[str, int] = {}
        counts["messages"] = conn.execute(
            f"SELECT count(*) FROM messages WHERE sid IN ({sids})", (ns,)
        ).fetchone()[0]
        colls = [message_collection(ns)] + [
            entry_collection(ns, scope, label)
            for scope, label in conn.execute(
                "SELECT DISTINCT scope, label FROM entries WHERE namespace = ?", (ns,)
            ).fetchall()
        ]
        for coll in colls:  # the namespace's lexical index (messages and entry blocks)
            for table in ("search_terms", "search_pending", "search_stats"):
                conn.execute(f"DELETE FROM {table} WHERE coll = ?", (coll,))
        # Every namespace-owned table, children first. A new table holding namespace data
        # gets one line here (tests/contract/test_delete_namespace.py checks every table).
        for name, sql in (
            ("compactions", f"DELETE FROM compactions WHERE sid IN ({sids})"),
            ("", f"DELETE FROM messages WHERE sid IN ({sids})"),
            ("sessions", "DELETE FROM sessions WHERE namespace = ?"),
            ("blocks", "DELETE FROM blocks WHERE namespace = ?"),
            ("entries", "DELETE FROM entries WHERE namespace = ?"),
            ("prompts", "DELETE FROM prompts WHERE namespace = ?"),
            ("skill_states", "DELETE FROM skill_states WHERE namespace = ?"),
        ):
            changed = conn.execute(sql, (ns,)).rowcount
            if name:
                counts[name] = changed
        return counts

    async def stats(self) -> dict[str, int]:
        """Row counts: namespaces, sessions, messages, compactions, blocks, entries, prompts,
        skill_states, and ``schema_version``."""
        with self._tx(write=False) as conn:
            conn.execute("SAVEPOINT mindstore_read")
            try:
                out = {
                    "namespaces": conn.execute(
                        "SELECT count(*) FROM (SELECT namespace FROM sessions UNION "
                        "SELECT namespace FROM blocks UNION SELECT namespace FROM entries)"
                    ).fetchone()[0],
                }
                for table in (
                    "sessions",
                    "messages",
                    "compactions",
                    "blocks",
                    "entries",
                    "prompts",
                    "skill_states",
                ):
                    out[table] = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                out["schema_version"] = conn.execute("PRAGMA user_version").fetchone()[0]
            finally:
                conn.execute("RELEASE mindstore_read")
        return {k: int(v) for k, v in out.items()}

    async def list_namespaces(self) -> list[str]:
        with self._tx(write=False) as conn:
            rows = conn.execute(
                "SELECT namespace FROM sessions UNION SELECT namespace FROM blocks "
                "UNION SELECT namespace FROM entries ORDER BY 1"
            ).fetchall()
        return [str(r[0]) for r in rows]
