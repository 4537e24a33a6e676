"""One of the contention test's worker processes (run as a script).

Usage: ``python contention_worker.py BACKEND TARGET WORKER SECONDS SEED``. For SECONDS it mixes,
on one shared store: auto-parented appends to session ``chain``; compare-and-append to session
``cas``; explicit-parent appends and deletes of its own messages in session ``tree``; appends to
the namespace-scoped block ``shared``; and searches. It prints one JSON object at the end: what
was acknowledged and which exceptions occurred (by type name, with one example message each).
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from typing import Any

from mindstore import Session
from mindstore.errors import ConflictError, MessageNotFoundError

NS = "contention"


async def open_store(backend: str, target: str) -> Any:
    if backend == "sqlite":
        from mindstore.store.sqlite import SQLiteStore

        return SQLiteStore(target)
    from mindstore.store.postgres import PostgresStore

    url, schema = target.split("|")
    return await PostgresStore.open(url, schema=schema, min_size=1, max_size=2)


def msg(mid: str, text: str) -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}


async def main() -> None:
    backend, target = sys.argv[1], sys.argv[2]
    worker, seconds, seed = int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    rng = random.Random(seed)
    store = await open_store(backend, target)
    chain = Session.create(store, "chain", namespace=NS)
    cas = Session.create(store, "cas", namespace=NS)
    tree = Session.create(store, "tree", namespace=NS).with_context("shared", scope="namespace")
    acked: dict[str, list[Any]] = {
        "chain": [],
        "cas": [],
        "tree": [],
        "tree_deleted": [],
        "block": [],
    }
    errors: dict[str, str] = {}
    counts: dict[str, int] = {}
    own_tree: list[str] = []
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        n += 1
        uid = f"w{worker}n{n}"
        r = rng.random()
        try:
            if r < 0.3:
                await chain.append_message(msg(uid, f"chain contention {uid}"))
                acked["chain"].append(uid)
            elif r < 0.45:
                leaf = await cas.get_latest_leaf()
                expected = leaf["id"] if leaf else None
                await cas.append_message(msg(uid, f"cas {uid}"), expected_leaf=expected)
                acked["cas"].append(uid)
            elif r < 0.65:
                others = await tree.get_latest_leaf()
                choices = own_tree + ([others["id"]] if others else [])
                parent = rng.choice(choices) if choices and rng.random() < 0.8 else None
                await tree.append_message(msg(uid, f"tree {uid}"), parent_id=parent)
                acked["tree"].append(uid)
                own_tree.append(uid)
            elif r < 0.72 and own_tree:
                victim = own_tree.pop(rng.randrange(len(own_tree)))
                await tree.delete_messages([victim])
                acked["tree_deleted"].append(victim)
            elif r < 0.87:
                await tree.append_context_block("shared", f"item {uid}")
                acked["block"].append(uid)
            else:
                await tree.search(rng.choice(["tree", "contention w1*", '"chain contention"']))
        except (ConflictError, MessageNotFoundError) as exc:
            name = type(exc).__name__
            counts[name] = counts.get(name, 0) + 1
            errors.setdefault(name, str(exc))
        except Exception as exc:  # anything else is a defect: report it
            name = "UNEXPECTED " + type(exc).__name__
            counts[name] = counts.get(name, 0) + 1
            errors.setdefault(name, repr(exc))
    await store.aclose()
    print(json.dumps({"acked": acked, "errors": errors, "counts": counts, "ops": n}))


if __name__ == "__main__":
    asyncio.run(main())
