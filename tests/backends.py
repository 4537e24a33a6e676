"""Backend helpers for tests: open a fresh store of either backend and clean it up.

Import it as ``from backends import open_test_store`` (``tests/`` is on ``sys.path`` through the
root conftest). Kept out of ``conftest.py`` because several folders have a ``conftest.py`` and
``from conftest import …`` would pick whichever was imported first.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Awaitable, Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mindstore.store.base import Store

POSTGRES_URL = os.environ.get("MINDSTORE_TEST_POSTGRES_URL", "")
REQUIRE_POSTGRES = os.environ.get("MINDSTORE_REQUIRE_POSTGRES") == "1"
SQLITE_FILE = "mindstore-test.db"  # the file open_test_store opens under a test's tmp_path


def postgres_url_or_skip() -> str:
    """The test server's URL; skip (or fail when required) without one."""
    if not POSTGRES_URL:
        if REQUIRE_POSTGRES:
            pytest.fail("MINDSTORE_REQUIRE_POSTGRES=1 but MINDSTORE_TEST_POSTGRES_URL is unset")
        pytest.skip("set MINDSTORE_TEST_POSTGRES_URL to run the PostgreSQL backend tests")
    return POSTGRES_URL


def new_schema_name() -> str:
    return f"mindstore_t_{uuid.uuid4().hex[:16]}"


async def drop_schema(url: str, schema: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def open_test_store(backend: str, tmp_path: Path, **options: Any) -> tuple[Store, Any]:
    """Open a fresh store of ``backend``; return it and a cleanup token."""
    if backend == "sqlite":
        from mindstore.store.sqlite import SQLiteStore

        return SQLiteStore(tmp_path / SQLITE_FILE, **options), None
    url = postgres_url_or_skip()
    from mindstore.store.postgres import PostgresStore

    schema = new_schema_name()
    store = await PostgresStore.open(url, schema=schema, min_size=1, max_size=4, **options)
    return store, (url, schema)


def database_location(backend: str, tmp_path: Path, token: Any) -> Any:
    """Where :func:`open_test_store` put the database, for a test that reads it through its
    own plain connection: the SQLite file's path, or PostgreSQL's ``(url, schema)``."""
    return tmp_path / SQLITE_FILE if backend == "sqlite" else token


async def close_test_store(store: Store, token: Any) -> None:
    await store.aclose()
    if token is not None:
        await drop_schema(*token)


async def reopen_test_store(backend: str, tmp_path: Path, token: Any) -> Store:
    """A second, independent store object (its own connections) on the database that
    :func:`open_test_store` opened — another worker of the same application."""
    if backend == "sqlite":
        from mindstore.store.sqlite import SQLiteStore

        return SQLiteStore(tmp_path / SQLITE_FILE)
    from mindstore.store.postgres import PostgresStore

    url, schema = token
    return await PostgresStore.open(url, schema=schema, min_size=1, max_size=2)


Reopen = Callable[..., Awaitable[Store]]
"""The type of the ``reopen`` fixture (``tests/conftest.py``)."""


@dataclass(frozen=True)
class Storage:
    """Where a test's data lives — a SQLite file or a PostgreSQL schema — and how to open a
    store object on it, backend-neutral: ``await storage.open(**options)`` is another worker of
    the same application (its own connections, the same data). Picklable, so a subprocess can
    open it too. ``options`` are given to every open (the pgvector backend requires its index).
    """

    backend: str
    path: Path | None = None
    url: str | None = None
    schema: str | None = None
    options: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def new(cls, backend: str, tmp_path: Path) -> Storage:
        """Fresh storage for ``backend`` (``sqlite``, ``postgres``, ``pgvector``); skips (or
        fails when required) a PostgreSQL backend without its server. Nothing is created until
        the first :meth:`open`."""
        if backend == "sqlite":
            return cls(backend, path=tmp_path / SQLITE_FILE)
        if backend == "postgres":
            return cls(backend, url=postgres_url_or_skip(), schema=new_schema_name())
        if backend == "pgvector":
            from pgvector_server import pgvector_url, why_not

            url = pgvector_url()
            if url is None:
                if REQUIRE_POSTGRES:
                    pytest.fail(f"MINDSTORE_REQUIRE_POSTGRES=1 but no pgvector server: {why_not()}")
                pytest.skip(f"no PostgreSQL with pgvector: {why_not()}")
            return cls(
                backend, url=url, schema=new_schema_name(), options=(("vector_index", "pgvector"),)
            )
        raise ValueError(f"unknown test backend {backend!r}")

    @property
    def url_string(self) -> str:
        """The :func:`mindstore.open_store` URL of this storage (open it with
        :meth:`open_options`)."""
        if self.path is not None:
            return f"sqlite:///{self.path}"
        assert self.url is not None
        return self.url

    def open_options(self, **options: Any) -> dict[str, Any]:
        """The options :func:`mindstore.open_store` needs for this storage, plus ``options``."""
        merged = dict(self.options)
        if self.path is None:
            merged.update(schema=self.schema, min_size=1, max_size=4)
        merged.update(options)
        return merged

    async def open(self, **options: Any) -> Store:
        """A new store object on this storage (the caller closes it)."""
        from mindstore import open_store

        return await open_store(self.url_string, **self.open_options(**options))

    def open_sync(self, **options: Any) -> Any:
        """A new :mod:`mindstore.sync` store on this storage (the caller closes it)."""
        from mindstore import sync

        return sync.open_store(self.url_string, **self.open_options(**options))

    @property
    def token(self) -> Any:
        """The cleanup token of :func:`open_test_store` (None, or ``(url, schema)``)."""
        return None if self.url is None else (self.url, self.schema)

    # ---- direct inspection (not through a store), for "nothing left behind" checks ----------
    async def table_counts(self) -> dict[str, int]:
        """Row count of every table of this storage."""
        counts: dict[str, int] = {}
        if self.path is not None:
            with closing(sqlite3.connect(self.path)) as conn:
                for table in _sqlite_tables(conn):
                    counts[table] = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
            return counts
        import psycopg

        assert self.url is not None
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            for table in await _pg_tables(conn, self.schema):
                cur = await conn.execute(f'SELECT count(*) FROM "{self.schema}"."{table}"')
                row = await cur.fetchone()
                assert row is not None
                counts[table] = int(row[0])
        return counts

    async def rows_matching(self, value: str, marker: str) -> dict[str, int]:
        """Per table, the rows where any column equals ``value`` or contains ``marker``
        (tables without such rows are left out)."""
        found: dict[str, int] = {}
        args = [value, f"%{marker}%"]
        if self.path is not None:
            with closing(sqlite3.connect(self.path)) as conn:
                for table in _sqlite_tables(conn):
                    cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
                    where = " OR ".join(
                        f'CAST("{c}" AS TEXT) = ? OR CAST("{c}" AS TEXT) LIKE ?' for c in cols
                    )
                    sql = f'SELECT count(*) FROM "{table}" WHERE {where}'
                    n = conn.execute(sql, args * len(cols)).fetchone()[0]
                    if n:
                        found[table] = n
            return found
        import psycopg

        assert self.url is not None
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            for table in await _pg_tables(conn, self.schema):
                cur = await conn.execute(
                    "SELECT column_name FROM information_schema.columns"
                    " WHERE table_schema = %s AND table_name = %s",
                    (self.schema, table),
                )
                cols = [r[0] for r in await cur.fetchall()]
                where = " OR ".join(f'"{c}"::text = %s OR "{c}"::text LIKE %s' for c in cols)
                cur = await conn.execute(
                    f'SELECT count(*) FROM "{self.schema}"."{table}" WHERE {where}',
                    args * len(cols),
                )
                row = await cur.fetchone()
                if row is not None and row[0]:
                    found[table] = int(row[0])
        return found

    async def drop(self) -> None:
        """Remove what the tests wrote (PostgreSQL: the schema; SQLite: tmp_path does)."""
        if self.url is not None and self.schema is not None:
            await drop_schema(self.url, self.schema)


def _sqlite_tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return [name for (name,) in rows if not name.startswith("sqlite_")]


async def _pg_tables(conn: Any, schema: str | None) -> list[str]:
    cur = await conn.execute(
        "SELECT table_name FROM information_schema.tables"
        " WHERE table_schema = %s AND table_type = 'BASE TABLE' ORDER BY table_name",
        (schema,),
    )
    return [r[0] for r in await cur.fetchall()]


async def dump_tables(backend: str, location: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table (as tuples of cells), keyed by table name, read through a
    plain connection of the test's own (``location``: see ``backends.database_location``)."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    if backend == "sqlite":
        import sqlite3

        conn = sqlite3.connect(location)
        try:
            names = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            ]
            for name in names:
                out[name] = [tuple(r) for r in conn.execute(f'SELECT * FROM "{name}"')]
        finally:
            conn.close()
        return out
    import psycopg

    url, schema = location
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (schema,),
        )
        names = [r[0] for r in await cur.fetchall()]
        for name in names:
            # the row as text: every column, tsvectors included, in one comparable string
            cur = await conn.execute(f'SELECT t::text FROM "{schema}"."{name}" t')
            out[name] = [tuple(r) for r in await cur.fetchall()]
    return out


# Each (coll, doc)'s term rows (kind 0), and as search_docs holds them: one row of arrays.
_TERM_ROWS = "SELECT coll, doc, part, dl, key, tf, ctx FROM search_terms WHERE kind = 0"
_DOC_ROWS = (
    "SELECT coll, doc, part, dl, u.key, u.tf, u.ctx FROM search_docs,"
    " LATERAL unnest(keys, tfs, ctxs) AS u(key, tf, ctx)"
)
# the statistics, and as the documents add up (one search_docs row per indexed document)
_STATS = "SELECT coll, part, docs, length FROM search_stats WHERE docs > 0"
_DOC_STATS = "SELECT coll, part, count(*), sum(dl::float8) FROM search_docs GROUP BY coll, part"


async def search_docs_mismatch(conn: Any) -> list[tuple[Any, ...]]:
    """Rows in one of search_terms (kind 0) and search_docs but not the other (both ways),
    search_docs rows whose arrays differ in length or are empty, and statistics that are not
    the sums of the documents (both ways)."""
    out: list[tuple[Any, ...]] = []
    for sql in (
        f"{_TERM_ROWS} EXCEPT ALL {_DOC_ROWS}",
        f"{_DOC_ROWS} EXCEPT ALL {_TERM_ROWS}",
        "SELECT coll, doc FROM search_docs WHERE cardinality(keys) = 0"
        " OR cardinality(keys) <> cardinality(tfs) OR cardinality(keys) <> cardinality(ctxs)",
        f"{_STATS} EXCEPT ALL {_DOC_STATS}",
        f"{_DOC_STATS} EXCEPT ALL {_STATS}",
    ):
        cur = await conn.execute(sql)
        out += await cur.fetchall()
    return out


def tool_message(mid: str, text: str, tool: str | None = None) -> dict[str, object]:
    """An assistant message with ``text``, and a tool call whose input is ``tool`` if given."""
    parts: list[dict[str, object]] = [{"type": "text", "text": text}]
    if tool is not None:
        parts.append(
            {
                "type": "tool-call",
                "toolCallId": f"c-{mid}",
                "toolName": "run",
                "state": "output-available",
                "input": {"cmd": tool},
                "output": "ok",
            }
        )
    return {"id": mid, "role": "assistant", "parts": parts}
