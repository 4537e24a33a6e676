"""SessionManager benchmarks (issue 5) on a real SQLite file.

1. ``list()`` first page (50) with 10,000 sessions in the namespace — target ≤ 5 ms
   (median). Baseline: the same page read with one raw ``sqlite3`` query on the same file.
2. Cross-session ``search()`` over 1,000 sessions × 100 messages — target: median within 3× a
   plain FTS5 query (``porter unicode61``, bm25, LIMIT 20) over the same texts in a standalone
   FTS5 table, measured in the same run. The query mix covers rare, medium and common words,
   two-word ANDs, a phrase and a prefix; each query's median is compared with its baseline
   median (calls alternate, so machine load hits both), and the target applies to the median
   of those per-query ratios.

Usage::

    .venv/bin/python bench/bench_manager.py            # full sizes (10,000 / 1,000 × 100)
    .venv/bin/python bench/bench_manager.py --quick    # smaller corpus, same list() size
    .venv/bin/python bench/bench_manager.py --quick --postgres postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mindstore import SessionManager, SQLiteStore
from mindstore.store.base import NewMessage, SessionKey


def vocabulary(n: int, rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(4, 9))))
    return sorted(words)


def sentence(vocab: list[str], weights: list[float], rng: random.Random) -> str:
    return " ".join(rng.choices(vocab, weights, k=rng.randint(10, 30)))


async def interleaved(
    ours: Callable[[], Awaitable[Any]], base: Callable[[], Any], reps: int
) -> tuple[float, float]:
    """Median ms of ``ours`` and ``base``, alternating call by call so that load from other
    processes hits both sides alike."""
    a: list[float] = []
    b: list[float] = []
    for _ in range(reps):
        t = time.perf_counter()
        await ours()
        a.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        base()
        b.append((time.perf_counter() - t) * 1000)
    return statistics.median(a), statistics.median(b)


def row(name: str, ms: float, base: float, target: str) -> str:
    return f"| {name:<34} | {ms:9.3f} | {base:9.3f} | {ms / base:6.2f}x | {target:<12} |"


HEADER = (
    f"| {'case':<34} | {'median ms':>9} | {'base ms':>9} | {'ratio':>7} | {'target':<12} |\n"
    f"|{'-' * 36}|{'-' * 11}|{'-' * 11}|{'-' * 9}|{'-' * 14}|"
)


async def bench_list(path: Path, n_sessions: int, reps: int) -> tuple[float, float]:
    store = SQLiteStore(path)
    try:
        m = SessionManager(store, namespace="bench")
        other = SessionManager(store, namespace="noise")
        t = time.perf_counter()
        for i in range(n_sessions):
            await m.create(f"session {i}", model="m")
            if i % 10 == 0:
                await other.create(f"noise {i}")
        print(f"created {n_sessions:,} sessions in {time.perf_counter() - t:.1f} s")
        first = await m.list()
        assert len(first) == 50
        conn = sqlite3.connect(path)
        try:
            sql = (
                "SELECT * FROM sessions WHERE namespace = ?"
                " ORDER BY updated_us DESC, session_id DESC LIMIT 50"
            )
            ours, base = await interleaved(
                lambda: m.list(), lambda: conn.execute(sql, ["bench"]).fetchall(), reps
            )
        finally:
            conn.close()
    finally:
        await store.aclose()
    return ours, base


async def bench_list_postgres(url: str, n_sessions: int, reps: int) -> tuple[float, float]:
    """list() on PostgreSQL in a throw-away schema; baseline: the same page by one raw query
    on its own connection."""
    import uuid

    import psycopg

    from mindstore import PostgresStore

    schema = f"bench_manager_{uuid.uuid4().hex[:8]}"
    store = await PostgresStore.open(url, schema=schema, min_size=1, max_size=4)
    try:
        m = SessionManager(store, namespace="bench")
        t = time.perf_counter()
        for i in range(n_sessions):
            await m.create(f"session {i}", model="m")
        print(f"postgres: created {n_sessions:,} sessions in {time.perf_counter() - t:.1f} s")
        assert len(await m.list()) == 50
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            sql = (
                f'SELECT * FROM "{schema}".sessions WHERE namespace = %s'
                " ORDER BY updated_at DESC, session_id DESC LIMIT 50"
            )
            ours: list[float] = []
            base: list[float] = []
            for _ in range(reps):
                t = time.perf_counter()
                await m.list()
                ours.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                await (await conn.execute(sql, ["bench"])).fetchall()
                base.append((time.perf_counter() - t) * 1000)
    finally:
        await store.aclose()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return statistics.median(ours), statistics.median(base)


async def bench_search(
    path: Path, n_sessions: int, per_session: int, reps: int
) -> list[tuple[str, float, float]]:
    rng = random.Random(42)
    vocab = vocabulary(5000, rng)
    weights = [1 / (r + 1) for r in range(len(vocab))]  # Zipf
    texts: list[list[str]] = [
        [sentence(vocab, weights, rng) for _ in range(per_session)] for _ in range(n_sessions)
    ]
    queries = {
        "common word": vocab[20],
        "medium word": vocab[400],
        "rare word": vocab[3500],
        "two words (AND)": f"{vocab[30]} {vocab[200]}",
        "phrase": f'"{texts[7][3].split()[1]} {texts[7][3].split()[2]}"',
        "prefix": vocab[300][:4] + "*",
    }

    store = SQLiteStore(path)
    try:
        t = time.perf_counter()
        for s, session_texts in enumerate(texts):
            key = SessionKey(namespace="bench", session_id=f"s{s:05d}")
            items = [
                NewMessage(
                    message={
                        "id": f"m{i}",
                        "role": "user" if i % 2 == 0 else "assistant",
                        "parts": [{"type": "text", "text": text}],
                    },
                    tokens=len(text) // 4,
                )
                for i, text in enumerate(session_texts)
            ]
            await store.append(key, items)
        # a second namespace the search must skip
        await store.append(
            SessionKey(namespace="noise", session_id="s00000"),
            [
                NewMessage(
                    message={"id": "x", "role": "user", "parts": [{"type": "text", "text": q}]}
                )
                for q in queries.values()
            ],
        )
        total = n_sessions * per_session
        print(f"indexed {total:,} messages in {time.perf_counter() - t:.1f} s")
        m = SessionManager(store, namespace="bench")
        # Baseline: a plain FTS5 table with the same texts, queried the simplest way.
        plain = sqlite3.connect(path.with_name("plain-fts.db"))
        try:
            plain.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize = 'porter unicode61')")
            plain.executemany("INSERT INTO t (text) VALUES (?)", ((x,) for ts in texts for x in ts))
            plain.commit()
            sql = "SELECT rowid, text, bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 20"
            results = {}
            for name, q in queries.items():
                hits = await m.search(q)
                assert hits, f"no hits for {name}: {q}"
                assert plain.execute(sql, [q]).fetchall(), f"baseline: no hits for {q}"
                results[name] = await interleaved(
                    lambda q=q: m.search(q), lambda q=q: plain.execute(sql, [q]).fetchall(), reps
                )
        finally:
            plain.close()
    finally:
        await store.aclose()
    return [(name, *results[name]) for name in queries]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller search corpus")
    parser.add_argument("--postgres", metavar="URL", help="also time list() on PostgreSQL")
    args = parser.parse_args()
    n_list = 10_000
    n_sessions, per_session = (200, 50) if args.quick else (1_000, 100)
    reps = 30 if args.quick else 50
    with tempfile.TemporaryDirectory() as tmp:
        list_ms, list_base = await bench_list(Path(tmp) / "list.db", n_list, reps)
        search = await bench_search(Path(tmp) / "search.db", n_sessions, per_session, reps)
    pg = await bench_list_postgres(args.postgres, n_list, reps) if args.postgres else None
    print()
    print(
        f"SessionManager on SQLite — list: {n_list:,} sessions; "
        f"search: {n_sessions:,} sessions × {per_session} messages; {reps} reps, median"
    )
    print(HEADER)
    print(row("list() first page (50)", list_ms, list_base, "≤ 5 ms"))
    if pg is not None:
        print(row("list() first page (50), PostgreSQL", pg[0], pg[1], "≤ 5 ms"))
    for name, ms, base in search:
        print(row(f"search: {name}", ms, base, "≤ 3x base"))
    overall = statistics.median(ms for _, ms, _ in search)
    overall_base = statistics.median(b for _, _, b in search)
    print(row("search: median over the mix", overall, overall_base, "≤ 3x base"))
    ratios = [ms / base for _, ms, base in search]
    ratio = statistics.median(ratios)
    print(f"search: median of the per-query ratios: {ratio:.2f}x (the target's measure)")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    ok_list = list_ms <= 5.0 and (pg is None or pg[0] <= 5.0)
    ok_search = ratio <= 3
    print(
        f"\nlist ≤ 5 ms: {'PASS' if ok_list else 'FAIL'}; "
        f"search median within 3x plain FTS5: {'PASS' if ok_search else 'FAIL'}"
    )


if __name__ == "__main__":
    asyncio.run(main())
