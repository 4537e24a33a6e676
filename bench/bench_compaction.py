"""Compaction benchmark: the cost of compact_after and of overlays, against baselines measured in
the same run.

Run::

    .venv/bin/python bench/bench_compaction.py           # full
    .venv/bin/python bench/bench_compaction.py --quick   # fewer repetitions
    MINDSTORE_BENCH_POSTGRES_URL=postgresql://... .venv/bin/python bench/bench_compaction.py \
        --backend postgres

Workloads (issue 4 targets):

1. append latency with ``compact_after`` set (threshold high enough never to fire) when the
   path holds 10,000 messages vs when it holds 100 (target ≤ 1.3×: the token estimate is
   maintained incrementally, an append never re-reads the history). The same appends without
   ``compact_after`` are shown for reference.
2. ``get_history()`` on a 10,000-message path with one overlay (covering m1..m4999) vs the same
   path without any (target ≤ 1.2×).
3. append through a fresh ``Session`` per request (the server pattern) at 10,000 messages, with
   ``compact_after`` vs without (target ≤ 1.3×, issue 13: the running estimate is kept in the
   store, so a new Session object never re-reads the history).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_stores import close_store, open_bench_store

from mindstore.compaction.overlays import apply_overlays
from mindstore.session import Session
from mindstore.store.base import NewMessage, Store

TEXT = (
    "The deployment to the staging cluster finished; latency is back under 120 ms and the "
    "database migration is queued for tonight."
)


def message(i: int) -> dict[str, Any]:
    return {
        "id": f"m{i}",
        "role": "user" if i % 2 == 0 else "assistant",
        "parts": [{"type": "text", "text": f"{TEXT} ({i})"}],
    }


async def fill(session: Session, start: int, stop: int) -> None:
    """Append messages ``start..stop-1`` as a chain, in batches straight through the store."""
    batch = 500
    for lo in range(start, stop, batch):
        items = [
            NewMessage(message=message(i), tokens=session.count_message_tokens([message(i)]))
            for i in range(lo, min(stop, lo + batch))
        ]
        await session.store.append(session.key, items)


async def append_latencies(
    small: Session, small_start: int, big: Session, big_start: int, count: int
) -> tuple[float, float]:
    """Median seconds per append_message on ``small`` and on ``big``, appending to them
    alternately so that machine noise hits both alike."""
    await small.append_message(message(small_start))  # warm-up (recomputes the estimate once)
    await big.append_message(message(big_start))
    times: dict[int, list[float]] = {0: [], 1: []}
    for k in range(1, count + 1):
        order = (0, 1) if k % 2 == 0 else (1, 0)
        for which in order:
            session, start = ((small, small_start), (big, big_start))[which]
            t0 = time.perf_counter()
            await session.append_message(message(start + k))
            times[which].append(time.perf_counter() - t0)
    return statistics.median(times[0]), statistics.median(times[1])


async def fresh_session_latencies(
    store: Store, plain_id: str, auto_id: str, start: int, count: int
) -> tuple[float, float]:
    """Median seconds per append through a NEW Session object each time, without and with
    ``compact_after`` (threshold never reached), alternating so noise hits both alike."""

    def handle(which: int) -> Session:
        if which == 0:
            return Session.create(store, plain_id)
        return (
            Session.create(store, auto_id)
            .on_compaction(lambda messages, context: None)
            .compact_after(10**12)
        )

    for which in (0, 1):  # warm-up
        await handle(which).append_message(message(start))
    times: dict[int, list[float]] = {0: [], 1: []}
    for k in range(1, count + 1):
        for which in (0, 1) if k % 2 == 0 else (1, 0):
            t0 = time.perf_counter()
            await handle(which).append_message(message(start + k))
            times[which].append(time.perf_counter() - t0)
    return statistics.median(times[0]), statistics.median(times[1])


async def history_times(a: Session, b: Session, repeats: int) -> tuple[float, float]:
    """Median get_history seconds of ``a`` and ``b``, measured alternately so that machine
    noise hits both alike."""
    times: dict[int, list[float]] = {0: [], 1: []}
    for r in range(repeats):
        order = (0, 1) if r % 2 == 0 else (1, 0)
        for which in order:
            session = (a, b)[which]
            t0 = time.perf_counter()
            await session.get_history()
            times[which].append(time.perf_counter() - t0)
    return statistics.median(times[0]), statistics.median(times[1])


def row(name: str, small: float, big: float, target: float | None) -> str:
    ratio = big / small if small else float("inf")
    verdict = "" if target is None else ("ok" if ratio <= target else "OVER TARGET")
    tgt = "" if target is None else f"≤ {target:.1f}×"
    return f"{name:<44} {small * 1e3:>10.3f} {big * 1e3:>10.3f} {ratio:>7.2f}× {tgt:>7} {verdict}"


async def run(backend: str, quick: bool) -> int:
    n = 10_000
    appends = 100 if quick else 400
    repeats = 11 if quick else 31
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        store, token = await open_bench_store(backend, Path(tmp))
        try:
            print(f"backend: {backend}   path: {n:,} messages   {'quick' if quick else 'full'}")
            print(f"{'workload':<44} {'base ms':>10} {'test ms':>10} {'ratio':>8} {'target':>7}")

            # 1. append latency at 100 vs 10,000 messages, with compact_after
            lat: dict[tuple[bool, int], float] = {}
            for auto in (True, False):
                pair = []
                for size in (100, n):
                    s = Session.create(store, f"append-{auto}-{size}")
                    if auto:
                        s.on_compaction(lambda messages, context: None).compact_after(10**12)
                    await fill(s, 0, size)
                    pair.append(s)
                small, big = await append_latencies(pair[0], 100, pair[1], n, appends)
                lat[(auto, 100)], lat[(auto, n)] = small, big
            line = row(
                "append_message, compact_after (10k vs 100)",
                lat[(True, 100)],
                lat[(True, n)],
                1.3,
            )
            failures += "OVER" in line
            print(line)
            print(
                row(
                    "append_message, no compact_after (10k vs 100)",
                    lat[(False, 100)],
                    lat[(False, n)],
                    None,
                )
            )
            print(
                row(
                    "compact_after overhead at 10k (with vs without)",
                    lat[(False, n)],
                    lat[(True, n)],
                    None,
                )
            )

            # 3. a fresh Session per append at 10,000 messages: compact_after vs without
            for sid in ("fresh-plain", "fresh-auto"):
                await fill(Session.create(store, sid), 0, n)
            base, test = await fresh_session_latencies(
                store, "fresh-plain", "fresh-auto", n, appends
            )
            line = row("new Session per append 10k, auto vs none", base, test, 1.3)
            failures += "OVER" in line
            print(line)

            # 2. get_history on 10,000 messages with one overlay vs none
            plain = Session.create(store, "history-plain")
            over = Session.create(store, "history-overlay")
            await fill(plain, 0, n)
            await fill(over, 0, n)
            await over.add_compaction("## Topic\nthe first half", "m1", f"m{n // 2 - 1}")
            assert len(await over.get_history()) == n - (n // 2 - 1) + 1
            await history_times(plain, over, 2)  # warm caches
            base, test = await history_times(plain, over, repeats)
            line = row("get_history 10k, one overlay vs none", base, test, 1.2)
            failures += "OVER" in line
            print(line)
            # the overlay work alone, without the store read: apply_overlays on the same rows
            rows = await over.store.path(over.key, None)
            compactions = await over.get_compactions()
            msgs = [r.message for r in rows]
            t0 = time.perf_counter()
            for _ in range(repeats):
                apply_overlays(msgs, compactions)
            apply_ms = (time.perf_counter() - t0) / repeats
            print(f"{'  of which apply_overlays on 10k rows':<44} {'':>10} {apply_ms * 1e3:>10.3f}")
        finally:
            await close_store(store, token)
    return failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    args = parser.parse_args()
    failures = asyncio.run(run(args.backend, args.quick))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
