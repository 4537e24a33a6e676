"""Memory recall@10 on the MADial-Bench development half (Chinese and its English translation).

Run::

    .venv/bin/python bench/recall_madial.py            # SQLite, default lexical search
    .venv/bin/python bench/recall_madial.py --postgres # also PostgreSQL

PostgreSQL is ``MINDSTORE_BENCH_POSTGRES_URL``, else ``MINDSTORE_TEST_POSTGRES_URL`` (a throw-away
schema each run, :mod:`bench_stores`).

Data: ``../shared/madial/madial-dev.json`` (override with ``MINDSTORE_MADIAL``; evaluation-only,
never copied into the repository), scored as its README says: one namespace per user, one
session ``memories``, one message per memory (``id = "m<id>"``, its ``event`` as text); every
dialogue's query is its lines up to the first test turn joined with no separator, passed
verbatim to ``SessionManager.search(query, limit=10)``; recall@10 is the share of its relevant
memories among the results (no results: 0). A plain Okapi BM25 over the same texts (k1 1.5,
b 0.75; Chinese as character unigrams and bigrams, English as lower-case words minus a small
stop list, no stemming: the README's baseline) runs in the same process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench_stores import close_store, open_bench_store

from mindstore.manager import SessionManager
from mindstore.store.base import Store

DATA = Path(
    os.environ.get(
        "MINDSTORE_MADIAL", Path(__file__).resolve().parents[2] / "shared/madial/madial-dev.json"
    )
)
STOP = set(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "is",
        "are",
        "was",
        "were",
        "be",
        "i",
        "you",
        "he",
        "she",
        "it",
        "we",
        "they",
    ]
)
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def plain_terms(text: str) -> list[str]:
    """The baseline's terms: CJK unigrams and bigrams, other words lower-cased."""
    out: list[str] = []
    for run in re.findall(r"[\u3400-\u9fff\uf900-\ufaff]+|[A-Za-z0-9']+", text):
        if _CJK.match(run):
            out += list(run) + [run[i : i + 2] for i in range(len(run) - 1)]
        else:
            w = run.lower()
            if w not in STOP:
                out.append(w)
    return out


def plain_bm25(docs: dict[str, str], query: str, k: int = 10) -> list[str]:
    terms = {d: Counter(plain_terms(t)) for d, t in docs.items()}
    n = len(terms)
    avg = sum(sum(c.values()) for c in terms.values()) / max(1, n)
    df: Counter[str] = Counter()
    for c in terms.values():
        df.update(c.keys())
    q = set(plain_terms(query))
    scores: dict[str, float] = {}
    for d, c in terms.items():
        dl = sum(c.values())
        s = 0.0
        for t in q:
            f = c.get(t, 0)
            if f:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * f * 2.5 / (f + 1.5 * (0.25 + 0.75 * dl / avg))
        if s > 0:
            scores[d] = s
    return [d for d, _ in sorted(scores.items(), key=lambda x: -x[1])[:k]]


def cases(
    lang: dict[str, Any],
) -> tuple[dict[int, dict[str, str]], list[tuple[int, str, set[str]]]]:
    memories: dict[int, dict[str, str]] = {}
    for m in lang["memories"]:
        memories.setdefault(int(m["user_id"]), {})[f"m{m['id']}"] = str(m["event"])
    out = []
    for d in lang["dialogues"]:
        lines = d["dialogue"]
        turn = d["test_turn"][0] if isinstance(d["test_turn"], list) else d["test_turn"]
        relevant = d["relevant_id"]
        ids = relevant if isinstance(relevant, list) else [relevant]
        out.append((int(d["user_id"]), "".join(lines[: int(turn)]), {f"m{i}" for i in ids}))
    return memories, out


async def score(store: Store, lang: dict[str, Any], tag: str) -> dict[str, Any]:
    memories, qs = cases(lang)
    for user, docs in memories.items():
        m = SessionManager(store, namespace=f"{tag}-{user}")
        await m.append_all(
            "memories",
            [
                {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}
                for mid, text in docs.items()
            ],
        )
    ours, base, empty, lat = [], [], 0, []
    for user, query, relevant in qs:
        m = SessionManager(store, namespace=f"{tag}-{user}")
        t0 = time.perf_counter()
        hits = [h.message_id for h in await m.search(query, limit=10)]
        lat.append(time.perf_counter() - t0)
        empty += not hits
        ours.append(len(relevant & set(hits)) / len(relevant))
        plain = plain_bm25(memories[user], query)
        base.append(len(relevant & set(plain)) / len(relevant))
    return {
        "queries": len(qs),
        "mindstore": statistics.mean(ours),
        "plain": statistics.mean(base),
        "empty": empty / len(qs),
        "median_ms": statistics.median(lat) * 1e3,
    }


async def run(backends: list[str], data: dict[str, Any]) -> None:
    print(
        "| backend | language | queries | mindstore recall@10 | plain BM25 | zero results "
        "| median |"
    )
    print("|---|---|---|---|---|---|---|")
    for backend in backends:
        for lang in ("zh", "en"):
            with tempfile.TemporaryDirectory() as d:
                store, token = await open_bench_store(backend, Path(d))
                try:
                    r = await score(store, data[lang], lang)
                finally:
                    await close_store(store, token)
            print(
                f"| {backend} | {lang} | {r['queries']} | **{r['mindstore']:.3f}** | "
                f"{r['plain']:.3f} | {r['empty']:.1%} | {r['median_ms']:.2f} ms |"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", action="store_true", help="also on PostgreSQL")
    args = parser.parse_args(argv)
    data = json.loads(DATA.read_text(encoding="utf-8"))
    asyncio.run(run(["sqlite", "postgres"] if args.postgres else ["sqlite"], data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
