"""Read commands never create or change a file (issue 14 item 2): they open SQLite read-only
(``SQLiteStore(path, read_only=True)``). An empty or missing file is "no mindstore database"."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from mindstore.errors import StoreError
from mindstore.store.base import ScopeKey, SessionKey
from mindstore.store.sqlite import SQLiteStore

Invoke = Callable[..., Result]

READ_COMMANDS = [
    ["sessions"],
    ["history", "chat"],
    ["history", "chat", "--raw"],
    ["tree", "chat"],
    ["search", "deploy"],
    ["prompt", "chat"],
    ["blocks", "chat"],
    ["export", "chat"],
    ["stats"],
]


def _files(folder: Path) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("args", READ_COMMANDS, ids=lambda a: " ".join(a))
def test_read_commands_change_no_file(run: Invoke, db: Path, args: list[str]) -> None:
    before = _files(db.parent)
    result = run("--db", db, *args)
    assert result.exit_code == 0, result.stderr
    assert _files(db.parent) == before  # no -wal/-shm left behind, not a byte changed


@pytest.mark.parametrize("args", READ_COMMANDS, ids=lambda a: " ".join(a))
def test_an_empty_file_is_no_mindstore_database(
    run: Invoke, tmp_path: Path, args: list[str]
) -> None:
    zero = tmp_path / "zero.db"
    zero.touch()
    result = run("--db", zero, *args)
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"Error: no mindstore database at '{zero}'"), line
    assert zero.stat().st_size == 0
    assert [p.name for p in tmp_path.iterdir()] == ["zero.db"]


@pytest.mark.parametrize("args", READ_COMMANDS, ids=lambda a: " ".join(a))
def test_a_missing_file_is_not_created(run: Invoke, tmp_path: Path, args: list[str]) -> None:
    result = run("--db", tmp_path / "absent.db", *args)
    assert result.exit_code == 1
    assert "no mindstore database at" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_reads_see_a_writer_that_has_the_file_open(run: Invoke, db: Path) -> None:
    """While another connection has the file open (WAL sidecars exist) the read-only open
    sees the writes committed meanwhile."""
    other = sqlite3.connect(db)  # another process's open connection keeps the -wal/-shm files
    try:
        other.execute("SELECT count(*) FROM sessions").fetchall()

        async def write() -> None:
            async with SQLiteStore(db) as writer:
                key = ScopeKey(namespace="default", session_id="chat", label="x")
                await writer.set_block(key, "y")

        asyncio.run(write())
        assert Path(str(db) + "-wal").exists()
        result = run("--db", db, "--json", "blocks", "chat")
        assert result.exit_code == 0, result.stderr
        assert "x" in {b["label"] for b in json.loads(result.stdout)}
    finally:
        other.close()


def test_read_only_store_refuses_writes_and_keeps_the_file(db: Path) -> None:
    before = db.read_bytes()

    async def go() -> None:
        async with SQLiteStore(db, read_only=True) as store:
            assert store.read_only
            key = SessionKey(namespace="default", session_id="chat")
            assert len(await store.all_messages(key)) == 5
            with pytest.raises(StoreError, match="read_only"):
                await store.put_prompt(key, "new", overwrite=True)
            with pytest.raises(StoreError, match="read_only"):
                await store.delete_session(key)

    asyncio.run(go())
    assert db.read_bytes() == before
    assert sorted(p.name for p in db.parent.iterdir()) == [db.name]


def test_read_only_refuses_an_older_schema_without_migrating(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    with sqlite3.connect(old) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.execute("PRAGMA user_version=1")
    conn.close()
    before = old.read_bytes()

    async def go() -> None:
        with pytest.raises(StoreError, match="older"):
            async with SQLiteStore(old, read_only=True):
                pass

    asyncio.run(go())
    assert old.read_bytes() == before


def test_read_only_needs_a_file() -> None:
    with pytest.raises(ValueError, match="memory"):
        SQLiteStore(":memory:", read_only=True)


@pytest.mark.postgres
async def test_postgres_read_only_creates_nothing_and_refuses_writes() -> None:
    import psycopg

    from backends import drop_schema, new_schema_name, postgres_url_or_skip
    from mindstore.store.postgres import PostgresStore

    url = postgres_url_or_skip()
    schema = new_schema_name()

    async def schema_exists() -> bool:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            cur = await conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
            return await cur.fetchone() is not None

    try:
        with pytest.raises(StoreError, match="no mindstore database"):
            await PostgresStore.open(url, schema=schema, read_only=True)
        assert not await schema_exists()
        key = SessionKey(namespace="ns", session_id="s")
        async with await PostgresStore.open(url, schema=schema) as writer:
            await writer.create_session(key, name="kept")
        async with await PostgresStore.open(url, schema=schema, read_only=True) as reader:
            info = await reader.get_session(key)
            assert info is not None and info.name == "kept"
            with pytest.raises(StoreError):
                await reader.update_session(key, name="changed")
            with pytest.raises(StoreError):
                await reader.put_prompt(key, "p", overwrite=True)
            assert (await reader.get_session(key)).name == "kept"  # type: ignore[union-attr]
    finally:
        await drop_schema(url, schema)


@pytest.mark.postgres
async def test_postgres_reindex_needs_a_mindstore_schema(run: Invoke) -> None:
    """``reindex`` on a PostgreSQL schema without mindstore's tables (empty, or missing) says
    there is no mindstore database and creates nothing, as ``search`` does."""
    import psycopg

    from backends import drop_schema, new_schema_name, postgres_url_or_skip

    url = postgres_url_or_skip()
    empty, missing = new_schema_name(), new_schema_name()

    async def tables(schema: str) -> int:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (schema,)
            )
            row = await cur.fetchone()
            return int(row[0]) if row else 0

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f'CREATE SCHEMA "{empty}"')
    sep = "&" if "?" in url else "?"
    try:
        for schema in (empty, missing):
            db = f"{url}{sep}options=-csearch_path%3D{schema}"
            for args in (("reindex",), ("search", "x")):
                result = await asyncio.to_thread(run, "--db", db, *args)
                assert result.exit_code == 1, result.output
                assert "no mindstore database" in result.stderr
        assert await tables(empty) == 0 and await tables(missing) == 0
    finally:
        await drop_schema(url, empty)
        await drop_schema(url, missing)
