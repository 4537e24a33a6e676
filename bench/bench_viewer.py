"""Viewer benchmark (issue 19): a session of 10,000 messages opens in under 1 s of server time.

A real SQLite file gets sessions of 1,000 and 10,000 messages (and 50,000 without ``--quick``):
a conversation of user turns, assistant replies with a tool call every third turn, a side
branch every 500 messages and one compaction summary over the middle third. The viewer runs
in-process (uvicorn on a free loopback port, the same server ``mindstore serve`` runs) and each
request is timed from the client (server time plus loopback, median of the repetitions):

* ``page`` — ``/session`` HTML, the default window (the latest 100 items);
* ``page focus`` — ``/session?focus=<a message in the middle>`` (opens the summary around it);
* ``page raw`` — ``/session?raw=1`` (no overlays: every stored message is an item);
* ``api`` — ``/api/session`` (the same dict as JSON);

Baseline, in the same run: ``Session.get_history()`` on the same store (the library's read of the
whole path with overlays applied, which the CLI's ``history`` does). Target: ``page`` < 1,000 ms
at 10,000 messages.

Usage::

    .venv/bin/python bench/bench_viewer.py            # 1,000 / 10,000 / 50,000 messages
    .venv/bin/python bench/bench_viewer.py --quick    # 1,000 / 10,000
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from mindstore import Session, SQLiteStore
from mindstore.store.base import NewMessage, SessionKey
from mindstore.tokens import estimate_message_tokens
from mindstore.viewer.server import ViewerServer

WORDS = [
    "deploy",
    "rollback",
    "migration",
    "orders",
    "table",
    "lock",
    "latency",
    "checkout",
    "pods",
    "scale",
    "incident",
    "timeline",
    "database",
    "window",
    "batch",
    "alert",
    "escalate",
    "owner",
    "runbook",
    "health",
    "service",
    "traffic",
    "peak",
]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(WORDS, k=n))


async def build(path: Path, sizes: list[int]) -> dict[int, str]:
    """One session per size; returns size -> the id of a message in the middle of its path."""
    rng = random.Random(19)
    middle: dict[int, str] = {}
    async with SQLiteStore(path) as store:
        for size in sizes:
            key = SessionKey(namespace="default", session_id=f"s{size}")
            items: list[NewMessage] = []
            for i in range(size):
                if i % 2 == 0:
                    parts: list[dict[str, Any]] = [{"type": "text", "text": _text(rng, 20)}]
                else:
                    parts = [{"type": "text", "text": _text(rng, 60)}]
                    if i % 6 == 1:
                        tool = {
                            "type": "tool-search_runbooks",
                            "toolCallId": f"c{i}",
                            "state": "output-available",
                            "input": {"query": _text(rng, 3)},
                            "output": {"hits": [_text(rng, 15) for _ in range(3)]},
                        }
                        parts.insert(0, tool)
                msg = {"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "parts": parts}
                parent = f"m{i - 1}" if i else None
                items.append(NewMessage(message=msg, parent=parent, tokens=estimate(msg)))
                if i % 500 == 499:  # a side branch: another reply to the same parent
                    alt = {"id": f"alt{i}", "role": msg["role"], "parts": [dict(parts[-1])]}
                    items.append(NewMessage(message=alt, parent=parent, tokens=estimate(alt)))
            for k in range(0, len(items), 1000):
                await store.append(key, items[k : k + 1000])
            a, b = size // 3, 2 * size // 3
            a, b = a - a % 2, b - b % 2 + 1
            summary = _text(rng, 200)
            await store.add_compaction(key, summary=summary, from_id=f"m{a}", to_id=f"m{b}")
            middle[size] = f"m{size // 2}"
    return middle


def estimate(message: dict[str, Any]) -> int:
    return estimate_message_tokens([message])


def timed_get(base: str, path: str, reps: int) -> tuple[float, int]:
    parts = urlsplit(base)
    times = []
    size = 0
    for _ in range(reps):
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=120)
        t = time.perf_counter()
        conn.request("GET", path)
        r = conn.getresponse()
        body = r.read()
        times.append((time.perf_counter() - t) * 1000)
        conn.close()
        assert r.status == 200, (path, r.status, body[:300])
        size = len(body)
    return statistics.median(times), size


def baseline(path: Path, size: int, reps: int) -> float:
    async def go() -> float:
        async with SQLiteStore(path) as store:
            s = Session.create(store, f"s{size}")
            times = []
            for _ in range(reps):
                t = time.perf_counter()
                await s.get_history()
                times.append((time.perf_counter() - t) * 1000)
            return statistics.median(times)

    out: list[float] = []
    thread = threading.Thread(target=lambda: out.append(asyncio.run(go())))
    thread.start()
    thread.join()
    return out[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 and 10,000 messages only")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 50_000]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "viewer-bench.db"
        t = time.perf_counter()
        middle = asyncio.run(build(db, sizes))
        print(f"built {sum(sizes):,} messages in {time.perf_counter() - t:.1f} s")
        rows = []
        with ViewerServer(str(db)) as server:
            for size in sizes:
                q = {"id": f"s{size}"}
                timed_get(server.url, "/session?" + urlencode(q), 1)  # warm the page cache
                page, page_bytes = timed_get(server.url, "/session?" + urlencode(q), args.reps)
                focus, _ = timed_get(
                    server.url, "/session?" + urlencode({**q, "focus": middle[size]}), args.reps
                )
                raw, _ = timed_get(server.url, "/session?" + urlencode({**q, "raw": 1}), args.reps)
                api, _ = timed_get(server.url, "/api/session?" + urlencode(q), args.reps)
                base = baseline(db, size, args.reps)
                rows.append((size, page, focus, raw, api, page_bytes, base))
    print()
    print(
        "| messages | page (ms) | page focus (ms) | page raw (ms) | api (ms) | page size | "
        "get_history (ms, baseline) | page / baseline | target page < 1,000 ms |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|:--|")
    for size, page, focus, raw, api, nbytes, base in rows:
        ok = "met" if page < 1000 else "NOT met"
        print(
            f"| {size:,} | {page:.0f} | {focus:.0f} | {raw:.0f} | {api:.0f} | "
            f"{nbytes / 1024:.0f} KiB | {base:.0f} | {page / base:.2f}× | "
            f"{ok if size >= 10_000 else ''} |"
        )


if __name__ == "__main__":
    main()
