"""Shared fixtures. ``store`` is parametrised over every backend (the contract suite's basis).

PostgreSQL: ``MINDSTORE_TEST_POSTGRES_URL`` names a server; each test gets its own schema,
dropped afterwards, so runs cannot interfere. Without the variable the PostgreSQL cases skip
with a reason — unless ``MINDSTORE_REQUIRE_POSTGRES=1`` (CI), where they fail.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backends import close_test_store, open_test_store
from mindstore.store.base import Store


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--soak",
        action="store_true",
        default=False,
        help="run the reliability tests long (thousands of kills) instead of the CI size",
    )


BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def store(backend: str, tmp_path: Path) -> AsyncIterator[Store]:
    s, token = await open_test_store(backend, tmp_path)
    try:
        yield s
    finally:
        await close_test_store(s, token)
