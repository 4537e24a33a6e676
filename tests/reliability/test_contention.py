"""Contention: 8 processes for a bounded time mixing every kind of write on one store.

The only exceptions allowed are the documented typed ones (ConflictError for a lost
compare-and-append, MessageNotFoundError for a parent another worker deleted). The final state
must equal what the acknowledged operations imply: message counts, one chain per auto-parented
session, block contents containing every acknowledged append exactly once.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from backends import drop_schema, new_schema_name, postgres_url_or_skip
from mindstore import Session

WORKER = Path(__file__).with_name("contention_worker.py")
SRC = Path(__file__).resolve().parents[2] / "src"
WORKERS = 8
SECONDS = float(os.environ.get("MINDSTORE_CONTENTION_SECONDS", "4"))


def run_workers(backend: str, target: str) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), backend, target, str(w), str(SECONDS), str(100 + w)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        for w in range(WORKERS)
    ]
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=SECONDS + 120)
            assert p.returncode == 0, err.decode()[-3000:]
            results.append(json.loads(out.decode().strip().splitlines()[-1]))
    finally:
        # A failed worker must not leave the others running with open pipes.
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
    return results


async def check_final_state(store: Any, results: list[dict[str, Any]]) -> None:
    unexpected = {
        k: v for r in results for k, v in r["errors"].items() if k.startswith("UNEXPECTED")
    }
    assert not unexpected, unexpected
    acked: dict[str, list[Any]] = {}
    for r in results:
        for k, v in r["acked"].items():
            acked.setdefault(k, []).extend(v)
    assert sum(r["ops"] for r in results) > WORKERS * 10  # real contention happened

    for name in ("chain", "cas"):
        s = Session.create(store, name, namespace="contention")
        rows = await store.all_messages(s.key)
        assert sorted(r.id for r in rows) == sorted(acked[name]), name
        # one chain: every message but the leaf has exactly one child
        assert await s.get_path_length() == len(rows), f"{name} forked"
        history = await s.get_history()
        assert [m["id"] for m in history] == [r.id for r in sorted(rows, key=lambda r: r.seq)]

    tree = Session.create(store, "tree", namespace="contention").with_context(
        "shared", scope="namespace"
    )
    rows = await store.all_messages(tree.key)
    expected_tree = set(acked["tree"]) - set(acked["tree_deleted"])
    assert {r.id for r in rows} == expected_tree
    ids = {r.id for r in rows}
    assert all(r.parent_id is None or r.parent_id in ids for r in rows)
    hits = await tree.search("tree", limit=100_000)
    assert {h.message_id for h in hits} == ids

    block = await tree.get_context_block("shared")
    items = [ln[len("item ") :] for ln in (block.content if block else "").split("\n") if ln]
    assert sorted(items) == sorted(acked["block"])


@pytest.mark.slow
async def test_sqlite_contention(tmp_path: Path) -> None:
    from mindstore.store.sqlite import SQLiteStore

    path = str(tmp_path / "contention.db")
    async with SQLiteStore(path) as store:
        await store.stats()  # create the schema before the workers race to
    results = await asyncio.to_thread(run_workers, "sqlite", path)
    async with SQLiteStore(path) as store:
        await check_final_state(store, results)


@pytest.mark.slow
@pytest.mark.postgres
async def test_postgres_contention() -> None:
    url = postgres_url_or_skip()
    from mindstore.store.postgres import PostgresStore

    schema = new_schema_name()
    try:
        results = await asyncio.to_thread(run_workers, "postgres", f"{url}|{schema}")
        store = await PostgresStore.open(url, schema=schema, min_size=1, max_size=2)
        try:
            await check_final_state(store, results)
        finally:
            await store.aclose()
    finally:
        await drop_schema(url, schema)
