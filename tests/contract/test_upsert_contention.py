"""Contract: insert-or-update paths under real contention — writers in several processes (each
with its own connections) hitting the same *new* key at the same moment — end with the last
write, never a unique-key error, and leave exactly one row (and one search document) per key.

Covered: keyed entries (``put_entry`` directly, ``set_context`` on a searchable block, the
LangGraph store's ``aput``), blocks (``set_block``, ``update_block``), usage (``add_usage``),
skill state (``set_skill_loaded``) and the frozen prompt (``put_prompt``).
"""

from __future__ import annotations

import asyncio
import multiprocessing
from typing import Any

import pytest

from backends import Storage
from mindstore.context.providers import StoreSearchProvider
from mindstore.integrations.langgraph import MindstoreStore
from mindstore.search import parse_query
from mindstore.session import Session
from mindstore.store.base import ScopeKey, SessionKey, Store

WORKERS = 4
ROUNDS = 12
NS = "race"
RAW = ScopeKey(namespace=NS, session_id=None, label="raw")


def _knowledge(store: Store) -> Session:
    return Session.create(store, "writer", namespace=NS).with_context(
        "knowledge", description="Knowledge base", provider=StoreSearchProvider(store)
    )


async def _race(storage: Storage, worker: int, barrier: Any) -> dict[str, Any]:
    store = await storage.open()
    lg = MindstoreStore(store, namespace=NS)
    tools = await _knowledge(store).tools()
    loaded = 0
    try:
        for n in range(ROUNDS):
            await asyncio.to_thread(barrier.wait, 30)  # every worker starts the round together
            text = f"worker{worker} round{n} marker{n}"
            await store.put_entry(RAW, f"k{n}", text)
            out = await tools.execute(
                "set_context",
                {"label": "knowledge", "content": text, "metadata": {"title": f"note {n}"}},
            )
            assert out == f'Indexed "note-{n}" in knowledge.', out
            await lg.aput(("t",), f"k{n}", {"v": worker, "text": text})
            await store.set_block(ScopeKey(namespace=NS, session_id=f"s{n}", label="block"), text)
            await store.update_block(
                ScopeKey(namespace=NS, session_id=None, label=f"u{n}"),
                lambda cur, w=worker: cur + f"w{w};",
            )
            await store.add_usage(SessionKey(namespace=NS, session_id=f"u{n}"), 1, 2, 0.5)
            loaded += await store.set_skill_loaded(
                SessionKey(namespace=NS, session_id=f"k{n}"), "skills", "s", True
            )
            prompt = await store.put_prompt(
                SessionKey(namespace=NS, session_id=f"p{n}"), text, overwrite=False
            )
            assert prompt.startswith("worker") and prompt.endswith(f"round{n} marker{n}")
        return {"loaded": loaded}
    finally:
        await store.aclose()


def _worker(storage: Storage, worker: int, barrier: Any, results: Any) -> None:
    results.put((worker, asyncio.run(_race(storage, worker, barrier))))


@pytest.mark.slow
async def test_processes_racing_on_new_keys_never_fail_and_leave_one_row(
    store: Store, storage: Storage
) -> None:
    await store.put_entry(RAW, "warm-up", "opens the schema before the workers race")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(storage, w, barrier, results)) for w in range(WORKERS)
    ]
    for p in procs:
        p.start()
    for p in procs:
        await asyncio.to_thread(p.join, 120)
    assert [p.exitcode for p in procs] == [0] * WORKERS
    got = dict(results.get(timeout=5) for _ in range(WORKERS))
    # the first loader of a skill sees True, every other one "already loaded"
    assert sum(r["loaded"] for r in got.values()) == ROUNDS

    lg = MindstoreStore(store, namespace=NS)
    kb = await _knowledge(store).get_context_provider("knowledge")
    knowledge = {e.key: e.content for e in await kb.entries()}
    assert sorted(knowledge) == sorted(f"note-{n}" for n in range(ROUNDS))
    writers = [f"worker{w}" for w in range(WORKERS)]
    for n in range(ROUNDS):
        winners = {
            "raw": (await store.get_entry(RAW, f"k{n}")),
            "knowledge": knowledge[f"note-{n}"],
            "block": await store.get_block(
                ScopeKey(namespace=NS, session_id=f"s{n}", label="block")
            ),
            "prompt": await store.get_prompt(SessionKey(namespace=NS, session_id=f"p{n}")),
        }
        raw = winners.pop("raw")
        assert raw is not None
        winners["raw"] = raw.content
        for what, text in winners.items():
            assert text in [f"{w} round{n} marker{n}" for w in writers], (what, n, text)
        # one search document per key: the losers' index rows went with their rows
        hits = await store.search_entries(RAW, parse_query(f"marker{n}"), limit=10)
        assert [h.key for h in hits] == [f"k{n}"]
        item = await lg.aget(("t",), f"k{n}")
        assert item is not None and item.value["v"] in range(WORKERS)
        appended = await store.get_block(ScopeKey(namespace=NS, session_id=None, label=f"u{n}"))
        assert appended is not None
        assert sorted(appended.split(";")[:-1]) == [f"w{w}" for w in range(WORKERS)]
        usage = await store.get_session(SessionKey(namespace=NS, session_id=f"u{n}"))
        assert usage is not None
        assert (usage.input_tokens, usage.output_tokens) == (WORKERS, 2 * WORKERS)
        assert usage.estimated_cost == pytest.approx(0.5 * WORKERS)
        states = await store.get_skill_states(SessionKey(namespace=NS, session_id=f"k{n}"))
        assert [(s.key, s.loaded) for s in states] == [("s", True)]
    assert len(await lg.asearch(("t",), limit=100)) == ROUNDS


async def test_concurrent_aput_on_one_new_key_last_write_wins(
    store: Store, storage: Storage
) -> None:
    # The report's repro: eight puts of one new key at once over the store's connection pool,
    # plus the same through a second store object (its own connections).
    other = await storage.open()
    try:
        stores = [MindstoreStore(store, namespace=NS), MindstoreStore(other, namespace=NS)]
        for n in range(20):
            await asyncio.gather(*(stores[i % 2].aput(("t",), f"k{n}", {"v": i}) for i in range(8)))
        for n in range(20):
            item = await stores[0].aget(("t",), f"k{n}")
            assert item is not None and item.value["v"] in range(8)
        assert len(await stores[0].asearch(("t",), limit=100)) == 20
        # an existing key rewritten concurrently: still one row, one of the writes
        await asyncio.gather(*(stores[i % 2].aput(("t",), "k0", {"v": 100 + i}) for i in range(8)))
        item = await stores[1].aget(("t",), "k0")
        assert item is not None and item.value["v"] in range(100, 108)
        assert await store.count_entries(stores[0]._key(("t",))) == 20
    finally:
        await other.aclose()
