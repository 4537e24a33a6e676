"""Crash consistency of fork, compact_and_split and import: a writer repeating one of them is
SIGKILLed at random instants, ≥100 times per operation and backend (issue 13, items 2 and 4).

See ``crash_ops.py`` for what is checked after every kill. ``--soak`` (or
``MINDSTORE_CRASH_KILLS``) raises the number of kills.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from crash_ops import OPS, run_op_crash_rounds

from backends import drop_schema, new_schema_name, postgres_url_or_skip


def _kills(request: pytest.FixtureRequest) -> int:
    if request.config.getoption("--soak", default=False):
        return 1000
    return int(os.environ.get("MINDSTORE_CRASH_KILLS", "100"))


@pytest.mark.slow
@pytest.mark.parametrize("op", OPS)
async def test_sqlite_operation_survives_sigkill(
    op: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    kills = _kills(request)
    report = await run_op_crash_rounds(op, "sqlite", str(tmp_path / "ops.db"), kills, tmp_path)
    assert report.problems == [], "\n".join(report.problems)
    assert report.kills >= kills
    assert report.acked_ops >= kills // 4  # the writers got operations done between kills
    assert report.in_flight >= kills // 4, report  # many kills landed inside an operation


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("op", OPS)
async def test_postgres_operation_survives_sigkill(
    op: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = postgres_url_or_skip()
    kills = _kills(request)
    schema = new_schema_name()
    try:
        report = await run_op_crash_rounds(op, "postgres", f"{url}|{schema}", kills, tmp_path)
    finally:
        await drop_schema(url, schema)
    assert report.problems == [], "\n".join(report.problems)
    assert report.kills >= kills
    assert report.acked_ops >= kills // 4
    assert report.in_flight >= kills // 4, report
