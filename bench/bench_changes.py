"""Change-feed benchmark: commit-to-delivery latency of ``store.changes()`` across processes.

Run::

    .venv/bin/python bench/bench_changes.py            # both backends, 500 messages each
    .venv/bin/python bench/bench_changes.py --quick    # 200 messages each
    .venv/bin/python bench/bench_changes.py --backend sqlite
    .venv/bin/python bench/bench_changes.py --concurrency   # PostgreSQL writers per namespace

A reader process follows the feed of one namespace while this process appends messages one at
a time (``Session.append_message``, 10 ms apart, so the number measured is delivery, not a
queue). Latency = the moment the reader has the event minus the moment the writer's append
returned (its commit acknowledged); both are ``time.monotonic()``, one clock for every process
on Linux. Issue 32 targets: p95 ≤ 100 ms on PostgreSQL, ≤ 250 ms on SQLite.

Baselines, same run, same pacing: the same wake-up mechanism without mindstore — on SQLite a
plain ``sqlite3`` writer inserting a row per commit and a reader polling ``PRAGMA
data_version`` every 50 ms (the feed's default ``poll_interval``) and selecting the new rows;
on PostgreSQL a plain psycopg writer inserting a row and calling ``pg_notify`` in each
transaction and a reader ``LISTEN``\\ ing and selecting the new rows. PostgreSQL is
``MINDSTORE_BENCH_POSTGRES_URL`` (else ``MINDSTORE_TEST_POSTGRES_URL``, else
``postgresql://postgres@127.0.0.1:5432/test``), in a throw-away schema.

``--concurrency`` measures what the feed's numbering costs concurrent PostgreSQL writers: 8
tasks on one store (pool of 8) append to 8 sessions, once spread over 8 namespaces and once all
in one. Gapless numbers in commit order lock the namespace's counter row through each commit,
so the writers of one namespace commit one at a time; the 8-namespace run, same store, same
run, is the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

NS = "bench"
GAP = 0.010  # seconds between appends
DONE = "done"


def pg_url() -> str:
    return os.environ.get(
        "MINDSTORE_BENCH_POSTGRES_URL",
        os.environ.get("MINDSTORE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    )


# ---- reader processes ---------------------------------------------------------------------------
async def read_mindstore(backend: str, target: str) -> None:
    store = await open_store(backend, target)
    try:
        print("ready", flush=True)
        async for c in store.changes(NS, since=0):
            if c.kind != "message_appended":
                continue
            mid = c.data["message_id"]
            print(f"{mid} {time.monotonic():.6f}", flush=True)
            if mid == DONE:
                return
    finally:
        await store.aclose()


def read_plain_sqlite(path: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    last = 0
    print("ready", flush=True)
    while True:
        mark = conn.execute("PRAGMA data_version").fetchone()[0]
        rows = conn.execute("SELECT seq, mid FROM plain WHERE seq > ? ORDER BY seq", (last,))
        for seq, mid in rows.fetchall():
            last = seq
            print(f"{mid} {time.monotonic():.6f}", flush=True)
            if mid == DONE:
                return
        while conn.execute("PRAGMA data_version").fetchone()[0] == mark:
            time.sleep(0.05)


async def read_plain_postgres(url: str, schema: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f'SET search_path TO "{schema}"')
        await conn.execute("LISTEN plain_bench")
        last = 0
        print("ready", flush=True)
        while True:
            cur = await conn.execute(
                "SELECT seq, mid FROM plain WHERE seq > %s ORDER BY seq", (last,)
            )
            for seq, mid in await cur.fetchall():
                last = seq
                print(f"{mid} {time.monotonic():.6f}", flush=True)
                if mid == DONE:
                    return
            async for _ in conn.notifies(timeout=5.0, stop_after=1):
                pass


# ---- writers (this process) ---------------------------------------------------------------------
async def open_store(backend: str, target: str) -> Any:
    if backend == "sqlite":
        from mindstore.store.sqlite import SQLiteStore

        return SQLiteStore(target)
    from mindstore.store.postgres import PostgresStore

    url, schema = target.split("|")
    return await PostgresStore.open(url, schema=schema, min_size=1, max_size=2)


async def write_mindstore(backend: str, target: str, n: int) -> dict[str, float]:
    from mindstore import Session

    store = await open_store(backend, target)
    acked: dict[str, float] = {}
    try:
        s = Session.create(store, "chat", namespace=NS)
        for i in range(n + 1):
            mid = DONE if i == n else f"m{i}"
            await s.append_message(
                {"id": mid, "role": "user", "parts": [{"type": "text", "text": f"message {i}"}]}
            )
            acked[mid] = time.monotonic()
            await asyncio.sleep(GAP)
    finally:
        await store.aclose()
    return acked


async def write_plain(backend: str, target: str, n: int) -> dict[str, float]:
    acked: dict[str, float] = {}
    if backend == "sqlite":
        conn = sqlite3.connect(target, isolation_level=None)
        for i in range(n + 1):
            mid = DONE if i == n else f"m{i}"
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO plain (mid) VALUES (?)", (mid,))
            conn.execute("COMMIT")
            acked[mid] = time.monotonic()
            await asyncio.sleep(GAP)
        conn.close()
        return acked
    import psycopg

    url, schema = target.split("|")
    async with await psycopg.AsyncConnection.connect(url) as pg:
        await pg.execute(f'SET search_path TO "{schema}"')
        await pg.commit()
        for i in range(n + 1):
            mid = DONE if i == n else f"m{i}"
            await pg.execute("INSERT INTO plain (mid) VALUES (%s)", (mid,))
            await pg.execute("SELECT pg_notify('plain_bench', %s)", (mid,))
            await pg.commit()
            acked[mid] = time.monotonic()
            await asyncio.sleep(GAP)
    return acked


def latencies(backend: str, target: str, kind: str, n: int) -> list[float]:
    """Run one reader process and the writer; the per-message delivery latencies (ms)."""
    reader = subprocess.Popen(
        [sys.executable, __file__, "--reader", kind, "--backend", backend, "--target", target],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout is not None
        assert reader.stdout.readline().strip() == "ready", (
            reader.stderr.read() if reader.stderr else ""
        )
        time.sleep(0.3)  # the reader is waiting
        writer = write_mindstore if kind == "mindstore" else write_plain
        acked = asyncio.run(writer(backend, target, n))
        out, err = reader.communicate(timeout=120)
        assert reader.returncode == 0, err[-2000:]
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.communicate()
    received = dict(line.split() for line in out.splitlines() if line.strip())
    assert set(received) == set(acked), "the reader missed messages"
    return [(float(received[m]) - acked[m]) * 1000 for m in acked]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def prepare(backend: str, target: str) -> None:
    if backend == "sqlite":
        asyncio.run(_migrate(backend, target))
        conn = sqlite3.connect(target, isolation_level=None)
        conn.execute("CREATE TABLE plain (seq INTEGER PRIMARY KEY, mid TEXT NOT NULL)")
        conn.close()
        return
    asyncio.run(_migrate(backend, target))
    import psycopg

    url, schema = target.split("|")
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(f'CREATE TABLE "{schema}".plain (seq bigserial PRIMARY KEY, mid text NOT NULL)')


async def _migrate(backend: str, target: str) -> None:
    store = await open_store(backend, target)
    await store.stats()
    await store.aclose()


async def concurrent_appends(namespaces: int, writers: int = 8, n: int = 100) -> float:
    """Appends per second of ``writers`` tasks to their own sessions in ``namespaces``
    namespaces (a warm-up round first)."""
    from mindstore.store.base import NewMessage, SessionKey
    from mindstore.store.postgres import PostgresStore

    schema = f"mindstore_bench_{uuid.uuid4().hex[:12]}"
    store = await PostgresStore.open(pg_url(), schema=schema, min_size=writers, max_size=writers)
    try:

        async def write(i: int, prefix: str) -> None:
            key = SessionKey(namespace=f"ns{i % namespaces}", session_id=f"s{i}")
            for j in range(n):
                msg = {
                    "id": f"{prefix}{j}",
                    "role": "user",
                    "parts": [{"type": "text", "text": "hi"}],
                }
                await store.append(key, [NewMessage(message=msg, tokens=2)])

        await asyncio.gather(*(write(i, "w") for i in range(writers)))
        start = time.perf_counter()
        await asyncio.gather(*(write(i, "m") for i in range(writers)))
        return writers * n / (time.perf_counter() - start)
    finally:
        await store.aclose()
        import psycopg

        with psycopg.connect(pg_url(), autocommit=True) as pg:
            pg.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def concurrency() -> int:
    spread = asyncio.run(concurrent_appends(8))
    one = asyncio.run(concurrent_appends(1))
    print("8 writers, one PostgreSQL store (pool of 8), 100 durable appends each")
    print(f"  8 sessions in 8 namespaces (baseline): {spread:,.0f} appends/s")
    print(f"  8 sessions in 1 namespace:             {one:,.0f} appends/s ({one / spread:.2f}x)")
    print(f"(load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 messages per run")
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument(
        "--concurrency", action="store_true", help="PostgreSQL: 8 writers, 8 vs 1 namespaces"
    )
    parser.add_argument("--reader", choices=["mindstore", "plain"], help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.concurrency:
        return concurrency()
    if args.reader:  # a reader process
        if args.reader == "mindstore":
            asyncio.run(read_mindstore(args.backend, args.target))
        elif args.backend == "sqlite":
            read_plain_sqlite(args.target)
        else:
            url, schema = args.target.split("|")
            asyncio.run(read_plain_postgres(url, schema))
        return 0
    n = 200 if args.quick else 500
    rows: list[tuple[str, ...]] = []
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    for backend in backends:
        with tempfile.TemporaryDirectory() as d:
            schema = f"mindstore_bench_{uuid.uuid4().hex[:12]}"
            target = str(Path(d) / "feed.db") if backend == "sqlite" else f"{pg_url()}|{schema}"
            try:
                prepare(backend, target)
                mine = latencies(backend, target, "mindstore", n)
                base = latencies(backend, target, "plain", n)
            finally:
                if backend == "postgres":
                    import psycopg

                    with psycopg.connect(pg_url(), autocommit=True) as conn:
                        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        target_ms = 250 if backend == "sqlite" else 100
        for name, values in (("mindstore changes()", mine), ("baseline (plain)", base)):
            rows.append(
                (
                    backend,
                    name,
                    f"{statistics.median(values):.1f}",
                    f"{pct(values, 0.95):.1f}",
                    f"{max(values):.1f}",
                    f"<= {target_ms}" if name.startswith("mindstore") else "",
                    ("ok" if pct(values, 0.95) <= target_ms else "MISSED")
                    if name.startswith("mindstore")
                    else "",
                )
            )
    header = ("backend", "reader", "p50 ms", "p95 ms", "max ms", "p95 target", "")
    widths = [max(len(r[i]) for r in [*rows, header]) for i in range(len(header))]
    gap = f"{GAP * 1000:.0f} ms"
    print(f"commit-to-delivery latency, {n} appends {gap} apart, reader in another process")
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    print(f"(load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
