"""Where ``reindex`` spends its time, as its progress callback sees it (issue 30 item 4).

Run::

    .venv/bin/python bench/bench_reindex_phases.py [--messages 30000]
    MINDSTORE_BENCH_POSTGRES_URL=postgresql://... .venv/bin/python \
        bench/bench_reindex_phases.py --backend postgres

Prints, for one ``store.reindex(progress=...)`` over ``--messages`` messages: the time before
the first progress call (clearing the old index), the time to the first call that reports every
document counted (indexing), and the time after it until ``reindex`` returns (writing the index
and committing) — the step a count-only bar showed as a bar standing at 100 %. The CLI's bar
names these phases (``mindstore.cli.progress``).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from bench_stores import close_store, open_bench_store

from mindstore.session import Session
from mindstore.store.base import NewMessage, Store

TEXT = "deploy {i} to the staging cluster; latency and the database migration queued tonight {j}"


async def fill(store: Store, n: int) -> None:
    key = Session.create(store, "big").key
    for lo in range(0, n, 1000):
        batch = [
            NewMessage(
                message={
                    "id": f"m{i}",
                    "role": "user" if i % 2 else "assistant",
                    "parts": [{"type": "text", "text": TEXT.format(i=i, j=i % 97)}],
                },
                tokens=20,
            )
            for i in range(lo, min(n, lo + 1000))
        ]
        await store.append(key, batch)


async def run(backend: str, n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store, token = await open_bench_store(backend, Path(tmp))
        try:
            await fill(store, n)
            calls: list[tuple[float, int, int]] = []
            t0 = time.perf_counter()
            count = await store.reindex(
                progress=lambda d, t: calls.append((time.perf_counter() - t0, d, t))
            )
            end = time.perf_counter() - t0
        finally:
            await close_store(store, token)
    first = calls[0][0] if calls else end
    counted = next((c[0] for c in calls if c[1] >= c[2]), end)
    print(f"reindex of {count:,} documents on {backend}: {end:.2f} s, {len(calls)} progress calls")
    print(f"{'phase':<44} {'seconds':>8} {'share':>6}")
    for name, seconds in (
        ("before the first count (clearing)", first),
        ("counting (indexing documents)", counted - first),
        ("after the last count (writing, commit)", end - counted),
    ):
        print(f"{name:<44} {seconds:>8.2f} {seconds / end:>6.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--messages", type=int, default=30_000)
    args = parser.parse_args()
    asyncio.run(run(args.backend, args.messages))


if __name__ == "__main__":
    main()
