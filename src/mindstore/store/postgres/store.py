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

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, Self, TypeVar

from mindstore.changes import Change
from mindstore.embeddings import Embedder
from mindstore.errors import (
    MindstoreError,
    StoreError,
)
from mindstore.search import ParsedQuery, SearchResult
from mindstore.store import _changes as feed_rules
from mindstore.store._checks import (
    check_choice,
    check_key,
    check_name,
)
from mindstore.store._front import Domains, StoreFront
from mindstore.store._vectors import VectorMethods, check_embedder
from mindstore.store.base import (
    SessionKey,
    _Sentinel,
)
from mindstore.store.postgres import _changes, _entries, _messages, _registry, _search, _state
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
logger = logging.getLogger("mindstore")


# ---- SQL ---------------------------------------------------------------------------------------


class PostgresStore(StoreFront, VectorMethods):
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
        # wide namespaces (more sessions than lexical.STAMP_PARTS): searched in a snapshot
        # with their statistics summed (postgres/_search.py)
        self._wide: set[str] = set()
        self._dsn = dsn
        self._change_channel = _changes.channel(schema)
        self._waker = _changes.Waker(self._change_channel, self._send_wakeup)
        self._embedder = check_embedder(embedder)
        self._vectors: PostgresVectors | None = (
            PostgresVectors(self._db, self._embedder, vector_index) if self._embedder else None
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

    async def aclose(self) -> None:
        """Close the pool. Idempotent; later calls raise StoreError.

        The pool's background tasks live in the event loop that opened the store; a store
        closed after that loop ended closes its idle connections directly. Better: open and
        use the store inside one loop, or use :mod:`mindstore.sync` from code that is not async.
        """
        if not self._db.closed:
            await self._waker.drain()
        await self._db.close()

    # ---- transactions (the plumbing is in _connection.py) ------------------------------------
    async def _write(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``fn(conn, *args)`` in one transaction (a savepoint inside :meth:`transaction`);
        see :meth:`.PostgresConnection.write`. The one write style of both backends: a store
        method validates, then passes a domain function and its arguments here
        (SQLiteStore._write is the twin)."""
        result = await self._db.write(fn, *args)
        namespaces = getattr(fn, "namespaces", None)
        if namespaces and not self._db.in_transaction:
            await self._wake_followers(namespaces)
        return result

    async def _wake_followers(self, namespaces: set[str]) -> None:
        """After a commit: wake the followers of ``namespaces`` (see
        :func:`._changes.notify_sql`), off the write's path (:class:`._changes.Waker`). Never
        fails the write that committed: a lost wake-up only delays followers until their
        next periodic read."""
        self._waker.wake(namespaces)

    async def _send_wakeup(self, sql: Any) -> None:
        async def send(conn: Conn) -> None:
            await conn.execute(sql)

        await self._db.read(send)

    async def _read(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``fn(conn, *args)`` as a read; see :meth:`.PostgresConnection.read`."""
        return await self._db.read(fn, *args)

    async def _read_snapshot(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``fn(conn, *args)``, several reads, in one repeatable-read, read-only
        transaction (one snapshot); see :meth:`.PostgresConnection.read_snapshot`."""

        async def run(conn: Conn) -> T:
            return await fn(conn, *args)

        return await self._db.read_snapshot(run)

    async def _search_messages(
        self, namespace: str, query: ParsedQuery, ids: list[str] | None, limit: int
    ) -> list[SearchResult]:
        """Outside a caller's transaction: the search without BEGIN/COMMIT, checked to have
        read one state of the namespace's index (:func:`._search.search_checked`); in the
        usual repeatable-read snapshot when it was written meanwhile, inside a transaction,
        or for a wide namespace (more sessions than :data:`.lexical.STAMP_PARTS`)."""
        wide = namespace in self._wide
        if not self._db.in_transaction and not wide:
            found = await self._read(_search.search_checked, namespace, query, ids, limit)
            self._remember_width(namespace, found.wide)
            if found.results is not None:
                return found.results
            wide = found.wide
        found = await self._read_snapshot(_search.search, namespace, query, ids, limit, wide)
        self._remember_width(namespace, found.wide)
        assert found.results is not None
        return found.results

    def _remember_width(self, namespace: str, wide: bool) -> None:
        """Keep :attr:`_wide` up to date with what a search found (bounded: forgetting a wide
        namespace costs its next search a checked first statement)."""
        if wide == (namespace in self._wide):
            return
        if not wide:
            self._wide.discard(namespace)
            return
        if len(self._wide) >= 4096:
            self._wide.clear()
        self._wide.add(namespace)

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
        namespaces: set[str] = set()
        async with (
            self._db.transaction(readonly=readonly, lock=keys),
            self._collect_changes(namespaces),
        ):
            yield
        if namespaces and not self._db.in_transaction:  # the outermost block committed
            await self._wake_followers(namespaces)

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

        The follower holds its own connection (not one of the pool's) that ``LISTEN``\\ s on
        the schema's channel: every write's commit notifies it, so ``poll_interval`` is not
        used here (a wait still ends every second, to notice a closed store or make up for a
        lost notification). A lost
        connection is reopened for up to ``connect_timeout`` and the feed resumes by ``seq``.
        """
        feed_rules.check_changes_args(namespace, since, batch, poll_interval)
        feed = _changes.Feed(
            namespace,
            connect=self._connect_follower,
            chan=_changes.channel(self._schema),
            max_wait=1.0,
            retry_for=float(self._limits.get("connect_timeout") or 30.0),
            is_open=lambda: not self._db.closed,
        )
        return feed_rules.follow(feed, since, follow=follow, batch=batch)

    async def _connect_follower(self) -> Any:
        import psycopg
        from psycopg import sql as pgsql

        timeout = max(1, int(self._limits.get("connect_timeout") or 30))
        conn = await psycopg.AsyncConnection.connect(
            self._dsn, autocommit=True, connect_timeout=timeout
        )
        if self._schema is not None:
            await conn.execute(
                pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(self._schema))
            )
        await conn.execute("SET TIME ZONE 'UTC'")
        return conn

    # ---- the one backend-specific step of the shared methods (see _front.py) ---------------
    _domains = Domains(_messages, _search, _state, _entries, _registry, _changes)
    _index_in_prepare = True

    async def _append_prepared(
        self, key: SessionKey, prepared: Any, expected_leaf: str | _Sentinel | None
    ) -> list[bool]:
        """One append transaction; a commit whose outcome was lost is settled by asking the
        server (see the module docstring)."""
        outcome = _messages.AppendOutcome()
        try:
            return await self._write(
                self._logged(_messages.append, feed_rules.describe_append),
                key,
                prepared,
                expected_leaf,
                outcome,
            )
        except StoreError as e:
            wait = self._limits.get("connect_timeout") or 30.0
            return await _messages.settle_append(self._read, e, outcome, wait)
