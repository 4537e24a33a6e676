"""The one sqlite3 connection of a :class:`~mindstore.store.sqlite.SQLiteStore`.

Invariants:

* **Opening** happens on first use. The schema version (``PRAGMA user_version``) is read before
  anything can write to the file; a newer one is refused with
  :class:`~mindstore.errors.SchemaVersionError` and the file is untouched. Then WAL mode,
  ``synchronous``, ``foreign_keys=ON`` and ``busy_timeout`` are set and pending migrations run
  (:func:`.migrations.migrate`, one ``BEGIN IMMEDIATE`` transaction). A read-only open goes
  through a ``file:…?mode=ro`` URI with ``query_only`` on and never creates, migrates or writes
  a file; it refuses a missing, empty or older-schema file.
* **Autocommit connection, explicit transactions.** The connection runs with
  ``isolation_level=None``; a write is exactly one ``BEGIN IMMEDIATE … COMMIT`` (the write lock
  is taken up front, so a read-then-insert under it cannot race another writer). ``BEGIN`` is
  retried on ``SQLITE_BUSY`` until ``busy_timeout``. Any exception inside rolls back.
* **Grouped calls.** :meth:`SQLiteConnection.transaction` opens one transaction for a block of
  store calls of one task; each write call inside it is a ``SAVEPOINT`` (all-or-nothing on its
  own). A call from another task while the block is open is refused, not joined.
* **Errors.** ``sqlite3.Error`` becomes :class:`~mindstore.errors.StoreError` (the original on
  ``__cause__``) here and nowhere else.
* **Threads.** A ``threading.RLock`` serialises use of the connection; sqlite3 calls run inline
  on the calling thread (one connection serialises the calls anyway, so a worker-thread hop per
  call would only add latency).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal

from mindstore.errors import StoreError
from mindstore.store.sqlite.migrations import LATEST_VERSION, check_not_newer, migrate

__all__ = ["SQLiteConnection"]


class SQLiteConnection:
    """Open, transaction and error-translation plumbing for one database file.

    ``label`` names the store in error messages (its ``repr``).
    """

    def __init__(
        self,
        path: str,
        *,
        synchronous: Literal["NORMAL", "FULL"],
        busy_timeout: float,
        read_only: bool,
        label: str,
    ) -> None:
        self.path = path
        self.read_only = read_only
        self._synchronous = synchronous
        self._busy_timeout = busy_timeout
        self._label = label
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._lock = threading.RLock()
        # transaction(): the owner token of the open block (None: none) and the task's token.
        self._tx_owner: object | None = None
        self._tx_readonly = False
        self._tx_task: ContextVar[object | None] = ContextVar("mindstore_sqlite_tx", default=None)

    # ---- opening -----------------------------------------------------------------------------
    def _connect(self, database: str, *, uri: bool = False) -> sqlite3.Connection:
        return sqlite3.connect(
            database,
            uri=uri,
            timeout=self._busy_timeout,
            isolation_level=None,
            check_same_thread=False,
            cached_statements=256,
        )

    def _read_only_uri(self) -> str:
        if not os.path.isfile(self.path):
            raise StoreError(f"no mindstore database at {self.path!r} (the file does not exist)")
        uri = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro"
        if not any(os.path.exists(self.path + ext) for ext in ("-wal", "-shm")):
            # No other connection has the file open (WAL sidecars exist while one does): read
            # it as immutable, or SQLite would create -wal/-shm files next to it and leave them.
            # With sidecars present a normal read-only open creates nothing new and sees the
            # other process's committed writes.
            uri += "&immutable=1"
        return uri

    def _prepare_read_only(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            raise StoreError(
                f"no mindstore database at {self.path!r} (the file is empty or holds "
                "no mindstore schema)"
            )
        check_not_newer(self.path, version)
        if version < LATEST_VERSION:
            raise StoreError(
                f"{self.path!r} has schema version {version}, older than this mindstore's "
                f"{LATEST_VERSION}; open it once without read_only to upgrade it"
            )
        conn.execute("PRAGMA query_only=ON")
        conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout * 1000)}")

    def _prepare(self, conn: sqlite3.Connection) -> None:
        # Read the version before anything can write to the file (WAL switch, migrations).
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        check_not_newer(self.path, version)
        if self.path != ":memory:":
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout * 1000)}")
        if version < LATEST_VERSION:
            migrate(conn, self.path, self._begin)

    def _open(self) -> sqlite3.Connection:
        if self.read_only:
            conn = self._connect(self._read_only_uri(), uri=True)
        else:
            conn = self._connect(self.path)
        try:
            if self.read_only:
                self._prepare_read_only(conn)
            else:
                self._prepare(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _connection(self) -> sqlite3.Connection:
        """The open connection (opened now on first use); the caller holds the lock."""
        if self._closed:
            raise StoreError(f"{self._label} is closed; open a new store")
        conn = self._conn
        if conn is None:
            conn = self._conn = self._open()
        return conn

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the connection. Idempotent; later calls raise StoreError."""
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
            if conn is not None:
                try:
                    conn.close()
                except sqlite3.Error as e:  # pragma: no cover - close rarely fails
                    raise StoreError(f"closing {self.path!r} failed: {e}") from e

    # ---- transactions ------------------------------------------------------------------------
    def _begin(self, conn: sqlite3.Connection) -> None:
        deadline = time.monotonic() + self._busy_timeout
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as e:
                busy = getattr(e, "sqlite_errorcode", None) in (
                    sqlite3.SQLITE_BUSY,
                    sqlite3.SQLITE_LOCKED,
                ) or "locked" in str(e)
                if not busy or time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)

    def _check_writable(self) -> None:
        if self.read_only:
            raise StoreError(f"{self._label} was opened read_only; it cannot be written")

    @contextmanager
    def tx(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """Run a block on the connection: one ``BEGIN IMMEDIATE`` transaction when ``write``.

        Inside :meth:`transaction` (same task) the block joins that transaction instead; a
        write is then a savepoint, so the call stays all-or-nothing on its own.
        The single place where sqlite3 errors become StoreError; any exception rolls back.
        """
        with self._lock:
            try:
                if self._closed:
                    raise StoreError(f"{self._label} is closed; open a new store")
                if self._tx_owner is not None:
                    yield from self._in_transaction(write=write)
                    return
                conn = self._connection()
                if not write:
                    yield conn
                    return
                self._check_writable()
                self._begin(conn)
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as e:
                raise StoreError(f"SQLite error on {self.path!r}: {e}") from e

    def _refuse_other_task(self) -> StoreError:
        return StoreError(
            f"{self._label} is inside another task's transaction; do not await anything but "
            "this store's calls inside store.transaction()"
        )

    def _in_transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        conn = self._conn
        if self._tx_task.get() is not self._tx_owner or conn is None:
            # Only reachable when the owner of a transaction awaited something else inside it
            # and another task of this thread called the store: refuse rather than join.
            raise self._refuse_other_task()
        if not write:
            yield conn
            return
        if self._tx_readonly:
            raise StoreError("cannot write inside a read-only transaction (readonly=True)")
        conn.execute("SAVEPOINT mindstore_call")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK TO mindstore_call")
            conn.execute("RELEASE mindstore_call")
            raise
        conn.execute("RELEASE mindstore_call")

    @contextmanager
    def transaction(self, *, readonly: bool) -> Iterator[None]:
        """One transaction for a block of calls of this task (see the module docstring).

        A write block is one ``BEGIN IMMEDIATE`` (the write lock is held from the start);
        ``readonly`` begins a deferred transaction: one WAL snapshot, writers not blocked. The
        block holds the connection's lock, so other threads wait for it. Nested: joins.
        """
        if self._tx_owner is not None and self._tx_task.get() is self._tx_owner:
            if not readonly and self._tx_readonly:
                raise StoreError("cannot write inside a read-only transaction (readonly=True)")
            yield  # nested: join the enclosing transaction
            return
        owner = object()
        with self._lock:
            if self._tx_owner is not None:
                raise self._refuse_other_task()
            try:
                conn = self._connection()
                if readonly:
                    conn.execute("BEGIN")
                else:
                    self._check_writable()
                    self._begin(conn)
                token = self._tx_task.set(owner)
                self._tx_owner, self._tx_readonly = owner, readonly
                try:
                    yield
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                finally:
                    self._tx_owner, self._tx_readonly = None, False
                    self._tx_task.reset(token)
            except sqlite3.Error as e:
                raise StoreError(f"SQLite error on {self.path!r}: {e}") from e
