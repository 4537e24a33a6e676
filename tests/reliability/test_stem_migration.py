"""The English-stemmer migrations (SQLite m011, PostgreSQL m012) rebuild the lexical index of a
store written before them: every key changed (``deploi`` → ``deploy``), so an index left as it
was would miss what it holds."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from backends import drop_schema, new_schema_name, postgres_url_or_skip
from mindstore.search import parse_query
from mindstore.session import Session


def _msg(mid: str, text: str) -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}


TEXTS = [("m1", "We are deploying the release"), ("m2", "The deployment failed"), ("m3", "Lunch")]


async def test_sqlite_file_of_version_10_is_reindexed_on_open(tmp_path: Path) -> None:
    from mindstore.store.sqlite import SQLiteStore
    from mindstore.store.sqlite.migrations import LATEST_VERSION

    path = tmp_path / "old.db"
    async with SQLiteStore(path) as store:
        s = Session.create(store, "s")
        for mid, text in TEXTS:
            await s.append_message(_msg(mid, text))
    with sqlite3.connect(path) as conn:  # as a version-10 file: keys this stemmer never makes
        for table in ("search_terms", "search_pending", "search_stats"):
            conn.execute(f"DELETE FROM {table}")
        conn.execute("DROP TABLE changes")  # m012's, which a version-10 file does not have
        conn.execute("PRAGMA user_version = 10")
    async with SQLiteStore(path) as store:
        assert (await store.stats())["schema_version"] == LATEST_VERSION
        hits = await store.search("default", parse_query("deploy"))
        assert sorted(h.message_id for h in hits[:2]) == ["m1", "m2"]  # m3 via its parent


async def test_postgres_schema_of_version_11_is_reindexed_on_open() -> None:
    import psycopg

    from mindstore.store.postgres import PostgresStore
    from mindstore.store.postgres.migrations import LATEST_VERSION

    url = postgres_url_or_skip()
    schema = new_schema_name()
    try:
        store = await PostgresStore.open(url, schema=schema, min_size=1, max_size=1)
        try:
            s = Session.create(store, "s")
            for mid, text in TEXTS:
                await s.append_message(_msg(mid, text))
        finally:
            await store.aclose()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f'SET search_path TO "{schema}"')
            for table in ("search_terms", "search_docs", "search_stats"):  # keys unknown now
                await conn.execute(f"DELETE FROM {table}")
            await conn.execute("DROP TABLE changes, change_counters")  # m013's
            await conn.execute("UPDATE mindstore_schema SET version = 11")
        store = await PostgresStore.open(url, schema=schema, min_size=1, max_size=1)
        try:
            assert (await store.stats())["schema_version"] == LATEST_VERSION
            hits = await store.search("default", parse_query("deploy"))
            assert sorted(h.message_id for h in hits[:2]) == ["m1", "m2"]  # m3 via its parent
        finally:
            await store.aclose()
    finally:
        await drop_schema(url, schema)
