"""Context-memory benchmark: the frozen prompt, tool generation, rendering and entry search.

Run::

    .venv/bin/python bench/bench_context.py           # full (100,000 entries)
    .venv/bin/python bench/bench_context.py --quick   # 10,000 entries, fewer repetitions

Workloads (issue 3 targets), each against a baseline measured in the same run:

1. ``freeze_system_prompt()`` on a warm session for 1…200 blocks: O(1) and no provider calls.
   Baseline: the first (cold) freeze of the same session, which renders every block. Also a
   new Session object with ``with_cached_prompt()`` (what a new process does: one store read,
   no provider calls).
2. ``tools()`` and ``render_system_prompt`` for 20 blocks of every kind: under 1 ms each.
   Baseline for tools(): building the same four Tool objects by hand (no store read).
3. ``StoreSearchProvider.search`` over 100,000 entries, median over many queries, vs a plain
   FTS5 ``MATCH … ORDER BY rank LIMIT 10`` over a one-table copy of the same text with plain
   ``sqlite3`` in the same process (target: within 3×).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mindstore.context.providers import StaticProvider, StoreSearchProvider, StoreSkillProvider
from mindstore.prompt import ContextBlock, render_system_prompt
from mindstore.search import parse_query
from mindstore.session import Session
from mindstore.store.base import ScopeKey
from mindstore.store.sqlite import SQLiteStore
from mindstore.tools import Tool, ToolSet

RNG = random.Random(7)
VOCAB = [
    "".join(RNG.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(RNG.randint(3, 9)))
    for _ in range(5000)
]
WEIGHTS = [1.0 / (i + 1) for i in range(len(VOCAB))]


def sentence(n: int) -> str:
    return " ".join(RNG.choices(VOCAB, weights=WEIGHTS, k=n))


class CountingProvider:
    calls = 0

    def __init__(self, text: str) -> None:
        self.text = text

    def get(self) -> str:
        CountingProvider.calls += 1
        return self.text


def median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


async def time_async(fn: Callable[[], Awaitable[Any]], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        await fn()
        out.append(time.perf_counter() - t)
    return out


def time_sync(fn: Callable[[], Any], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))


# ---- 1. frozen prompt --------------------------------------------------------------------------
async def bench_freeze(store: SQLiteStore, repeat: int) -> list[str]:
    rows = []
    failures = []
    for n in (1, 5, 20, 50, 200):
        s = Session.create(store, f"freeze-{n}").with_cached_prompt()
        for i in range(n):
            if i % 2:
                s.with_context(f"static{i}", provider=CountingProvider(sentence(40)))
            else:
                s.with_context(f"block{i}", description="notes", max_tokens=2000)
        CountingProvider.calls = 0
        t = time.perf_counter()
        frozen = await s.freeze_system_prompt()
        cold = time.perf_counter() - t
        cold_calls = CountingProvider.calls
        CountingProvider.calls = 0
        warm = await time_async(s.freeze_system_prompt, repeat)
        warm_calls = CountingProvider.calls

        async def new_process(n: int = n) -> str:
            fresh = Session.create(store, f"freeze-{n}").with_cached_prompt()
            return await fresh.freeze_system_prompt()

        cached = await time_async(new_process, max(20, repeat // 20))
        assert await new_process() == frozen
        if warm_calls:
            failures.append(f"warm freeze called providers {warm_calls}× at {n} blocks")
        rows.append(
            [
                str(n),
                f"{cold * 1e6:.0f}",
                str(cold_calls),
                f"{median_us(warm):.2f}",
                str(warm_calls),
                f"{median_us(cached):.0f}",
                f"{cold / statistics.median(warm):.0f}×",
            ]
        )
    table(
        "1. freeze_system_prompt (µs, median); warm = same session, cached = new Session object",
        [
            "blocks",
            "cold",
            "provider calls",
            "warm",
            "provider calls",
            "cached (new obj)",
            "cold/warm",
        ],
        rows,
    )
    warm_first, warm_last = float(rows[0][3]), float(rows[-1][3])
    print(f"   warm freeze at 200 blocks / at 1 block: {warm_last / warm_first:.2f}× (O(1))")
    if warm_last > 5 * warm_first + 1:
        failures.append("warm freeze grows with the number of blocks")
    return failures


# ---- 2. tools() and rendering --------------------------------------------------------------------
async def bench_tools_render(store: SQLiteStore, repeat: int) -> list[str]:
    s = Session.create(store, "tools-20")
    for i in range(14):
        s.with_context(f"mem{i}", description=f"Memory {i}", max_tokens=1000 + i)
    for i in range(2):
        s.with_context(f"soul{i}", provider=StaticProvider(sentence(30)))
    for i in range(2):
        s.with_context(f"kb{i}", description="Knowledge", provider=StoreSearchProvider(store))
    for i in range(2):
        s.with_context(f"skills{i}", provider=StoreSkillProvider(store))
    await s.tools()  # warm: blocks bound once
    tools_t = await time_async(s.tools, repeat)

    blocks = [
        ContextBlock(
            label=f"block{i}",
            description="A description",
            content=sentence(60),
            tokens=80,
            max_tokens=1000 if i % 2 else None,
            kind=("readonly", "writable", "searchable", "loadable")[i % 4],  # type: ignore[arg-type]
        )
        for i in range(20)
    ]
    render_t = time_sync(lambda: render_system_prompt(blocks), repeat)

    async def noop(args: dict[str, Any]) -> str:
        return ""

    schema = {"type": "object", "properties": {"label": {"type": "string"}}}
    by_hand = time_sync(
        lambda: ToolSet(
            Tool(name=n, description="d", parameters=schema, execute=noop)
            for n in ("set_context", "load_context", "unload_context", "search_context")
        ),
        repeat,
    )
    table(
        "2. 20 blocks (µs, median)",
        ["operation", "median", "p95", "baseline", "ratio"],
        [
            [
                "session.tools()",
                f"{median_us(tools_t):.0f}",
                f"{sorted(tools_t)[int(len(tools_t) * 0.95)] * 1e6:.0f}",
                f"{median_us(by_hand):.1f} (4 Tools by hand)",
                f"{statistics.median(tools_t) / statistics.median(by_hand):.0f}×",
            ],
            [
                "render_system_prompt",
                f"{median_us(render_t):.1f}",
                f"{sorted(render_t)[int(len(render_t) * 0.95)] * 1e6:.1f}",
                "-",
                "-",
            ],
        ],
    )
    failures = []
    if statistics.median(tools_t) >= 1e-3:
        failures.append("tools() for 20 blocks is not under 1 ms")
    if statistics.median(render_t) >= 1e-3:
        failures.append("rendering 20 blocks is not under 1 ms")
    return failures


# ---- 3. entry search -----------------------------------------------------------------------------
async def bench_search(store: SQLiteStore, tmp: Path, entries: int, queries: int) -> list[str]:
    docs = [(f"entry-{i}", sentence(30)) for i in range(entries)]
    key = ScopeKey(namespace="bench", session_id=None, label="knowledge")
    # The first entries go through the public API (and time it); the bulk is loaded with
    # executemany straight into the SQLiteStore schema plus an FTS5 'rebuild' — a hundred
    # thousand single-entry transactions would dominate the run and measure nothing new.
    api_part = min(1000, entries)
    t = time.perf_counter()
    for k, text in docs[:api_part]:
        await store.put_entry(key, k, text)
    put_us = (time.perf_counter() - t) / api_part * 1e6
    t = time.perf_counter()
    raw = sqlite3.connect(tmp / "bench.db", timeout=30)
    with raw:
        raw.executemany(
            "INSERT INTO entries (namespace, scope, label, key, content, description, updated_us)"
            " VALUES ('bench', '', 'knowledge', ?, ?, NULL, ?)",
            [(k, text, i) for i, (k, text) in enumerate(docs[api_part:])],
        )
        raw.execute("INSERT INTO entry_stem (entry_stem) VALUES ('rebuild')")
        raw.execute("INSERT INTO entry_text (entry_text) VALUES ('rebuild')")
    raw.close()
    build = time.perf_counter() - t
    assert await store.count_entries(key) == entries

    plain = sqlite3.connect(tmp / "plain.db")
    plain.execute("PRAGMA journal_mode=WAL")
    plain.execute("PRAGMA synchronous=NORMAL")
    plain.execute("CREATE VIRTUAL TABLE fts USING fts5(key, content, tokenize='porter unicode61')")
    with plain:
        plain.executemany("INSERT INTO fts (key, content) VALUES (?, ?)", docs)

    s = Session.create(store, "search", namespace="bench").with_context(
        "knowledge", provider=StoreSearchProvider(store, recent=0)
    )
    provider = await s.get_context_provider("knowledge")
    # medium-frequency words (top words match most of the corpus; rare ones almost nothing)
    pool = VOCAB[20:400]
    qs = [" ".join(RNG.sample(pool, 1 if i % 2 else 2)) for i in range(queries)]

    def plain_query(q: str) -> None:
        plain.execute(
            "SELECT key, content FROM fts WHERE fts MATCH ? ORDER BY rank LIMIT 10", (q,)
        ).fetchall()

    async def run_ours(q: str) -> None:
        await provider.search(q)

    async def run_store(q: str) -> None:
        await store.search_entries(key, parse_query(q), limit=10)

    async def run_plain(q: str) -> None:
        plain_query(q)

    # Interleaved per query (same cache state for all three), after one warm-up pass.
    runners = (run_ours, run_store, run_plain)
    for q in qs:
        for run in runners:
            await run(q)
    samples: list[list[float]] = [[], [], []]
    for q in qs:
        for n, run in enumerate(runners):
            t = time.perf_counter()
            await run(q)
            samples[n].append(time.perf_counter() - t)
    ours, store_only, base = samples
    plain.close()
    ratio = statistics.median(ours) / statistics.median(base)
    table(
        f"3. search over {entries:,} entries ({queries} queries; put_entry {put_us:.0f} µs each, "
        f"bulk load {build:.1f} s)",
        ["implementation", "median µs", "p95 µs", "ratio"],
        [
            [
                "StoreSearchProvider.search",
                f"{median_us(ours):.0f}",
                f"{sorted(ours)[int(len(ours) * 0.95)] * 1e6:.0f}",
                f"{ratio:.2f}×",
            ],
            [
                "  of which store.search_entries",
                f"{median_us(store_only):.0f}",
                f"{sorted(store_only)[int(len(store_only) * 0.95)] * 1e6:.0f}",
                f"{statistics.median(store_only) / statistics.median(base):.2f}×",
            ],
            [
                "plain FTS5 MATCH … LIMIT 10",
                f"{median_us(base):.0f}",
                f"{sorted(base)[int(len(base) * 0.95)] * 1e6:.0f}",
                "1.00×",
            ],
        ],
    )
    return [] if ratio <= 3 else [f"entry search is {ratio:.2f}× plain FTS5 (target ≤ 3×)"]


async def main(quick: bool) -> int:
    repeat = 300 if quick else 2000
    entries = 10_000 if quick else 100_000
    queries = 100 if quick else 300
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        async with SQLiteStore(tmp / "bench.db") as store:
            failures += await bench_freeze(store, repeat)
            failures += await bench_tools_render(store, repeat)
            failures += await bench_search(store, tmp, entries, queries)
    print()
    for f in failures:
        print(f"FAIL: {f}")
    print("all targets met" if not failures else f"{len(failures)} target(s) missed")
    return 1 if failures else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    sys.exit(asyncio.run(main(parser.parse_args().quick)))
