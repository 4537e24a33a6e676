"""Contract: appends to one namespace-scoped block from several processes are never lost."""

from __future__ import annotations

import asyncio
import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from backends import close_test_store, open_test_store
from mindstore.session import Session
from mindstore.store.base import ScopeKey, Store

WORKERS = 3
APPENDS = 25


async def _open(backend: str, location: Any) -> Store:
    if backend == "sqlite":
        from mindstore.store.sqlite import SQLiteStore

        return SQLiteStore(location)
    from mindstore.store.postgres import PostgresStore

    url, schema = location
    return await PostgresStore.open(url, schema=schema, min_size=1, max_size=2)


async def _append_lines(backend: str, location: Any, tag: str) -> None:
    store = await _open(backend, location)
    try:
        s = Session.create(store, f"worker-{tag}", namespace="team").with_context(
            "profile", scope="namespace"
        )
        for i in range(APPENDS):
            await s.append_context_block("profile", f"{tag}-{i}")
    finally:
        await store.aclose()


def _worker(backend: str, location: Any, tag: str) -> None:
    asyncio.run(_append_lines(backend, location, tag))


@pytest.mark.slow
async def test_concurrent_process_appends_to_shared_block(backend: str, tmp_path: Path) -> None:
    store, token = await open_test_store(backend, tmp_path)
    try:
        # make sure the schema exists before the workers race to open it
        await store.set_block(ScopeKey(namespace="team", session_id=None, label="profile"), "")
        location: Any = tmp_path / "mindstore-test.db" if backend == "sqlite" else token
        ctx = multiprocessing.get_context("spawn")
        procs = [
            ctx.Process(target=_worker, args=(backend, location, f"w{n}")) for n in range(WORKERS)
        ]
        for p in procs:
            p.start()
        for p in procs:
            await asyncio.to_thread(p.join, 60)
        assert [p.exitcode for p in procs] == [0] * WORKERS
        content = await store.get_block(
            ScopeKey(namespace="team", session_id=None, label="profile")
        )
        assert content is not None
        lines = content.split("\n")
        expected = {f"w{n}-{i}" for n in range(WORKERS) for i in range(APPENDS)}
        assert sorted(lines) == sorted(expected)  # none lost, none duplicated
        for n in range(WORKERS):  # each worker's lines in its own order
            mine = [line for line in lines if line.startswith(f"w{n}-")]
            assert mine == [f"w{n}-{i}" for i in range(APPENDS)]
    finally:
        await close_test_store(store, token)
