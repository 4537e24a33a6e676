"""PostgresStore: the shared backend — many agent workers on many machines, one PostgreSQL.

Invariants
==========

* **Opening** (``await PostgresStore.open(dsn, ...)``) migrates under an advisory lock keyed by
  the schema (:mod:`.migrations`: two workers opening at once serialise and both succeed; a
  newer schema is refused and nothing changes), then opens a connection pool. The pool,
  transactions, retries after a server restart, the server-side timeouts and the translation of
  ``psycopg.Error`` into :class:`~mindstore.errors.StoreError` are :mod:`._connection`.
* **One transaction per call.** Every write method is exactly one transaction on one pooled
  connection (a savepoint inside :meth:`PostgresStore.transaction`); any exception inside —
  including a connection lost mid-way — rolls back, so a failed call changes nothing. A read
  that is one statement runs without an explicit transaction; several statements that must
  agree read one ``REPEATABLE READ`` snapshot.
* **Per-session serialisation.** Every append first upserts the session's ``sessions`` row with
  ``INSERT … ON CONFLICT DO UPDATE`` — which takes that row's lock — and then reads the
  latest-leaf pointer, inserts and moves the pointer while holding it. Concurrent appenders to
  one session (any process, any machine) queue on one row lock and form one chain; appenders
  to different sessions do not wait for each other. ``delete``/``clear`` and
  ``transaction(lock=...)`` take the same lock. ``update_block`` locks the block row
  (``INSERT … ON CONFLICT DO NOTHING`` then ``SELECT … FOR UPDATE``) around the caller's
  function; ``add_usage`` is one atomic ``UPDATE``-by-upsert.
* **Unknown commit outcomes.** A connection lost after ``COMMIT`` was sent may or may not have
  committed: such a StoreError has ``maybe_committed=True``. An append first asks the server
  (``txid_status`` of the transaction id its lock statement returned) and answers truthfully
  when it can: committed → returns; rolled back → StoreError(maybe_committed=False).
* **Arguments are checked before any I/O** (:mod:`mindstore.store._checks`), with the same
  errors as the SQLite backend.

Schema (see :mod:`.migrations`)
===============================

The same shape as the SQLite backend: ``sessions`` (registry row + ``leaf_seq`` pointer +
``message_count``), ``messages`` (``seq`` identity, ``parent_seq``, ``UNIQUE(sid, id)``, content
as TEXT JSON — it reads back byte for byte — ``tokens``, ``nbytes``, ``created_at``),
``message_search`` (one row per message, written in the same statement and deleted with it:
what a search returns — namespace, session id, id, role, time, indexed text), ``compactions``,
``blocks``/``entries`` keyed by (namespace, scope, label[, key]) with scope ``''`` for
namespace-wide, ``prompts``, ``skill_states``. Paths are recursive CTEs over ``parent_seq`` (no
depth limit).

Search: the pure :mod:`mindstore.lexical` package tokenises, scores (BM25 with per-namespace
statistics and a context field) and makes snippets for both backends; this backend keeps the
``search_terms`` / ``search_stats`` rows (:mod:`.lexical`) in the same transaction as the
message or entry they index, and reads candidates from them. Semantic search is
:mod:`.vectors`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, Self, TypeVar

from mindstore.embeddings import Embedder
from mindstore.errors import (
    CompactionError,
    ConflictError,
    InvalidKeyError,
    MindstoreError,
    SessionNotFoundError,
    StoreError,
)
from mindstore.lexical import bm25
from mindstore.lexical.collections import entry_collection, message_collection
from mindstore.lexical.snippet import SnippetQuery, make_snippet
from mindstore.search import ParsedQuery, SearchResult, search_result
from mindstore.store import _rules
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
    not_found,
    prefix_upper_bound,
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
from mindstore.store.postgres import _messages, lexical
from mindstore.store.postgres._common import FORGET_ESTIMATE_SQL, lock_session
from mindstore.store.postgres._connection import (
    DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT,
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_STATEMENT_TIMEOUT,
    PostgresConnection,
    redact,
    require_driver,
)
from mindstore.store.postgres.vectors import PostgresVectors

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from mindstore.store.postgres._connection import Conn as Conn

__all__ = [
    "DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT",
    "DEFAULT_LOCK_TIMEOUT",
    "DEFAULT_STATEMENT_TIMEOUT",
    "PostgresStore",
]

T = TypeVar("T")


# ---- SQL ---------------------------------------------------------------------------------------
_SESSION_COLS = (
    "session_id, name, parent_session_id, model, source, metadata, input_tokens, "
    "output_tokens, estimated_cost, end_reason, created_at, updated_at, message_count"
)

_COMPACTION_COLS = "id, from_id, to_id, summary, created_at, superseded_by, reverted"


# used by the other domains' writes
_FORGET_ESTIMATE_SQL = FORGET_ESTIMATE_SQL

_ENTRY_COLUMNS: Final = "key, content, description, updated_at, data, created_at, expires_at"


def _entry(row: Sequence[Any]) -> Entry:
    return Entry(
        key=row[0],
        content=row[1],
        description=row[2],
        updated_at=row[3],
        data=row[4],
        created_at=row[3] if row[5] is None else row[5],
        expires_at=row[6],
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
        created_at=row[10],
        updated_at=row[11],
        message_count=row[12],
    )


def _compaction(row: Sequence[Any]) -> Compaction:
    return Compaction(
        id=row[0],
        from_message_id=row[1],
        to_message_id=row[2],
        summary=row[3],
        created_at=row[4],
        superseded_by=row[5],
        reverted=bool(row[6]),
    )


class PostgresStore(VectorMethods):
    """The PostgreSQL backend of the :class:`~mindstore.store.base.Store` protocol.

    Create with :meth:`open` (it migrates and opens the pool); close with :meth:`aclose` or use
    ``async with``.
    """

    def __init__(
        self,
        db: PostgresConnection,
        *,
        schema: str | None,
        dsn: str,
        embedder: Embedder | None = None,
        vector_index: str = "auto",
    ) -> None:
        """Use :meth:`PostgresStore.open`."""
        self._db = db
        self._schema = schema
        self._dsn = dsn
        self._embedder = check_embedder(embedder)
        self._vectors: PostgresVectors | None = (
            PostgresVectors(self, self._embedder, vector_index) if self._embedder else None
        )

    @staticmethod
    def _describe(dsn: str, schema: str | None) -> str:
        schema_part = f", schema={schema!r}" if schema else ""
        return f"PostgresStore({redact(dsn)!r}{schema_part})"

    def __repr__(self) -> str:
        return self._describe(self._dsn, self._schema)

    @property
    def schema(self) -> str | None:
        """The schema holding the tables (None: the server's default search_path)."""
        return self._schema

    @property
    def _pool(self) -> AsyncConnectionPool[Any]:
        return self._db.pool

    @property
    def _limits(self) -> Mapping[str, float | None]:
        """The timeouts the store was opened with (seconds; see :meth:`open`)."""
        return self._db.limits

    # ---- lifecycle -------------------------------------------------------------------------
    @classmethod
    async def open(
        cls,
        dsn: str,
        *,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = 30.0,
        settings: Mapping[str, str] | None = None,
        lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT,
        statement_timeout: float | None = DEFAULT_STATEMENT_TIMEOUT,
        idle_in_transaction_timeout: float | None = DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT,
        read_only: bool = False,
        embedder: Embedder | None = None,
        vector_index: Literal["auto", "pgvector", "exact"] = "auto",
    ) -> PostgresStore:
        """Migrate the database (under an advisory lock) and open a connection pool.

        Args:
            dsn: a libpq connection string or ``postgresql://`` URL.
            schema: put every table in this schema (created if missing); None uses the
                server's default ``search_path`` (normally ``public``).
            min_size: connections the pool keeps open.
            max_size: most connections the pool opens.
            connect_timeout: seconds to wait for a connection (at open and for each call)
                before raising StoreError.
            settings: server settings applied to every pooled connection with
                ``set_config``, e.g. ``{"synchronous_commit": "off"}`` (commits no longer wait
                for the WAL flush: much faster appends on slow disks; a server crash may lose
                the last few commits, never corrupt or half-apply one). They are applied after
                the timeouts below, so a setting of the same name wins.
            lock_timeout: seconds a statement may wait for a row lock — e.g. an append waiting
                for another writer of the same session — before the call fails with StoreError
                (nothing written; retry later). ``None`` waits forever (not recommended: a
                frozen writer would block every writer of its session).
            statement_timeout: seconds any one statement may run before it is cancelled and the
                call fails with StoreError (nothing written). ``None``: no limit.
            idle_in_transaction_timeout: seconds the server lets one of this store's
                connections sit idle inside an open transaction before it ends that connection
                and rolls the transaction back — this frees the locks of a frozen or stopped
                worker. ``None``: no limit.
            read_only: only read an existing, current mindstore schema: nothing is created or
                migrated (a missing or older schema raises StoreError) and every connection
                runs with ``default_transaction_read_only`` on, so a write raises StoreError.
            embedder: an :class:`~mindstore.embeddings.Embedder` for semantic and hybrid
                search. Appends never call it; :meth:`embed_pending` embeds what is new.
            vector_index: ``"auto"``: pgvector's HNSW index when ``CREATE EXTENSION vector``
                succeeds (or the extension is there), else the exact scan with a logged
                warning; ``"pgvector"``: require it (StoreError if unavailable); ``"exact"``:
                never use it. Only used with an embedder. :attr:`vector_index` tells which
                one is in use.

        Raises:
            MissingDependencyError: psycopg is missing (``pip install 'mindstore[postgres]'``).
            SchemaVersionError: the database was written by a newer mindstore; nothing changed.
            StoreError: the server cannot be reached or the migration failed.
        """
        require_driver()
        if not isinstance(dsn, str):
            raise TypeError(f"dsn must be a string, got {type(dsn).__name__}")
        check_embedder(embedder)
        check_choice(vector_index, "vector_index", ("auto", "pgvector", "exact"))
        if schema is not None:
            check_name(schema, "schema")
        db = await PostgresConnection.open(
            dsn,
            schema=schema,
            min_size=min_size,
            max_size=max_size,
            connect_timeout=connect_timeout,
            settings=settings,
            lock_timeout=lock_timeout,
            statement_timeout=statement_timeout,
            idle_in_transaction_timeout=idle_in_transaction_timeout,
            read_only=read_only,
            label=cls._describe(dsn, schema),
        )
        store = cls(db, schema=schema, dsn=dsn, embedder=embedder, vector_index=vector_index)
        if store._vectors is not None:
            try:
                await store._vectors.setup(read_only)
            except BaseException as exc:
                await db.pool.close()
                if isinstance(exc, MindstoreError):
                    raise
                raise StoreError(f"pgvector is not available: {exc}") from exc
        return store

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the pool. Idempotent; later calls raise StoreError.

        The pool's background tasks live in the event loop that opened the store; a store
        closed after that loop ended closes its idle connections directly. Better: open and
        use the store inside one loop, or use :mod:`mindstore.sync` from code that is not async.
        """
        await self._db.close()

    # ---- transactions (the plumbing is in _connection.py) ------------------------------------
    async def _write(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``fn(conn, *args)`` in one transaction (a savepoint inside :meth:`transaction`);
        see :meth:`.PostgresConnection.write`. The one write style of both backends: a store
        method validates, then passes a domain function and its arguments here
        (SQLiteStore._write is the twin)."""
        return await self._db.write(fn, *args)

    async def _read(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``fn(conn, *args)`` as a read; see :meth:`.PostgresConnection.read`."""
        return await self._db.read(fn, *args)

    async def _read_snapshot(self, fn: Callable[[Conn], Awaitable[T]]) -> T:
        """Run several reads in one repeatable-read, read-only transaction (one snapshot)."""
        return await self._db.read_snapshot(fn)

    async def _fetchone(self, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> Any:
        """One read statement's first row (or None)."""
        return await self._db.fetchone(sql, params)

    async def _fetchall(
        self, sql: str, params: Sequence[Any] | Mapping[str, Any], *, prepare: bool | None = None
    ) -> list[tuple[Any, ...]]:
        """One read statement; ``prepare=False`` never makes it a server-side prepared
        statement (see :meth:`search`)."""
        return await self._db.fetchall(sql, params, prepare=prepare)

    @asynccontextmanager
    async def transaction(
        self, *, readonly: bool = False, lock: Sequence[SessionKey] = ()
    ) -> AsyncIterator[None]:
        """See :meth:`mindstore.store.base.Store.transaction`.

        The block holds one pooled connection in one transaction: ``READ COMMITTED`` for
        writes (each statement sees what committed before it; ``lock`` takes the sessions' rows
        ``FOR UPDATE`` — the lock appends take — in a fixed order, so checks made after it hold
        until commit), ``REPEATABLE READ, READ ONLY`` with ``readonly`` (one snapshot for every
        read). Other tasks use other connections and never see the block's writes before its
        commit. A failure anywhere rolls everything back; a lost connection is a StoreError
        (not retried: the block's writes are gone with it).
        """
        for k in lock:
            check_key(k)
        keys = sorted({(k.namespace, k.session_id) for k in lock})
        async with self._db.transaction(readonly=readonly, lock=keys):
            yield

    # ---- helpers the other domains use (inside a transaction) --------------------------------
    _lock_session = staticmethod(lock_session)
    _clear_session = staticmethod(_messages.clear_session)

    # ---- messages ----------------------------------------------------------------------------
    async def append(
        self,
        key: SessionKey,
        items: Sequence[NewMessage],
        *,
        expected_leaf: str | _Sentinel | None = UNSET,
    ) -> list[bool]:
        """See :meth:`mindstore.store.base.Store.append` and the module docstring."""
        check_key(key)
        prepared = _rules.prepare_append(items, expected_leaf, index=True)
        if prepared is None:
            return []
        outcome = _messages.AppendOutcome()
        try:
            return await self._write(_messages.append, key, prepared, expected_leaf, outcome)
        except StoreError as e:
            wait = self._limits.get("connect_timeout") or 30.0
            return await _messages.settle_append(self._read, e, outcome, wait)

    async def token_estimate(self, key: SessionKey) -> TokenEstimate | None:
        """See :meth:`mindstore.store.base.Store.token_estimate`."""
        check_key(key)
        return await self._read(_messages.token_estimate, key)

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
        return await self._write(
            _messages.set_token_estimate, key, leaf_id, tokens, version, floor, margin
        )

    async def get_message(self, key: SessionKey, message_id: str) -> StoredMessage | None:
        """See :meth:`mindstore.store.base.Store.get_message`."""
        check_key(key)
        check_id(message_id)
        return await self._read(_messages.get_message, key, message_id)

    async def get_messages(self, key: SessionKey, ids: Sequence[str]) -> list[StoredMessage]:
        """See :meth:`mindstore.store.base.Store.get_messages`."""
        check_key(key)
        wanted = _rules.message_ids(ids)
        if not wanted:
            return []
        return await self._read(_messages.get_messages, key, wanted)

    async def all_messages(self, key: SessionKey) -> list[StoredMessage]:
        """See :meth:`mindstore.store.base.Store.all_messages`."""
        check_key(key)
        return await self._read(_messages.all_messages, key)

    async def path(self, key: SessionKey, leaf_id: str | None) -> list[StoredMessage]:
        """See :meth:`mindstore.store.base.Store.path`."""
        check_key(key)
        _rules.check_leaf_id(leaf_id)
        return await self._read(_messages.path, key, leaf_id)

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
        return await self._read(
            _messages.path_window, key, leaf_id, max_tokens, max_bytes, min_messages
        )

    async def path_length(self, key: SessionKey, leaf_id: str | None) -> int:
        """See :meth:`mindstore.store.base.Store.path_length`."""
        check_key(key)
        _rules.check_leaf_id(leaf_id)
        return await self._read(_messages.path_length, key, leaf_id)

    async def children(self, key: SessionKey, message_id: str) -> list[StoredMessage]:
        """See :meth:`mindstore.store.base.Store.children`."""
        check_key(key)
        check_id(message_id)
        return await self._read(_messages.children, key, message_id)

    async def latest_leaf(self, key: SessionKey) -> StoredMessage | None:
        """See :meth:`mindstore.store.base.Store.latest_leaf`."""
        check_key(key)
        return await self._read(_messages.latest_leaf, key)

    async def update(self, key: SessionKey, message: dict[str, Any], *, tokens: int) -> None:
        """See :meth:`mindstore.store.base.Store.update`."""
        check_key(key)
        await self._write(_messages.update, key, _rules.PreparedUpdate(message, tokens, index=True))

    async def delete(self, key: SessionKey, ids: Sequence[str]) -> int:
        """See :meth:`mindstore.store.base.Store.delete`."""
        check_key(key)
        wanted = _rules.delete_ids(ids)
        if not wanted:
            return 0
        return await self._write(_messages.delete, key, wanted)

    async def clear(self, key: SessionKey) -> None:
        """See :meth:`mindstore.store.base.Store.clear`."""
        check_key(key)
        await self._write(_messages.clear_session, key)

    async def search(
        self,
        namespace: str,
        query: ParsedQuery,
        *,
        session_ids: Sequence[str] | None = None,
        limit: int = 20,
    ) -> list[SearchResult]:
        """See :meth:`mindstore.store.base.Store.search` and :mod:`.fts`."""
        check_name(namespace, "namespace")
        check_query(query)
        check_int(limit, "limit")
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

        async def run(conn: Conn) -> list[SearchResult]:
            sids: set[int] | None = None
            if session_ids is not None:
                cur = await conn.execute(
                    "SELECT sid FROM sessions WHERE namespace = %s AND session_id = ANY(%s)",
                    (namespace, session_ids),
                )
                sids = {r[0] for r in await cur.fetchall()}
                if not sids:
                    return []
            ranked = await lexical.candidates(conn, coll, query, sids, sessions=True, limit=limit)
            out: list[SearchResult] = []
            for chunk in _chunks(ranked, limit):
                cur = await conn.execute(
                    "SELECT seq, session_id, id, role, text, tool_text, created_at "
                    "FROM message_search WHERE seq = ANY(%s)",
                    ([c[1] for c in chunk],),
                )
                rows = {r[0]: r for r in await cur.fetchall()}
                for score, seq, _ in chunk:
                    r = rows.get(seq)
                    if r is None:
                        continue
                    fields = (r[4], r[5])
                    if query.phrases and not bm25.passes_phrases(query, fields):
                        continue
                    out.append(
                        search_result(
                            r[1],
                            r[2],
                            r[3],
                            r[4] or r[5] or "",
                            make_snippet(snip, fields),
                            score,
                            r[6],
                        )
                    )
                    if len(out) >= limit:
                        return out
            return out

        return await self._read_snapshot(run)

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
        check_key(key)
        check_text(summary, "summary")
        check_id(from_id, "from_id")
        check_id(to_id, "to_id")
        sup = [check_int(c, "supersedes") for c in supersedes]

        async def run(conn: Conn) -> Compaction:
            sid = await self._lock_session(conn, key)
            found: set[str] = set()
            if sid is not None:
                cur = await conn.execute(
                    "SELECT id FROM messages WHERE sid = %s AND id = ANY(%s)",
                    (sid, [from_id, to_id]),
                )
                found = {r[0] for r in await cur.fetchall()}
            for mid in (from_id, to_id):
                if mid not in found:
                    raise not_found(key, mid)
            if sup:
                cur = await conn.execute(
                    "SELECT id FROM compactions WHERE sid = %s AND id = ANY(%s)", (sid, sup)
                )
                known = {r[0] for r in await cur.fetchall()}
                unknown = [c for c in sup if c not in known]
                if unknown:
                    raise CompactionError(
                        f"cannot supersede compaction {unknown[0]}: not a compaction of "
                        f"session {key.session_id!r}"
                    )
            cur = await conn.execute(
                "INSERT INTO compactions (sid, from_id, to_id, summary) VALUES (%s, %s, %s, %s) "
                f"RETURNING {_COMPACTION_COLS}",
                (sid, from_id, to_id, summary),
            )
            row = await cur.fetchone()
            assert row is not None
            if sup:
                await conn.execute(
                    "UPDATE compactions SET superseded_by = %s WHERE id = ANY(%s)", (row[0], sup)
                )
            await conn.execute(_FORGET_ESTIMATE_SQL, (key.namespace, key.session_id))
            return _compaction(row)

        return await self._write(run)

    async def get_compactions(self, key: SessionKey) -> list[Compaction]:
        check_key(key)
        rows = await self._fetchall(
            f"SELECT {_COMPACTION_COLS} FROM compactions WHERE sid = "
            "(SELECT sid FROM sessions WHERE namespace = %s AND session_id = %s) ORDER BY id",
            (key.namespace, key.session_id),
        )
        return [_compaction(r) for r in rows]

    async def revert_compaction(self, key: SessionKey, compaction_id: int) -> Compaction:
        check_key(key)
        check_int(compaction_id, "compaction_id")

        async def run(conn: Conn) -> Compaction:
            cur = await conn.execute(
                "UPDATE compactions c SET reverted = true FROM sessions s "
                "WHERE s.sid = c.sid AND s.namespace = %s AND s.session_id = %s AND c.id = %s "
                "RETURNING c.id, c.from_id, c.to_id, c.summary, c.created_at, c.superseded_by, "
                "c.reverted",
                (key.namespace, key.session_id, compaction_id),
            )
            row = await cur.fetchone()
            if row is None:
                raise CompactionError(
                    f"no compaction {compaction_id} in session {key.session_id!r}"
                )
            await conn.execute(
                "UPDATE compactions SET superseded_by = NULL WHERE superseded_by = %s",
                (compaction_id,),
            )
            await conn.execute(_FORGET_ESTIMATE_SQL, (key.namespace, key.session_id))
            return _compaction(row)

        return await self._write(run)

    # ---- context blocks ----------------------------------------------------------------------
    async def get_block(self, key: ScopeKey) -> str | None:
        k = check_scope(key)
        row = await self._fetchone(
            "SELECT content FROM blocks WHERE namespace = %s AND scope = %s AND label = %s", k
        )
        return None if row is None else str(row[0])

    async def set_block(self, key: ScopeKey, content: str) -> None:
        k = check_scope(key)
        check_text(content, "content")

        async def run(conn: Conn) -> None:
            await conn.execute(
                "INSERT INTO blocks (namespace, scope, label, content) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (namespace, scope, label) DO UPDATE SET "
                "content = excluded.content, updated_at = clock_timestamp()",
                (*k, content),
            )

        await self._write(run)

    async def update_block(self, key: ScopeKey, fn: Callable[[str], str]) -> str:
        """See :meth:`mindstore.store.base.Store.update_block`: ``fn`` runs while this
        transaction holds the block's row lock, so concurrent updates from any process
        serialise and none is lost."""
        k = check_scope(key)
        if not callable(fn):
            raise TypeError("fn must be a callable taking the current content")

        async def run(conn: Conn) -> str:
            cur = await conn.execute(
                "INSERT INTO blocks (namespace, scope, label, content) VALUES (%s, %s, %s, '') "
                "ON CONFLICT (namespace, scope, label) DO NOTHING RETURNING true",
                k,
            )
            created = await cur.fetchone() is not None
            cur = await conn.execute(
                "SELECT content FROM blocks WHERE namespace = %s AND scope = %s AND label = %s "
                "FOR UPDATE",
                k,
            )
            row = await cur.fetchone()
            assert row is not None
            new = fn("" if created else row[0])
            check_text(new, "the block update function's result")
            await conn.execute(
                "UPDATE blocks SET content = %s, updated_at = clock_timestamp() "
                "WHERE namespace = %s AND scope = %s AND label = %s",
                (new, *k),
            )
            return new

        return await self._write(run)

    async def delete_block(self, key: ScopeKey) -> None:
        k = check_scope(key)

        async def run(conn: Conn) -> None:
            await conn.execute(
                "DELETE FROM blocks WHERE namespace = %s AND scope = %s AND label = %s", k
            )

        await self._write(run)

    async def list_blocks(
        self, namespace: str, session_id: str | None
    ) -> list[tuple[ScopeKey, str]]:
        check_name(namespace, "namespace")
        if session_id is not None:
            check_name(session_id, "session_id")
        rows = await self._fetchall(
            "SELECT scope, label, content FROM blocks WHERE namespace = %s AND scope IN (%s, '')"
            " ORDER BY scope = '', label",
            (namespace, session_id or ""),
        )
        return [
            (ScopeKey(namespace=namespace, session_id=scope or None, label=label), content)
            for scope, label, content in rows
        ]

    # ---- frozen system prompt ----------------------------------------------------------------
    async def get_prompt(self, key: SessionKey) -> str | None:
        check_key(key)
        row = await self._fetchone(
            "SELECT prompt FROM prompts WHERE namespace = %s AND session_id = %s",
            (key.namespace, key.session_id),
        )
        return None if row is None else str(row[0])

    async def put_prompt(self, key: SessionKey, prompt: str, *, overwrite: bool) -> str:
        check_key(key)
        check_text(prompt, "prompt")
        on_conflict = (
            "UPDATE SET prompt = excluded.prompt, updated_at = clock_timestamp()"
            if overwrite
            else "NOTHING"
        )

        async def run(conn: Conn) -> str:
            await conn.execute(
                "INSERT INTO prompts (namespace, session_id, prompt) VALUES (%s, %s, %s) "
                f"ON CONFLICT (namespace, session_id) DO {on_conflict}",
                (key.namespace, key.session_id, prompt),
            )
            # A new statement sees a concurrent first freeze that committed meanwhile.
            cur = await conn.execute(
                "SELECT prompt FROM prompts WHERE namespace = %s AND session_id = %s",
                (key.namespace, key.session_id),
            )
            row = await cur.fetchone()
            assert row is not None
            return str(row[0])

        return await self._write(run)

    # ---- loaded skills -----------------------------------------------------------------------
    async def get_skill_states(self, key: SessionKey) -> list[SkillState]:
        check_key(key)
        rows = await self._fetchall(
            "SELECT label, skill_key, loaded, unloaded_before_seq FROM skill_states "
            "WHERE namespace = %s AND session_id = %s ORDER BY created_order",
            (key.namespace, key.session_id),
        )
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

        async def run(conn: Conn) -> bool:
            if loaded:
                # Inserted, or flipped from unloaded: True. Already loaded: no row, False.
                cur = await conn.execute(
                    "INSERT INTO skill_states (namespace, session_id, label, skill_key, loaded) "
                    "VALUES (%s, %s, %s, %s, true) "
                    "ON CONFLICT (namespace, session_id, label, skill_key) "
                    "DO UPDATE SET loaded = true WHERE NOT skill_states.loaded RETURNING 1",
                    k,
                )
            else:
                cur = await conn.execute(
                    "UPDATE skill_states SET loaded = false, unloaded_before_seq = "
                    "(SELECT max(m.seq) FROM messages m JOIN sessions s ON s.sid = m.sid "
                    "WHERE s.namespace = %s AND s.session_id = %s) "
                    "WHERE namespace = %s AND session_id = %s AND label = %s AND skill_key = %s "
                    "AND loaded RETURNING 1",
                    (key.namespace, key.session_id, *k),
                )
                if await cur.fetchone() is None:
                    return False
                # the skill's earlier results now read back shorter: re-measure the path
                await conn.execute(_FORGET_ESTIMATE_SQL, (key.namespace, key.session_id))
                return True
            return await cur.fetchone() is not None

        return await self._write(run)

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
        check_expiry(expires_at)

        async def run(conn: Conn) -> None:
            # a rewritten entry gets a new id: ids order entries by their last write, which is
            # how equal scores are ordered (most recently written first); its creation time is
            # carried over (NULL in rows older than m006: their updated_at)
            cur = await conn.execute(
                "DELETE FROM entries WHERE namespace = %s AND scope = %s AND label = %s "
                "AND key = %s RETURNING id, coalesce(created_at, updated_at)",
                (*k, entry_key),
            )
            old = await cur.fetchone()
            if old is not None:
                await lexical.unindex(conn, entry_collection(*k), [old[0]])
            cur = await conn.execute(
                # One clock reading for both times: a new entry's created_at equals its
                # updated_at exactly (two clock_timestamp() calls differ by microseconds).
                "INSERT INTO entries (namespace, scope, label, key, content, description, "
                "data, created_at, updated_at, expires_at) "
                "SELECT %s, %s, %s, %s, %s, %s, %s, coalesce(%s, t.now), t.now, %s "
                "FROM (SELECT clock_timestamp() AS now) t RETURNING id",
                (*k, entry_key, content, description, data, old[1] if old else None, expires_at),
            )
            row = await cur.fetchone()
            assert row is not None
            await lexical.index_entry(conn, k, row[0], entry_key, content, description)

        await self._write(run)

    async def get_entry(self, key: ScopeKey, entry_key: str) -> Entry | None:
        found = await self.get_entries(key, [entry_key])
        return found[0] if found else None

    async def get_entries(self, key: ScopeKey, entry_keys: Sequence[str]) -> list[Entry]:
        k = check_scope(key)
        keys = [check_entry_key(e) for e in entry_keys]
        if not keys:
            return []
        rows = await self._fetchall(
            f"SELECT {_ENTRY_COLUMNS} FROM entries "
            "WHERE namespace = %s AND scope = %s AND label = %s AND key = ANY(%s)",
            (*k, keys),
        )
        found = {r[0]: _entry(r) for r in rows}
        return [found[e] for e in dict.fromkeys(keys) if e in found]

    async def list_entries(self, key: ScopeKey, *, limit: int | None = None) -> list[Entry]:
        k = check_scope(key)
        if limit is not None:
            check_int(limit, "limit")
        rows = await self._fetchall(
            f"SELECT {_ENTRY_COLUMNS} FROM entries "
            "WHERE namespace = %s AND scope = %s AND label = %s "
            "ORDER BY updated_at DESC, key DESC LIMIT %s",
            (*k, None if limit is None else max(0, limit)),
        )
        return [_entry(r) for r in rows]

    async def list_entry_labels(self, namespace: str, *, prefix: str = "") -> list[str]:
        check_name(namespace, "namespace")
        check_text(prefix, "prefix", InvalidKeyError)
        # A loose index scan over the (namespace, scope, label COLLATE "C") index of m006: each
        # step seeks the next distinct label, so the cost grows with the labels, not with their
        # entries. Comparing in "C" (code-point) order makes [prefix, bound) exactly the labels
        # that start with ``prefix`` whatever the database's collation.
        bound = prefix_upper_bound(prefix)
        below = "" if bound is None else ' AND label COLLATE "C" < %(hi)s'
        rows = await self._fetchall(
            "WITH RECURSIVE l(label) AS ("
            ' SELECT (SELECT min(label COLLATE "C") FROM entries'
            " WHERE namespace = %(ns)s AND scope = ''"
            f' AND label COLLATE "C" >= %(lo)s{below})'
            " UNION ALL"
            ' SELECT (SELECT min(label COLLATE "C") FROM entries'
            " WHERE namespace = %(ns)s AND scope = ''"
            f' AND label COLLATE "C" > l.label{below}) FROM l WHERE l.label IS NOT NULL)'
            " SELECT label FROM l WHERE label IS NOT NULL AND EXISTS ("
            "SELECT 1 FROM entries e WHERE e.namespace = %(ns)s AND e.scope = '' "
            "AND e.label = l.label AND (e.expires_at IS NULL OR e.expires_at > clock_timestamp()))",
            {"ns": namespace, "lo": prefix, "hi": bound},
        )
        return [r[0] for r in rows]

    async def set_entry_expiry(self, key: ScopeKey, expiries: Mapping[str, datetime | None]) -> int:
        k = check_scope(key)
        rows = [(check_expiry(at), *k, check_entry_key(e)) for e, at in expiries.items()]
        if not rows:
            return 0

        async def run(conn: Conn) -> int:
            n = 0
            for row in rows:
                cur = await conn.execute(
                    "UPDATE entries SET expires_at = %s "
                    "WHERE namespace = %s AND scope = %s AND label = %s AND key = %s",
                    row,
                )
                n += cur.rowcount
            return n

        return await self._write(run)

    async def delete_expired_entries(self, namespace: str | None = None) -> int:
        if namespace is not None:
            check_name(namespace, "namespace")

        async def run(conn: Conn) -> int:
            cur = await conn.execute(
                "DELETE FROM entries WHERE expires_at IS NOT NULL "
                "AND expires_at <= clock_timestamp() "
                "AND (%(ns)s::text IS NULL OR namespace = %(ns)s::text) "
                "RETURNING id, namespace, scope, label",
                {"ns": namespace},
            )
            gone = await cur.fetchall()
            for doc, ns, scope, label in gone:
                await lexical.unindex(conn, entry_collection(ns, scope, label), [doc])
            return len(gone)

        return await self._write(run)

    async def count_entries(self, key: ScopeKey) -> int:
        k = check_scope(key)
        row = await self._fetchone(
            "SELECT count(*) FROM entries WHERE namespace = %s AND scope = %s AND label = %s", k
        )
        assert row is not None
        return int(row[0])

    async def delete_entry(self, key: ScopeKey, entry_key: str) -> bool:
        k = check_scope(key)
        check_entry_key(entry_key)

        async def run(conn: Conn) -> bool:
            cur = await conn.execute(
                "DELETE FROM entries WHERE namespace = %s AND scope = %s AND label = %s "
                "AND key = %s RETURNING id",
                (*k, entry_key),
            )
            row = await cur.fetchone()
            if row is None:
                return False
            await lexical.unindex(conn, entry_collection(*k), [row[0]])
            return True

        return await self._write(run)

    async def search_entries(
        self, key: ScopeKey, query: ParsedQuery, *, limit: int = 10
    ) -> list[EntryHit]:
        k = check_scope(key)
        check_query(query)
        check_int(limit, "limit")
        if query.empty or limit <= 0:
            return []
        coll = entry_collection(*k)
        snip = SnippetQuery.from_query(query)

        async def run(conn: Conn) -> list[EntryHit]:
            ranked = await lexical.candidates(conn, coll, query, None, sessions=False, limit=limit)
            out: list[EntryHit] = []
            for chunk in _chunks(ranked, limit):
                cur = await conn.execute(
                    "SELECT id, key, content, description FROM entries WHERE id = ANY(%s)",
                    ([c[1] for c in chunk],),
                )
                rows = {r[0]: r for r in await cur.fetchall()}
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
                        return out
            return out

        return await self._read_snapshot(run)

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

        async def run(conn: Conn) -> SessionInfo:
            cur = await conn.execute(
                "INSERT INTO sessions (namespace, session_id, name, parent_session_id, model, "
                "source, metadata) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                f"ON CONFLICT (namespace, session_id) DO NOTHING RETURNING {_SESSION_COLS}",
                (key.namespace, key.session_id, name, parent_session_id, model, source, meta),
            )
            row = await cur.fetchone()
            if row is None:
                raise ConflictError(
                    f"session {key.session_id!r} already exists in namespace {key.namespace!r}"
                )
            return _session_info(row)

        return await self._write(run)

    async def get_session(self, key: SessionKey) -> SessionInfo | None:
        check_key(key)
        row = await self._fetchone(
            f"SELECT {_SESSION_COLS} FROM sessions WHERE namespace = %s AND session_id = %s",
            (key.namespace, key.session_id),
        )
        return None if row is None else _session_info(row)

    async def list_sessions(
        self, namespace: str, *, limit: int = 50, before: str | None = None
    ) -> list[SessionInfo]:
        check_name(namespace, "namespace")
        check_int(limit, "limit")
        if before is not None:
            check_name(before, "before")
        if limit <= 0:
            return []
        if before is None:
            rows = await self._fetchall(
                f"SELECT {_SESSION_COLS} FROM sessions WHERE namespace = %s "
                "ORDER BY updated_at DESC, session_id DESC LIMIT %s",
                (namespace, limit),
            )
        else:
            rows = await self._fetchall(
                f"SELECT {_SESSION_COLS} FROM sessions s WHERE namespace = %s "
                "AND (updated_at, session_id) < (SELECT b.updated_at, b.session_id "
                "FROM sessions b WHERE b.namespace = %s AND b.session_id = %s) "
                "ORDER BY updated_at DESC, session_id DESC LIMIT %s",
                (namespace, namespace, before, limit),
            )
        return [_session_info(r) for r in rows]

    async def update_session(self, key: SessionKey, **fields: Any) -> SessionInfo:
        """Set ``name``, ``end_reason``, ``model``, ``source`` and/or ``metadata``; touch
        updated_at. Unknown session → SessionNotFoundError; unknown field → TypeError."""
        check_key(key)
        values = check_session_fields(fields)
        sets = "".join(f"{f} = %s, " for f in values)  # field names from the allow-list only

        async def run(conn: Conn) -> SessionInfo:
            cur = await conn.execute(
                f"UPDATE sessions SET {sets}updated_at = clock_timestamp() "
                f"WHERE namespace = %s AND session_id = %s RETURNING {_SESSION_COLS}",
                (*values.values(), key.namespace, key.session_id),
            )
            row = await cur.fetchone()
            if row is None:
                raise SessionNotFoundError(
                    f"no session {key.session_id!r} in namespace {key.namespace!r}"
                )
            return _session_info(row)

        return await self._write(run)

    async def add_usage(
        self, key: SessionKey, input_tokens: int, output_tokens: int, cost: float
    ) -> SessionInfo:
        check_key(key)
        check_int(input_tokens, "input_tokens")
        check_int(output_tokens, "output_tokens")
        if isinstance(cost, bool) or not isinstance(cost, int | float) or cost != cost:
            raise TypeError("cost must be a number")

        async def run(conn: Conn) -> SessionInfo:
            cur = await conn.execute(
                "INSERT INTO sessions (namespace, session_id, input_tokens, output_tokens, "
                "estimated_cost) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (namespace, session_id) DO UPDATE SET "
                "input_tokens = sessions.input_tokens + excluded.input_tokens, "
                "output_tokens = sessions.output_tokens + excluded.output_tokens, "
                "estimated_cost = sessions.estimated_cost + excluded.estimated_cost, "
                f"updated_at = clock_timestamp() RETURNING {_SESSION_COLS}",
                (key.namespace, key.session_id, input_tokens, output_tokens, float(cost)),
            )
            row = await cur.fetchone()
            assert row is not None
            return _session_info(row)

        return await self._write(run)

    async def reindex(self, *, progress: Callable[[int, int], None] | None = None) -> int:
        """See :meth:`mindstore.store.base.Store.reindex`."""

        async def run(conn: Conn) -> int:
            return await lexical.rebuild(conn, progress)

        return await self._write(run)

    async def delete_session(self, key: SessionKey) -> bool:
        check_key(key)
        ns, sess = key.namespace, key.session_id

        async def run(conn: Conn) -> bool:
            sid = await self._clear_session(conn, key)
            existed = sid is not None
            for sql in (
                "DELETE FROM blocks WHERE namespace = %s AND scope = %s",
                "DELETE FROM prompts WHERE namespace = %s AND session_id = %s",
            ):
                cur = await conn.execute(sql, (ns, sess))
                existed = existed or cur.rowcount > 0
            cur = await conn.execute(
                "DELETE FROM entries WHERE namespace = %s AND scope = %s RETURNING id, label",
                (ns, sess),
            )
            gone = await cur.fetchall()
            existed = existed or bool(gone)
            for label in {r[1] for r in gone}:
                docs = [r[0] for r in gone if r[1] == label]
                await lexical.unindex(conn, entry_collection(ns, sess, label), docs)
            if sid is not None:
                await conn.execute("DELETE FROM sessions WHERE sid = %s", (sid,))
            return existed

        return await self._write(run)

    async def delete_namespace(self, namespace: str) -> dict[str, int]:
        """See :meth:`mindstore.store.base.Store.delete_namespace`.

        One transaction: the namespace's registry rows are locked first (``FOR UPDATE``, in
        ``sid`` order, the lock every append of a session takes), so an append in flight
        either commits before the deletion or waits and then finds its session gone (it then
        starts a new session). ``message_search`` rows go with their messages (cascade); they
        are counted under ``messages``. Deleted rows stay on disk as dead tuples until
        (auto)vacuum reclaims them.
        """
        check_name(namespace, "namespace")
        sids = "SELECT sid FROM sessions WHERE namespace = %s"

        async def run(conn: Conn) -> dict[str, int]:
            await conn.execute(f"{sids} ORDER BY sid FOR UPDATE", (namespace,))
            counts: dict[str, int] = {}
            cur = await conn.execute(
                "SELECT DISTINCT scope, label FROM entries WHERE namespace = %s", (namespace,)
            )
            colls = [message_collection(namespace)] + [
                entry_collection(namespace, scope, label) for scope, label in await cur.fetchall()
            ]
            for table in ("search_terms", "search_stats"):  # the namespace's lexical index
                await conn.execute(f"DELETE FROM {table} WHERE coll = ANY(%s)", (colls,))
            # Every namespace-owned table, children first. A new table holding namespace
            # data gets one line here (tests/contract/test_delete_namespace.py checks every
            # table of the schema).
            for name, sql in (
                ("compactions", f"DELETE FROM compactions WHERE sid IN ({sids})"),
                ("", "DELETE FROM message_search WHERE namespace = %s"),
                ("messages", f"DELETE FROM messages WHERE sid IN ({sids})"),
                ("sessions", "DELETE FROM sessions WHERE namespace = %s"),
                ("blocks", "DELETE FROM blocks WHERE namespace = %s"),
                ("entries", "DELETE FROM entries WHERE namespace = %s"),
                ("prompts", "DELETE FROM prompts WHERE namespace = %s"),
                ("skill_states", "DELETE FROM skill_states WHERE namespace = %s"),
            ):
                cur = await conn.execute(sql, (namespace,))
                if name:
                    counts[name] = cur.rowcount
            return counts

        return await self._write(run)

    async def stats(self) -> dict[str, int]:
        """Row counts: namespaces, sessions, messages, compactions, blocks, entries, prompts,
        skill_states, and ``schema_version``."""
        tables = (
            "sessions",
            "messages",
            "compactions",
            "blocks",
            "entries",
            "prompts",
            "skill_states",
        )
        counts = ", ".join(f"(SELECT count(*) FROM {t})" for t in tables)
        row = await self._fetchone(
            "SELECT (SELECT count(*) FROM (SELECT namespace FROM sessions UNION "
            "SELECT namespace FROM blocks UNION SELECT namespace FROM entries) n), "
            f"{counts}, (SELECT version FROM mindstore_schema)",
            (),
        )
        assert row is not None
        out = {"namespaces": int(row[0])}
        for i, t in enumerate(tables):
            out[t] = int(row[i + 1])
        out["schema_version"] = int(row[-1])
        return out

    async def list_namespaces(self) -> list[str]:
        # COLLATE "C": code-point order, the same as SQLite's BINARY comparison.
        rows = await self._fetchall(
            "SELECT n FROM (SELECT namespace AS n FROM sessions UNION SELECT namespace "
            'FROM blocks UNION SELECT namespace FROM entries) u ORDER BY n COLLATE "C"',
            (),
        )
        return [str(r[0]) for r in rows]


# ---- helpers ---------------------------------------------------------------------------------
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
