"""LangGraph store benchmark: MindstoreStore vs LangGraph's own AsyncSqliteStore, same run.

Run::

    .venv/bin/python bench/bench_langgraph.py           # 5,000 items
    .venv/bin/python bench/bench_langgraph.py --quick   # 1,000 items
    MINDSTORE_BENCH_POSTGRES_URL=postgresql://… .venv/bin/python bench/bench_langgraph.py

Workload (the calls a LangGraph agent's memory makes), on one file-backed store each:
``aput`` of N items spread over 50 user namespaces (``("users", uid, "memories")``), then the
median per call of ``aget`` (random key), ``asearch`` with a ``filter`` in one user namespace,
``asearch`` with a ``query`` in one user namespace, ``alist_namespaces(prefix=("users",))``.

Semantic search (``index={"dims", "embed", "fields"}``): the same N items put with an index
config into MindstoreStore and into LangGraph's ``InMemoryStore`` (the baseline, same run, same
scripted embed function — a hashed bag of words, so both pay the same embedding cost), then the
median ``asearch(query=…)`` in one user namespace and across all of them, and how often the two
stores return the same top 10 (same keys in the same order; scores equal to 1e-5).

Baseline: ``langgraph.store.sqlite.aio.AsyncSqliteStore`` (``pip install
langgraph-checkpoint-sqlite``; a benchmark peer, never a mindstore dependency) on its own SQLite
file. Without an ``index`` config it ignores ``query`` (no full-text search), so its query row
measures a filtered listing, not a search; mindstore's row is a BM25 search. Ratios are
mindstore / baseline (lower is better). Timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore

from mindstore.integrations.langgraph import MindstoreStore
from mindstore.store import open_store

RNG = random.Random(11)
WORDS = [
    "".join(RNG.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(RNG.randint(4, 9)))
    for _ in range(3000)
]
USERS = [f"u{i}" for i in range(50)]


def memory(i: int) -> dict[str, Any]:
    return {"text": " ".join(RNG.choices(WORDS, k=12)), "kind": f"k{i % 5}", "n": i}


async def per_call(fn: Callable[[], Awaitable[Any]], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6  # µs


async def workload(store: BaseStore, n: int, repeat: int) -> dict[str, float]:
    rng = random.Random(3)
    t0 = time.perf_counter()
    for i in range(n):
        await store.aput(("users", USERS[i % len(USERS)], "memories"), f"m{i}", memory(i))
    out = {"aput (per item)": (time.perf_counter() - t0) / n * 1e6}

    async def get() -> None:
        i = rng.randrange(n)
        assert await store.aget(("users", USERS[i % len(USERS)], "memories"), f"m{i}")

    async def filtered() -> None:
        ns = ("users", rng.choice(USERS), "memories")
        await store.asearch(ns, filter={"kind": "k3"}, limit=10)

    async def query() -> None:
        ns = ("users", rng.choice(USERS), "memories")
        await store.asearch(ns, query=rng.choice(WORDS[:300]), limit=10)

    async def listing() -> None:
        await store.alist_namespaces(prefix=("users",), limit=100)

    out["aget"] = await per_call(get, repeat)
    out["asearch filter"] = await per_call(filtered, repeat)
    out["asearch query"] = await per_call(query, repeat)
    out["alist_namespaces"] = await per_call(listing, max(10, repeat // 10))
    return out


DIMS = 256


_WORD_VECTORS: dict[str, list[float]] = {}


def _word_vector(word: str) -> list[float]:
    vector = _WORD_VECTORS.get(word)
    if vector is None:
        rng = random.Random(word)
        vector = _WORD_VECTORS[word] = [rng.gauss(0.0, 1.0) for _ in range(DIMS)]
    return vector


def embed(texts: list[str]) -> list[list[float]]:
    """A scripted embedding model: a text is the sum of its words' fixed random directions
    (dense, so scores are continuous and two stores' rankings can be compared exactly)."""
    out = []
    for text in texts:
        v = [0.0] * DIMS
        for word in text.split():
            v = [a + b for a, b in zip(v, _word_vector(word), strict=True)]
        out.append(v)
    return out


INDEX: Any = {"dims": DIMS, "embed": embed, "fields": ["text"]}


async def semantic_workload(
    store: BaseStore, n: int, repeat: int, queries: list[str]
) -> tuple[dict[str, float], list[list[tuple[str, float]]]]:
    rng = random.Random(5)
    items = random.Random(9)
    t0 = time.perf_counter()
    for i in range(n):
        text = " ".join(items.choices(WORDS, k=12))
        await store.aput(("users", USERS[i % len(USERS)], "memories"), f"m{i}", {"text": text})
    out = {"aput with embedding (per item)": (time.perf_counter() - t0) / n * 1e6}

    async def one_user() -> None:
        ns = ("users", rng.choice(USERS), "memories")
        await store.asearch(ns, query=" ".join(rng.choices(WORDS, k=3)), limit=10)

    async def all_users() -> None:
        await store.asearch(("users",), query=" ".join(rng.choices(WORDS, k=3)), limit=10)

    out["asearch semantic, one user"] = await per_call(one_user, repeat)
    out["asearch semantic, all users"] = await per_call(all_users, max(5, repeat // 20))
    tops = []
    for q in queries:
        hits = await store.asearch(("users",), query=q, limit=10)
        tops.append([(h.key, h.score or 0.0) for h in hits])
    return out, tops


async def run_semantic(url: str | None, n: int, repeat: int) -> dict[str, Any]:
    """MindstoreStore (SQLite file, or PostgreSQL when ``url``) against InMemoryStore."""
    from langgraph.store.memory import InMemoryStore

    rng = random.Random(21)
    queries = [" ".join(rng.choices(WORDS, k=3)) for _ in range(20)]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_store(url or f"{tmp}/s.db")
        try:
            results["mindstore"] = await semantic_workload(
                MindstoreStore(store, namespace="semantic", index=INDEX), n, repeat, queries
            )
        finally:
            await store.aclose()
    results["InMemoryStore"] = await semantic_workload(
        InMemoryStore(index=INDEX), n, repeat, queries
    )
    return results


def print_semantic(label: str, results: dict[str, Any], n: int) -> None:
    ours, ours_tops = results["mindstore"]
    base, base_tops = results["InMemoryStore"]
    same = sum(
        [k for k, _ in a] == [k for k, _ in b]
        and all(abs(x - y) <= 1e-5 for (_, x), (_, y) in zip(a, b, strict=True))
        for a, b in zip(ours_tops, base_tops, strict=True)
    )
    print()
    print(f"Semantic search, {label}, {n} items, dims={DIMS}; median µs per call")
    print("operation | mindstore | InMemoryStore | ratio")
    print("--- | --- | --- | ---")
    for op in ours:
        print(f"{op} | {ours[op]:.0f} | {base[op]:.0f} | {ours[op] / base[op]:.2f}×")
    print(f"same top 10 (keys, order, scores to 1e-5): {same} of {len(ours_tops)} queries")


async def run_mindstore(url: str, n: int, repeat: int) -> dict[str, float]:
    store = await open_store(url)
    try:
        return await workload(MindstoreStore(store, namespace="bench"), n, repeat)
    finally:
        await store.aclose()


async def run_postgres(url: str, n: int, repeat: int) -> dict[str, float]:
    """In a schema of its own, dropped afterwards: the server's other data is never touched."""
    import psycopg

    from mindstore.store.postgres import PostgresStore

    schema = f"bench_langgraph_{os.getpid()}"
    store = await PostgresStore.open(url, schema=schema)
    try:
        return await workload(MindstoreStore(store, namespace="bench"), n, repeat)
    finally:
        await store.aclose()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def run_baseline(path: Path, n: int, repeat: int) -> dict[str, float] | None:
    try:
        from langgraph.store.sqlite.aio import AsyncSqliteStore
    except ImportError:
        return None
    async with AsyncSqliteStore.from_conn_string(str(path)) as store:
        await store.setup()
        return await workload(store, n, repeat)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 items, fewer repetitions")
    args = parser.parse_args()
    n, repeat = (1000, 200) if args.quick else (5000, 500)
    with tempfile.TemporaryDirectory() as tmp:
        results = {"mindstore SQLite": await run_mindstore(f"{tmp}/m.db", n, repeat)}
        pg = os.environ.get("MINDSTORE_BENCH_POSTGRES_URL")
        if pg:
            results["mindstore PostgreSQL"] = await run_postgres(pg, n, repeat)
        base = await run_baseline(Path(tmp) / "lg.db", n, repeat)
    semantic = {"SQLite": await run_semantic(None, n, repeat)}
    if pg:
        semantic["PostgreSQL"] = await run_semantic(pg, n, repeat)
    print(f"LangGraph store, {n} items over {len(USERS)} namespaces; median µs per call")
    header = ["operation", *results, "AsyncSqliteStore", "ratio (SQLite)"]
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for op in results["mindstore SQLite"]:
        row = [op, *(f"{r[op]:.0f}" for r in results.values())]
        if base is None:
            row += ["not installed", "-"]
        else:
            row += [f"{base[op]:.0f}", f"{results['mindstore SQLite'][op] / base[op]:.2f}×"]
        print(" | ".join(row))
    for label, result in semantic.items():
        print_semantic(label, result, n)


if __name__ == "__main__":
    asyncio.run(main())
