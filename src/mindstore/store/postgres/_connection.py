"""The connection pool of a :class:`~mindstore.store.postgres.PostgresStore`.

Invariants:

* **Opening** first migrates (or, read-only, checks the version) on a dedicated connection
  (:mod:`.migrations`), then opens a psycopg ``AsyncConnectionPool`` whose connections run in
  autocommit mode with ``search_path`` set to the schema, ``TimeZone=UTC``,
  ``client_min_messages=warning``, the three server-side timeouts and the caller's settings.
* **One transaction per write.** :meth:`PostgresConnection.write` runs a domain function in one
  ``BEGIN … COMMIT`` on one pooled connection; any exception rolls back. Reads run in autocommit
  (one statement is one snapshot) or, for several statements, in one ``REPEATABLE READ, READ
  ONLY`` transaction (:meth:`PostgresConnection.read_snapshot`).
* **Grouped calls.** :meth:`PostgresConnection.transaction` binds one pooled connection in one
  transaction to the current task; writes inside it are savepoints, reads see its snapshot.
* **Server restarts.** A write whose ``BEGIN`` fails on a dead pooled connection (nothing was
  sent yet) is retried on another connection, as is any read; the pool reconnects at most
  ``_MAX_RECONNECT_DELAY`` apart (:func:`fast_reconnect_pool`). A connection lost while
  committing gives ``StoreError(maybe_committed=True)``.
* **Errors.** ``psycopg.Error`` (pool timeouts included) becomes
  :class:`~mindstore.errors.StoreError` here and nowhere else (:func:`store_error`), with a
  message naming the option to change when a timeout was the cause.

Importing this module does not need psycopg; :meth:`PostgresConnection.open` raises
:class:`~mindstore.errors.MissingDependencyError` without it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, TypeVar

from mindstore.errors import MissingDependencyError, StoreError
from mindstore.store.postgres import migrations

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

    Conn = AsyncConnection[tuple[Any, ...]]

try:
    import psycopg
    from psycopg import sql as pgsql
except ImportError:  # pragma: no cover - exercised by the missing-extra meta test
    psycopg = None  # type: ignore[assignment]
    pgsql = None  # type: ignore[assignment]

__all__ = [
    "DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT",
    "DEFAULT_LOCK_TIMEOUT",
    "DEFAULT_STATEMENT_TIMEOUT",
    "PostgresConnection",
    "redact",
    "require_driver",
    "store_error",
]

T = TypeVar("T")

# Server-side limits (seconds) on every pooled connection; see PostgresStore.open.
DEFAULT_LOCK_TIMEOUT: Final = 10.0
DEFAULT_STATEMENT_TIMEOUT: Final = 60.0
DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT: Final = 30.0
_MAX_RECONNECT_DELAY: Final = 0.5  # seconds between reconnection attempts while the server is down

_LOCK_ROW_SQL: Final = "SELECT 1 FROM sessions WHERE namespace = %s AND session_id = %s FOR UPDATE"


class PostgresConnection:
    """The pool, the write/read plumbing and error translation of one store.

    ``label`` names the store in error messages (its ``repr``); ``limits`` holds the timeouts
    the store was opened with (for messages and the commit-status check).
    """

    def __init__(
        self, pool: AsyncConnectionPool[Any], *, label: str, limits: Mapping[str, float | None]
    ) -> None:
        self.pool = pool
        self.limits: dict[str, float | None] = dict(limits)
        self._label = label
        self._closed = False
        self._retries = max(2, (pool.max_size or 1) + 1)
        # The connection of this task's open transaction() block, if any (see write/read).
        self._tx_conn: ContextVar[Conn | None] = ContextVar("mindstore_pg_tx", default=None)
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    @classmethod
    async def open(
        cls,
        dsn: str,
        *,
        schema: str | None,
        min_size: int,
        max_size: int,
        connect_timeout: float,
        settings: Mapping[str, str] | None,
        lock_timeout: float | None,
        statement_timeout: float | None,
        idle_in_transaction_timeout: float | None,
        read_only: bool,
        label: str,
    ) -> PostgresConnection:
        """Check the pool options, migrate (or check the version when ``read_only``), open
        the pool. The options are documented on :meth:`PostgresStore.open`."""
        require_driver()
        from psycopg_pool import AsyncConnectionPool

        if not isinstance(min_size, int) or not isinstance(max_size, int):
            raise TypeError("min_size and max_size must be integers")
        if min_size < 0 or max_size < max(1, min_size):
            raise ValueError("need 0 <= min_size <= max_size and max_size >= 1")

        timeouts = {
            "lock_timeout": lock_timeout,
            "statement_timeout": statement_timeout,
            "idle_in_transaction_session_timeout": idle_in_transaction_timeout,
        }
        config = {name: _milliseconds(name, value) for name, value in timeouts.items()}
        for name, value in (settings or {}).items():
            if not isinstance(name, str) or not isinstance(value, str):
                raise TypeError("settings must map setting names to string values")
            config[name] = value

        await _prepare(dsn, schema, connect_timeout, read_only=read_only)
        if read_only:
            config["default_transaction_read_only"] = "on"

        async def configure(conn: Conn) -> None:
            if schema is not None:
                await conn.execute(
                    pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema))
                )
            await conn.execute("SET TIME ZONE 'UTC'")
            # NOTICEs (e.g. from IF NOT EXISTS) are expected, not news.
            await conn.execute("SET client_min_messages TO warning")
            for name, value in config.items():
                await conn.execute("SELECT set_config(%s, %s, false)", (name, value))

        pool: AsyncConnectionPool[Any] = fast_reconnect_pool(AsyncConnectionPool)(
            dsn,
            min_size=min_size,
            max_size=max_size,
            kwargs={"autocommit": True},
            configure=configure,
            timeout=connect_timeout,
            open=False,
            name="mindstore",
        )
        try:
            await pool.open(wait=True, timeout=connect_timeout)
        except psycopg.Error as e:
            await pool.close()
            raise StoreError(f"cannot connect to PostgreSQL at {redact(dsn)}: {e}") from e
        return cls(pool, label=label, limits={"connect_timeout": connect_timeout, **timeouts})

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_transaction(self) -> bool:
        """Whether this task is inside :meth:`transaction` (its calls share its connection)."""
        return self._tx_conn.get() is not None

    async def close(self) -> None:
        """Close the pool. Idempotent; later calls raise StoreError.

        The pool's background tasks live in the event loop that opened the store. A script that
        runs every call in its own ``asyncio.run`` has closed that loop by the time it closes
        the store; the pool then cannot stop its tasks ("Event loop is closed"), so the idle
        connections are closed directly instead.
        """
        if self._closed:
            return
        self._closed = True
        opened_in = self._loop
        if (
            opened_in is None
            or opened_in is asyncio.get_running_loop()
            or not opened_in.is_closed()
        ):
            await self.pool.close()
            return
        # The opening loop is gone: its worker tasks died with it.
        idle = list(getattr(self.pool, "_pool", ()))
        with contextlib.suppress(RuntimeError):
            await self.pool.close()
        for conn in idle:
            with contextlib.suppress(Exception):
                await conn.close()

    def check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self._label} is closed; open a new store")

    # ---- writes and reads: the one place driver errors are translated ------------------------
    async def write(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``fn(conn, *args)`` in one transaction. A dead pooled connection found at BEGIN
        (nothing sent yet) is replaced and the call retried; any other driver failure →
        StoreError.

        Inside :meth:`transaction` (same task) ``fn`` runs in a savepoint of that transaction,
        so the call stays all-or-nothing on its own; nothing commits before the block ends."""
        self.check_open()
        bound = self._tx_conn.get()
        if bound is not None:
            try:
                async with bound.transaction():
                    return await fn(bound, *args)
            except psycopg.Error as e:
                raise store_error(e, self.limits) from e
        attempt = 0
        while True:
            attempt += 1
            begun = committing = False
            conn: Conn | None = None
            try:
                async with self.pool.connection() as conn:
                    async with conn.transaction():
                        begun = True
                        result = await fn(conn, *args)
                        committing = True  # leaving the block sends COMMIT
                    return result
            except psycopg.Error as e:
                if not begun and attempt < self._retries and _is_dead(conn):
                    continue
                # Lost while committing: the server may have committed before it went away.
                unknown = committing and _is_dead(conn)
                raise store_error(e, self.limits, maybe_committed=unknown) from e

    async def read(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``fn(conn, *args)`` as a read (autocommit; one statement is one snapshot).
        Reads are idempotent, so a dead connection is replaced and the read retried. Inside
        :meth:`transaction` the read runs in that transaction (sees its snapshot and writes)."""
        self.check_open()
        bound = self._tx_conn.get()
        if bound is not None:
            try:
                return await fn(bound, *args)
            except psycopg.Error as e:
                raise store_error(e, self.limits) from e
        attempt = 0
        while True:
            attempt += 1
            conn: Conn | None = None
            try:
                async with self.pool.connection() as conn:
                    return await fn(conn, *args)
            except psycopg.Error as e:
                if attempt < self._retries and _is_dead(conn):
                    continue
                raise store_error(e, self.limits) from e

    async def read_snapshot(self, fn: Callable[[Conn], Awaitable[T]]) -> T:
        """Run several reads in one repeatable-read, read-only transaction (one snapshot).

        Inside :meth:`transaction` the reads run in that transaction instead: its isolation
        level is already set (it cannot change after its first statement), and it sees its own
        writes."""
        if self._tx_conn.get() is not None:
            return await self.read(fn)

        async def run(conn: Conn) -> T:
            # The level on the connection, so BEGIN carries it: one round trip, not BEGIN and
            # then SET TRANSACTION (a search is a few short statements; each trip shows).
            await conn.set_isolation_level(psycopg.IsolationLevel.REPEATABLE_READ)
            await conn.set_read_only(True)
            try:
                async with conn.transaction():
                    return await fn(conn)
            finally:
                if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                    await conn.set_isolation_level(None)
                    await conn.set_read_only(None)
                elif not conn.closed:
                    await conn.close()  # never back in the pool with these settings

        return await self.read(run)

    async def fetchone(self, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> Any:
        async def run(conn: Conn) -> Any:
            cur = await conn.execute(sql, params)
            return await cur.fetchone()

        return await self.read(run)

    async def fetchall(
        self, sql: str, params: Sequence[Any] | Mapping[str, Any], *, prepare: bool | None = None
    ) -> list[tuple[Any, ...]]:
        """One read statement; ``prepare=False`` never makes it a server-side prepared
        statement."""

        async def run(conn: Conn) -> list[tuple[Any, ...]]:
            cur = await conn.execute(sql, params, prepare=prepare)
            return await cur.fetchall()

        return await self.read(run)

    @asynccontextmanager
    async def transaction(
        self, *, readonly: bool, lock: Sequence[tuple[str, str]]
    ) -> AsyncIterator[None]:
        """One pooled connection in one transaction for this task's block of calls:
        ``READ COMMITTED`` for writes with the ``lock`` sessions' rows taken ``FOR UPDATE`` in
        the given order, ``REPEATABLE READ, READ ONLY`` with ``readonly``. Nested: joins (and
        takes the nested block's locks). A lost connection is a StoreError, not retried."""
        self.check_open()
        bound = self._tx_conn.get()
        if bound is not None:
            try:
                for ns, sid in lock:
                    await bound.execute(_LOCK_ROW_SQL, (ns, sid))
            except psycopg.Error as e:
                raise store_error(e, self.limits) from e
            yield  # nested: join the enclosing transaction
            return
        try:
            async with self.pool.connection() as conn, conn.transaction():
                if readonly:
                    await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                for ns, sid in lock:
                    await conn.execute(_LOCK_ROW_SQL, (ns, sid))
                token = self._tx_conn.set(conn)
                try:
                    yield
                finally:
                    self._tx_conn.reset(token)
        except psycopg.Error as e:
            raise store_error(e, self.limits) from e


# ---- helpers -----------------------------------------------------------------------------------
def require_driver() -> None:
    """MissingDependencyError naming the ``postgres`` extra unless psycopg and its pool are
    installed."""
    if psycopg is None:
        raise MissingDependencyError("psycopg", "postgres")
    try:
        import psycopg_pool  # noqa: F401
    except ImportError as e:  # pragma: no cover - psycopg without psycopg_pool
        raise MissingDependencyError("psycopg_pool", "postgres") from e


def redact(dsn: str) -> str:
    """The DSN without a password, for messages."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(dsn)
    except Exception:
        return "<dsn>"
    if "password" in params:
        params["password"] = "***"
    return make_conninfo("", **params)


def _is_dead(conn: Conn | None) -> bool:
    """The failure was the connection dying (server restarted, network cut), not the query:
    another connection may succeed. (A pool timeout leaves ``conn`` None: not retried.)"""
    return conn is not None and (conn.broken or conn.closed)


def store_error(
    e: BaseException, limits: Mapping[str, float | None], *, maybe_committed: bool = False
) -> StoreError:
    """The driver error ``e`` as a StoreError whose message says what to do."""
    from psycopg_pool import PoolTimeout

    detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if maybe_committed:
        return StoreError(
            f"PostgreSQL connection lost while committing ({detail}): the write may or may "
            "not have been applied. Re-read to find out, or retry: a retry with the same "
            "message ids is idempotent (StoreError.message_ids holds the ids of an append)",
            maybe_committed=True,
        )
    if isinstance(e, PoolTimeout):
        return StoreError(
            f"no PostgreSQL connection within connect_timeout={limits.get('connect_timeout')}s "
            f"(the server is unreachable or every pooled connection is busy): {detail}; "
            "nothing was written, retry later"
        )
    if isinstance(e, psycopg.errors.LockNotAvailable):
        return StoreError(
            f"gave up waiting for a lock after lock_timeout={limits.get('lock_timeout')}s: "
            "another writer of this session (or block) holds it — a slow, stuck or stopped "
            "worker; nothing was written, retry later (PostgresStore.open(lock_timeout=...))"
        )
    if isinstance(e, psycopg.errors.QueryCanceled):
        return StoreError(
            f"PostgreSQL cancelled a statement ({detail}); with statement_timeout="
            f"{limits.get('statement_timeout')}s a statement that runs longer is stopped. "
            "Nothing was written; retry, or raise PostgresStore.open(statement_timeout=...)"
        )
    return StoreError(f"PostgreSQL error: {detail}")


def _milliseconds(name: str, seconds: float | None) -> str:
    """A timeout option in seconds → the server setting (``0`` disables it)."""
    if seconds is None:
        return "0"
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise ValueError(f"{name} must be a positive number of seconds or None, got {seconds!r}")
    return f"{max(1, round(seconds * 1000))}ms"


def fast_reconnect_pool(base: type[AsyncConnectionPool[Any]]) -> type[AsyncConnectionPool[Any]]:
    """``base`` whose reconnection attempts are at most ``_MAX_RECONNECT_DELAY`` apart.

    psycopg_pool backs off exponentially (1, 2, 4, 8 … s) while the server is down, so after
    an outage of a few seconds the pool stayed empty for up to as long again once the server
    was back. Capping the delay lets the first call after a restart succeed within about a
    second; an attempt against a down server is one refused connect, so the cost is nil.
    """
    try:
        from psycopg_pool.base import AttemptWithBackoff
    except ImportError:  # pragma: no cover - a psycopg_pool without the class: keep its backoff
        return base

    class Attempt(AttemptWithBackoff):
        INITIAL_DELAY = _MAX_RECONNECT_DELAY / 4

        def update_delay(self, now: float) -> None:
            super().update_delay(now)
            self.delay = min(self.delay, _MAX_RECONNECT_DELAY)

    class Pool(base):  # type: ignore[valid-type,misc]
        async def _add_connection(
            self, attempt: AttemptWithBackoff | None, growing: bool = False
        ) -> None:
            if attempt is None:
                attempt = Attempt(timeout=self.reconnect_timeout)
            await super()._add_connection(attempt, growing)

    return Pool


async def _prepare(
    dsn: str, schema: str | None, connect_timeout: float, *, read_only: bool
) -> None:
    """On a dedicated connection: bring the schema to LATEST_VERSION under an advisory lock,
    or, ``read_only``, check that it is there and current (nothing written); see
    :mod:`.migrations`."""
    try:
        conn = await psycopg.AsyncConnection.connect(
            dsn, connect_timeout=max(1, int(connect_timeout)), autocommit=read_only
        )
    except psycopg.Error as e:
        raise StoreError(f"cannot connect to PostgreSQL at {redact(dsn)}: {e}") from e
    try:
        async with conn:
            if read_only:
                await migrations.check_current(conn, schema, redact(dsn))
            else:
                await migrations.migrate(conn, schema)
    except psycopg.Error as e:
        if read_only:
            raise StoreError(f"reading the mindstore schema version failed: {e}") from e
        raise StoreError(f"migrating the mindstore schema failed: {e}") from e
