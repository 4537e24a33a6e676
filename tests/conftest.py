"""Shared fixtures. ``store`` is parametrised over every backend (the contract suite's basis).

PostgreSQL: ``MINDSTORE_TEST_POSTGRES_URL`` names a server; each test gets its own schema,
dropped afterwards, so runs cannot interfere. Without the variable the PostgreSQL cases skip
with a reason — unless ``MINDSTORE_REQUIRE_POSTGRES=1`` (CI), where they fail.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backends import Reopen, Storage
from mindstore.store.base import Store


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--soak",
        action="store_true",
        default=False,
        help="run the reliability tests long (thousands of kills) instead of the CI size",
    )


BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]

#: The text every PostgreSQL test skips with when no server is configured (backends.py).
POSTGRES_SKIP_HINT = "MINDSTORE_TEST_POSTGRES_URL"


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Skips in a few lines instead of one per test (``addopts`` leaves ``s`` out of ``-r``):
    the PostgreSQL ones — hundreds on a machine without a server — as one line saying how to
    run them, every other reason once with its count."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if r.skipped]
    if not skipped:
        return
    reasons: dict[str, int] = {}
    postgres = 0
    for report in skipped:
        reason = _skip_reason(report)
        if POSTGRES_SKIP_HINT in reason:
            postgres += 1
        else:
            reasons[reason] = reasons.get(reason, 0) + 1
    terminalreporter.write_sep("-", "skipped")
    if postgres:
        terminalreporter.write_line(
            f"{postgres} PostgreSQL tests skipped: set {POSTGRES_SKIP_HINT}="
            "postgresql://USER@HOST:5432/DB to run them (each test uses its own schema)"
        )
    for reason, count in sorted(reasons.items()):
        terminalreporter.write_line(f"{count} skipped: {reason}")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def storage(backend: str, tmp_path: Path) -> AsyncIterator[Storage]:
    """Where the ``store`` fixture's data lives (a SQLite file or a PostgreSQL schema, dropped
    afterwards)."""
    where = Storage.new(backend, tmp_path)
    try:
        yield where
    finally:
        await where.drop()


@pytest.fixture
async def store(storage: Storage) -> AsyncIterator[Store]:
    s = await storage.open()
    try:
        yield s
    finally:
        await s.aclose()


@pytest.fixture
async def reopen(storage: Storage) -> AsyncIterator[Reopen]:
    """``await reopen(**options)``: another, independent store object on the ``store``
    fixture's data (what a second worker or a restarted process opens), with extra options
    (e.g. ``embedder=...``); every store it opened is closed after the test."""
    opened: list[Store] = []

    async def open_another(**options: object) -> Store:
        s = await storage.open(**options)
        opened.append(s)
        return s

    try:
        yield open_another
    finally:
        for s in opened:
            await s.aclose()
