"""Reliability: several processes share one SQLite file; schema versions are enforced.

4 processes × 250 auto-parented appends to ONE session must give 1,000 messages in ONE chain
(every append attaches to the leaf the previous one created, whichever process made it) — the
``BEGIN IMMEDIATE`` read-leaf-then-insert transaction is what guarantees it.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from mindstore.errors import SchemaVersionError
from mindstore.session import Session
from mindstore.store.sqlite import SQLiteStore
from mindstore.store.sqlite.migrations import LATEST_VERSION

PROCESSES = 4
PER_PROCESS = 250


def _append_worker(path: str, worker: int, start: multiprocessing.synchronize.Event) -> None:
    async def run() -> None:
        async with SQLiteStore(path, busy_timeout=60) as store:
            s = Session.create(store, "shared")
            start.wait(30)
            for i in range(PER_PROCESS):
                m = {
                    "id": f"w{worker}-{i}",
                    "role": "user",
                    "parts": [{"type": "text", "text": f"worker {worker} message {i}"}],
                }
                assert await s.append_message(m) is True

    asyncio.run(run())


async def _create(path: str) -> None:
    async with SQLiteStore(path) as store:
        await store.stats()


def test_concurrent_auto_parented_appends_form_one_chain(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    asyncio.run(_create(path))  # the schema exists before the race starts
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_append_worker, args=(path, w, start)) for w in range(PROCESSES)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0, f"worker exited with {p.exitcode}"

    asyncio.run(_check_one_chain(path))


async def _check_one_chain(path: str) -> None:
    total = PROCESSES * PER_PROCESS
    async with SQLiteStore(path) as store:
        s = Session.create(store, "shared")
        history = await s.get_history()
        assert len(history) == total
        every = await store.all_messages(s.key)
        assert len(every) == total
        # one chain: exactly one root, every other message has exactly one child except the leaf
        roots = [m for m in every if m.parent_id is None]
        assert len(roots) == 1
        child_count: dict[str, int] = {}
        for m in every:
            if m.parent_id is not None:
                child_count[m.parent_id] = child_count.get(m.parent_id, 0) + 1
        assert max(child_count.values()) == 1
        assert {m["id"] for m in history} == {m.id for m in every}
        # per worker, its own messages appear in the order it appended them
        for w in range(PROCESSES):
            mine = [m["id"] for m in history if m["id"].startswith(f"w{w}-")]
            assert mine == [f"w{w}-{i}" for i in range(PER_PROCESS)]
        leaf = await s.get_latest_leaf()
        assert leaf is not None and leaf["id"] == history[-1]["id"]
        info = await store.get_session(s.key)
        assert info is not None and info.message_count == total
        # seq is strictly increasing along the chain
        seqs = [m.seq for m in await store.path(s.key, None)]
        assert seqs == sorted(seqs)


async def _write_one(path: Path) -> None:
    async with SQLiteStore(path) as store:
        await Session.create(store, "s").append_message({"id": "a", "role": "user", "parts": []})


async def _open_twice(path: Path) -> None:
    store = SQLiteStore(path)
    with pytest.raises(SchemaVersionError, match="upgrade mindstore"):
        await Session.create(store, "s").get_history()
    await store.aclose()
    with pytest.raises(SchemaVersionError):
        async with SQLiteStore(path):
            pass


def test_newer_schema_is_refused_and_file_untouched(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    asyncio.run(_write_one(path))
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=DELETE")  # fold the WAL in so the file stands alone
    conn.execute(f"PRAGMA user_version={LATEST_VERSION + 1}")
    conn.close()
    before = path.read_bytes()
    asyncio.run(_open_twice(path))
    assert path.read_bytes() == before
    assert not Path(str(path) + "-wal").exists()


def test_fresh_file_is_migrated_to_latest_version(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    store = SQLiteStore(path)
    assert not path.exists()  # the constructor does no I/O
    stats = asyncio.run(store.stats())
    asyncio.run(store.aclose())
    assert stats["schema_version"] == LATEST_VERSION
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()
    # reopening an up-to-date file works
    again = SQLiteStore(path)
    assert asyncio.run(again.stats())["schema_version"] == LATEST_VERSION
    asyncio.run(again.aclose())
