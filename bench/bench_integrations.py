"""Integration benchmarks (issue 18): the sync bridge and the OpenAI Agents SDK session.

1. **Sync bridge overhead per call.** ``mindstore.sync`` runs each call on the store's loop
   thread through anyio's ``BlockingPortal``. Measured: the same call made through the sync API
   and awaited directly on an async store (same SQLite file, calls alternating so load hits
   both): a cheap read (``get_message``) shows the bridge's fixed cost, a durable append shows
   it relative to real work. Reported: median µs per call, the ratio and the difference (the
   bridge's cost per call). No target beyond "report it"; the difference should be tens of µs.
2. **``MindstoreSession.add_items`` vs the SDK's own ``SQLiteSession.add_items``** (same run,
   same items, both on a SQLite file in WAL mode): one agent turn of 4 items (user message,
   function call, its output, assistant message) per call. mindstore also indexes every item
   for full-text search and keeps the tree; the SDK's session stores JSON rows only. Target:
   the adapter at least as fast (ratio ≤ 1.0). mindstore runs with its default
   ``synchronous=NORMAL`` and, for a like-for-like durability row, ``FULL`` (SQLite's default,
   which ``SQLiteSession`` uses).

Usage::

    .venv/bin/python bench/bench_integrations.py            # full
    .venv/bin/python bench/bench_integrations.py --quick    # smoke run
    .venv/bin/python bench/bench_integrations.py --postgres postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import mindstore.sync as msync
from mindstore import PostgresStore, Session, SQLiteStore

HEADER = (
    f"| {'case':<46} | {'ours µs':>9} | {'base µs':>9} | {'ratio':>6} | {'diff µs':>8} | target |\n"
    f"|{'-' * 48}|{'-' * 11}|{'-' * 11}|{'-' * 8}|{'-' * 10}|--------|"
)


def row(name: str, ours: float, base: float, target: str) -> str:
    return (
        f"| {name:<46} | {ours:9.1f} | {base:9.1f} | {ours / base:5.2f}x | "
        f"{ours - base:8.1f} | {target:<6} |"
    )


def text(role: str, body: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "text": body}]}


async def alternate(
    ours: Callable[[], Any], base: Callable[[], Awaitable[Any]], reps: int, block: int = 20
) -> tuple[float, float]:
    """Median µs per call of the sync ``ours`` and the awaited ``base``, in alternating blocks."""
    a: list[float] = []
    b: list[float] = []
    for _ in range(reps // block):
        t = time.perf_counter()
        for _ in range(block):
            ours()
        a.append((time.perf_counter() - t) / block * 1e6)
        t = time.perf_counter()
        for _ in range(block):
            await base()
        b.append((time.perf_counter() - t) / block * 1e6)
    return statistics.median(a), statistics.median(b)


async def bench_bridge(
    open_sync: Callable[[], Any], aio_store: Any, reps: int, label: str
) -> list[str]:
    rows = []
    with open_sync() as sstore:
        ssession = msync.Session.create(sstore, "bridge-sync")
        asession = Session.create(aio_store, "bridge")
        ssession.append_message({"id": "seed", **text("user", "seed message")})
        await asession.append_message({"id": "seed", **text("user", "seed message")})
        ours, base = await alternate(
            lambda: ssession.get_message("seed"), lambda: asession.get_message("seed"), reps
        )
        rows.append(row(f"{label}: get_message (cheap read)", ours, base, "report"))
        n = 0

        def sync_append() -> None:
            nonlocal n
            n += 1
            ssession.append_message(text("user", f"sync {n} deploy orders"))

        async def async_append() -> None:
            nonlocal n
            n += 1
            await asession.append_message(text("user", f"async {n} deploy orders"))

        ours, base = await alternate(sync_append, async_append, reps // 2)
        rows.append(row(f"{label}: append_message (durable write)", ours, base, "report"))
    return rows


TURN: list[dict[str, Any]] = [
    {"role": "user", "content": "What is the weather in Paris today?"},
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "18 C and sunny"},
    {"role": "assistant", "content": "It is 18 C and sunny in Paris today."},
]


async def bench_sessions(tmp: Path, turns: int, pg_url: str | None) -> list[str]:
    from agents import SQLiteSession

    from mindstore.integrations.openai_agents import MindstoreSession

    rows = []
    baseline = SQLiteSession("bench", tmp / "sdk.db")
    stores: list[tuple[str, Any]] = [
        ("NORMAL", SQLiteStore(tmp / "ms-normal.db")),
        ("FULL", SQLiteStore(tmp / "ms-full.db", synchronous="FULL")),
    ]
    schema = f"bench_agents_{uuid.uuid4().hex[:8]}"
    if pg_url:
        stores.append(("PostgreSQL", await PostgresStore.open(pg_url, schema=schema)))
    try:
        ours_sessions = [(name, MindstoreSession("bench", s)) for name, s in stores]
        timings: dict[str, list[float]] = {name: [] for name, _ in ours_sessions}
        base_t: list[float] = []
        for _ in range(turns):
            t = time.perf_counter()
            await baseline.add_items(TURN)
            base_t.append((time.perf_counter() - t) * 1e6)
            for name, s in ours_sessions:
                t = time.perf_counter()
                await s.add_items(TURN)
                timings[name].append((time.perf_counter() - t) * 1e6)
        base = statistics.median(base_t)
        for name, _ in ours_sessions:
            what = f"add_items(4 items), mindstore {name}"
            target = "≤ 1.0x" if name != "PostgreSQL" else "report"
            rows.append(row(what, statistics.median(timings[name]), base, target))
        # Same content read back, and indexed for search on our side.
        first = ours_sessions[0][1]
        assert await first.get_items() == await baseline.get_items()
        assert await first.session.search("sunny")
        t = time.perf_counter()
        await first.get_items(limit=20)
        ours_get = (time.perf_counter() - t) * 1e6
        t = time.perf_counter()
        await baseline.get_items(limit=20)
        base_get = (time.perf_counter() - t) * 1e6
        rows.append(
            row(f"get_items(limit=20) of {4 * turns} items (one call)", ours_get, base_get, "info")
        )
    finally:
        baseline.close()
        for _, s in stores:
            await s.aclose()
        if pg_url:
            import psycopg

            async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--postgres", metavar="URL", help="also measure on PostgreSQL")
    args = parser.parse_args()
    reps = 400 if args.quick else 2000
    turns = 100 if args.quick else 500
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        # Separate files: two connections writing one file in turn would measure SQLite's
        # cache invalidation between them, not the bridge.
        aio = SQLiteStore(tmp / "bridge-async.db")
        rows = await bench_bridge(
            lambda: msync.SQLiteStore(tmp / "bridge-sync.db"), aio, reps, "SQLite"
        )
        await aio.aclose()
        if args.postgres:
            schema = f"bench_bridge_{uuid.uuid4().hex[:8]}"
            aio_pg = await PostgresStore.open(args.postgres, schema=schema)
            try:
                rows += await bench_bridge(
                    lambda: msync.PostgresStore.open(args.postgres, schema=schema),
                    aio_pg,
                    reps // 4,
                    "PostgreSQL",
                )
            finally:
                await aio_pg.aclose()
                import psycopg

                async with await psycopg.AsyncConnection.connect(
                    args.postgres, autocommit=True
                ) as conn:
                    await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        print(f"\n1. sync bridge (mindstore.sync) vs awaiting the async API; {reps} calls, median")
        print(HEADER)
        print("\n".join(rows))
        session_rows = await bench_sessions(tmp, turns, args.postgres)
    print(
        f"\n2. MindstoreSession.add_items vs agents.SQLiteSession.add_items (base); "
        f"{turns} turns of 4 items, median per call"
    )
    print(HEADER)
    print("\n".join(session_rows))
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    asyncio.run(main())
