"""Background compaction benchmark: an append that triggers a 2-second summariser, against an
append without compaction measured in the same run (issue 30 item 2).

Run::

    .venv/bin/python bench/bench_compaction_background.py           # full
    .venv/bin/python bench/bench_compaction_background.py --quick   # fewer sessions
    MINDSTORE_BENCH_POSTGRES_URL=postgresql://... .venv/bin/python \
        bench/bench_compaction_background.py --backend postgres

Workload: ``--sessions`` pairs of sessions, each filled to just below a 300-token threshold.
For each pair, in turn: one append to the plain session (no ``compact_after``: the baseline),
then the append that crosses the threshold of the session with ``compact_after(300,
background=True)``, whose summariser (async, a scripted model) takes 2 s. The table compares the
medians (target ≤ 1.3×). Then every background compaction is awaited and checked to have been
stored, and one inline (``background=False``) triggering append is timed for reference.
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

from mindstore.compaction.compact_function import create_compact_function
from mindstore.session import Session
from mindstore.store.base import Store

THRESHOLD = 300
MODEL_SECONDS = 2.0
TARGET = 1.3
TEXT = "The staging deploy finished; latency is back under 120 ms. " * 2


def message(i: int) -> dict[str, Any]:
    return {
        "id": f"m{i}",
        "role": "user" if i % 2 == 0 else "assistant",
        "parts": [{"type": "text", "text": f"{TEXT} ({i})"}],
    }


async def slow_model(prompt: str) -> str:
    await asyncio.sleep(MODEL_SECONDS)  # a model API call
    return "## Topic\nthe staging deploy\n## Key Points\nlatency is fine"


COMPACT = create_compact_function(summarize=slow_model, protect_head=1, tail_token_budget=60)


async def fill_below(session: Session) -> int:
    """Append messages until one more would cross the threshold; return the next index."""
    i, tokens = 0, 0
    per = session.count_message_tokens([message(0)])
    while tokens + per <= THRESHOLD:
        await session.append_message(message(i))
        tokens += session.count_message_tokens([message(i)])
        i += 1
    return i


async def timed_append(session: Session, i: int) -> float:
    t0 = time.perf_counter()
    await session.append_message(message(i))
    return (time.perf_counter() - t0) * 1000


async def run(backend: str, sessions: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        store, token = await open_bench_store(backend, Path(tmp))
        try:
            return await measure(store, sessions)
        finally:
            await close_store(store, token)


async def measure(store: Store, sessions: int) -> int:
    errors: list[BaseException] = []
    pairs = []
    for k in range(sessions):
        plain = Session.create(store, f"plain-{k}")
        background = (
            Session.create(store, f"bg-{k}")
            .on_compaction(COMPACT)
            .compact_after(THRESHOLD, background=True)
            .on_compaction_error(errors.append)
        )
        nxt = await fill_below(plain)
        assert await fill_below(background) == nxt
        pairs.append((plain, background, nxt))
    base: list[float] = []
    trig: list[float] = []
    for plain, background, nxt in pairs:
        base.append(await timed_append(plain, nxt))
        trig.append(await timed_append(background, nxt))
        assert background.compactor.running, "the append did not start a compaction"
    t0 = time.perf_counter()
    for _, background, _ in pairs:
        await background.wait_compaction()
    waited = time.perf_counter() - t0
    stored = [bool(await b.get_compactions()) for _, b, _ in pairs]

    inline = Session.create(store, "inline").on_compaction(COMPACT).compact_after(THRESHOLD)
    nxt = await fill_below(inline)
    inline_ms = await timed_append(inline, nxt)

    base_med, trig_med = statistics.median(base), statistics.median(trig)
    ratio = trig_med / base_med
    print(f"{'workload':<58} {'median ms':>10} {'max ms':>9}")
    print(f"{'append, no compaction (baseline)':<58} {base_med:>10.3f} {max(base):>9.3f}")
    print(
        f"{'append starting a 2 s compaction, background=True':<58} "
        f"{trig_med:>10.3f} {max(trig):>9.3f}"
    )
    print(f"{'append with the same compaction inline (reference)':<58} {inline_ms:>10.1f}")
    print(
        f"\nratio background/baseline: {ratio:.2f}x (target <= {TARGET}x) over {len(pairs)} "
        f"sessions; compactions stored after wait_compaction(): {sum(stored)}/{len(stored)} "
        f"(waited {waited:.2f} s); errors: {len(errors)}"
    )
    failures = 0
    if ratio > TARGET:
        print("FAIL: the background append is slower than the target")
        failures += 1
    if not all(stored) or errors:
        print("FAIL: a background compaction did not complete")
        failures += 1
    return failures


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sessions")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    args = parser.parse_args()
    failures = asyncio.run(run(args.backend, 10 if args.quick else 40))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
