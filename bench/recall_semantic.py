"""Evidence recall@10 on the LoCoMo development half for the lexical, semantic and hybrid modes
(issue 17), with the offline default embedder, on SQLite and PostgreSQL (exact scan, and
pgvector HNSW when a server with pgvector is given).

Run::

    .venv/bin/python bench/recall_semantic.py                      # SQLite + shared PostgreSQL
    MINDSTORE_BENCH_PGVECTOR_URL=postgresql://... .venv/bin/python bench/recall_semantic.py

The data and the metric are those of ``../shared/locomo/README.md`` (read there, never copied):
one namespace per conversation, one session per ``session_N``, one message per turn (id =
``dia_id``, text ``"<speaker>: <text>"``); every question of categories 1-4 whose evidence ids
exist is run verbatim through ``SessionManager(store, namespace=conv).search(question,
limit=10, mode=...)``; recall@10 = mean share of its evidence ids among the results.
Embeddings go through ``bench/embedding_cache.py`` (the model is slow on a busy machine; the
first run fills the cache: ~2,800 turns and ~800 questions). Latency is the search call's,
query embedding included (cached after the first run: see the note printed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from embedding_cache import CachingEmbedder

from mindstore import SessionManager, SQLiteStore
from mindstore.embeddings import default_embedder
from mindstore.store.base import NewMessage, SessionKey

DATA = Path(
    os.environ.get("MINDSTORE_LOCOMO")
    or Path(__file__).resolve().parents[2] / "shared" / "locomo" / "locomo-dev.json"
)
PG_URL = os.environ.get("MINDSTORE_BENCH_POSTGRES_URL") or os.environ.get(
    "MINDSTORE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
PGVECTOR_URL = os.environ.get("MINDSTORE_BENCH_PGVECTOR_URL", "")
CATEGORIES = (1, 2, 3, 4)


def sessions(conv: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    c = conv["conversation"]
    names = sorted((k for k in c if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k[8:]))
    return [(k, c[k]) for k in names]


def questions(conv: dict[str, Any]) -> list[dict[str, Any]]:
    ids = {t["dia_id"] for _, ts in sessions(conv) for t in ts}
    return [
        q
        for q in conv["qa"]
        if q.get("category") in CATEGORIES
        and q.get("evidence")
        and all(e in ids for e in q["evidence"])
    ]


async def load(store: Any, data: list[dict[str, Any]]) -> None:
    for conv in data:
        a = conv["conversation"]["speaker_a"]
        for name, ts in sessions(conv):
            items = [
                NewMessage(
                    message={
                        "id": t["dia_id"],
                        "role": "user" if t["speaker"] == a else "assistant",
                        "parts": [{"type": "text", "text": f"{t['speaker']}: {t['text']}"}],
                    }
                )
                for t in ts
            ]
            await store.append(SessionKey(namespace=conv["sample_id"], session_id=name), items)


@asynccontextmanager
async def backend(kind: str, embedder: Any) -> AsyncIterator[Any]:
    if kind == "sqlite":
        path = Path(tempfile.mkdtemp()) / "recall.db"
        async with SQLiteStore(path, embedder=embedder) as store:
            yield store
        return
    from mindstore.store.postgres import PostgresStore

    url = PGVECTOR_URL if kind == "postgres+pgvector" else PG_URL
    index = "pgvector" if kind == "postgres+pgvector" else "exact"
    schema = f"bench_recall_{uuid.uuid4().hex[:10]}"
    store = await PostgresStore.open(url, schema=schema, embedder=embedder, vector_index=index)
    try:
        yield store
    finally:
        await store.aclose()
        import psycopg

        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def run(kind: str, data: list[dict[str, Any]], embedder: Any, modes: list[Any]) -> None:
    async with backend(kind, embedder) as store:
        await load(store, data)
        t = time.perf_counter()
        n = await store.embed_pending()
        embed_s = time.perf_counter() - t
        print(f"{kind}: embedded {n} turns in {embed_s:.1f} s (cache hits {embedder.hits})")
        for mode, weight in modes:
            recall, times = [], []
            for conv in data:
                m = SessionManager(store, namespace=conv["sample_id"])
                for q in questions(conv):
                    t = time.perf_counter()
                    hits = await m.search(
                        q["question"], limit=10, mode=mode, semantic_weight=weight
                    )
                    times.append(time.perf_counter() - t)
                    ev = set(q["evidence"])
                    recall.append(len(ev & {h.message_id for h in hits}) / len(ev))
            times.sort()
            label = mode if mode != "hybrid" else f"hybrid w={weight}"
            print(
                f"| {kind} | {label} | **{statistics.fmean(recall):.3f}** | {len(recall)} | "
                f"{statistics.median(times) * 1000:.1f} ms | "
                f"{times[int(0.95 * len(times))] * 1000:.1f} ms |"
            )


async def main(args: argparse.Namespace, data: list[dict[str, Any]]) -> None:
    embedder = CachingEmbedder(default_embedder())
    modes: list[Any] = [("lexical", 0.5), ("semantic", 0.5)]
    modes += [("hybrid", float(w)) for w in args.weights.split(",")]
    kinds = ["sqlite"]
    if not args.no_postgres:
        kinds.append("postgres")
        if PGVECTOR_URL:
            kinds.append("postgres+pgvector")
    print("| backend | mode | recall@10 | questions | p50 | p95 |")
    print("|---|---|---:|---:|---:|---:|")
    for kind in kinds:
        await run(kind, data, embedder, modes)
    print(f"(embedding cache: {embedder.hits} hits, {embedder.misses} misses this run)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--weights", default="0.5", help="hybrid weights, comma-separated")
    parser.add_argument(
        "--conversations", type=int, default=None, help="only the first N conversations"
    )
    args = parser.parse_args()
    data = json.loads(DATA.read_text())[: args.conversations]
    sys.exit(asyncio.run(main(args, data)))
