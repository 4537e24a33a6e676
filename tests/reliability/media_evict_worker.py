"""A writer for the media-eviction crash test (run as a script, killed with SIGKILL).

Usage: ``python media_evict_worker.py BACKEND TARGET BLOBS SEED`` where BACKEND is ``sqlite``
(TARGET = file path) or ``postgres`` (TARGET = ``url|schema``) and BLOBS a folder.

It loops forever: append one message holding a ``data:`` screenshot and a large tool output,
then run ``evict_media`` over the session. Each step is reported on stdout as one JSON line
before it starts (``intent``) and one after it returned (``ack``), flushed, so the parent knows
what was acknowledged when the kill landed. :func:`media_message` is deterministic in its
index, so the parent can rebuild every original and compare hydrated history with it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import sys
from typing import Any

from mindstore import Session

NAMESPACE = "crash"
SESSION = "media"
KEEP = 2
MIN_BYTES = 2048
WORD = "mediacheck"


def media_message(i: int) -> dict[str, Any]:
    rng = random.Random(i)
    image = "data:image/png;base64," + base64.b64encode(rng.randbytes(6000)).decode()
    dump = " ".join(f"row{rng.randrange(10**6)}" for _ in range(900))
    return {
        "id": f"m{i}",
        "role": "assistant",
        "parts": [
            {"type": "text", "text": f"{WORD} step {i}"},
            {"type": "file", "mediaType": "image/png", "url": image},
            {
                "type": "tool-run",
                "toolCallId": f"c{i}",
                "state": "output-available",
                "input": {"step": i},
                "output": {"stdout": dump, "code": 0},
            },
        ],
    }


def emit(kind: str, op: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({kind: op}) + "\n")
    sys.stdout.flush()


async def open_store(backend: str, target: str) -> Any:
    if backend == "sqlite":
        from mindstore.store.sqlite import SQLiteStore

        return SQLiteStore(target)
    from mindstore.store.postgres import PostgresStore

    url, schema = target.split("|")
    return await PostgresStore.open(url, schema=schema, min_size=1, max_size=2)


async def main() -> None:
    backend, target, blobs = sys.argv[1], sys.argv[2], sys.argv[3]
    store = await open_store(backend, target)
    session = Session.create(store, SESSION, namespace=NAMESPACE).with_blob_store(blobs)
    n = len(await store.all_messages(session.key))
    emit("ready", {"existing": n})
    while True:
        emit("intent", {"op": "append", "id": f"m{n}"})
        await session.append_message(media_message(n))
        emit("ack", {"op": "append", "id": f"m{n}"})
        n += 1
        emit("intent", {"op": "evict"})
        report = await session.evict_media(older_than_messages=KEEP, min_bytes=MIN_BYTES)
        emit("ack", {"op": "evict", "messages": report.messages})


if __name__ == "__main__":
    asyncio.run(main())
