"""Wide namespaces: search in a namespace of many short sessions against the same number of
messages in 100 sessions, on SQLite and PostgreSQL, same run.

Run::

    .venv/bin/python bench/bench_wide.py            # 10,000 sessions of 2 messages
    .venv/bin/python bench/bench_wide.py --quick    # 2,000 sessions
    .venv/bin/python bench/bench_wide.py --sqlite   # SQLite only

The session score needs every session's statistics, and a search used to read them one row
per session (and on PostgreSQL stamp them, twice): a rare word's search in a namespace of
10,000 sessions took 12 ms on SQLite and 35 ms on PostgreSQL where the same messages in 100
sessions took under 1 and 5 ms. A namespace wider than ``WIDE_PARTS`` / ``STAMP_PARTS``
(200) sessions now reads the statistics summed and the lengths of the sessions a search's
postings are in only. The ratio printed is the wide namespace's median against the narrow
one's (no target; a ratio near 1 means the number of sessions no longer matters).

PostgreSQL is ``MINDSTORE_BENCH_POSTGRES_URL`` (else ``MINDSTORE_TEST_POSTGRES_URL``, else
``postgresql://postgres@127.0.0.1:5432/test``), in a throw-away schema dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
import uuid
from typing import Any

from mindstore.search import parse_query
from mindstore.store.base import NewMessage, SessionKey, Store

WORDS = ["hello", "world", "notes", "plan", "meeting", "draft", "review", "status"]
QUERIES = {"rare word (1 % of sessions)": "zeppelin", "common word (every message)": "hello"}


def message(rng: random.Random, i: int, rare: bool) -> dict[str, Any]:
    words = rng.choices(WORDS, k=rng.randint(6, 14)) + ["hello"] + ["zeppelin"] * rare
    return {"id": f"m{i}", "role": "user", "parts": [{"type": "text", "text": " ".join(words)}]}


async def load(store: Store, namespace: str, sessions: int, per: int) -> None:
    rng = random.Random(1)
    for s in range(sessions):
        key = SessionKey(namespace=namespace, session_id=f"s{s}")
        msgs = [message(rng, i, rare=(s * per + i) % 199 == 0) for i in range(per)]
        await store.append(key, [NewMessage(message=m) for m in msgs])


async def timed(store: Store, namespace: str, query: str, runs: int = 40) -> float:
    parsed = parse_query(query)
    await store.search(namespace, parsed, limit=10)
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        await store.search(namespace, parsed, limit=10)
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


async def run(backend: str, store: Store, sessions: int) -> None:
    messages = 2 * sessions
    t0 = time.perf_counter()
    await load(store, "wide", sessions, 2)
    await load(store, "narrow", 100, messages // 100)
    print(f"  ({backend}: loaded 2 x {messages:,} messages in {time.perf_counter() - t0:.0f} s)")
    for label, query in QUERIES.items():
        wide = await timed(store, "wide", query)
        narrow = await timed(store, "narrow", query)
        print(
            f"{backend:10} {label:28} {sessions:,} sessions {wide * 1000:7.2f} ms | "
            f"100 sessions {narrow * 1000:6.2f} ms | {wide / narrow:.2f}x",
            flush=True,
        )


async def sqlite(sessions: int) -> None:
    from mindstore.store.sqlite import SQLiteStore

    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(os.path.join(tmp, "wide.db"))
        try:
            await run("SQLite", store, sessions)
        finally:
            await store.aclose()


async def postgres(sessions: int) -> None:
    from bench_postgres import URL, drop  # (bench/ is this script's folder)

    from mindstore.store.postgres import PostgresStore

    schema = f"mindstore_bench_{uuid.uuid4().hex[:12]}"
    store = await PostgresStore.open(URL, schema=schema, min_size=1, max_size=1)
    try:
        await run("PostgreSQL", store, sessions)
    finally:
        await store.aclose()
        await drop(schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 sessions")
    parser.add_argument("--sqlite", action="store_true", help="SQLite only")
    args = parser.parse_args()
    sessions = 2_000 if args.quick else 10_000
    asyncio.run(sqlite(sessions))
    if not args.sqlite:
        asyncio.run(postgres(sessions))


if __name__ == "__main__":
    main()
