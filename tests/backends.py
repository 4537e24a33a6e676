"""Backend helpers for tests: open a fresh store of either backend and clean it up.

Import it as ``from backends import open_test_store`` (``tests/`` is on ``sys.path`` through the
root conftest). Kept out of ``conftest.py`` because several folders have a ``conftest.py`` and
``from conftest import …`` would pick whichever was imported first.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from mindstore.store.base import Store

POSTGRES_URL = os.environ.get("MINDSTORE_TEST_POSTGRES_URL", "")
REQUIRE_POSTGRES = os.environ.get("MINDSTORE_REQUIRE_POSTGRES") == "1"


def postgres_url_or_skip() -> str:
    """The test server's URL; skip (or fail when required) without one."""
    if not POSTGRES_URL:
        if REQUIRE_POSTGRES:
            pytest.fail("MINDSTORE_REQUIRE_POSTGRES=1 but MINDSTORE_TEST_POSTGRES_URL is unset")
        pytest.skip("set MINDSTORE_TEST_POSTGRES_URL to run the PostgreSQL backend tests")
    return POSTGRES_URL


def new_schema_name() -> str:
    return f"mindstore_t_{uuid.uuid4().hex[:16]}"


def database_location(backend: str, tmp_path: Path, token: Any) -> Any:
    """Where :func:`open_test_store` put the database, for a test that reads it through its
    own plain connection: the SQLite file's path, or PostgreSQL's ``(url, schema)``."""
    return tmp_path / "mindstore-test.db" if backend == "sqlite" else token


async def drop_schema(url: str, schema: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def open_test_store(backend: str, tmp_path: Path, **options: Any) -> tuple[Store, Any]:
    """Open a fresh store of ``backend``; return it and a cleanup token."""
    if backend == "sqlite":
        from mindstore.store.sqlite import SQLiteStore

        return SQLiteStore(tmp_path / "mindstore-test.db", **options), None
    url = postgres_url_or_skip()
    from mindstore.store.postgres import PostgresStore

    schema = new_schema_name()
    store = await PostgresStore.open(url, schema=schema, min_size=1, max_size=4, **options)
    return store, (url, schema)


async def close_test_store(store: Store, token: Any) -> None:
    await store.aclose()
    if token is not None:
        await drop_schema(*token)


async def reopen_test_store(backend: str, tmp_path: Path, token: Any) -> Store:
    """A second, independent store object (its own connections) on the database that
    :func:`open_test_store` opened — another worker of the same application."""
    if backend == "sqlite":
        from mindstore.store.sqlite import SQLiteStore

        return SQLiteStore(tmp_path / "mindstore-test.db")
    from mindstore.store.postgres import PostgresStore

    url, schema = token
    return await PostgresStore.open(url, schema=schema, min_size=1, max_size=2)
