"""Fixtures for the ``mindstore`` command tests: a populated SQLite file and a CLI runner.

The CLI runs its own event loop (``asyncio.run``), so these tests are synchronous and build
their databases with ``asyncio.run`` too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from mindstore.cli import cli
from mindstore.session import Session
from mindstore.store.base import ScopeKey, SessionKey
from mindstore.store.sqlite import SQLiteStore


def text(role: str, body: str, mid: str) -> dict[str, Any]:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": body}]}


async def populate(path: Path) -> None:
    """Session "chat" (namespace default): u1 → a1 → u2 → {a2, a2b}; a tool call; blocks;
    a frozen prompt; overlays (one superseded, one reverted); skill state; usage. Session
    "other" for cross-session search; namespace "elsewhere" must never show up."""
    async with SQLiteStore(path) as store:
        key = SessionKey(namespace="default", session_id="chat")
        await store.create_session(key, name="Deploy chat", model="test-model", metadata={"a": 1})
        s = Session.create(store, "chat")
        await s.append_message(text("user", "The deployment failed last night", "u1"))
        await s.append_message(
            {
                "id": "a1",
                "role": "assistant",
                "metadata": {"model": "x"},
                "parts": [
                    {
                        "type": "tool-get_status",
                        "toolCallId": "c1",
                        "state": "output-available",
                        "input": {"env": "prod"},
                        "output": {"status": "red"},
                    },
                    {"type": "text", "text": "Deploying v42 failed in the migration step"},
                ],
            }
        )
        await s.append_message(text("user", "Roll back please", "u2"))
        await s.append_message(text("assistant", "Rolled back to v41 [done]", "a2"))
        await s.append_message(text("assistant", "Rollback complete: orders table", "a2b"), "u2")
        first = await store.add_compaction(key, summary="old summary", from_id="a1", to_id="u2")
        await store.add_compaction(
            key,
            summary="User reported a failed deploy.",
            from_id="u1",
            to_id="u2",
            supersedes=[first.id],
        )
        reverted = await store.add_compaction(key, summary="reverted one", from_id="u1", to_id="a1")
        await store.revert_compaction(key, reverted.id)
        await store.set_block(
            ScopeKey(namespace="default", session_id="chat", label="memory"), "Likes tea"
        )
        await store.set_block(
            ScopeKey(namespace="default", session_id=None, label="profile"), "Name: Ada"
        )
        await store.set_skill_loaded(key, "skills", "runbook", True)
        await store.set_skill_loaded(key, "skills", "runbook", False)
        await store.set_skill_loaded(key, "skills", "api", True)
        await store.put_prompt(key, "SYSTEM PROMPT\nline two", overwrite=True)
        await store.add_usage(key, 100, 20, 0.5)
        other = Session.create(store, "other")
        await other.append_message(text("user", "Capacity planning for the orders table", "o1"))
        hidden = Session.create(store, "chat", namespace="elsewhere")
        await hidden.append_message(text("user", "secret deployment orders table", "h1"))


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "cli.db"
    asyncio.run(populate(path))
    return path


Invoke = Callable[..., Result]


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch) -> Invoke:
    monkeypatch.delenv("MINDSTORE_DB", raising=False)
    monkeypatch.delenv("MINDSTORE_NAMESPACE", raising=False)
    runner = CliRunner()

    def invoke(*args: Any, input: str | None = None) -> Result:
        return runner.invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)

    return invoke
