"""MindstoreStore (LangGraph BaseStore) on every backend: the behaviours LangGraph documents for
stores and checks in its own store tests, plus a real LangGraph graph that writes a memory in
one run and recalls it in the next (scripted nodes, no model)."""

from __future__ import annotations

import asyncio
import operator
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    PutOp,
    SearchOp,
)

from mindstore.context.providers import StoreSearchProvider
from mindstore.integrations._store_rules import encode_namespace
from mindstore.integrations.langgraph import MindstoreStore
from mindstore.session import Session
from mindstore.store.base import ScopeKey, Store


@pytest.fixture
def lg(store: Store) -> MindstoreStore:
    return MindstoreStore(store, namespace="tenant")


async def test_put_get_update_delete(lg: MindstoreStore) -> None:
    ns = ("users", "u1", "memories")
    value = {"title": "Test", "nested": {"list": [1, 2.5, "x", None, True]}, "ü": "ß"}
    assert await lg.asearch(("users",)) == []
    await lg.aput(ns, "doc1", value)
    item = await lg.aget(ns, "doc1")
    assert item is not None and isinstance(item, Item)
    assert (item.namespace, item.key, item.value) == (ns, "doc1", value)
    assert item.created_at == item.updated_at and item.created_at.tzinfo is not None
    await asyncio.sleep(0.002)
    await lg.aput(ns, "doc1", {"title": "Updated"})
    updated = await lg.aget(ns, "doc1")
    assert updated is not None and updated.value == {"title": "Updated"}
    assert updated.created_at == item.created_at and updated.updated_at > item.updated_at
    assert await lg.aget(("users", "u1", "other"), "doc1") is None
    await lg.adelete(ns, "doc1")
    assert await lg.aget(ns, "doc1") is None
    await lg.adelete(ns, "never-there")  # deleting a missing item is not an error


async def test_namespaces_never_collide(lg: MindstoreStore) -> None:
    spaces = [
        ("foo",),
        ("foo", "child"),
        ("foobar",),
        ('fo"o',),
        ("foo,bar",),
        ("foo", "bar"),
        ("fo\\o",),
        ("a]",),
        ("日本", "語"),
    ]
    for i, ns in enumerate(spaces):
        await lg.aput(ns, "k", {"i": i})
    for i, ns in enumerate(spaces):
        got = await lg.aget(ns, "k")
        assert got is not None and got.value == {"i": i}, ns
    found = {it.namespace for it in await lg.asearch(("foo",), limit=100)}
    assert found == {("foo",), ("foo", "child"), ("foo", "bar")}
    assert set(await lg.alist_namespaces(limit=100)) == set(spaces)
    assert await lg.alist_namespaces(prefix=("foo,bar",)) == [("foo,bar",)]


async def test_invalid_namespaces_are_refused(lg: MindstoreStore) -> None:
    for bad in [(), ("the", "thing.about"), ("some", "")]:
        with pytest.raises(InvalidNamespaceError):
            await lg.aput(bad, "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        await lg.aput(("langgraph", "x"), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):  # ops passed to abatch are checked too
        await lg.abatch([PutOp(("a.b",), "k", {"v": 1})])
    with pytest.raises(ValueError, match="too long"):
        await lg.aput(("x" * 300,), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError, match="tuple of labels"):  # not u, s, e, r, s
        await lg.aput("users", "k", {"v": 1})  # type: ignore[arg-type]
    with pytest.raises(InvalidNamespaceError, match="tuple of labels"):
        await lg.asearch("users")  # type: ignore[arg-type]
    assert await lg.alist_namespaces() == []


async def test_bad_values_change_nothing(lg: MindstoreStore) -> None:
    await lg.aput(("a",), "k", {"v": 1})
    with pytest.raises(TypeError, match="JSON-serialisable"):
        await lg.aput(("a",), "k", {"v": object()})
    with pytest.raises(ValueError, match="ttl"):
        await lg.aput(("a",), "k", {"v": 2}, ttl=-1)
    got = await lg.aget(("a",), "k")
    assert got is not None and got.value == {"v": 1}


async def test_list_namespaces_prefix_suffix_wildcards_depth_pages(lg: MindstoreStore) -> None:
    p = "pref"
    spaces = [
        (p, "test", "documents", "public", p),
        (p, "test", "documents", "private", p),
        (p, "test", "images", "public", p),
        (p, "test", "images", "private", p),
        (p, "prod", "documents", "public", p),
        (p, "prod", "documents", "some", "nesting", "public", p),
        (p, "prod", "documents", "private", p),
    ]
    for ns in spaces:
        await lg.aput(ns, "dummy", {"content": "dummy"})
    assert len(await lg.alist_namespaces(prefix=(p, "test"))) == 4
    assert len(await lg.alist_namespaces(prefix=(p, "test", "documents"))) == 2
    assert len(await lg.alist_namespaces(suffix=("public", p))) == 4
    both = await lg.alist_namespaces(prefix=(p, "test"), suffix=("public", p))
    assert sorted(both) == sorted([spaces[0], spaces[2]])
    assert len(await lg.alist_namespaces(prefix=(p, "*", "documents"))) == 5
    assert len(await lg.alist_namespaces(suffix=("*", "public", p))) == 4
    assert await lg.alist_namespaces(suffix=("some", "*", "public", p)) == [spaces[5]]
    assert await lg.alist_namespaces(max_depth=2) == [(p, "prod"), (p, "test")]
    deep = await lg.alist_namespaces(max_depth=4, prefix=(p, "*", "documents"))
    assert len(deep) == len(set(deep)) == 5
    every = await lg.alist_namespaces(prefix=(p,))
    assert every == sorted(spaces)
    assert await lg.alist_namespaces(prefix=(p,), limit=3) == every[:3]
    assert await lg.alist_namespaces(prefix=(p,), offset=3) == every[3:]
    # A namespace whose only item is deleted is no longer listed.
    await lg.adelete(spaces[0], "dummy")
    assert spaces[0] not in await lg.alist_namespaces(prefix=(p,))


async def test_search_filter_pagination_and_order(lg: MindstoreStore) -> None:
    base = "s"
    rows = [
        ((base, "documents", "user1"), {"title": "Doc 1", "author": "John Doe", "tags": ["a"]}),
        ((base, "documents", "user2"), {"title": "Doc 2", "author": "Jane Smith", "n": 5}),
        ((base, "reports", "d1"), {"title": "Report A", "author": "John Doe", "n": 10}),
        ((base, "reports", "d2"), {"title": "Report B", "author": "Alice", "tags": ["draft"]}),
    ]
    for ns, value in rows:
        await lg.aput(ns, f"item_{ns[-1]}", value)
    docs = await lg.asearch((base, "documents"))
    assert {i.namespace[1] for i in docs} == {"documents"} and len(docs) == 2
    every = await lg.asearch((base,))
    # Without a query: newest-updated first, no score.
    assert [i.key for i in every] == ["item_d2", "item_d1", "item_user2", "item_user1"]
    assert all(i.score is None for i in every)
    first, second = await lg.asearch((base,), limit=2), await lg.asearch((base,), offset=2)
    assert [i.key for i in first + second] == [i.key for i in every]
    john = await lg.asearch((base,), filter={"author": "John Doe"})
    assert {i.key for i in john} == {"item_user1", "item_d1"}
    assert [i.key for i in await lg.asearch((base,), filter={"tags": ["draft"]})] == ["item_d2"]
    assert {i.key for i in await lg.asearch((base,), filter={"n": {"$gte": 5}})} == {
        "item_user2",
        "item_d1",
    }
    assert [i.key for i in await lg.asearch((base,), filter={"n": {"$gt": 5, "$lt": 11}})] == [
        "item_d1"
    ]
    ne = await lg.asearch((base,), filter={"author": {"$ne": "John Doe"}})
    assert {i.key for i in ne} == {"item_user2", "item_d2"}
    with pytest.raises(ValueError, match="unsupported filter operator"):
        await lg.asearch((base,), filter={"n": {"$regex": "x"}})


async def test_query_is_served_by_full_text_search(lg: MindstoreStore) -> None:
    ns = ("user_123", "memories")
    await lg.aput(ns, "1", {"text": "User prefers dark mode in every editor"})
    await lg.aput(ns, "2", {"text": "Deployment released every Friday", "kind": "ops"})
    await lg.aput(ns, "3", {"text": "Это русский текст"})
    await lg.aput(ns, "4", {"text": "Deployed the dark release", "kind": "ops"})
    await lg.aput(ns, "5", {"text": "deployment secret"}, index=False)
    await lg.aput(ns, "6", {"text": "unrelated", "note": "deployment notes"}, index=["text"])
    hits = await lg.asearch(ns, query="releasing")  # stemmed: release/released/releasing
    assert {h.key for h in hits} == {"2", "4"}
    assert all(h.score is not None and h.score > 0 for h in hits)
    assert hits[0].score >= hits[1].score  # type: ignore[operator]
    best = await lg.asearch(ns, query="dark mode")
    assert best[0].key == "1"
    assert [h.key for h in await lg.asearch(ns, query="русский")] == ["3"]
    # filter and pagination apply to the ranked hits
    assert [h.key for h in await lg.asearch(ns, query="dark", filter={"kind": "ops"})] == ["4"]
    dark = await lg.asearch(ns, query="dark")
    assert [h.key for h in await lg.asearch(ns, query="dark", offset=1)] == [dark[1].key]
    # JSON keys are structure, not text: "kind" matches nothing; no query syntax error ever
    assert await lg.asearch(ns, query="kind") == []
    assert await lg.asearch(ns, query='"unclosed AND (* OR') == []
    assert await lg.asearch(ns, query="") == await lg.asearch(ns)


async def test_index_fields_config_chooses_the_indexed_text(store: Store) -> None:
    # without an embed function (and a store without an embedder) ``fields`` chooses the
    # full-text indexed text; with one the search is semantic (test_langgraph_semantic.py)
    lg = MindstoreStore(store, index={"fields": ["title"]})  # type: ignore[typeddict-item]
    await lg.aput(("d",), "a", {"title": "kubernetes guide", "body": "postgres tuning"})
    assert [h.key for h in await lg.asearch(("d",), query="kubernetes")] == ["a"]
    assert await lg.asearch(("d",), query="postgres") == []
    await lg.aput(("d",), "b", {"title": "x", "body": "postgres again"}, index=["body"])
    assert [h.key for h in await lg.asearch(("d",), query="postgres")] == ["b"]


async def test_batch_runs_ops_in_order(lg: MindstoreStore) -> None:
    await lg.aput(("test", "foo"), "key1", {"data": "value1"})
    results = await lg.abatch(
        [
            GetOp(("test", "foo"), "key1"),
            PutOp(("test", "bar"), "key2", {"data": "value2"}),
            SearchOp(("test",), filter={"data": "value1"}),
            ListNamespacesOp(),
            GetOp(("test", "bar"), "key2"),  # sees the put earlier in the batch
            PutOp(("test", "bar"), "key2", None),
            GetOp(("test", "bar"), "key2"),
            GetOp(("test",), "missing"),
        ]
    )
    assert isinstance(results[0], Item) and results[0].value == {"data": "value1"}
    assert results[1] is None
    assert [i.key for i in results[2]] == ["key1"]  # type: ignore[union-attr]
    assert results[3] == [("test", "bar"), ("test", "foo")]
    assert isinstance(results[4], Item) and results[4].value == {"data": "value2"}
    assert results[5:] == [None, None, None]


async def test_mindstore_namespaces_isolate_and_blocks_stay_out(store: Store) -> None:
    a, b = MindstoreStore(store, namespace="a"), MindstoreStore(store, namespace="b")
    await a.aput(("mem",), "k", {"text": "alpha secret"})
    assert await b.aget(("mem",), "k") is None
    assert await b.asearch(("mem",), query="alpha") == []
    assert await b.alist_namespaces() == []
    # A searchable block's entries live in the same table but are not LangGraph namespaces.
    session = Session.create(store, "s", namespace="a").with_context(
        "knowledge", provider=StoreSearchProvider(store)
    )
    await session.tools()
    kb = await session.get_context_block("knowledge")
    assert kb is not None
    await store.put_entry(ScopeKey(namespace="a", session_id=None, label="knowledge"), "x", "y")
    assert await a.alist_namespaces() == [("mem",)]
    assert [i.key for i in await a.asearch(())] == ["k"]


async def test_ttl_expiry_refresh_and_sweep(store: Store) -> None:
    lg = MindstoreStore(store, namespace="t", ttl={"default_ttl": 10, "refresh_on_read": True})
    ns = ("cache",)
    await lg.aput(ns, "default", {"text": "uses default ttl"})
    await lg.aput(ns, "short", {"text": "short lived"}, ttl=1)
    await lg.aput(ns, "forever", {"text": "kept forever"}, ttl=None)

    key = ScopeKey(namespace="t", session_id=None, label=encode_namespace(ns))

    async def expiry(entry_key: str) -> datetime | None:
        e = await store.get_entry(key, entry_key)
        assert e is not None
        return e.expires_at

    now = datetime.now(UTC)
    default_at, short_at = await expiry("default"), await expiry("short")
    close = timedelta(seconds=30)
    assert default_at is not None and abs(default_at - (now + timedelta(minutes=10))) < close
    assert short_at is not None and abs(short_at - (now + timedelta(minutes=1))) < close
    assert await expiry("forever") is None
    # Reads refresh the expiry unless told not to (with refresh_on_read, as SqliteStore).
    await store.set_entry_expiry(key, {"short": now + timedelta(seconds=20)})
    await lg.aget(ns, "short", refresh_ttl=False)
    assert await expiry("short") == now + timedelta(seconds=20)
    await lg.aget(ns, "short")
    assert (await expiry("short") or now) > now + timedelta(seconds=50)
    await store.set_entry_expiry(key, {"short": now + timedelta(seconds=20)})
    await lg.asearch(ns, query="short")
    assert (await expiry("short") or now) > now + timedelta(seconds=50)
    # An expired item is gone for every read even before the sweep, then the sweep deletes it.
    await store.set_entry_expiry(key, {"short": now - timedelta(seconds=1)})
    assert await lg.aget(ns, "short") is None
    assert "short" not in {i.key for i in await lg.asearch(ns)}
    await lg.aput(ns, "newest", {"text": "newest"}, ttl=1)
    await store.set_entry_expiry(key, {"newest": now - timedelta(seconds=1)})
    # The newest item has expired: a one-item page still holds the next one.
    assert [i.key for i in await lg.asearch(ns, limit=1)] == ["forever"]
    assert [i.key for i in await lg.asearch(ns, limit=1, offset=1)] == ["default"]
    assert await lg.asearch(ns, query="short lived") == []
    await lg.aput(("only", "expired"), "x", {"v": 1}, ttl=1)
    await store.set_entry_expiry(
        ScopeKey(namespace="t", session_id=None, label=encode_namespace(("only", "expired"))),
        {"x": now - timedelta(seconds=1)},
    )
    assert ("only", "expired") not in await lg.alist_namespaces()
    assert await lg.asweep_ttl() == 3
    assert await lg.asweep_ttl() == 0
    assert {i.key for i in await lg.asearch(ns)} == {"default", "forever"}


async def test_ttl_sweeper_task_starts_and_stops(store: Store) -> None:
    lg = MindstoreStore(store, ttl={"sweep_interval_minutes": 1})
    await lg.start_ttl_sweeper(sweep_interval_minutes=0.0005)  # every 30 ms
    await lg.aput(("c",), "k", {"v": 1}, ttl=1)
    key = ScopeKey(namespace="default", session_id=None, label=encode_namespace(("c",)))
    await store.set_entry_expiry(key, {"k": datetime.now(UTC) - timedelta(seconds=1)})
    for _ in range(200):
        if await store.get_entry(key, "k") is None:
            break
        await asyncio.sleep(0.02)
    assert await store.get_entry(key, "k") is None
    await lg.stop_ttl_sweeper()
    await lg.stop_ttl_sweeper()  # idempotent


async def test_sync_methods(lg: MindstoreStore, backend: str) -> None:
    # Inside the running loop: a PostgreSQL pool belongs to this (blocked) loop, so a sync call
    # is refused with an error naming the fix; SQLite runs it on the adapter's loop thread
    # (tests/integration/test_langgraph_loops.py).
    for call in (
        lambda: lg.put(("a",), "k", {"v": 1}),
        lambda: lg.get(("a",), "k"),
        lambda: lg.search(("a",)),
        lambda: lg.list_namespaces(),
        lambda: lg.delete(("a",), "k"),
    ):
        if backend == "sqlite":
            call()
            continue
        with pytest.raises(asyncio.InvalidStateError, match="async methods"):
            call()
    await lg.aget(("a",), "k")  # the store's loop is now known

    def worker(i: int) -> Any:
        lg.put(("threads",), f"k{i}", {"text": f"note number {i}"})
        got = lg.get(("threads",), f"k{i}")
        return got.value if got else None

    values = await asyncio.gather(*(asyncio.to_thread(worker, i) for i in range(8)))
    assert values == [{"text": f"note number {i}"} for i in range(8)]
    found = await asyncio.to_thread(lambda: lg.search(("threads",), query="note", limit=20))
    assert len(found) == 8
    assert await asyncio.to_thread(lambda: lg.list_namespaces()) == [("threads",)]


def test_sync_methods_without_a_loop_on_sqlite(tmp_path: Any) -> None:
    from mindstore import SQLiteStore

    store = SQLiteStore(str(tmp_path / "lg.db"))
    lg = MindstoreStore(store)
    lg.put(("m",), "k", {"text": "plain script"})
    got = lg.get(("m",), "k")
    assert got is not None and got.value == {"text": "plain script"}
    assert [i.key for i in lg.search(("m",), query="script")] == ["k"]
    asyncio.run(store.aclose())


class MemoryState(TypedDict):
    user_id: str
    text: str
    log: Annotated[list[str], operator.add]


def build_graph(store: BaseStore) -> Any:
    """Two scripted nodes: remember facts the user states, recall what matches the message."""

    async def remember(state: MemoryState, *, store: BaseStore) -> dict[str, Any]:
        text = state["text"]
        if text.startswith("remember: "):
            fact = text.removeprefix("remember: ")
            n = len(await store.asearch(("memories", state["user_id"]), limit=100))
            await store.aput(("memories", state["user_id"]), f"fact-{n}", {"fact": fact})
            return {"log": [f"saved {fact}"]}
        return {"log": []}

    async def recall(state: MemoryState, *, store: BaseStore) -> dict[str, Any]:
        hits = await store.asearch(("memories", state["user_id"]), query=state["text"], limit=3)
        return {"log": [f"recalled {h.value['fact']}" for h in hits]}

    graph = StateGraph(MemoryState)
    graph.add_node("remember", remember)
    graph.add_node("recall", recall)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "recall")
    graph.add_edge("recall", END)
    return graph.compile(store=store)


async def test_langgraph_graph_writes_and_recalls_a_memory(store: Store) -> None:
    app = build_graph(MindstoreStore(store, namespace="agent"))
    first = await app.ainvoke({"user_id": "u7", "text": "remember: the user's dog is Rex"})
    assert first["log"][0] == "saved the user's dog is Rex"
    await app.ainvoke({"user_id": "u7", "text": "remember: the user drinks green tea", "log": []})
    # A new graph over a new adapter (as a new process would build) recalls the memory.
    again = build_graph(MindstoreStore(store, namespace="agent"))
    out = await again.ainvoke({"user_id": "u7", "text": "dog", "log": []})
    assert out["log"] == ["recalled the user's dog is Rex"]
    other = await again.ainvoke({"user_id": "u8", "text": "dog", "log": []})
    assert other["log"] == []
    # The memories are ordinary mindstore entries: full-text searchable in the store.
    label = encode_namespace(("memories", "u7"))
    from mindstore.search import parse_query

    hits = await store.search_entries(
        ScopeKey(namespace="agent", session_id=None, label=label), parse_query("tea")
    )
    assert [h.key for h in hits] == ["fact-1"]


async def test_concurrent_operations(lg: MindstoreStore) -> None:
    """Many interleaved puts, gets, searches, listings and deletes at once (as LangGraph's
    own store tests run them): every op completes and the survivors are what the ops say."""
    ns = ("test", "foo", "bar")

    async def one(i: int) -> None:
        await lg.aput((*ns, str(i % 2)), f"key{i}", {"foo": f"bar{i}"})
        got = await lg.aget((*ns, str(i % 2)), f"key{i}")
        assert got is not None and got.value == {"foo": f"bar{i}"}
        await lg.alist_namespaces(max_depth=(i % 4) + 1)
        await lg.asearch(("test",), query=f"bar{i}")
        if i % 3 == 0:
            await lg.adelete((*ns, str(i % 2)), f"key{i}")

    await asyncio.gather(*(one(i) for i in range(60)))
    left = await lg.asearch(("test",), limit=100)
    assert sorted(i.key for i in left) == sorted(f"key{i}" for i in range(60) if i % 3)
    assert await lg.alist_namespaces() == [(*ns, "0"), (*ns, "1")]


def build_sync_graph(store: BaseStore) -> Any:
    """The same memory graph with *sync* nodes: LangGraph calls the store's sync methods."""

    def remember(state: MemoryState, *, store: BaseStore) -> dict[str, Any]:
        if state["text"].startswith("remember: "):
            fact = state["text"].removeprefix("remember: ")
            n = len(store.search(("memories", state["user_id"]), limit=100))
            store.put(("memories", state["user_id"]), f"fact-{n}", {"fact": fact})
        return {"log": []}

    def recall(state: MemoryState, *, store: BaseStore) -> dict[str, Any]:
        hits = store.search(("memories", state["user_id"]), query=state["text"], limit=3)
        return {"log": [f"recalled {h.value['fact']}" for h in hits]}

    graph = StateGraph(MemoryState)
    graph.add_node("remember", remember)
    graph.add_node("recall", recall)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "recall")
    graph.add_edge("recall", END)
    return graph.compile(store=store)


async def test_sync_nodes_under_ainvoke(store: Store) -> None:
    """ainvoke runs sync nodes in worker threads; their sync store calls run on this loop
    (PostgreSQL's pool lives here)."""
    lg = MindstoreStore(store, namespace="agent")
    app = build_sync_graph(lg)
    await app.ainvoke({"user_id": "u1", "text": "remember: the meeting is on Tuesday"})
    out = await app.ainvoke({"user_id": "u1", "text": "meeting"})
    assert out["log"] == ["recalled the meeting is on Tuesday"]


def test_sync_graph_invoke_on_sqlite(tmp_path: Any) -> None:
    """A plain script: graph.invoke, no event loop anywhere, a SQLite file."""
    from mindstore import SQLiteStore

    store = SQLiteStore(str(tmp_path / "sync.db"))
    app = build_sync_graph(MindstoreStore(store))
    app.invoke({"user_id": "u1", "text": "remember: the cat is called Tom"})
    assert app.invoke({"user_id": "u1", "text": "cat"})["log"] == ["recalled the cat is called Tom"]
    asyncio.run(store.aclose())
