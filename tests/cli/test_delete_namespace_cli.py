"""``mindstore delete-namespace`` (issue 14.8): confirmation, output, other namespaces kept."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from click.testing import Result

from mindstore.store.base import SessionKey
from mindstore.store.sqlite import SQLiteStore

Invoke = Callable[..., Result]


def sessions_of(db: Path, namespace: str) -> list[str]:
    async def go() -> list[str]:
        async with SQLiteStore(db) as store:
            return [s.id for s in await store.list_sessions(namespace, limit=100)]

    return asyncio.run(go())


def test_delete_namespace_with_yes(run: Invoke, db: Path) -> None:
    assert sessions_of(db, "default") and sessions_of(db, "elsewhere")
    result = run("--db", db, "delete-namespace", "default", "--yes")
    assert result.exit_code == 0, result.output
    assert result.output == (
        "Deleted namespace 'default': 2 sessions, 6 messages, 3 compactions, 2 blocks, "
        "1 frozen prompt, 2 skill states.\n"
    )
    assert sessions_of(db, "default") == []
    assert sessions_of(db, "elsewhere") == ["chat"]

    async def history() -> int:
        async with SQLiteStore(db) as store:
            return len(
                await store.all_messages(SessionKey(namespace="elsewhere", session_id="chat"))
            )

    assert asyncio.run(history()) == 1
    again = run("--db", db, "delete-namespace", "default", "--yes")
    assert again.exit_code == 0
    assert again.output == "Namespace 'default' held nothing; nothing was deleted.\n"


def test_delete_namespace_asks_first(run: Invoke, db: Path) -> None:
    refused = run("--db", db, "delete-namespace", "default", input="n\n")
    assert refused.exit_code == 1
    assert "Delete namespace 'default' (2 sessions) and everything in it?" in refused.output
    assert "nothing deleted: confirm with 'y', or pass --yes" in refused.output
    assert sessions_of(db, "default")
    no_answer = run("--db", db, "delete-namespace", "default", input="")
    assert no_answer.exit_code == 1 and sessions_of(db, "default")
    confirmed = run("--db", db, "delete-namespace", "default", input="y\n")
    assert confirmed.exit_code == 0
    assert "Deleted namespace 'default'" in confirmed.output
    assert sessions_of(db, "default") == []


def test_delete_namespace_json_and_errors(run: Invoke, db: Path, tmp_path: Path) -> None:
    result = run("--db", db, "--json", "delete-namespace", "elsewhere", "--yes")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["namespace"] == "elsewhere"
    assert data["deleted"]["sessions"] == 1 and data["deleted"]["messages"] == 1
    assert sessions_of(db, "default")
    empty = run("--db", db, "delete-namespace", "", "--yes")
    assert empty.exit_code == 2 and "NAMESPACE must be a non-empty name" in empty.output
    missing = run("--db", tmp_path / "nope.db", "delete-namespace", "x", "--yes")
    assert missing.exit_code == 1 and "no mindstore database at" in missing.output
    assert not (tmp_path / "nope.db").exists()
