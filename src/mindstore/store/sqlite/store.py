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
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, asynccontextmanager
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

from mindstore.embeddings import Embedder
from mindstore.errors import (
    InvalidKeyError,
)
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
from mindstore.store.sqlite import _entries, _messages, _registry, _search, _state
from mindstore.store.sqlite._common import forget_estimate, session_sid
from mindstore.store.sqlite._connection import SQLiteConnection
from mindstore.store.sqlite.vectors import SQLiteVectors

__all__ = ["SQLiteStore"]


def _now_us() -> int:
    return time.time_ns() // 1000


def _dt(us: int) -> datetime:
    # Exact: the double nearest us/1e6 is within 0.25 µs of it for any date before 2200, and
    # fromtimestamp rounds to the nearest microsecond. ~30% faster than epoch + timedelta.
    return datetime.fromtimestamp(us / 1_000_000, UTC)


# used by the other domains' writes
_forget_estimate = forget_estimate


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

    # ---- helpers the other domains use (inside a transaction) --------------------------------
    _sid = staticmethod(session_sid)
    _require_seq = staticmethod(_messages.require_seq)
    _clear_session = staticmethod(_messages.clear_session)

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
        prepared = _rules.prepare_append(items, expected_leaf)
        if prepared is None:
            return []
        return self._write(_messages.append, key, prepared, expected_leaf)

    async def token_estimate(self, key: SessionKey) -> TokenEstimate | None:
        """See :meth:`mindstore.store.base.Store.token_estimate`."""
        check_key(key)
        return self._read(_messages.token_estimate, key)

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
        _rules.check_token_estimate(leaf_id, tokens, version, floor, margin)
        return self._write(
            _messages.set_token_estimate, key, leaf_id, tokens, version, floor, margin
        )

    async def get_message(self, key: SessionKey, message_id: str) -> StoredMessage | None:
        """See :meth:`mindstore.store.base.Store.get_message`."""
        check_key(key)
        check_id(message_id)
        return self._read(_messages.get_message, key, message_id)

    async def get_messages(self, key: SessionKey, ids: Sequence[str]) -> list[StoredMessage]:
        """See :meth:`mindstore.store.base.Store.get_messages`."""
        check_key(key)
        wanted = _rules.message_ids(ids)
        if not wanted:
            return []
        return self._read(_messages.get_messages, key, wanted)

    async def all_messages(self, key: SessionKey) -> list[StoredMessage]:
        """See :meth:`mindstore.store.base.Store.all_messages`."""
        check_key(key)
        return self._read(_messages.all_messages, key)

    async def path(self, key: SessionKey, leaf_id: str | None) -> list[StoredMessage]:
        """See :meth:`mindstore.store.base.Store.path`."""
        check_key(key)
        _rules.check_leaf_id(leaf_id)
        return self._read(_messages.path, key, leaf_id)

    async def path_window(
        self,
        key: SessionKey,
        leaf_id: str | None,
        *,
        max_tokens: int | None,
        max_bytes: int | None,
        min_messages: int,
    ) -> PathWindow:
        """See :meth:`mindstore.store.base.Store.path_window`."""
        check_key(key)
        _rules.check_leaf_id(leaf_id)
        _rules.check_window(max_tokens, max_bytes, min_messages)
        return self._read(_messages.path_window, key, leaf_id, max_tokens, max_bytes, min_messages)

    async def path_length(self, key: SessionKey, leaf_id: str | None) -> int:
        """See :meth:`mindstore.store.base.Store.path_length`."""
        check_key(key)
        _rules.check_leaf_id(leaf_id)
        return self._read(_messages.path_length, key, leaf_id)

    async def children(self, key: SessionKey, message_id: str) -> list[StoredMessage]:
        """See :meth:`mindstore.store.base.Store.children`."""
        check_key(key)
        check_id(message_id)
        return self._read(_messages.children, key, message_id)

    async def latest_leaf(self, key: SessionKey) -> StoredMessage | None:
        """See :meth:`mindstore.store.base.Store.latest_leaf`."""
        check_key(key)
        return self._read(_messages.latest_leaf, key)

    async def update(self, key: SessionKey, message: dict[str, Any], *, tokens: int) -> None:
        """See :meth:`mindstore.store.base.Store.update`."""
        check_key(key)
        self._write(_messages.update, key, _rules.PreparedUpdate(message, tokens))

    async def delete(self, key: SessionKey, ids: Sequence[str]) -> int:
        """See :meth:`mindstore.store.base.Store.delete`."""
        check_key(key)
        wanted = _rules.delete_ids(ids)
        if not wanted:
            return 0
        return self._write(_messages.delete, key, wanted)

    async def clear(self, key: SessionKey) -> None:
        """See :meth:`mindstore.store.base.Store.clear`."""
        check_key(key)
        self._write(_messages.clear_session, key)

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
