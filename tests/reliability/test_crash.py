"""Crash consistency: a writer SIGKILLed at random instants, ≥100 times per backend.

See ``crash_harness.py`` for the invariants checked after every kill. ``--soak`` (or
``MINDSTORE_CRASH_KILLS``) raises the number of kills.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from crash_harness import run_crash_rounds

from backends import drop_schema, new_schema_name, postgres_url_or_skip


def _kills(request: pytest.FixtureRequest) -> int:
    if request.config.getoption("--soak", default=False):
        return 2000
    return int(os.environ.get("MINDSTORE_CRASH_KILLS", "100"))


@pytest.mark.slow
async def test_sqlite_survives_sigkill(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    from mindstore.store.sqlite import SQLiteStore

    path = str(tmp_path / "crash.db")

    async def open_store() -> Any:
        return SQLiteStore(path)

    report = await run_crash_rounds("sqlite", path, open_store, _kills(request))
    assert report.problems == [], "\n".join(report.problems)
    assert report.kills >= _kills(request)
    assert report.acked_ops > report.kills  # the writer made progress between kills


@pytest.mark.slow
@pytest.mark.postgres
async def test_postgres_survives_sigkill(request: pytest.FixtureRequest) -> None:
    url = postgres_url_or_skip()
    from mindstore.store.postgres import PostgresStore

    schema = new_schema_name()

    async def open_store() -> Any:
        return await PostgresStore.open(url, schema=schema, min_size=1, max_size=2)

    try:
        report = await run_crash_rounds("postgres", f"{url}|{schema}", open_store, _kills(request))
    finally:
        await drop_schema(url, schema)
    assert report.problems == [], "\n".join(report.problems)
    assert report.kills >= _kills(request)
    assert report.acked_ops > report.kills
