"""Contract: appends to one namespace-scoped block from several processes are never lost."""

from __future__ import annotations

import asyncio
import multiprocessing

import pytest

from backends import Storage
from mindstore.session import Session
from mindstore.store.base import ScopeKey, Store

WORKERS = 3
APPENDS = 25


async def _append_lines(storage: Storage, tag: str) -> None:
    store = await storage.open()
    try:
        s = Session.create(store, f"worker-{tag}", namespace="team").with_context(
            "profile", scope="namespace"
        )
        for i in range(APPENDS):
            await s.append_context_block("profile", f"{tag}-{i}")
    finally:
        await store.aclose()


def _worker(storage: Storage, tag: str) -> None:
    asyncio.run(_append_lines(storage, tag))


@pytest.mark.slow
async def test_concurrent_process_appends_to_shared_block(store: Store, storage: Storage) -> None:
    # make sure the schema exists before the workers race to open it
    await store.set_block(ScopeKey(namespace="team", session_id=None, label="profile"), "")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(storage, f"w{n}")) for n in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        await asyncio.to_thread(p.join, 60)
    assert [p.exitcode for p in procs] == [0] * WORKERS
    content = await store.get_block(ScopeKey(namespace="team", session_id=None, label="profile"))
    assert content is not None
    lines = content.split("\n")
    expected = {f"w{n}-{i}" for n in range(WORKERS) for i in range(APPENDS)}
    assert sorted(lines) == sorted(expected)  # none lost, none duplicated
    for n in range(WORKERS):  # each worker's lines in its own order
        mine = [line for line in lines if line.startswith(f"w{n}-")]
        assert mine == [f"w{n}-{i}" for i in range(APPENDS)]
