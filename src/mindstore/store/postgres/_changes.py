"""The change feed's SQL on PostgreSQL (twin of ``sqlite/_changes.py``; the rules are in
``store/_changes.py``).

Numbering: one statement bumps the namespace's row in ``change_counters`` (``INSERT … ON
CONFLICT DO UPDATE``, which locks that row until the transaction ends) and inserts the events
under the numbers it returned. The row lock makes the namespace's writers take numbers one at
a time and commit in that order, so a reader selecting ``seq > since`` never sees *n + 1*
before *n*, and a rollback returns its numbers. The statement runs last in the write's
transaction, so the lock is held only for the commit — but through its WAL flush: the writers
of one namespace commit one at a time (the price of gapless numbers in commit order); writers
of different namespaces do not wait for each other.

Waking: after the commit the store sends ``pg_notify`` on a channel named for the schema
(``mindstore_`` + a hash) with the namespace as payload, in a transaction of its own
(:func:`notify_sql` says why); a :class:`Feed` ``LISTEN``\\ s on its own connection before
its first read, so no commit falls between a read and the wait, and reads at least every
second anyway, so a lost notification costs at most that.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

from mindstore.changes import Change
from mindstore.errors import StoreError
from mindstore.store._changes import ChangeRow, Describe, change_from_row, dumps_data

if TYPE_CHECKING:
    from mindstore.store.postgres._common import Conn

__all__ = [
    "Feed",
    "Waker",
    "channel",
    "latest_seq",
    "logged",
    "nothing",
    "notify_sql",
    "read",
    "record",
]

T = TypeVar("T")
logger = logging.getLogger("mindstore")

_RECORD_SQL: Final = """
WITH c AS (
    INSERT INTO change_counters AS cc (namespace, last_seq) VALUES (%(ns)s, %(n)s)
    ON CONFLICT (namespace) DO UPDATE SET last_seq = cc.last_seq + EXCLUDED.last_seq
    RETURNING last_seq
)
INSERT INTO changes (namespace, seq, kind, session_id, data)
SELECT %(ns)s, c.last_seq - %(n)s + e.ord, e.kind, e.sid, e.data
FROM c, unnest(%(kinds)s::text[], %(sids)s::text[], %(datas)s::text[])
    WITH ORDINALITY AS e(kind, sid, data, ord)
"""
_READ_SQL: Final = (
    "SELECT seq, kind, session_id, data, created_at FROM changes "
    "WHERE namespace = %s AND seq > %s ORDER BY seq LIMIT %s"
)


def channel(schema: str | None) -> str:
    """The notification channel of the store's schema (an identifier safe to quote as is)."""
    return "mindstore_" + hashlib.sha256((schema or "").encode()).hexdigest()[:24]


async def record(conn: Conn, rows: Sequence[ChangeRow], chan: str | None = None) -> None:
    """Number and insert ``rows``, grouped by namespace, in the open transaction: one
    statement per namespace. (Followers are woken after the commit: :func:`notify_sql`.)"""
    by_ns: dict[str, list[ChangeRow]] = {}
    for row in rows:
        by_ns.setdefault(row[0], []).append(row)
    for ns, group in by_ns.items():
        await conn.execute(
            _RECORD_SQL,
            {
                "ns": ns,
                "n": len(group),
                "kinds": [r[1] for r in group],
                "sids": [r[2] for r in group],
                "datas": [dumps_data(r[3]) for r in group],
            },
        )


def notify_sql(chan: str, namespaces: Iterable[str]) -> Any:
    """One round trip that wakes the followers of ``namespaces``, sent after the write
    committed, in a transaction of its own that does not wait for the WAL flush.

    Why not ``NOTIFY`` inside the write: PostgreSQL serialises the commits of every
    transaction that notifies, database-wide and through the WAL flush (a lock taken in
    ``PreCommit_Notify``), so the writers of different namespaces could no longer share a
    flush. (On this project's test machine, whose flush is fast, the two gave the same
    throughput; see docs/benchmarks.md.) A notification lost with a crash between the two is
    made up by the followers' periodic read (:class:`Feed`)."""
    from psycopg import sql as pgsql

    calls = pgsql.SQL(", ").join(
        pgsql.SQL("pg_notify({}, {})").format(pgsql.Literal(chan), pgsql.Literal(ns))
        for ns in sorted(set(namespaces))
    )
    return pgsql.SQL("BEGIN; SET LOCAL synchronous_commit TO off; SELECT {}; COMMIT").format(calls)


def logged(
    fn: Callable[..., Any],
    describe: Describe,
    before: Callable[..., Any] | None,
    pending: list[ChangeRow] | None,
    chan: str | None,
) -> Callable[..., Any]:
    """``fn`` followed, in its transaction, by recording what ``describe`` says it did (into
    ``pending`` instead when a ``store.transaction()`` block records them at its end). The
    namespaces it recorded in are left on the wrapper's ``namespaces`` (the store notifies
    their followers once the transaction committed)."""
    namespaces: set[str] = set()

    async def run(conn: Conn, *args: Any) -> Any:
        seen = await before(conn, *args) if before is not None else None
        result = await fn(conn, *args)
        rows = describe(args, result, seen)
        if rows:
            if pending is None:
                await record(conn, rows, chan)
                namespaces.update(r[0] for r in rows)
            else:
                pending.extend(rows)
        return result

    run.namespaces = namespaces  # type: ignore[attr-defined]
    return run


async def nothing(conn: Conn, *args: Any) -> None:
    """A write with no rows of its own (``record_changes``: only its events)."""


async def read(conn: Conn, namespace: str, since: int, limit: int) -> list[Change]:
    cur = await conn.execute(_READ_SQL, (namespace, since, limit))
    return [
        change_from_row(namespace, seq, kind, sid, data, at)
        for seq, kind, sid, data, at in await cur.fetchall()
    ]


async def latest_seq(conn: Conn, namespace: str) -> int:
    cur = await conn.execute(
        "SELECT last_seq FROM change_counters WHERE namespace = %s", (namespace,)
    )
    row = await cur.fetchone()
    return 0 if row is None else int(row[0])


class Feed:
    """What :func:`mindstore.store._changes.follow` reads one namespace's feed with: a
    dedicated connection (``connect()`` opens it) that ``LISTEN``\\ s on ``chan`` before its
    first read. A lost connection is reopened (``LISTEN`` again, then the next read catches up
    by ``seq``) for up to ``retry_for`` seconds, then StoreError; ``max_wait`` bounds each wait
    so a closed store is noticed."""

    def __init__(
        self,
        namespace: str,
        *,
        connect: Callable[[], Awaitable[Any]],
        chan: str,
        max_wait: float,
        retry_for: float,
        is_open: Callable[[], bool],
    ) -> None:
        self.namespace = namespace
        self._connect = connect
        self._chan = chan
        self._max_wait = max_wait
        self._retry_for = retry_for
        self._is_open = is_open
        self._conn: Any = None

    async def _run(self, fn: Callable[[Any], Awaitable[T]]) -> T:
        import psycopg

        loop = asyncio.get_running_loop()
        down_since: float | None = None
        while True:
            if not self._is_open():
                raise StoreError("the store was closed while following its change feed")
            try:
                if self._conn is None:
                    conn = await self._connect()
                    await conn.execute(f'LISTEN "{self._chan}"')
                    self._conn = conn
                return await fn(self._conn)
            except psycopg.Error as e:
                await self.close()
                down_since = down_since or loop.time()
                if loop.time() - down_since > self._retry_for:
                    raise StoreError(f"following the change feed failed: {e}") from e
                await asyncio.sleep(0.25)

    async def mark(self) -> int:
        await self._run(_nothing)  # (re)connected and listening before the read
        return 0

    async def read(self, since: int, limit: int) -> list[Change]:
        return await self._run(lambda conn: read(conn, self.namespace, since, limit))

    async def latest(self) -> int:
        return await self._run(lambda conn: latest_seq(conn, self.namespace))

    async def wait(self, mark: int) -> None:
        """Return after a notification for this namespace (or after ``max_wait``)."""

        async def listen(conn: Any) -> None:
            async for note in conn.notifies(timeout=self._max_wait):
                if note.payload == self.namespace:
                    return

        await self._run(listen)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()


async def _nothing(conn: Any) -> None:
    return None


#: Seconds a wake-up waits for more commits to share its notification: a busy writer then
#: costs the server one small notifying transaction per 10 ms, not one per write, and a
#: follower hears of a commit at most this much later.
GATHER: Final = 0.010


class Waker:
    """Sends the post-commit wake-ups of one store off the write's path, coalesced.

    :meth:`wake` returns at once; one task waits :data:`GATHER`, then sends
    :func:`notify_sql` for the namespaces waiting; writes meanwhile only add to the next
    batch — so a writer pays no round trip of its own and the server sees at most one
    notifying transaction per :data:`GATHER`. ``send(sql)`` runs it on a pooled connection."""

    def __init__(self, chan: str, send: Callable[[Any], Awaitable[None]]) -> None:
        self._chan = chan
        self._send = send
        self._waiting: set[str] = set()
        self._task: asyncio.Task[None] | None = None

    def wake(self, namespaces: Iterable[str]) -> None:
        self._waiting.update(namespaces)
        if self._waiting and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while self._waiting:
            await asyncio.sleep(GATHER)  # let the writes of the next moment join this batch
            batch, self._waiting = self._waiting, set()
            try:
                await self._send(notify_sql(self._chan, batch))
            except Exception:  # never fails a write: followers read every second anyway
                logger.warning("waking change-feed followers failed; they catch up within a second")

    async def drain(self) -> None:
        """Let the wake-ups still waiting go out (for at most 2 s), e.g. before the pool
        closes."""
        task = self._task
        if task is not None and not task.done():
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2.0):
                    await asyncio.shield(task)
