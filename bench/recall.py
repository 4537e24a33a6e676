"""Evidence recall@10 on the LoCoMo development half (DESIGN §5.3, issue 16).

Run::

    .venv/bin/python bench/recall.py                 # SQLite, and PostgreSQL when reachable
    .venv/bin/python bench/recall.py --no-postgres   # SQLite only

Reads ``../shared/locomo/locomo-dev.json`` (override with ``MINDSTORE_LOCOMO``; the data is
evaluation-only and never copied into the repository) exactly as its README says: one namespace
per conversation, one session per ``session_N``, one message per turn with ``id = dia_id``,
role ``user`` for ``speaker_a`` and ``assistant`` for ``speaker_b``, a single text part
``"<speaker>: <text>"``; every question of categories 1–4 whose evidence ids all exist is run
verbatim through ``SessionManager(store, namespace=conv).search(question, limit=10)``, and
recall@10 is the mean share of its evidence ids among the returned message ids (no results:
0). Printed per backend and mode (``any`` — the default — and ``all``): recall overall and per
category, the zero-result rate, median and p95 latency; next to a plain Okapi BM25 over the
same texts computed in the same run (k1 1.5, b 0.75, a small English stop list, no stemming:
the README's baseline). PostgreSQL is ``MINDSTORE_BENCH_POSTGRES_URL`` (else
``MINDSTORE_TEST_POSTGRES_URL``, else the local default), in a throw-away schema.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
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

from mindstore import SessionManager, SQLiteStore
from mindstore.store.base import NewMessage, SessionKey

DATA = Path(
    os.environ.get("MINDSTORE_LOCOMO")
    or Path(__file__).resolve().parents[2] / "shared" / "locomo" / "locomo-dev.json"
)
URL = (
    os.environ.get("MINDSTORE_BENCH_POSTGRES_URL")
    or os.environ.get("MINDSTORE_TEST_POSTGRES_URL")
    or "postgresql://postgres@127.0.0.1:5432/test"
)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_PLAIN_STOP_WORDS = """
a an the and or but if of to in on at by for with from is are was were be been am do does did
what when where who whom which why how i you he she it we they me him her us them my your his
its our their this that these those there here as so not no
"""
PLAIN_STOP = frozenset(_PLAIN_STOP_WORDS.split())


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


class Score:
    def __init__(self) -> None:
        self.recall: list[float] = []
        self.by_cat: dict[int, list[float]] = defaultdict(list)
        self.zero = 0
        self.times: list[float] = []

    def add(self, q: dict[str, Any], got: list[str], seconds: float) -> None:
        ev = set(q["evidence"])
        r = len(ev & set(got)) / len(ev)
        self.recall.append(r)
        self.by_cat[q["category"]].append(r)
        self.zero += not got
        self.times.append(seconds)

    def row(self, name: str) -> str:
        n = len(self.recall)
        cats = " | ".join(
            f"{statistics.fmean(self.by_cat[c]):.3f}" if self.by_cat[c] else "–" for c in CATEGORIES
        )
        t = sorted(self.times)
        p95 = t[min(len(t) - 1, int(0.95 * len(t)))] if t else 0.0
        med = statistics.median(t) if t else 0.0
        return (
            f"| {name} | **{statistics.fmean(self.recall):.3f}** | {cats} | "
            f"{100 * self.zero / n:.1f} % | {med * 1000:.2f} ms | {p95 * 1000:.2f} ms |"
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


async def fill(store: Any, data: list[dict[str, Any]]) -> None:
    for conv in data:
        ns = conv["sample_id"]
        for name, ts in turns(conv):
            key = SessionKey(namespace=ns, session_id=name)
            await store.append(key, [NewMessage(message=message(conv, t), tokens=10) for t in ts])


async def measure(store: Any, data: list[dict[str, Any]], match: str) -> Score:
    score = Score()
    for conv in data:
        manager = SessionManager(store, namespace=conv["sample_id"])
        for q in questions(conv):
            t0 = time.perf_counter()
            hits = await manager.search(q["question"], limit=10, match=match)
            score.add(q, [h.message_id for h in hits], time.perf_counter() - t0)
    return score


@asynccontextmanager
async def postgres() -> AsyncIterator[Any]:
    import psycopg

    from mindstore.store.postgres import PostgresStore

    schema = f"recall_{uuid.uuid4().hex[:8]}"
    store = await PostgresStore.open(URL, schema=schema)
    try:
        yield store
    finally:
        await store.aclose()
        with psycopg.connect(URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    args = parser.parse_args()
    if not os.path.exists(DATA):  # noqa: ASYNC240 - once, before anything runs
        print(f"skipped: {DATA} not found (the LoCoMo development half; see bench/recall.py)")
        return
    data = load()
    n = sum(len(questions(c)) for c in data)
    print(f"LoCoMo development half: {len(data)} conversations, {n} questions (categories 1-4)\n")
    cats = " | ".join(CATEGORIES.values())
    print(f"| search | recall@10 | {cats} | zero results | median | p95 |")
    print("|---|---|" + "---|" * len(CATEGORIES) + "---|---|---|")
    print(plain_bm25(data).row("plain Okapi BM25 (README baseline, same run)"))
    with tempfile.TemporaryDirectory() as tmp:
        async with SQLiteStore(Path(tmp) / "recall.db") as store:
            await fill(store, data)
            for match in ("any", "all"):
                print((await measure(store, data, match)).row(f"SQLite, match={match!r}"))
    if args.no_postgres:
        return
    try:
        async with postgres() as store:
            await fill(store, data)
            for match in ("any", "all"):
                print((await measure(store, data, match)).row(f"PostgreSQL, match={match!r}"))
    except Exception as e:  # no server: say so, the SQLite rows stand
        print(f"\nPostgreSQL skipped: {type(e).__name__}: {e}", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
