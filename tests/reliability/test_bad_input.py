"""Bad input: a catalogue of hostile inputs, each answered by a typed error with a useful
message and the store unchanged — verified by a snapshot of every table (FTS shadow tables
included) before and after, on SQLite and PostgreSQL.

Also: inputs that look hostile but are valid (SQL fragments, quotes and control characters in
names, FTS/tsquery syntax in searches, NUL in text) work and touch nothing else; a 50 MB message
is shrunk by the row-size limit, never rejected.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from backends import close_test_store, open_test_store
from mindstore import Session, SessionManager, StaticProvider
from mindstore.context.providers import FileSkillProvider
from mindstore.errors import (
    BlockNotFoundError,
    CompactionError,
    InvalidKeyError,
    InvalidMessageError,
    MessageNotFoundError,
    MindstoreError,
    ReadOnlyBlockError,
    SessionNotFoundError,
    TokenBudgetError,
)

SQL = "x'); DROP TABLE messages; --"


def deep(n: int) -> Any:
    v: Any = "bottom"
    for _ in range(n):
        v = {"d": v}
    return v


def bomb() -> dict[str, Any]:
    d: dict[str, Any] = {}
    d["self"] = d
    return d


def text(mid: str | None, body: str = "hello") -> dict[str, Any]:
    m: dict[str, Any] = {"role": "user", "parts": [{"type": "text", "text": body}]}
    if mid is not None:
        m["id"] = mid
    return m


BAD_MESSAGES: list[tuple[str, Any]] = [
    ("None", None),
    ("a string", "hello"),
    ("an int", 42),
    ("a list", [text("x")]),
    ("no role", {"id": "x", "parts": []}),
    ("unknown role", {"id": "x", "role": "robot", "parts": []}),
    ("no parts", {"id": "x", "role": "user"}),
    ("parts not a list", {"id": "x", "role": "user", "parts": "text"}),
    ("part not an object", {"id": "x", "role": "user", "parts": ["hi"]}),
    ("part without type", {"id": "x", "role": "user", "parts": [{"text": "hi"}]}),
    ("text not a string", {"id": "x", "role": "user", "parts": [{"type": "text", "text": 1}]}),
    (
        "tool part without toolCallId",
        {"id": "x", "role": "assistant", "parts": [{"type": "tool-x", "state": "input-available"}]},
    ),
    (
        "dynamic tool without toolName",
        {"id": "x", "role": "assistant", "parts": [{"type": "dynamic-tool", "toolCallId": "c"}]},
    ),
    ("metadata not an object", {**text("x"), "metadata": [1, 2]}),
    ("id of 10,000 characters", text("i" * 10_000)),
    ("empty id", text("")),
    ("id not a string", {**text(None), "id": 7}),
    ("NUL in id", text("a\x00b")),
    ("lone surrogate in text", text("x", "bad \ud800 text")),
    ("lone surrogate in a key", {**text("x"), "metadata": {"\udfff": 1}}),
    ("NaN", {**text("x"), "metadata": {"score": math.nan}}),
    ("Infinity", {**text("x"), "metadata": {"score": math.inf}}),
    ("100-level-deep JSON", {**text("x"), "metadata": deep(100)}),
    ("recursion bomb", {**text("x"), "metadata": bomb()}),
    ("bytes value", {**text("x"), "metadata": {"b": b"\x00\x01"}}),
    ("set value", {**text("x"), "metadata": {"s": {1, 2}}}),
    ("non-string key", {**text("x"), "metadata": {1: "one"}}),
]

HOSTILE_QUERIES = [
    '"',
    '""',
    "*",
    "**",
    "NEAR(",
    "NEAR(a b, 2)",
    "-",
    "a -b",
    ":",
    "text:hello",
    "(",
    "((a)",
    "a OR b AND NOT c",
    "'; DROP TABLE messages; --",
    "1=1; SELECT * FROM sessions",
    "a & b | !c <-> d:*",
    "\x00",
    "\ud800",
    "^hello",
    "{a b}",
    "hello" * 500,
]


async def snapshot(backend: str, tmp_path: Path, token: Any) -> dict[str, list[Any]]:
    """Every row of every table of the store."""
    out: dict[str, list[Any]] = {}
    if backend == "sqlite":
        con = sqlite3.connect(tmp_path / "mindstore-test.db")
        try:
            names = [
                r[0]
                for r in con.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
                )
            ]
            for name in names:
                rows = con.execute(f'SELECT * FROM "{name}"').fetchall()
                out[name] = sorted(repr(r) for r in rows)
        finally:
            con.close()
        return out
    import psycopg

    url, schema = token
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s"
            " AND table_type = 'BASE TABLE' ORDER BY table_name",
            (schema,),
        )
        for (name,) in await cur.fetchall():
            rows = await (await conn.execute(f'SELECT * FROM "{schema}"."{name}"')).fetchall()
            out[name] = sorted(repr(r) for r in rows)
    return out


@pytest.fixture
async def env(backend: str, tmp_path: Path) -> Any:
    store, token = await open_test_store(backend, tmp_path)
    session = (
        Session.create(store, "victim", namespace="tenant")
        .with_context("soul", provider=StaticProvider("I am."))
        .with_context("memory", description="facts", max_tokens=20)
    )
    await session.append_message(text("m1", "the deployment is green"))
    await session.append_message(text("m2", "rollback planned"))
    await session.append_message(text("m3", "final words"))
    await session.replace_context_block("memory", "user likes tea")
    await session.add_compaction("summary", "m1", "m2")
    await session.freeze_system_prompt()
    try:
        yield store, token, session
    finally:
        await close_test_store(store, token)


async def test_every_bad_input_is_refused_and_changes_nothing(
    env: Any, backend: str, tmp_path: Path
) -> None:
    store, token, session = env
    manager = SessionManager(store, namespace="tenant")
    skills = FileSkillProvider(str(tmp_path / "skills"))
    before = await snapshot(backend, tmp_path, token)

    cases: list[tuple[str, Callable[[], Any], type[BaseException]]] = []
    for name, bad in BAD_MESSAGES:
        cases.append(
            (f"append {name}", lambda bad=bad: session.append_message(bad), InvalidMessageError)
        )
        cases.append(
            (f"update {name}", lambda bad=bad: session.update_message(bad), InvalidMessageError)
        )
    cases += [
        (
            "unknown parent",
            lambda: session.append_message(text("n1"), "nope"),
            MessageNotFoundError,
        ),
        ("SQL as parent", lambda: session.append_message(text("n1"), SQL), MessageNotFoundError),
        (
            "parent of wrong type",
            lambda: session.append_message(text("n1"), 5),
            InvalidMessageError,
        ),
        ("update unknown id", lambda: session.update_message(text("nope")), MessageNotFoundError),
        ("update without id", lambda: session.update_message(text(None)), InvalidMessageError),
        ("delete unknown", lambda: session.delete_messages(["m1", "nope"]), MessageNotFoundError),
        ("delete SQL id", lambda: session.delete_messages([SQL]), MessageNotFoundError),
        ("history of unknown leaf", lambda: session.get_history("nope"), MessageNotFoundError),
        ("branches of unknown", lambda: session.get_branches("nope"), MessageNotFoundError),
        (
            "compaction unknown from",
            lambda: session.add_compaction("s", "nope", "m2"),
            MessageNotFoundError,
        ),
        ("compaction reversed", lambda: session.add_compaction("s", "m3", "m1"), ValueError),
        ("negative token budget", lambda: session.get_recent_history(max_tokens=-1), ValueError),
        ("negative min_messages", lambda: session.get_recent_history(min_messages=-1), ValueError),
        (
            "reserved id prefix",
            lambda: session.append_message(text("compaction_9")),
            InvalidMessageError,
        ),
        ("revert unknown compaction", lambda: session.revert_compaction(987654), CompactionError),
        (
            "write unknown block",
            lambda: session.replace_context_block("nope", "x"),
            BlockNotFoundError,
        ),
        (
            "write read-only block",
            lambda: session.replace_context_block("soul", "x"),
            ReadOnlyBlockError,
        ),
        (
            "over budget",
            lambda: session.append_context_block("memory", "word " * 100),
            TokenBudgetError,
        ),
        ("traversal skill key", lambda: skills.set("../escape", "x"), InvalidKeyError),
        ("absolute skill key", lambda: skills.set("/etc/passwd", "x"), InvalidKeyError),
        ("backslash skill key", lambda: skills.set("a\\b", "x"), InvalidKeyError),
        ("encoded traversal key", lambda: skills.set("%2e%2e/x", "x"), InvalidKeyError),
        (
            "fork at unknown message",
            lambda: manager.fork("victim", "nope", "f"),
            MessageNotFoundError,
        ),
        ("fork of unknown session", lambda: manager.fork("ghost", "m1", "f"), MindstoreError),
        ("rename unknown session", lambda: manager.rename("ghost", "x"), SessionNotFoundError),
    ]
    for name, call, expected in cases:
        with pytest.raises(expected) as info:
            result = call()
            if hasattr(result, "__await__"):
                await result
        assert str(info.value), f"{name}: the error says nothing"
        assert len(str(info.value)) < 2_000, f"{name}: the error message is a dump"

    for query in HOSTILE_QUERIES:
        assert isinstance(await session.search(query), list), query
        assert isinstance(await manager.search(query), list), query
        tools = await session.tools() | await manager.tools()
        out = await tools.execute("session_search", {"query": query})
        assert isinstance(out, str)
    assert await skills.load("../../etc/passwd") is None

    after = await snapshot(backend, tmp_path, token)
    assert after == before


async def test_sql_quotes_and_control_characters_in_names_are_plain_data(store: Any) -> None:
    names = [SQL, "a'b\"c", "tab\there", "line\nbreak", "semi;colon", "back\\slash", "ünï©ødé"]
    for i, name in enumerate(names):
        s = Session.create(store, name, namespace=name).with_context(name, scope="namespace")
        await s.append_message(text(name, f"secret{i} body"))
        await s.replace_context_block(name, f"block {i}")
    for i, name in enumerate(names):
        s = Session.create(store, name, namespace=name).with_context(name, scope="namespace")
        assert [m["id"] for m in await s.get_history()] == [name]
        hits = await s.search(f"secret{i}")
        assert [h.message_id for h in hits] == [name]
        # nothing of the other namespaces is visible
        assert [h.message_id for h in await s.search("body")] == [name]
        block = await s.get_context_block(name)
        assert block is not None and block.content == f"block {i}"


async def test_nul_in_text_round_trips(store: Any) -> None:
    s = Session.create(store, "nul")
    msg = text("n", "before\x00after")
    await s.append_message(msg)
    assert await s.get_message("n") == msg


async def test_a_50_mb_message_is_shrunk_not_rejected(store: Any) -> None:
    s = Session.create(store, "huge")
    big = {
        "id": "big",
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "t" * 25_000_000},
            {
                "type": "tool-fetch",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {"url": "x"},
                "output": {"body": "o" * 25_000_000},
            },
        ],
    }
    assert await s.append_message(big) is True
    stored = await s.get_message("big")
    assert stored is not None
    size = len(json.dumps(stored, ensure_ascii=False).encode())
    assert size <= s.max_message_bytes
    assert stored.get("metadata")
