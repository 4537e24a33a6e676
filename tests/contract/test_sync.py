"""mindstore.sync on both backends: plain calls, threads, a running loop in the caller (Jupyter),
plain ``with``; and the parity of the sync surface with the async one."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mindstore
import mindstore.sync as sync
from backends import Storage
from mindstore.manager import SessionManager as AsyncSessionManager
from mindstore.session import Session as AsyncSession
from mindstore.store.postgres import PostgresStore as AsyncPostgresStore
from mindstore.store.sqlite import SQLiteStore as AsyncSQLiteStore
from mindstore.tools import ToolSet as AsyncToolSet


@pytest.fixture
def sync_store(backend: str, tmp_path: Path) -> Iterator[Any]:
    storage = Storage.new(backend, tmp_path)
    try:
        with storage.open_sync() as store:
            yield store
    finally:
        asyncio.run(storage.drop())


def text(role: str, body: str, mid: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": role, "parts": [{"type": "text", "text": body}]}
    if mid is not None:
        msg["id"] = mid
    return msg


# ---------------------------------------------------------------- parity


PAIRS = [
    (AsyncSQLiteStore, sync.SQLiteStore),
    (AsyncPostgresStore, sync.PostgresStore),
    (AsyncSession, sync.Session),
    (AsyncSessionManager, sync.SessionManager),
    (AsyncToolSet, sync.ToolSet),
]


@pytest.mark.parametrize(("aio", "twin"), PAIRS, ids=lambda c: c.__name__)
def test_every_public_async_method_has_a_sync_twin_with_the_same_signature(
    aio: type, twin: type
) -> None:
    checked = 0
    for name, member in inspect.getmembers(aio):
        if name.startswith("_"):
            continue
        sync_name = "close" if name == "aclose" else name
        assert hasattr(twin, sync_name), f"mindstore.sync.{twin.__name__} lacks {sync_name}"
        if isinstance(inspect.getattr_static(aio, name), property):
            assert isinstance(inspect.getattr_static(twin, sync_name), property), name
            continue
        if not callable(member):
            continue
        sync_member = getattr(twin, sync_name)
        assert not inspect.iscoroutinefunction(sync_member), f"{twin.__name__}.{sync_name}"
        assert inspect.signature(sync_member) == inspect.signature(member), name
        checked += 1
    assert checked >= 4
    if hasattr(aio, "__aenter__"):
        assert hasattr(twin, "__enter__") and hasattr(twin, "__exit__")


def test_constructors_keep_their_signatures() -> None:
    assert inspect.signature(sync.SQLiteStore) == inspect.signature(AsyncSQLiteStore)
    assert inspect.signature(sync.Session.create) == inspect.signature(AsyncSession.create)
    assert inspect.signature(sync.SessionManager) == inspect.signature(AsyncSessionManager)
    assert inspect.signature(sync.open_store) == inspect.signature(mindstore.open_store)
    assert sync.StaticProvider is mindstore.StaticProvider  # everything else: the same object


# ---------------------------------------------------------------- behaviour on both backends


def test_plain_calls_builders_and_tools(sync_store: Any) -> None:
    s = sync.Session.create(sync_store, "chat", namespace="u1").with_context(
        "memory", description="facts", max_tokens=200
    )
    assert s.append_message(text("user", "deploy the orders service", "u1")) is True
    assert s.append_message(text("user", "deploy the orders service", "u1")) is False
    s.append_message(text("assistant", "done", "a1"))
    assert [m["id"] for m in s.get_history()] == ["u1", "a1"]
    assert s.store is sync_store
    assert [r.message_id for r in s.search("orders", match="all")] == ["u1"]
    # any mode (the default) also finds the reply through its context (its parent's text)
    assert [r.message_id for r in s.search("orders")] == ["u1", "a1"]
    tools = s.tools()
    assert isinstance(tools, sync.ToolSet) and "set_context" in tools
    out = tools.execute("set_context", {"label": "memory", "content": "likes tea"})
    assert out.startswith("Written")
    assert "likes tea" in s.freeze_system_prompt()
    manager = sync.SessionManager(sync_store, namespace="u1")
    assert [i.id for i in manager.list()] == ["chat"]
    assert isinstance(manager.session("chat"), sync.Session)
    assert "deploy the orders service" in manager.tools().execute(
        "session_search", {"query": "orders"}
    )


def test_store_backed_providers_take_a_sync_store(sync_store: Any) -> None:
    s = sync.Session.create(sync_store, "kb").with_context(
        "knowledge", description="runbooks", provider=sync.StoreSearchProvider(sync_store)
    )
    tools = s.tools()
    written = tools.execute(
        "set_context", {"label": "knowledge", "key": "restart", "content": "make restart"}
    )
    assert "restart" in written
    assert "make restart" in tools.execute(
        "search_context", {"label": "knowledge", "query": "restart"}
    )


def test_eight_threads_append_to_one_store(sync_store: Any) -> None:
    per_thread = 25
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            mine = sync.Session.create(sync_store, f"own-{n}")
            shared = sync.Session.create(sync_store, "shared")
            for i in range(per_thread):
                shared.append_message(text("user", f"t{n} m{i}", f"t{n}-{i}"))
                mine.append_message(text("user", f"m{i}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    shared = sync.Session.create(sync_store, "shared")
    history = shared.get_history()
    assert len(history) == 8 * per_thread  # nothing lost, one chain (the path holds them all)
    assert len({m["id"] for m in history}) == 8 * per_thread
    for n in range(8):  # each thread's own appends stayed in order within the chain
        own = [m["id"] for m in history if m["id"].startswith(f"t{n}-")]
        assert own == [f"t{n}-{i}" for i in range(per_thread)]
        assert len(sync.Session.create(sync_store, f"own-{n}").get_history()) == per_thread


def test_the_change_feed_is_a_plain_iterator(sync_store: Any) -> None:
    s = sync.Session.create(sync_store, "s", namespace="ns")
    s.append_message(text("user", "one", "m1"))
    with sync_store.changes("ns", follow=False) as it:
        assert [(c.seq, c.data["message_id"]) for c in it] == [(1, "m1")]
    got: list[Any] = []

    def follow() -> None:
        with sync_store.changes("ns", since=1, poll_interval=0.01) as feed:
            for change in feed:
                got.append(change)
                if len(got) == 3:
                    return

    reader = threading.Thread(target=follow)
    reader.start()
    for i in range(2, 5):
        s.append_message(text("user", f"m{i}", f"m{i}"))
    reader.join(timeout=30)
    assert [c.data["message_id"] for c in got] == ["m2", "m3", "m4"]
    with pytest.raises(ValueError):
        sync_store.changes("ns", since=-1)


async def test_works_where_a_loop_is_already_running(sync_store: Any) -> None:
    # As in Jupyter: the calling thread runs an event loop.
    asyncio.get_running_loop()
    s = sync.Session.create(sync_store, "nb")
    s.append_message(text("user", "from a notebook cell"))
    assert len(s.get_history()) == 1


def test_closed_store_refuses_calls(sync_store: Any) -> None:
    s = sync.Session.create(sync_store, "x")
    s.append_message(text("user", "hi"))
    sync_store.close()
    sync_store.close()  # idempotent
    with pytest.raises(mindstore.StoreError, match="closed"):  # (as the async API raises)
        s.get_history()


def test_a_sync_store_has_no_transaction(sync_store: Any) -> None:
    """``transaction()`` is async-only (each sync call is its own transaction): it says so
    and what to use, rather than returning an async context manager a ``with`` rejects."""
    with pytest.raises(TypeError, match=r"store\.aio\.transaction"):
        sync_store.transaction()


def test_errors_pass_through_unchanged(sync_store: Any) -> None:
    s = sync.Session.create(sync_store, "x")
    with pytest.raises(mindstore.MessageNotFoundError):
        s.append_message(text("user", "hi"), parent_id="nope")


def test_background_compaction_from_plain_code(sync_store: Any) -> None:
    """compact_after(background=True) through mindstore.sync: the task runs on the store's loop
    thread; append_message returns before the 0.5 s summariser; wait_compaction() waits."""
    import time

    async def slow(prompt: str) -> str:
        await asyncio.sleep(0.5)
        return "## Topic\nsummary from the background"

    s = (
        sync.Session(sync_store, "bg")
        .on_compaction(
            mindstore.create_compact_function(summarize=slow, protect_head=1, tail_token_budget=50)
        )
        .compact_after(300, background=True)
    )
    slowest = 0.0
    for i in range(16):
        t0 = time.perf_counter()
        s.append_message(text("user", "word " * 20 + str(i)))
        slowest = max(slowest, time.perf_counter() - t0)
    assert slowest < 0.4  # no append waited for the summariser
    s.wait_compaction()
    assert s.get_compactions()
    assert any(m["id"].startswith("compaction_") for m in s.get_history())


def test_sync_upsert_eviction_and_hydration(sync_store: Any, tmp_path: Path) -> None:
    """Issue 32's calls from plain code: upsert, evict_media, hydrate=True, unload_skill."""
    manager = sync.SessionManager(sync_store, namespace="sync-media")
    url = "data:image/png;base64," + "Q" * 40_000
    shot = {"id": "u1", "role": "user", "parts": [{"type": "file", "url": url}]}
    assert manager.upsert("s", shot) == "u1"
    assert manager.upsert("s", text("assistant", "partial", "a1")) == "a1"
    assert manager.upsert("s", text("assistant", "final answer", "a1")) == "a1"
    session = manager.session("s").with_blob_store(str(tmp_path / "blobs"))
    report = session.evict_media(older_than_messages=1)
    assert (report.messages, report.items) == (1, 1)
    plain = session.get_history()
    assert plain[0]["parts"][0]["type"] == "text" and len(plain) == 2
    assert session.get_history(hydrate=True)[0] == shot
    assert session.loaded_skills() == []
