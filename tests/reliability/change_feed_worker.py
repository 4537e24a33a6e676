"""A writer or a reader process of the change-feed test (run as a script).

``python change_feed_worker.py write BACKEND TARGET MESSAGES``: appends MESSAGES messages one at
a time to session ``chat`` of namespace ``feed``, writes the session's ``notes`` block after
every tenth and a namespace-wide ``done`` block at the end; prints ``{"seq": last}``.

``python change_feed_worker.py read BACKEND TARGET OUT SINCE``: follows ``store.changes("feed",
since=SINCE)`` and appends one JSON line per event to OUT (flushed at once, so a SIGKILL loses
at most a line it was writing); stops after the ``done`` block's event.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from mindstore import Session
from mindstore.store.base import ScopeKey

NS = "feed"


async def open_store(backend: str, target: str) -> Any:
    if backend == "sqlite":
        from mindstore.store.sqlite import SQLiteStore

        return SQLiteStore(target)
    from mindstore.store.postgres import PostgresStore

    url, schema = target.split("|")
    return await PostgresStore.open(url, schema=schema, min_size=1, max_size=2)


async def write(store: Any, messages: int) -> None:
    s = Session.create(store, "chat", namespace=NS).with_context("notes", max_tokens=100_000)
    for i in range(messages):
        role = "user" if i % 2 == 0 else "assistant"
        await s.append_message(
            {"id": f"m{i}", "role": role, "parts": [{"type": "text", "text": f"message {i}"}]}
        )
        if i % 10 == 9:
            await s.replace_context_block("notes", f"after message {i}")
    await store.set_block(ScopeKey(namespace=NS, session_id=None, label="done"), "yes")
    print(json.dumps({"seq": await store.latest_change_seq(NS)}), flush=True)


async def read(store: Any, out: str, since: int) -> None:
    with open(out, "a", encoding="utf-8") as f:  # noqa: ASYNC230 - a test worker, one file
        async for c in store.changes(NS, since=since, poll_interval=0.02):
            line = {
                "seq": c.seq,
                "kind": c.kind,
                "session_id": c.session_id,
                "data": dict(c.data),
                "created": c.created_at.timestamp(),
                "received": time.time(),
            }
            f.write(json.dumps(line) + "\n")
            f.flush()
            if c.kind == "block_written" and c.data.get("label") == "done":
                return


async def main() -> None:
    mode, backend, target = sys.argv[1:4]
    store = await open_store(backend, target)
    try:
        if mode == "write":
            await write(store, int(sys.argv[4]))
        else:
            await read(store, sys.argv[4], int(sys.argv[5]))
    finally:
        await store.aclose()


if __name__ == "__main__":
    asyncio.run(main())
