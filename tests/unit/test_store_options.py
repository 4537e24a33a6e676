"""The stores' constructor options are checked before any I/O, with the same wording on both
backends (``store/_checks.py``); nothing is created or contacted for a bad option."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mindstore import PostgresStore, SQLiteStore
from mindstore.store._checks import check_choice

UNREACHABLE = "postgresql://nobody@127.0.0.1:1/none"  # never contacted: the checks come first


def test_check_choice_names_every_allowed_value() -> None:
    assert check_choice("FULL", "synchronous", ("NORMAL", "FULL")) == "FULL"
    with pytest.raises(ValueError, match=r"^mode must be 'a', 'b' or 'c', got 'd'$"):
        check_choice("d", "mode", ("a", "b", "c"))
    with pytest.raises(ValueError, match=r"^mode must be 'a' or 'b', got 1$"):
        check_choice(1, "mode", ("a", "b"))


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"synchronous": "OFF"}, ValueError, r"synchronous must be 'NORMAL' or 'FULL', got 'OFF'"),
        ({"busy_timeout": -1}, ValueError, "busy_timeout"),
        ({"busy_timeout": True}, ValueError, "busy_timeout"),
        ({"embedder": object()}, TypeError, "embedder"),
    ],
)
def test_sqlite_refuses_bad_options_without_touching_the_file(
    tmp_path: Path, options: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        SQLiteStore(tmp_path / "x.db", **options)
    assert list(tmp_path.iterdir()) == []


def test_sqlite_path_and_read_only_memory() -> None:
    with pytest.raises(TypeError, match="path"):
        SQLiteStore(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="read_only"):
        SQLiteStore(":memory:", read_only=True)


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        (
            {"vector_index": "ivf"},
            ValueError,
            r"vector_index must be 'auto', 'pgvector' or 'exact', got 'ivf'",
        ),
        ({"embedder": object()}, TypeError, "embedder"),
        ({"schema": ""}, ValueError, "schema"),
        ({"min_size": 2, "max_size": 1}, ValueError, "min_size"),
        ({"max_size": "4"}, TypeError, "integers"),
        ({"lock_timeout": 0}, ValueError, "lock_timeout must be a positive number"),
        ({"statement_timeout": -1.0}, ValueError, "statement_timeout"),
        ({"settings": {"work_mem": 64}}, TypeError, "settings"),
    ],
)
async def test_postgres_refuses_bad_options_before_connecting(
    options: dict[str, Any], error: type[Exception], match: str
) -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(error, match=match):
        await PostgresStore.open(UNREACHABLE, connect_timeout=1, **options)


async def test_postgres_dsn_must_be_a_string() -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(TypeError, match="dsn"):
        await PostgresStore.open(b"postgresql://x")  # type: ignore[arg-type]
