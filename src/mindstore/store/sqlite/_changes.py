"""The change feed's SQL on SQLite (twin of ``postgres/_changes.py``; the rules are in
``store/_changes.py``).

Numbering: the next number of a namespace is its highest plus one, read by the INSERT itself
inside the write's ``BEGIN IMMEDIATE`` transaction — SQLite has one writer at a time, so
numbers are handed out in commit order and a rollback returns them. Events are never deleted
singly (a deleted session's are emptied), so the highest number is never handed out again.
Readers (:func:`read`) select ``seq > since`` by primary key; followers wake when ``PRAGMA
data_version`` of their own connection changes (another connection committed).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Final

from mindstore.changes import Change
from mindstore.errors import StoreError
from mindstore.store._changes import ChangeRow, Describe, change_from_row, dumps_data
from mindstore.store.sqlite._common import now_us, to_datetime

__all__ = ["Feed", "latest_seq", "logged", "nothing", "read", "record"]

_INSERT_NEXT_SQL: Final = (
    "INSERT INTO changes (namespace, seq, kind, session_id, data, created_us) "
    "SELECT ?1, coalesce(max(seq), 0) + 1, ?2, ?3, ?4, ?5 FROM changes WHERE namespace = ?1"
)
_INSERT_SQL: Final = (
    "INSERT INTO changes (namespace, seq, kind, session_id, data, created_us) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
_LAST_SQL: Final = "SELECT coalesce(max(seq), 0) FROM changes WHERE namespace = ?"
_READ_SQL: Final = (
    "SELECT seq, kind, session_id, data, created_us FROM changes "
    "WHERE namespace = ? AND seq > ? ORDER BY seq LIMIT ?"
)


def record(conn: sqlite3.Connection, rows: Sequence[ChangeRow], chan: str | None = None) -> None:
    """Number and insert ``rows`` (order kept) in the open transaction (``chan``:
    PostgreSQL's notification channel; followers here poll instead). One statement for the
    usual single event."""
    now = now_us()
    if len(rows) == 1:
        ns, kind, sid, data = rows[0]
        conn.execute(_INSERT_NEXT_SQL, (ns, kind, sid, dumps_data(data), now))
        return
    by_ns: dict[str, list[ChangeRow]] = {}
    for row in rows:
        by_ns.setdefault(row[0], []).append(row)
    for ns, group in by_ns.items():
        first = int(conn.execute(_LAST_SQL, (ns,)).fetchone()[0]) + 1
        conn.executemany(
            _INSERT_SQL,
            [
                (ns, first + i, kind, sid, dumps_data(data), now)
                for i, (_, kind, sid, data) in enumerate(group)
            ],
        )


def logged(
    fn: Callable[..., Any],
    describe: Describe,
    before: Callable[..., Any] | None,
    pending: list[ChangeRow] | None,
    chan: str | None = None,
) -> Callable[..., Any]:
    """``fn`` followed, in its transaction, by recording what ``describe`` says it did (into
    ``pending`` instead when a ``store.transaction()`` block records them at its end)."""

    def run(conn: sqlite3.Connection, *args: Any) -> Any:
        seen = before(conn, *args) if before is not None else None
        result = fn(conn, *args)
        rows = describe(args, result, seen)
        if rows:
            if pending is None:
                record(conn, rows)
            else:
                pending.extend(rows)
        return result

    return run


def nothing(conn: sqlite3.Connection, *args: Any) -> None:
    """A write with no rows of its own (``record_changes``: only its events)."""


def read(conn: sqlite3.Connection, namespace: str, since: int, limit: int) -> list[Change]:
    return [
        change_from_row(namespace, seq, kind, sid, data, to_datetime(us))
        for seq, kind, sid, data, us in conn.execute(_READ_SQL, (namespace, since, limit))
    ]


def latest_seq(conn: sqlite3.Connection, namespace: str) -> int:
    return int(conn.execute(_LAST_SQL, (namespace,)).fetchone()[0])


class Feed:
    """What :func:`mindstore.store._changes.follow` reads one namespace's feed with.

    ``open_reader()`` opens the follower's own connection (a read-only connection to the file,
    so ``PRAGMA data_version`` changes whenever any other connection — this process's store
    included — commits); for ``":memory:"`` ``shared`` runs a function on the store's own
    connection, and its ``total_changes`` stands in for the version.
    """

    def __init__(
        self,
        namespace: str,
        *,
        open_reader: Callable[[], sqlite3.Connection] | None,
        shared: Callable[[Callable[[sqlite3.Connection], Any]], Any] | None,
        poll_interval: float,
        is_open: Callable[[], bool],
    ) -> None:
        self.namespace = namespace
        self._open_reader = open_reader
        self._shared = shared
        self._poll = poll_interval
        self._is_open = is_open
        self._conn: sqlite3.Connection | None = None

    def _run(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        if not self._is_open():
            raise StoreError("the store was closed while following its change feed")
        try:
            if self._shared is not None:
                return self._shared(fn)
            if self._conn is None:
                assert self._open_reader is not None
                self._conn = self._open_reader()
            return fn(self._conn)
        except sqlite3.Error as e:
            raise StoreError(f"reading the change feed failed: {e}") from e

    def _version(self, conn: sqlite3.Connection) -> int:
        if self._shared is not None:
            return conn.total_changes
        return int(conn.execute("PRAGMA data_version").fetchone()[0])

    async def mark(self) -> int:
        return int(self._run(self._version))

    async def read(self, since: int, limit: int) -> list[Change]:
        result: list[Change] = self._run(lambda conn: read(conn, self.namespace, since, limit))
        return result

    async def latest(self) -> int:
        return int(self._run(lambda conn: latest_seq(conn, self.namespace)))

    async def wait(self, mark: int) -> None:
        """Return once another connection committed after ``mark`` was taken."""
        # A poll, not an event: the commit may come from another process.
        while await self.mark() == mark:  # noqa: ASYNC110
            await asyncio.sleep(self._poll)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
