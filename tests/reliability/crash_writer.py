"""A writer process for the crash-consistency tests (run as a script, killed with SIGKILL).

Usage: ``python crash_writer.py BACKEND TARGET ROUND SEED`` where BACKEND is ``sqlite`` (TARGET
= file path) or ``postgres`` (TARGET = ``url|schema``).

It loops forever over random operations on one session — auto-parented appends, explicit-parent
appends (branches), updates, deletes and block appends — and reports each operation on stdout as
one JSON line *before* it starts (``intent``) and one *after* it returned (``ack``), flushing
each line, so the parent knows exactly which operations were acknowledged when the kill landed.

Every message text contains the word ``crashcheck`` and a unique token ``u<round>x<n>`` so the
parent can check the search index against the messages with a query.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
from typing import Any

from mindstore import Session
from mindstore.errors import MessageNotFoundError

NAMESPACE = "crash"
SESSION = "s1"
BLOCK = "log"


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


def text_for(uid: str, version: int) -> str:
    return f"crashcheck {uid} version v{version} " + "lorem ipsum dolor " * 8


async def main() -> None:
    backend, target, round_no, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    store = await open_store(backend, target)
    session = Session.create(store, SESSION, namespace=NAMESPACE).with_context(
        BLOCK, description="append-only log"
    )
    ids = [m.id for m in await store.all_messages(session.key)]
    emit("ready", {"existing": len(ids)})
    n = 0
    while True:
        n += 1
        uid = f"u{round_no}x{n}"
        r = rng.random()
        if r < 0.45 or len(ids) < 3:
            op = {"op": "append", "id": uid, "parent": "auto"}
            emit("intent", op)
            await session.append_message(
                {"id": uid, "role": "user", "parts": [{"type": "text", "text": text_for(uid, 0)}]}
            )
        elif r < 0.6:
            parent = rng.choice(ids)
            op = {"op": "append", "id": uid, "parent": parent}
            emit("intent", op)
            try:
                await session.append_message(
                    {
                        "id": uid,
                        "role": "assistant",
                        "parts": [{"type": "text", "text": text_for(uid, 0)}],
                    },
                    parent_id=parent,
                )
            except MessageNotFoundError:
                continue
        elif r < 0.75:
            target_id = rng.choice(ids)
            version = n
            op = {"op": "update", "id": target_id, "version": version}
            emit("intent", op)
            await session.update_message(
                {
                    "id": target_id,
                    "role": "user",
                    "parts": [{"type": "text", "text": text_for(target_id, version)}],
                }
            )
            emit("ack", op)
            continue
        elif r < 0.85:
            target_id = rng.choice(ids)
            op = {"op": "delete", "id": target_id}
            emit("intent", op)
            await session.delete_messages([target_id])
            ids.remove(target_id)
            emit("ack", op)
            continue
        else:
            op = {"op": "block", "item": uid}
            emit("intent", op)
            await session.append_context_block(BLOCK, f"item {uid}")
            emit("ack", op)
            continue
        ids.append(uid)
        emit("ack", op)


if __name__ == "__main__":
    asyncio.run(main())
