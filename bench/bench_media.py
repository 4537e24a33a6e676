"""Media eviction benchmark: a session with 200 one-megabyte screenshots, before and after
``Session.evict_media``.

Run::

    .venv/bin/python bench/bench_media.py                  # SQLite, 200 x 1 MB
    .venv/bin/python bench/bench_media.py --quick          # 20 x 1 MB
    MINDSTORE_BENCH_POSTGRES_URL=postgresql://... .venv/bin/python \\
        bench/bench_media.py --backend postgres

The conversation has ``--shots`` rounds of two messages; each round holds one screenshot (a
``data:image/png`` URL of ``--size`` bytes): on even rounds the user attaches it as a ``file``
part, on odd rounds a ``screenshot`` tool returns it in its output. Measured in the same run:

* the baseline — what the database holds of the session with every screenshot inline, and how
  long ``get_history()`` takes then;
* one ``evict_media()`` pass (``older_than_messages=--keep``, default 4 — the span a model
  replays in full; ``min_bytes`` default 32768) into a local folder: its time, what the
  database holds afterwards (the stored JSON of the session's rows; SQLite: the file after
  ``VACUUM``; PostgreSQL: the messages relation with TOAST after ``VACUUM FULL``),
  ``get_history()`` (markers) and ``get_history(hydrate=True)`` and whether the hydrated
  history is byte-identical to the original.

The issue's target: after eviction the database holds < 5 MB of the session (the tail stays
inline: with ``--keep 4`` two screenshots, with 8 four — plus, for a screenshot in a tool output,
its search-index rows, since tool outputs are indexed as text).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from mindstore import Session
from mindstore.store.base import Store

MB = 1_000_000
PREFIX = "data:image/png;base64,"


def screenshot(seed: int, size: int) -> str:
    raw = random.Random(seed).randbytes((size - len(PREFIX)) * 3 // 4)
    return PREFIX + base64.b64encode(raw).decode()


def conversation(shots: int, size: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(shots):
        image = screenshot(i, size)
        if i % 2 == 0:
            out.append(
                {
                    "id": f"u{i}",
                    "role": "user",
                    "parts": [
                        {"type": "text", "text": f"what is wrong on this screen ({i})?"},
                        {"type": "file", "mediaType": "image/png", "url": image},
                    ],
                }
            )
            out.append(
                {
                    "id": f"a{i}",
                    "role": "assistant",
                    "parts": [{"type": "text", "text": f"The dialog {i} overlaps the menu."}],
                }
            )
        else:
            out.append({"id": f"u{i}", "role": "user", "parts": [{"type": "text", "text": "look"}]})
            out.append(
                {
                    "id": f"a{i}",
                    "role": "assistant",
                    "parts": [
                        {
                            "type": "tool-screenshot",
                            "toolCallId": f"c{i}",
                            "state": "output-available",
                            "input": {"window": "main"},
                            "output": {"type": "image", "data": image},
                        }
                    ],
                }
            )
    return out


async def open_store(backend: str, folder: Path) -> tuple[Store, Any]:
    if backend == "sqlite":
        from mindstore.store.sqlite import SQLiteStore

        path = folder / "media.db"
        return SQLiteStore(path), path
    from mindstore.store.postgres import PostgresStore

    url = os.environ.get("MINDSTORE_BENCH_POSTGRES_URL")
    if not url:
        sys.exit("set MINDSTORE_BENCH_POSTGRES_URL for --backend postgres")
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    return await PostgresStore.open(url, schema=schema), (url, schema)


async def database_bytes(store: Store, where: Any) -> int:
    """What the database holds after compacting its free space."""
    if isinstance(where, Path):
        await store.aclose()
        con = sqlite3.connect(where)
        try:
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            con.execute("VACUUM")
        finally:
            con.close()
        return where.stat().st_size
    import psycopg

    url, schema = where
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f'VACUUM FULL "{schema}".messages')
        cur = await conn.execute("SELECT pg_total_relation_size(%s)", (f'"{schema}".messages',))
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


async def timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = await fn()
    return time.perf_counter() - start, result


async def run(backend: str, shots: int, size: int, keep: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        blobs = folder / "blobs"
        messages = conversation(shots, size)
        original = json.dumps(messages)

        store, where = await open_store(backend, folder)
        s = Session.create(store, "shots")
        t0 = time.perf_counter()
        for m in messages:
            await s.append_message(m)
        fill_s = time.perf_counter() - t0
        rows_before = sum(r.nbytes for r in await store.all_messages(s.key))
        read_before, _ = await timed(s.get_history)
        db_before = await database_bytes(store, where)
        if isinstance(where, Path):  # database_bytes closed it to VACUUM the file
            from mindstore.store.sqlite import SQLiteStore

            store = SQLiteStore(where)
        s = Session.create(store, "shots").with_blob_store(str(blobs))

        evict_s, report = await timed(lambda: s.evict_media(older_than_messages=keep))
        rows_after = sum(r.nbytes for r in await store.all_messages(s.key))
        read_after, _ = await timed(s.get_history)
        read_hydrated, hydrated = await timed(lambda: s.get_history(hydrate=True))
        identical = json.dumps(hydrated) == original
        objects = [p.stat().st_size for p in blobs.rglob("*") if p.is_file()]
        db_after = await database_bytes(store, where)
        if backend != "sqlite":
            await store.aclose()
            import psycopg

            url, schema = where
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')

    mb = 1e6
    print(f"media eviction on {backend}: {shots} screenshots of {size / mb:.1f} MB "
          f"({len(messages)} messages; appended in {fill_s:.1f} s)")  # fmt: skip
    print(f"{'':28} {'baseline (inline)':>18} {'after evict_media':>18}")
    print(
        f"{'stored JSON of the session':28} {rows_before / mb:>15.1f} MB "
        f"{rows_after / mb:>15.2f} MB"
    )
    print(f"{'database after vacuum':28} {db_before / mb:>15.1f} MB {db_after / mb:>15.2f} MB")
    print(f"{'get_history()':28} {read_before * 1e3:>15.0f} ms {read_after * 1e3:>15.0f} ms")
    print(f"{'get_history(hydrate=True)':28} {'':>18} {read_hydrated * 1e3:>15.0f} ms")
    print(f"evict_media(older_than_messages={keep}): {evict_s:.1f} s, {report.messages} "
          f"messages, {report.items} values, "
          f"{report.bytes_moved / mb:.1f} MB moved; blob store: {len(objects)} objects, "
          f"{sum(objects) / mb:.1f} MB")  # fmt: skip
    print(f"hydrated history byte-identical to the original: {identical}")
    target = "met" if rows_after < 5 * mb and identical else "MISSED"
    print(f"target (< 5 MB of the session left in the database, identical hydration): {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--shots", type=int, default=200)
    parser.add_argument("--size", type=int, default=MB, help="bytes of each data: URL")
    parser.add_argument("--keep", type=int, default=4, help="older_than_messages (the tail)")
    parser.add_argument("--quick", action="store_true", help="20 screenshots")
    args = parser.parse_args()
    asyncio.run(run(args.backend, 20 if args.quick else args.shots, args.size, args.keep))


if __name__ == "__main__":
    main()
