"""The store a benchmark runs on: SQLite in a temporary folder, or PostgreSQL in a throw-away
schema (``MINDSTORE_BENCH_POSTGRES_URL``, else ``MINDSTORE_TEST_POSTGRES_URL``) dropped after.
Imported by the bench scripts (run from this folder, so it is on ``sys.path``)."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

from mindstore.store.base import Store


def postgres_url() -> str:
    """The server to benchmark, or exit with how to name one."""
    url = os.environ.get("MINDSTORE_BENCH_POSTGRES_URL") or os.environ.get(
        "MINDSTORE_TEST_POSTGRES_URL"
    )
    if not url:
        sys.exit("set MINDSTORE_BENCH_POSTGRES_URL to benchmark PostgreSQL")
    return url


async def open_bench_store(backend: str, tmp: Path, **options: Any) -> tuple[Store, Any]:
    """A fresh store of ``backend`` and the token :func:`close_store` needs."""
    if backend == "sqlite":
        from mindstore.store.sqlite import SQLiteStore

        return SQLiteStore(tmp / "bench.db", **options), None
    from mindstore.store.postgres import PostgresStore

    url = postgres_url()
    schema = f"mindstore_bench_{uuid.uuid4().hex[:12]}"
    options = {"min_size": 1, "max_size": 4, **options}
    return await PostgresStore.open(url, schema=schema, **options), (url, schema)


async def close_store(store: Store, token: Any) -> None:
    """Close the store; drop its PostgreSQL schema."""
    await store.aclose()
    if token is not None:
        import psycopg

        url, schema = token
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
