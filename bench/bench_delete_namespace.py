"""delete_namespace benchmark: forgetting a user, against deleting the same sessions one by one.

Run::

    .venv/bin/python bench/bench_delete_namespace.py                 # SQLite
    .venv/bin/python bench/bench_delete_namespace.py --quick
    MINDSTORE_BENCH_POSTGRES_URL=postgresql://... .venv/bin/python \\
        bench/bench_delete_namespace.py --backend postgres

The store holds ``--other`` messages in another namespace and ``--gone`` messages (1,000 per
session) in the namespace to delete. ``SessionManager.delete_namespace()`` (one transaction;
on SQLite plus the search-index ``optimize`` that purges the deleted words) is timed against
the only way there was before: ``SessionManager.delete(id)`` for every session (blocks,
entries and namespace-scoped rows would still be left over). No target: the table shows what a
deletion costs and its ratio to the per-session baseline in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from mindstore.manager import SessionManager
from mindstore.store.base import Store

PER_SESSION = 1000


async def open_store(backend: str, folder: Path) -> tuple[Store, Any]:
    if backend == "sqlite":
        from mindstore.store.sqlite import SQLiteStore

        return SQLiteStore(folder / f"bench-{uuid.uuid4().hex[:6]}.db"), None
    from mindstore.store.postgres import PostgresStore

    url = os.environ.get("MINDSTORE_BENCH_POSTGRES_URL")
    if not url:
        sys.exit("set MINDSTORE_BENCH_POSTGRES_URL for --backend postgres")
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    return await PostgresStore.open(url, schema=schema), (url, schema)


async def close_store(store: Store, token: Any) -> None:
    await store.aclose()
    if token is not None:
        import psycopg

        url, schema = token
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


async def fill(store: Store, namespace: str, messages: int) -> None:
    m = SessionManager(store, namespace=namespace).with_context("memory")
    for s in range(max(1, messages // PER_SESSION)):
        batch = [
            {
                "id": f"m{i}",
                "role": "user" if i % 2 == 0 else "assistant",
                "parts": [{"type": "text", "text": f"note {i} about topic{i % 97} in {namespace}"}],
            }
            for i in range(min(PER_SESSION, messages))
        ]
        await m.append_all(f"s{s}", batch)
        await m.session(f"s{s}").replace_context_block("memory", f"facts of s{s}")


async def run(backend: str, other: int, gone: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        timings = []
        for way in ("per-session", "delete_namespace"):
            store, token = await open_store(backend, Path(tmp))
            try:
                await fill(store, "other", other)
                await fill(store, "gone", gone)
                m = SessionManager(store, namespace="gone")
                start = time.perf_counter()
                if way == "delete_namespace":
                    await m.delete_namespace()
                else:
                    for info in await m.list(limit=1000):
                        await m.delete(info.id)
                timings.append(time.perf_counter() - start)
            finally:
                await close_store(store, token)
        return timings[0], timings[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--other", type=int, default=100_000)
    parser.add_argument("--gone", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="10,000 other, 2,000 deleted")
    args = parser.parse_args()
    other, gone = (10_000, 2_000) if args.quick else (args.other, args.gone)
    baseline, deletion = asyncio.run(run(args.backend, other, gone))
    print(f"backend {args.backend}: {other:,} messages kept, {gone:,} deleted")
    print("| workload | time | ratio |")
    print("|---|---|---|")
    print(f"| delete() per session (baseline) | {baseline * 1000:.0f} ms | 1.00× |")
    print(f"| delete_namespace() | {deletion * 1000:.0f} ms | {deletion / baseline:.2f}× |")


if __name__ == "__main__":
    main()
