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

import asyncio
import json
import time
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
    InvalidMessageError,
    MessageNotFoundError,
    MindstoreError,
    SessionNotFoundError,
    StoreError,
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
    not_found,
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
from mindstore.store.postgres import lexical
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
_MSG_COLS = "m.seq, m.id, p.id, m.content, m.created_at, m.tokens, m.nbytes"
_MSG_FROM = "messages m LEFT JOIN messages p ON p.seq = m.parent_seq "
_SESSION_SEQ = "(SELECT leaf_seq FROM sessions WHERE namespace = %s AND session_id = %s)"
_MESSAGE_SEQ = (
    "(SELECT x.seq FROM messages x JOIN sessions xs ON xs.sid = x.sid "
    "WHERE xs.namespace = %s AND xs.session_id = %s AND x.id = %s)"
)

# Walk from a message to its root; ``depth`` 0 is the leaf. Each step is a LATERAL primary-key
# lookup: with a plain join the planner, working from stale statistics on a freshly filled table,
# may pick a hash join that scans the whole table once per level (quadratic).
_STEP = (
    "FROM up CROSS JOIN LATERAL (SELECT * FROM messages x WHERE x.seq = up.parent_seq LIMIT 1) m"
)
_PATH_SQL = (
    "WITH RECURSIVE up(depth, seq, parent_seq, id, content, created_at, tokens, nbytes) AS ("
    " SELECT 0, seq, parent_seq, id, content, created_at, tokens, nbytes"
    " FROM messages WHERE seq = {leaf}"
    " UNION ALL"
    " SELECT up.depth + 1, m.seq, m.parent_seq, m.id, m.content, m.created_at, m.tokens, m.nbytes"
    f" {_STEP}"
    ") SELECT depth, seq, id, content, created_at, tokens, nbytes FROM up"
)

_PATH_COUNT_SQL = (
    "WITH RECURSIVE up(parent_seq) AS ("
    " SELECT parent_seq FROM messages WHERE seq = {leaf}"
    " UNION ALL"
    f" SELECT m.parent_seq {_STEP}"
    ") SELECT count(*) FROM up"
)

# Sizes of the whole path (no bodies), then bodies for the rows of the window only.
_WINDOW_SQL = (
    "WITH RECURSIVE up(depth, seq, parent_seq, tokens, nbytes) AS ("
    " SELECT 0, seq, parent_seq, tokens, nbytes FROM messages WHERE seq = {leaf}"
    " UNION ALL"
    " SELECT up.depth + 1, m.seq, m.parent_seq, m.tokens, m.nbytes"
    f" {_STEP}"
    "), w AS ("
    " SELECT depth, seq,"
    " sum(tokens) OVER (ORDER BY depth) AS ct, sum(nbytes) OVER (ORDER BY depth) AS cb,"
    " sum(tokens) OVER () AS tt, sum(nbytes) OVER () AS tb, count(*) OVER () AS n"
    " FROM up"
    f") SELECT w.depth, w.tt, w.tb, w.n, {_MSG_COLS} FROM w JOIN {_MSG_FROM}"
    "ON m.seq = w.seq WHERE w.depth < %s{budget}"
)

_SESSION_COLS = (
    "session_id, name, parent_session_id, model, source, metadata, input_tokens, "
    "output_tokens, estimated_cost, end_reason, created_at, updated_at, message_count"
)

_COMPACTION_COLS = "id, from_id, to_id, summary, created_at, superseded_by, reverted"


# Upsert the sessions row, which locks it until the end of the transaction.
_LOCK_SESSION_SQL = (
    "INSERT INTO sessions (namespace, session_id) VALUES (%s, %s) "
    "ON CONFLICT (namespace, session_id) DO UPDATE SET leaf_seq = sessions.leaf_seq "
    "RETURNING sid, leaf_seq, (SELECT text FROM message_search WHERE seq = sessions.leaf_seq), "
    "txid_current()"
)

# Insert one message with its search row and, if it was new, move the leaf pointer — one round
# trip. (The search row's foreign key is checked at the end of the statement, when the message
# row exists.)
_INSERT_ONE_SQL = (
    "WITH ins AS ("
    " INSERT INTO messages (sid, id, parent_seq, role, content, tokens, nbytes)"
    " VALUES (%(sid)s, %(id)s, %(parent)s, %(role)s, %(content)s,"
    " %(tokens)s, %(nbytes)s)"
    " ON CONFLICT (sid, id) DO NOTHING RETURNING seq, created_at"
    "), indexed AS ("
    " INSERT INTO message_search (seq, namespace, session_id, id, role, created_at, text,"
    " tool_text) SELECT ins.seq, %(ns)s, %(sess)s, %(id)s, %(role)s, ins.created_at,"
    " %(text)s, %(tool)s FROM ins"
    "), terms AS ("
    " INSERT INTO search_terms (coll, kind, key, doc, part, tf, ctx, dl)"
    " SELECT %(coll)s, u.kind, u.key, ins.seq, %(sid)s, u.tf, u.ctx, %(dl)s FROM ins,"
    " unnest(%(kinds)s::smallint[], %(keys)s::text[], %(tfs)s::real[], %(ctxs)s::real[])"
    " AS u(kind, key, tf, ctx)"
    "), counted AS ("
    " INSERT INTO search_stats AS st (coll, part, docs, length)"
    " SELECT %(coll)s, %(sid)s, 1, %(dl)s FROM ins WHERE %(indexed)s"
    " ON CONFLICT (coll, part) DO UPDATE SET docs = st.docs + 1,"
    " length = st.length + excluded.length"
    ") UPDATE sessions SET leaf_seq = ins.seq, message_count = message_count + 1,"
    " updated_at = clock_timestamp(),"
    # the running token estimate (TokenEstimate): extended by a child of the measured leaf,
    # started by a new root, cleared otherwise (SET sees the row's old values)
    " est_tokens = CASE WHEN %(parent)s::bigint IS NULL THEN %(tokens)s::bigint"
    " WHEN sessions.est_seq = %(parent)s::bigint THEN sessions.est_tokens + %(tokens)s::bigint"
    " END,"
    " est_seq = CASE WHEN %(parent)s::bigint IS NULL"
    " OR sessions.est_seq = %(parent)s::bigint THEN ins.seq END"
    " FROM ins WHERE sessions.sid = %(sid)s RETURNING ins.seq"
)

# Clear the running estimate and the compaction back-off after a path-changing write.
_FORGET_ESTIMATE_SQL = (
    "UPDATE sessions SET est_seq = NULL, est_tokens = NULL, est_gen = est_gen + 1,"
    " compact_floor = NULL, compact_margin = NULL WHERE namespace = %s AND session_id = %s"
)

_INSERT_MANY_SQL = (
    "WITH u AS MATERIALIZED (SELECT * FROM unnest("
    "%(seqs)s::bigint[], %(ids)s::text[], %(parents)s::bigint[], %(roles)s::text[],"
    " %(contents)s::text[], %(tokens)s::int[], %(nbytes)s::int[], %(texts)s::text[],"
    " %(tools)s::text[]"
    ") WITH ORDINALITY AS u(seq, id, parent, role, content, tokens, nbytes, text, tool, ord)"
    "), ins AS ("
    " INSERT INTO messages (seq, sid, id, parent_seq, role, content, tokens, nbytes)"
    " SELECT u.seq, %(sid)s, u.id, u.parent, u.role, u.content, u.tokens,"
    " u.nbytes FROM u ORDER BY u.ord RETURNING seq, created_at"
    ") INSERT INTO message_search (seq, namespace, session_id, id, role, created_at, text,"
    " tool_text) SELECT u.seq, %(ns)s, %(sess)s, u.id, u.role, ins.created_at, u.text,"
    " u.tool FROM u JOIN ins ON ins.seq = u.seq ORDER BY u.ord"
)

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


def _message(row: Sequence[Any]) -> StoredMessage:
    """Row of ``_MSG_COLS`` → StoredMessage."""
    return StoredMessage(
        id=row[1],
        parent_id=row[2],
        message=json.loads(row[3]),
        created_at=row[4],
        seq=row[0],
        tokens=row[5],
        nbytes=row[6],
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


class _Prepared:
    """A message ready to insert: serialised once, outside the transaction."""

    __slots__ = ("content", "id", "item", "nbytes", "role", "text", "tool")

    def __init__(self, item: NewMessage) -> None:
        if not isinstance(item, NewMessage):
            raise TypeError(f"append takes NewMessage items, got {type(item).__name__}")
        msg = item.message
        if not isinstance(msg, dict):
            raise InvalidMessageError("NewMessage.message must be a validated message dict")
        self.id = check_id(msg.get("id"), "message.id")
        role = msg.get("role")
        if not isinstance(role, str):
            raise InvalidMessageError("message.role must be a string")
        self.role = role
        parent = item.parent
        if isinstance(parent, str):
            check_id(parent, "parent_id")
        elif parent is not None and parent is not AUTO:
            raise TypeError("parent must be a message id, None (new root) or AUTO")
        check_int(item.tokens, "NewMessage.tokens")
        self.item = item
        self.content, self.nbytes = _serialise(msg, self.id)
        self.text, self.tool = index_text(msg)


def _serialise(msg: dict[str, Any], mid: str) -> tuple[str, int]:
    try:
        content = dumps(msg)
    except (TypeError, ValueError) as e:
        raise InvalidMessageError(f"message {mid!r} is not JSON-serialisable: {e}") from e
    # json.dumps escapes control characters, so the text holds no NUL for PostgreSQL to reject.
    return content, len(content.encode("utf-8"))


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
        prepared = [_Prepared(item) for item in items]
        if expected_leaf is not UNSET and expected_leaf is not None:
            check_id(expected_leaf, "expected_leaf")
        if not prepared and expected_leaf is UNSET:
            return []

        # The transaction's id and its result: if the connection is lost while committing,
        # the server is asked (txid_status) whether that transaction committed.
        xid: list[int] = []
        done: list[list[bool]] = []

        async def run(conn: Conn) -> list[bool]:
            result = await attempt(conn)
            done.append(result)
            return result

        async def attempt(conn: Conn) -> list[bool]:
            cur = await conn.execute(_LOCK_SESSION_SQL, (key.namespace, key.session_id))
            row = await cur.fetchone()
            assert row is not None
            sid, leaf, leaf_text, txid = row
            xid.append(txid)
            if expected_leaf is not UNSET:
                current = None
                if leaf is not None:
                    cur = await conn.execute("SELECT id FROM messages WHERE seq = %s", (leaf,))
                    r = await cur.fetchone()
                    current = r[0] if r is not None else None
                if current != expected_leaf:
                    raise ConflictError(
                        f"expected the latest leaf of session {key.session_id!r} to be "
                        f"{expected_leaf!r} but it is {current!r}: re-read the history and retry"
                    )
            if len(prepared) == 1:
                return [await self._insert_one(conn, key, sid, leaf, leaf_text, prepared[0])]
            return await self._insert_many(conn, key, sid, leaf, leaf_text, prepared)

        try:
            return await self._write(run)
        except StoreError as e:
            if not (e.maybe_committed and xid and done):
                raise
            status = await self._transaction_status(xid[-1])
            if status == "committed":
                return done[-1]
            if status == "aborted":
                raise StoreError(
                    "PostgreSQL connection lost while committing; the server then reported "
                    "that the transaction was rolled back: nothing was written, retry",
                    message_ids=e.message_ids,
                ) from e.__cause__
            raise

    async def _transaction_status(self, xid: int) -> str | None:
        """``committed`` / ``aborted`` for a transaction whose COMMIT lost its connection,
        asked of the server (``txid_status``) for up to ``connect_timeout`` seconds (it may be
        restarting); None if it could not tell in that time."""
        budget = self._limits.get("connect_timeout") or 30.0
        deadline = time.monotonic() + budget
        while (left := deadline - time.monotonic()) > 0:
            try:
                row = await asyncio.wait_for(self._fetchone("SELECT txid_status(%s)", (xid,)), left)
            except (StoreError, TimeoutError):
                await asyncio.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
                continue
            status = row[0] if row is not None else None
            if status in ("committed", "aborted"):
                return str(status)
            if status is None:  # too old to know (not for a transaction this recent)
                return None
            await asyncio.sleep(0.02)  # "in progress": its backend is still finishing
        return None

    async def _insert_one(
        self,
        conn: Conn,
        key: SessionKey,
        sid: int,
        leaf: int | None,
        leaf_text: str | None,
        p: _Prepared,
    ) -> bool:
        parent = p.item.parent
        parent_text: str | None = None
        if parent is AUTO:
            parent_seq, parent_text = leaf, leaf_text
        elif parent is None:
            parent_seq = None
        else:
            assert isinstance(parent, str)
            cur = await conn.execute(
                "SELECT m.seq, x.text FROM messages m LEFT JOIN message_search x "
                "ON x.seq = m.seq WHERE m.sid = %s AND m.id = %s",
                (sid, parent),
            )
            r = await cur.fetchone()
            if r is None:
                raise MessageNotFoundError(
                    f"parent message {parent!r} does not exist in session "
                    f"{key.session_id!r}; nothing was written"
                )
            parent_seq, parent_text = r
        doc = lexical.message_document(p.text, p.tool, parent_text)
        cur = await conn.execute(
            _INSERT_ONE_SQL,
            {
                "sid": sid,
                "ns": key.namespace,
                "sess": key.session_id,
                "id": p.id,
                "parent": parent_seq,
                "role": p.role,
                "content": p.content,
                "tokens": p.item.tokens,
                "nbytes": p.nbytes,
                "text": p.text,
                "tool": p.tool,
                "coll": message_collection(key.namespace),
                "kinds": [r[0] for r in doc.rows],
                "keys": [r[1] for r in doc.rows],
                "tfs": [r[2] for r in doc.rows],
                "ctxs": [r[3] for r in doc.rows],
                "dl": doc.length,
                "indexed": bool(doc.rows),
            },
        )
        return await cur.fetchone() is not None

    async def _insert_many(
        self,
        conn: Conn,
        key: SessionKey,
        sid: int,
        leaf: int | None,
        leaf_text: str | None,
        items: list[_Prepared],
    ) -> list[bool]:
        """A batch in a constant number of round trips: find existing ids and explicit parents,
        allocate seqs, insert every new row with one ``unnest``, move the leaf pointer."""
        ids = [p.id for p in items]
        parents = [p.item.parent for p in items if isinstance(p.item.parent, str)]
        cur = await conn.execute(
            "SELECT m.id, m.seq, x.text FROM messages m LEFT JOIN message_search x "
            "ON x.seq = m.seq WHERE m.sid = %s AND m.id = ANY(%s)",
            (sid, list({*ids, *parents})),
        )
        known: dict[str, int] = {}
        texts: dict[int | None, str | None] = {leaf: leaf_text}
        for r in await cur.fetchall():
            known[r[0]] = r[1]
            texts[r[1]] = r[2]
        # Allocate seqs for every item up front (unused ones are simply skipped: seqs only
        # need to be monotonic, not dense).
        cur = await conn.execute(
            "SELECT nextval(pg_get_serial_sequence('messages', 'seq')) FROM generate_series(1, %s)",
            (len(items),),
        )
        seqs = [r[0] for r in await cur.fetchall()]
        cur = await conn.execute("SELECT est_seq, est_tokens FROM sessions WHERE sid = %s", (sid,))
        est = await cur.fetchone()
        est_seq, est_tokens = est if est is not None else (None, None)
        results: list[bool] = []
        rows: list[tuple[int, _Prepared, int | None]] = []
        for p, seq in zip(items, seqs, strict=True):
            parent = p.item.parent
            if parent is AUTO:
                parent_seq = leaf
            elif parent is None:
                parent_seq = None
            else:
                assert isinstance(parent, str)
                found = known.get(parent)
                if found is None:
                    raise MessageNotFoundError(
                        f"parent message {parent!r} does not exist in session "
                        f"{key.session_id!r}; nothing was written"
                    )
                parent_seq = found
            if p.id in known:
                results.append(False)
                continue
            known[p.id] = seq
            texts[seq] = p.text
            rows.append((seq, p, parent_seq))
            if parent_seq is None:
                est_seq, est_tokens = seq, p.item.tokens
            elif est_seq is not None and est_tokens is not None and parent_seq == est_seq:
                est_seq, est_tokens = seq, est_tokens + p.item.tokens
            else:
                est_seq = est_tokens = None
            leaf = seq
            results.append(True)
        if rows:
            await conn.execute(
                _INSERT_MANY_SQL,
                {
                    "sid": sid,
                    "ns": key.namespace,
                    "sess": key.session_id,
                    "seqs": [r[0] for r in rows],
                    "ids": [r[1].id for r in rows],
                    "parents": [r[2] for r in rows],
                    "roles": [r[1].role for r in rows],
                    "contents": [r[1].content for r in rows],
                    "tokens": [r[1].item.tokens for r in rows],
                    "nbytes": [r[1].nbytes for r in rows],
                    "texts": [r[1].text for r in rows],
                    "tools": [r[1].tool for r in rows],
                },
            )
            coll = message_collection(key.namespace)
            terms = lexical.message_rows()
            for seq, p, parent_seq in rows:
                parent_text = texts.get(parent_seq) if parent_seq is not None else None
                doc = lexical.message_document(p.text, p.tool, parent_text)
                lexical.collect(terms, coll, seq, sid, doc)
            await lexical.add_rows(conn, terms)
            await conn.execute(
                "UPDATE sessions SET leaf_seq = %s, message_count = message_count + %s, "
                "updated_at = clock_timestamp(), est_seq = %s, est_tokens = %s WHERE sid = %s",
                (leaf, len(rows), est_seq, est_tokens, sid),
            )
        return results

    async def token_estimate(self, key: SessionKey) -> TokenEstimate | None:
        """See :meth:`mindstore.store.base.Store.token_estimate`."""
        check_key(key)
        row = await self._fetchone(
            "SELECT m.id, s.est_tokens, s.est_gen, s.compact_floor, s.compact_margin "
            "FROM sessions s LEFT JOIN messages m ON m.seq = s.est_seq "
            "WHERE s.namespace = %s AND s.session_id = %s",
            (key.namespace, key.session_id),
        )
        if row is None:
            return None
        known = row[0] is not None and row[1] is not None
        return TokenEstimate(
            leaf_id=row[0] if known else None,
            tokens=int(row[1]) if known else None,
            version=int(row[2]),
            floor=None if row[3] is None else int(row[3]),
            margin=None if row[4] is None else int(row[4]),
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
        check_int(tokens, "tokens")
        check_int(version, "version")
        for name, opt in (("floor", floor), ("margin", margin)):
            if opt is not None:
                check_int(opt, name)

        async def run(conn: Conn) -> bool:
            cur = await conn.execute(
                "UPDATE sessions SET est_seq = (SELECT seq FROM messages "
                "WHERE sid = sessions.sid AND id = %s), est_tokens = %s, compact_floor = %s, "
                "compact_margin = %s WHERE namespace = %s AND session_id = %s AND est_gen = %s",
                (leaf_id, tokens, floor, margin, key.namespace, key.session_id, version),
            )
            return cur.rowcount == 1

        return await self._write(run)

    async def get_message(self, key: SessionKey, message_id: str) -> StoredMessage | None:
        check_key(key)
        check_id(message_id)
        row = await self._fetchone(
            f"SELECT {_MSG_COLS} FROM sessions s JOIN {_MSG_FROM}ON m.sid = s.sid "
            "WHERE s.namespace = %s AND s.session_id = %s AND m.id = %s",
            (key.namespace, key.session_id, message_id),
        )
        return None if row is None else _message(row)

    async def get_messages(self, key: SessionKey, ids: Sequence[str]) -> list[StoredMessage]:
        check_key(key)
        if isinstance(ids, str):
            raise TypeError("ids must be a sequence of message ids, not a string")
        wanted = [check_id(i) for i in ids]
        if not wanted:
            return []
        rows = await self._fetchall(
            f"SELECT {_MSG_COLS} FROM sessions s JOIN {_MSG_FROM}ON m.sid = s.sid "
            "WHERE s.namespace = %s AND s.session_id = %s AND m.id = ANY(%s) ORDER BY m.seq",
            (key.namespace, key.session_id, wanted),
        )
        return [_message(r) for r in rows]

    async def all_messages(self, key: SessionKey) -> list[StoredMessage]:
        check_key(key)
        rows = await self._fetchall(
            f"SELECT {_MSG_COLS} FROM sessions s JOIN {_MSG_FROM}ON m.sid = s.sid "
            "WHERE s.namespace = %s AND s.session_id = %s ORDER BY m.seq",
            (key.namespace, key.session_id),
        )
        return [_message(r) for r in rows]

    @staticmethod
    def _leaf_sql(key: SessionKey, leaf_id: str | None) -> tuple[str, list[Any]]:
        if leaf_id is None:
            return _SESSION_SEQ, [key.namespace, key.session_id]
        return _MESSAGE_SEQ, [key.namespace, key.session_id, check_id(leaf_id, "leaf_id")]

    async def path(self, key: SessionKey, leaf_id: str | None) -> list[StoredMessage]:
        check_key(key)
        leaf_sql, params = self._leaf_sql(key, leaf_id)
        rows = await self._fetchall(_PATH_SQL.format(leaf=leaf_sql), params)
        if not rows:
            if leaf_id is not None:
                raise not_found(key, leaf_id)
            return []
        if any(r[0] != i for i, r in enumerate(rows)):  # pragma: no cover - CTE order is FIFO
            rows.sort(key=lambda r: int(r[0]))
        rows.reverse()
        out: list[StoredMessage] = []
        parent_id: str | None = None
        loads = json.loads
        for r in rows:
            out.append(
                StoredMessage(
                    id=r[2],
                    parent_id=parent_id,
                    message=loads(r[3]),
                    created_at=r[4],
                    seq=r[1],
                    tokens=r[5],
                    nbytes=r[6],
                )
            )
            parent_id = r[2]
        return out

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
            if value is not None:
                check_int(value, name)
        check_int(min_messages, "min_messages")
        leaf_sql, params = self._leaf_sql(key, leaf_id)
        params.append(max(1, min_messages))
        budget = []
        if max_tokens is not None:
            budget.append("w.ct <= %s")
            params.append(max_tokens)
        if max_bytes is not None:
            budget.append("w.cb <= %s")
            params.append(max_bytes)
        cond = f" OR ({' AND '.join(budget)})" if budget else " OR true"
        rows = await self._fetchall(_WINDOW_SQL.format(leaf=leaf_sql, budget=cond), params)
        if not rows:
            if leaf_id is not None:
                raise not_found(key, leaf_id)
            return PathWindow(
                messages=[], truncated=False, total_tokens=0, total_bytes=0, path_length=0
            )
        rows.sort(key=lambda r: -int(r[0]))
        total_tokens, total_bytes, n = int(rows[0][1]), int(rows[0][2]), int(rows[0][3])
        return PathWindow(
            messages=[_message(r[4:]) for r in rows],
            truncated=len(rows) < n,
            total_tokens=total_tokens,
            total_bytes=total_bytes,
            path_length=n,
        )

    async def path_length(self, key: SessionKey, leaf_id: str | None) -> int:
        check_key(key)
        leaf_sql, params = self._leaf_sql(key, leaf_id)
        row = await self._fetchone(
            f"SELECT {leaf_sql} IS NOT NULL, ({_PATH_COUNT_SQL.format(leaf=leaf_sql)})",
            params + params,
        )
        assert row is not None
        if not row[0]:
            if leaf_id is not None:
                raise not_found(key, leaf_id)
            return 0
        return int(row[1])

    async def children(self, key: SessionKey, message_id: str) -> list[StoredMessage]:
        check_key(key)
        check_id(message_id)
        rows = await self._fetchall(
            "SELECT c.seq, c.id, par.id, c.content, c.created_at, c.tokens, c.nbytes "
            "FROM sessions s JOIN messages par ON par.sid = s.sid "
            "LEFT JOIN messages c ON c.parent_seq = par.seq "
            "WHERE s.namespace = %s AND s.session_id = %s AND par.id = %s ORDER BY c.seq",
            (key.namespace, key.session_id, message_id),
        )
        if not rows:
            raise not_found(key, message_id)
        return [_message(r) for r in rows if r[0] is not None]

    async def latest_leaf(self, key: SessionKey) -> StoredMessage | None:
        check_key(key)
        row = await self._fetchone(
            f"SELECT {_MSG_COLS} FROM sessions s JOIN {_MSG_FROM}ON m.seq = s.leaf_seq "
            "WHERE s.namespace = %s AND s.session_id = %s",
            (key.namespace, key.session_id),
        )
        return None if row is None else _message(row)

    async def update(self, key: SessionKey, message: dict[str, Any], *, tokens: int) -> None:
        check_key(key)
        if not isinstance(message, dict):
            raise InvalidMessageError("update takes a validated message dict")
        mid = check_id(message.get("id"), "message.id")
        role = message.get("role")
        if not isinstance(role, str):
            raise InvalidMessageError("message.role must be a string")
        check_int(tokens, "tokens")
        content, nbytes = _serialise(message, mid)
        text, tool = index_text(message)

        async def run(conn: Conn) -> None:
            cur = await conn.execute(
                "WITH upd AS (UPDATE messages m SET role = %(role)s, content = %(content)s, "
                "tokens = %(tokens)s, nbytes = %(nbytes)s "
                "FROM sessions s WHERE s.sid = m.sid "
                "AND s.namespace = %(ns)s AND s.session_id = %(sess)s AND m.id = %(id)s "
                "RETURNING m.seq) "
                "UPDATE message_search x SET role = %(role)s, text = %(text)s, "
                "tool_text = %(tool)s FROM upd WHERE x.seq = upd.seq RETURNING x.seq",
                {
                    "role": role,
                    "content": content,
                    "tokens": tokens,
                    "nbytes": nbytes,
                    "text": text,
                    "tool": tool,
                    "ns": key.namespace,
                    "sess": key.session_id,
                    "id": mid,
                },
            )
            row = await cur.fetchone()
            if row is None:
                raise not_found(key, mid)
            await conn.execute(_FORGET_ESTIMATE_SQL, (key.namespace, key.session_id))
            # the message's own rows, and its children's context (the parent's text)
            seqs = [row[0], *await lexical.children_of(conn, [row[0]])]
            await lexical.reindex_messages(conn, key.namespace, seqs)

        await self._write(run)

    @staticmethod
    async def _lock_session(conn: Conn, key: SessionKey) -> int | None:
        cur = await conn.execute(
            "SELECT sid FROM sessions WHERE namespace = %s AND session_id = %s FOR UPDATE",
            (key.namespace, key.session_id),
        )
        row = await cur.fetchone()
        return None if row is None else int(row[0])

    async def delete(self, key: SessionKey, ids: Sequence[str]) -> int:
        check_key(key)
        if isinstance(ids, str):
            raise TypeError("ids must be a sequence of message ids, not a string")
        wanted = list(dict.fromkeys(check_id(i) for i in ids))
        if not wanted:
            return 0

        async def run(conn: Conn) -> int:
            sid = await self._lock_session(conn, key)
            rows: list[tuple[Any, ...]] = []
            if sid is not None:
                cur = await conn.execute(
                    "SELECT seq, id, parent_seq FROM messages WHERE sid = %s AND id = ANY(%s)",
                    (sid, wanted),
                )
                rows = await cur.fetchall()
            if len(rows) != len(wanted):
                found = {r[1] for r in rows}
                missing = [i for i in wanted if i not in found]
                raise MessageNotFoundError(
                    f"cannot delete {missing[0]!r}: no such message in session "
                    f"{key.session_id!r}; nothing was deleted"
                )
            parent_of: dict[int, int | None] = {r[0]: r[2] for r in rows}
            deleted = list(parent_of)
            survivors: list[int | None] = []
            for seq in deleted:
                survivor = parent_of[seq]
                while survivor is not None and survivor in parent_of:
                    survivor = parent_of[survivor]
                survivors.append(survivor)
            # Re-attach children (that survive) to the nearest surviving ancestor; their context
            # (the parent's text) changes.
            moved = await lexical.children_of(conn, deleted)
            await lexical.unindex(conn, message_collection(key.namespace), deleted)
            await conn.execute(
                "UPDATE messages c SET parent_seq = v.survivor "
                "FROM unnest(%s::bigint[], %s::bigint[]) AS v(gone, survivor) "
                "WHERE c.parent_seq = v.gone AND NOT (c.seq = ANY(%s))",
                (deleted, survivors, deleted),
            )
            cur = await conn.execute(
                "DELETE FROM compactions WHERE sid = %s AND (from_id = ANY(%s) OR to_id = ANY(%s))"
                " RETURNING id",
                (sid, wanted, wanted),
            )
            dropped = [r[0] for r in await cur.fetchall()]
            if dropped:
                # An overlay a dropped one had superseded applies again.
                await conn.execute(
                    "UPDATE compactions SET superseded_by = NULL "
                    "WHERE sid = %s AND superseded_by = ANY(%s)",
                    (sid, dropped),
                )
            await conn.execute("DELETE FROM messages WHERE seq = ANY(%s)", (deleted,))
            await lexical.reindex_messages(conn, key.namespace, moved)
            await conn.execute(
                "UPDATE sessions SET leaf_seq = (SELECT max(m.seq) FROM messages m "
                "WHERE m.sid = %s AND NOT EXISTS "
                "(SELECT 1 FROM messages c WHERE c.parent_seq = m.seq)), "
                "message_count = message_count - %s, updated_at = clock_timestamp() "
                "WHERE sid = %s",
                (sid, len(rows), sid),
            )
            await conn.execute(_FORGET_ESTIMATE_SQL, (key.namespace, key.session_id))
            return len(rows)

        return await self._write(run)

    async def clear(self, key: SessionKey) -> None:
        check_key(key)

        async def run(conn: Conn) -> None:
            await self._clear_session(conn, key)

        await self._write(run)

    async def _clear_session(self, conn: Conn, key: SessionKey) -> int | None:
        sid = await self._lock_session(conn, key)
        await conn.execute(
            "DELETE FROM skill_states WHERE namespace = %s AND session_id = %s",
            (key.namespace, key.session_id),
        )
        if sid is None:
            return None
        await conn.execute("DELETE FROM compactions WHERE sid = %s", (sid,))
        await lexical.clear_session(conn, key.namespace, sid)
        # Children before parents is not needed: the self-reference is checked per statement.
        await conn.execute("DELETE FROM messages WHERE sid = %s", (sid,))
        await conn.execute(
            "UPDATE sessions SET leaf_seq = NULL, message_count = 0, "
            "updated_at = clock_timestamp() WHERE sid = %s",
            (sid,),
        )
        await conn.execute(_FORGET_ESTIMATE_SQL, (key.namespace, key.session_id))
        return sid

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
