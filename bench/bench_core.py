"""Core SQLite benchmark: mindstore's SQLiteStore against plain ``sqlite3`` doing the same work.

Run::

    .venv/bin/python bench/bench_core.py           # full (builds a 1,000,000-row store)
    .venv/bin/python bench/bench_core.py --quick   # smaller sizes, for CI / a quick look
    .venv/bin/python bench/bench_core.py --quick --only search   # one workload (repeatable)

Every baseline runs in the same process on the same machine with the same settings (WAL,
``synchronous=NORMAL``), so the ratios are what matter. Workloads (issue 2 targets):

1. durable appends one at a time: ``Session.append_message`` vs plain sqlite3 inserting the
   message row and its FTS5 row with one commit each (target ≥ 60 % of the baseline rate);
2. reading a 5,000-message path: ``get_history()`` vs ``SELECT`` + ``json.loads`` of the same
   rows (target ≤ 1.5×);
3. search over 100,000 messages in 100 sessions, median, for ``match="any"`` (words ORed) and
   ``match="all"`` (ANDed): ``Session.search`` vs a plain FTS5 ``MATCH … ORDER BY rank LIMIT
   20`` of the same words (ORed / ANDed) over a one-index copy of the same text (target ≤ 3×);
   and the slowest of 20 natural-language queries of 60 words (target ≤ 50 ms);
4. append latency at 10,000 messages in a session vs at 10 (target ≤ 1.3×);
5. cold ``get_latest_leaf`` (fresh store object: open + first query) in a store of 10,000 vs
   1,000,000 messages (target ≤ 1.5×). The big store is built with ``executemany`` straight into
   the SQLiteStore schema (messages and registry rows, no FTS rows — latest_leaf never reads
   them), which is much faster than a million appends.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mindstore.search import index_text, parse_query
from mindstore.session import Session
from mindstore.store.base import NewMessage, SessionKey
from mindstore.store.sqlite import SQLiteStore

RNG = random.Random(42)
VOCAB = [
    "".join(RNG.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(RNG.randint(3, 9)))
    for _ in range(5000)
] + ["deployment", "deploying", "deployed", "kubernetes", "database", "migration", "latency"]
WEIGHTS = [1.0 / (i + 1) for i in range(len(VOCAB))]


def sentence(n: int) -> str:
    return " ".join(RNG.choices(VOCAB, weights=WEIGHTS, k=n))


def make_message(i: int) -> dict[str, Any]:
    return {
        "id": f"m{i}",
        "role": "user" if i % 2 == 0 else "assistant",
        "parts": [{"type": "text", "text": sentence(RNG.randint(15, 40))}],
    }


def plain_db(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(
        "CREATE TABLE IF NOT EXISTS messages (seq INTEGER PRIMARY KEY, session TEXT, id TEXT, "
        "parent TEXT, content TEXT);"
        "CREATE INDEX IF NOT EXISTS messages_session ON messages (session, seq);"
        "CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(text, "
        "tokenize='porter unicode61 remove_diacritics 2');"
    )
    return conn


def rate(n: int, seconds: float) -> str:
    return f"{n / seconds:,.0f}/s"


ROWS: list[tuple[str, str, str, float, str, str]] = []


def report(name: str, ours: str, base: str, ratio: float, target: str, ok: bool) -> None:
    ROWS.append((name, ours, base, ratio, target, "ok" if ok else "MISSED"))
    print(f"  {name}: mindstore {ours}, plain {base}, ratio {ratio:.2f} (target {target})")


class _PlainAppender:
    """Plain sqlite3: per message one transaction inserting the row and its FTS row(s)."""

    def __init__(self, path: Path, *, two_indexes: bool) -> None:
        self.conn = plain_db(path)
        self.two = two_indexes
        if two_indexes:
            self.conn.execute(
                "CREATE VIRTUAL TABLE fts_raw USING fts5(text, tool_text, tokenize='unicode61', "
                "detail=column)"
            )
        self.parent: str | None = None

    def append(self, m: dict[str, Any]) -> None:
        conn = self.conn
        content = json.dumps(m, ensure_ascii=False, separators=(",", ":"))
        text, tool_text = index_text(m)
        conn.execute("BEGIN IMMEDIATE")
        cur = conn.execute(
            "INSERT INTO messages (session, id, parent, content) VALUES (?, ?, ?, ?)",
            ("s", m["id"], self.parent, content),
        )
        conn.execute("INSERT INTO fts (rowid, text) VALUES (?, ?)", (cur.lastrowid, text))
        if self.two:
            conn.execute(
                "INSERT INTO fts_raw (rowid, text, tool_text) VALUES (?, ?, ?)",
                (cur.lastrowid, text, tool_text),
            )
        conn.execute("COMMIT")
        self.parent = m["id"]


async def bench_appends(tmp: Path, n: int, rounds: int) -> None:
    """Four writers on four fresh files, interleaved message by message (so bursts of load
    from other processes hit every variant alike); per variant the summed time of its appends,
    median over ``rounds``."""
    msgs = [make_message(i) for i in range(n)]
    times: dict[str, list[float]] = {"plain1": [], "plain2": [], "session": [], "store": []}
    key = SessionKey(namespace="default", session_id="raw")
    for r in range(rounds):
        a1 = _PlainAppender(tmp / f"p1-{r}.db", two_indexes=False)
        a2 = _PlainAppender(tmp / f"p2-{r}.db", two_indexes=True)
        async with (
            SQLiteStore(tmp / f"ms-{r}.db") as ses_store,
            SQLiteStore(tmp / f"st-{r}.db") as raw_store,
        ):
            s = Session.create(ses_store, "s")
            acc = dict.fromkeys(times, 0.0)
            perf = time.perf_counter
            for m in msgs:
                t0 = perf()
                a1.append(m)
                t1 = perf()
                a2.append(m)
                t2 = perf()
                await s.append_message(m)
                t3 = perf()
                await raw_store.append(key, [NewMessage(message=m, tokens=10)])
                t4 = perf()
                acc["plain1"] += t1 - t0
                acc["plain2"] += t2 - t1
                acc["session"] += t3 - t2
                acc["store"] += t4 - t3
        a1.conn.close()
        a2.conn.close()
        for k, v in acc.items():
            times[k].append(v)
    sizes = {name: _file_size(tmp / f"{name}-{rounds - 1}.db") for name in ("p1", "p2", "ms")}
    p1, p2, ses, sto = (
        statistics.median(times[k]) for k in ("plain1", "plain2", "session", "store")
    )
    report(
        "appends, Session.append_message vs plain (row + same 2 FTS rows)",
        rate(n, ses),
        rate(n, p2),
        p2 / ses,
        "≥ 0.60",
        p2 / ses >= 0.6,
    )
    report(
        f"file size after {n:,} appends, mindstore vs plain (row + 1 FTS5)",
        f"{sizes['ms'] / n:,.0f} B/msg",
        f"{sizes['p1'] / n:,.0f} B/msg",
        sizes["ms"] / sizes["p1"],
        "≤ 2×",
        sizes["ms"] <= 2 * sizes["p1"],
    )
    report(
        "file size, mindstore vs plain (row + same 2 FTS)",
        f"{sizes['ms'] / n:,.0f} B/msg",
        f"{sizes['p2'] / n:,.0f} B/msg",
        sizes["ms"] / sizes["p2"],
        "(info)",
        True,
    )
    report("appends, Store.append vs same", rate(n, sto), rate(n, p2), p2 / sto, "(info)", True)
    report(
        "appends, Session.append_message vs plain (row + 1 FTS row)",
        rate(n, ses),
        rate(n, p1),
        p1 / ses,
        "(info)",
        True,
    )


def _file_size(path: Path) -> int:
    """Bytes of a closed database file and whatever of its write-ahead log is left."""
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


async def bench_path(tmp: Path, n: int, repeats: int) -> None:
    msgs = [make_message(i) for i in range(n)]
    conn = plain_db(tmp / "plain-path.db")
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO messages (session, id, parent, content) VALUES (?, ?, ?, ?)",
        [("s", m["id"], None, json.dumps(m, separators=(",", ":"))) for m in msgs],
    )
    conn.execute("COMMIT")
    async with SQLiteStore(tmp / "ms-path.db") as store:
        s = Session.create(store, "s")
        await store.append(s.key, [NewMessage(message=m, tokens=10) for m in msgs])
        base_t, ours_t = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            rows = conn.execute(
                "SELECT id, content FROM messages WHERE session = ? ORDER BY seq", ("s",)
            ).fetchall()
            plain = [json.loads(c) for _, c in rows]
            base_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            history = await s.get_history()
            ours_t.append(time.perf_counter() - t0)
            assert len(history) == len(plain) == n
    conn.close()
    b, o = statistics.median(base_t), statistics.median(ours_t)
    r = o / b
    report(
        f"read a {n:,}-message path",
        f"{o * 1000:.1f} ms",
        f"{b * 1000:.1f} ms",
        r,
        "≤ 1.5×",
        r <= 1.5,
    )


async def bench_search(tmp: Path, n: int, sessions: int, queries: int) -> None:
    msgs = [make_message(i) for i in range(n)]
    conn = plain_db(tmp / "plain-search.db")
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO fts (rowid, text) VALUES (?, ?)",
        [(i + 1, index_text(m)[0]) for i, m in enumerate(msgs)],
    )
    conn.execute("COMMIT")
    per = n // sessions
    async with SQLiteStore(tmp / "ms-search.db") as store:
        for k in range(sessions):
            key = SessionKey(namespace="default", session_id=f"s{k}")
            chunk = msgs[k * per : (k + 1) * per]
            await store.append(key, [NewMessage(message=m, tokens=10) for m in chunk])
        qs = [" ".join(RNG.choices(VOCAB[:300], k=RNG.choice([1, 1, 2]))) for _ in range(queries)]
        qs[::5] = [RNG.choice(VOCAB[:200])[:3] + "*" for _ in qs[::5]]
        for match, op in (("any", " OR "), ("all", " AND ")):
            base_t, ours_t, ns_t = [], [], []
            for i, q in enumerate(qs):
                parsed = parse_query(q, match)
                words = q.split()
                expr = op.join(f'"{w[:-1]}"*' if w.endswith("*") else f'"{w}"' for w in words)
                t0 = time.perf_counter()
                conn.execute(
                    "SELECT rowid, snippet(fts, 0, '[', ']', '…', 16) FROM fts "
                    "WHERE fts MATCH ? ORDER BY rank LIMIT 20",
                    (expr,),
                ).fetchall()
                base_t.append(time.perf_counter() - t0)
                s = Session.create(store, f"s{i % sessions}")
                t0 = time.perf_counter()
                await s.search(q, match=match)
                ours_t.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                await store.search("default", parsed)
                ns_t.append(time.perf_counter() - t0)
            b, o, ns = (statistics.median(x) for x in (base_t, ours_t, ns_t))
            label = f"search {n:,} msgs / {sessions} sessions, match={match}, median"
            report(label, f"{o * 1000:.2f} ms", f"{b * 1000:.2f} ms", o / b, "≤ 3×", o / b <= 3)
            report(
                "  same, namespace-wide store.search",
                f"{ns * 1000:.2f} ms",
                f"{b * 1000:.2f} ms",
                ns / b,
                "(info)",
                True,
            )
        # long natural-language queries: 60 words each, the slowest must stay under 50 ms
        long_t = []
        for _ in range(20):
            q = " ".join(RNG.choices(VOCAB, weights=WEIGHTS, k=60))
            t0 = time.perf_counter()
            await store.search("default", parse_query(q))
            long_t.append(time.perf_counter() - t0)
        worst = max(long_t)
        report(
            "search, 60-word queries, slowest of 20",
            f"{worst * 1000:.1f} ms",
            "50 ms",
            worst / 0.05,
            "≤ 1×",
            worst <= 0.05,
        )
    conn.close()


async def bench_append_latency(tmp: Path, big: int, samples: int) -> None:
    async with SQLiteStore(tmp / "ms-latency.db") as store:
        small = Session.create(store, "small")
        large = Session.create(store, "large")
        for i in range(10):
            await small.append_message(make_message(i))
        await store.append(
            large.key, [NewMessage(message=make_message(i), tokens=10) for i in range(big)]
        )

        # alternate the two sessions append by append, so load from other processes hits both
        small_times: list[float] = []
        large_times: list[float] = []
        for j in range(samples):
            for s, start, times in (
                (small, 1_000_000, small_times),
                (large, 2_000_000, large_times),
            ):
                m = make_message(start + j)
                t0 = time.perf_counter()
                await s.append_message(m)
                times.append(time.perf_counter() - t0)
        small_t = statistics.median(small_times)
        large_t = statistics.median(large_times)
    r = large_t / small_t
    report(
        f"append latency at {big:,} vs 10 msgs",
        f"{large_t * 1e6:.0f} µs",
        f"{small_t * 1e6:.0f} µs (at 10)",
        r,
        "≤ 1.3×",
        r <= 1.3,
    )


def build_big_store(path: Path, total: int, sessions: int) -> None:
    """Fill a SQLiteStore file directly through its schema (fast path for the 1M-row store)."""
    asyncio.run(_touch(path))
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous=OFF")
    now = time.time_ns() // 1000
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO sessions (sid, namespace, session_id, created_us, updated_us) "
        "VALUES (?, 'default', ?, ?, ?)",
        [(k + 1, f"s{k}", now, now) for k in range(sessions)],
    )
    per = total // sessions
    content = json.dumps({"id": "x", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
    seq = 0
    for k in range(sessions):
        rows = []
        for j in range(per):
            seq += 1
            rows.append((seq, k + 1, f"m{j}", seq - 1 if j else None, content, now))
        conn.executemany(
            "INSERT INTO messages (seq, sid, id, parent_seq, role, content, tokens, nbytes, "
            "created_us) VALUES (?, ?, ?, ?, 'user', ?, 5, 60, ?)",
            rows,
        )
        conn.execute(
            "UPDATE sessions SET leaf_seq = ?, message_count = ? WHERE sid = ?", (seq, per, k + 1)
        )
    conn.execute("COMMIT")
    conn.close()


async def _touch(path: Path) -> None:
    async with SQLiteStore(path) as store:
        await store.stats()


async def cold_latest_leaf(path: Path, session_id: str, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        store = SQLiteStore(path)
        leaf = await Session.create(store, session_id).get_latest_leaf()
        times.append(time.perf_counter() - t0)
        await store.aclose()
        assert leaf is not None
    return statistics.median(times)


def bench_cold_leaf(tmp: Path, small: int, big: int) -> None:
    t0 = time.perf_counter()
    build_big_store(tmp / "small.db", small, 10)
    build_big_store(tmp / "big.db", big, 100)
    print(f"  (built stores of {small:,} and {big:,} messages in {time.perf_counter() - t0:.1f} s)")
    s = asyncio.run(cold_latest_leaf(tmp / "small.db", "s5", 30))
    b = asyncio.run(cold_latest_leaf(tmp / "big.db", "s50", 30))
    r = b / s
    report(
        f"cold get_latest_leaf, {big:,} vs {small:,} msgs",
        f"{b * 1e6:.0f} µs",
        f"{s * 1e6:.0f} µs (small)",
        r,
        "≤ 1.5×",
        r <= 1.5,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (about 15 s)")
    parser.add_argument(
        "--only",
        choices=["appends", "path", "search", "latency", "cold"],
        action="append",
        help="run only this workload (repeatable)",
    )
    args = parser.parse_args(argv)
    q = args.quick
    print(f"sqlite {sqlite3.sqlite_version}, python {sys.version.split()[0]}, quick={q}")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        steps: list[tuple[str, Callable[[], Any]]] = [
            ("appends", lambda: asyncio.run(bench_appends(tmp, 1_000 if q else 5_000, 3))),
            ("path", lambda: asyncio.run(bench_path(tmp, 5_000, 5 if q else 15))),
            (
                "search",
                lambda: asyncio.run(
                    bench_search(tmp, 20_000 if q else 100_000, 100, 50 if q else 200)
                ),
            ),
            (
                "latency",
                lambda: asyncio.run(bench_append_latency(tmp, 10_000, 200 if q else 1_000)),
            ),
            ("cold", lambda: bench_cold_leaf(tmp, 10_000, 100_000 if q else 1_000_000)),
        ]
        for name, step in steps:
            if args.only and name not in args.only:
                continue
            print(f"[{name}]", flush=True)
            step()
            for f in tmp.glob("*.db*"):
                if name != "cold":
                    os.remove(f)
    width = max(len(r[0]) for r in ROWS)
    print()
    print(
        f"{'workload':<{width}}  {'mindstore':>14}  {'baseline':>18}  {'ratio':>6}  {'target':>7}  "
    )
    print("-" * (width + 60))
    for name, ours, base, ratio, target, status in ROWS:
        print(f"{name:<{width}}  {ours:>14}  {base:>18}  {ratio:>6.2f}  {target:>7}  {status}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
