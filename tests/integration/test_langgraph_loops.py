"""MindstoreStore's synchronous calls made where an event loop is running in the calling thread
(every Jupyter cell; a sync node under ``graph.invoke`` there), as ``InMemoryStore``'s work:
a SQLite store runs them on the adapter's own loop thread, a ``mindstore.sync`` store (either
backend) on that store's loop thread; a PostgreSQL store bound to the running loop refuses with
an error naming the fix and writes nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore
from test_langgraph_store import build_sync_graph

from backends import Storage
from mindstore import SQLiteStore
from mindstore.integrations.langgraph import MindstoreStore
from mindstore.store.base import Store


def exercise_sync_calls(lg: Any) -> None:
    """put/get/search/list/delete through the sync API, and a sync graph under ``invoke``."""
    lg.put(("notes",), "a", {"text": "the cat sat on the mat"})
    lg.put(("notes",), "b", {"text": "dogs bark"})
    got = lg.get(("notes",), "a")
    assert got is not None and got.value == {"text": "the cat sat on the mat"}
    assert "a" in [i.key for i in lg.search(("notes",), query="cat")]
    assert lg.list_namespaces() == [("notes",)]
    lg.delete(("notes",), "b")
    assert lg.get(("notes",), "b") is None
    app = build_sync_graph(lg)
    app.invoke({"user_id": "u1", "text": "remember: the meeting is on Tuesday"})
    out = app.invoke({"user_id": "u1", "text": "meeting"})
    assert out["log"] == ["recalled the meeting is on Tuesday"]


async def test_in_memory_store_is_the_reference() -> None:
    asyncio.get_running_loop()  # this coroutine is the "Jupyter cell"
    exercise_sync_calls(InMemoryStore())


async def test_sqlite_store_sync_calls_inside_a_running_loop(tmp_path: Any) -> None:
    store = SQLiteStore(tmp_path / "nb.db")
    try:
        lg = MindstoreStore(store)
        exercise_sync_calls(lg)
        # the async API on the same adapter still works on this loop, and sees the sync writes
        item = await lg.aget(("notes",), "a")
        assert item is not None and item.value["text"].startswith("the cat")
        # and sync calls from a worker thread (LangGraph's ainvoke) still run on this loop
        assert await asyncio.to_thread(lg.get, ("notes",), "a") == item
    finally:
        await store.aclose()


async def test_sync_store_is_accepted_on_every_backend(storage: Storage) -> None:
    sync_store = storage.open_sync()
    try:
        lg = MindstoreStore(sync_store, namespace="nb")
        assert lg.store is sync_store.aio
        exercise_sync_calls(lg)
        # async calls from this (foreign) loop hop to the store's loop thread
        await lg.aput(("notes",), "c", {"text": "async write"})
        got = await lg.aget(("notes",), "c")
        assert got is not None and got.value == {"text": "async write"}
        assert await asyncio.to_thread(lg.get, ("notes",), "c") == got
        app = build_sync_graph(lg)
        out = await app.ainvoke({"user_id": "u1", "text": "meeting"})
        assert out["log"] == ["recalled the meeting is on Tuesday"]
    finally:
        sync_store.close()


async def test_store_bound_to_the_running_loop_names_the_fix(store: Store, backend: str) -> None:
    if backend == "sqlite":
        pytest.skip("a SQLite store is bound to no loop: covered above")
    lg = MindstoreStore(store, namespace="nb")
    with pytest.raises(asyncio.InvalidStateError, match=r"mindstore\.sync"):
        lg.put(("notes",), "a", {"text": "x"})
    assert await lg.aget(("notes",), "a") is None
