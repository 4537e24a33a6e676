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

import os
import sqlite3
import urllib.parse
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import AbstractContextManager, asynccontextmanager
from typing import Any, Literal, Self, TypeVar

from mindstore.changes import Change
from mindstore.embeddings import Embedder
from mindstore.store import _changes as feed_rules
from mindstore.store._checks import (
    check_choice,
    check_key,
)
from mindstore.store._front import Domains, StoreFront
from mindstore.store._vectors import VectorMethods, check_embedder
from mindstore.store.base import (
    SessionKey,
)
from mindstore.store.sqlite import _changes, _entries, _messages, _registry, _search, _state
from mindstore.store.sqlite._connection import SQLiteConnection
from mindstore.store.sqlite.vectors import SQLiteVectors

__all__ = ["SQLiteStore"]


T = TypeVar("T")


class SQLiteStore(StoreFront, VectorMethods):
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
            SQLiteVectors(self._db, self._embedder) if self._embedder else None
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

    async def aclose(self) -> None:
        """Close the connection. Idempotent; later calls raise StoreError."""
        self._db.close()

    # ---- transactions (the plumbing is in _connection.py) ------------------------------------
    def _tx(self, *, write: bool) -> AbstractContextManager[sqlite3.Connection]:
        """The connection inside one transaction (write) or as a read; see
        :meth:`.SQLiteConnection.tx`."""
        return self._db.tx(write=write)

    _domains = Domains(_messages, _search, _state, _entries, _registry, _changes)
    _binds_event_loop = False

    async def _write(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(conn, *args)`` in one write transaction (a savepoint inside
        :meth:`transaction`); see :meth:`.SQLiteConnection.tx`. sqlite3 runs inline."""
        with self._db.tx(write=True) as conn:
            return fn(conn, *args)

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(conn, *args)`` as a read; see :meth:`.SQLiteConnection.tx`."""
        with self._db.tx(write=False) as conn:
            return fn(conn, *args)

    # Several reads that must agree take a SAVEPOINT inside the domain function itself.
    _read_snapshot = _read

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
            async with self._collect_changes():
                yield

    # ---- the change feed -------------------------------------------------------------------
    def changes(
        self,
        namespace: str,
        *,
        since: int = 0,
        follow: bool = True,
        poll_interval: float = 0.05,
        batch: int = 500,
    ) -> AsyncGenerator[Change, None]:
        """See :meth:`mindstore.store.base.ChangeStore.changes`.

        The follower reads on its own read-only connection to the file and checks its
        ``PRAGMA data_version`` every ``poll_interval`` seconds while nothing is new (a
        microsecond check; it changes when any other connection commits, this store's
        included). A ``":memory:"`` store has no file to open: it is followed on the store's
        own connection.
        """
        feed_rules.check_changes_args(namespace, since, batch, poll_interval)
        memory = self._path == ":memory:"
        feed = _changes.Feed(
            namespace,
            open_reader=None if memory else self._open_follower,
            shared=self._on_own_connection if memory else None,
            poll_interval=float(poll_interval),
            is_open=lambda: not self._db.closed,
        )
        return feed_rules.follow(feed, since, follow=follow, batch=batch)

    def _open_follower(self) -> sqlite3.Connection:
        with self._db.tx(write=False):
            pass  # the file exists and is migrated before the follower reads it
        uri = "file:" + urllib.parse.quote(os.path.abspath(self._path)) + "?mode=ro"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA query_only=ON")
        return conn

    def _on_own_connection(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._db.tx(write=False) as conn:
            return fn(conn)
