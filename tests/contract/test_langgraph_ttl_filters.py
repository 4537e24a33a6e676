"""Contract (every backend): the LangGraph store details LangGraph's ``SqliteStore`` defines and
its test suite checks — nested-path filters, TTL refreshed on read exactly when ``SqliteStore``
refreshes it, and a synchronous ``sweep_ttl()`` beside ``asweep_ttl()``.

The semantics were read from ``langgraph-checkpoint-sqlite`` 3.1.2 (``store/sqlite/base.py``)
and checked against it: a filter key ``"a.b"`` is ``json_extract(value, '$.a.b')``; a read
refreshes the expiry of what it returns (``expires_at = now + the item's ttl``) only when the
op asks for it *and* the store was built with ``ttl={"refresh_on_read": True}``.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mindstore.integrations._store_rules import encode_namespace
from mindstore.integrations.langgraph import MindstoreStore
from mindstore.store.base import ScopeKey, Store

NS = ("users", "docs")
VALUES: dict[str, dict[str, Any]] = {
    "alice": {"user": {"access-level": "admin", "age": 41, "team": {"name": "core"}}, "n": 1},
    "bob": {"user": {"access-level": "viewer", "age": 17}, "n": 2},
    "carol": {"user": {"access-level": "admin", "age": 29, "team": {"name": "web"}}, "n": 3},
    "dave": {"user": "not an object", "n": 4},
    "erin": {"n": 5, "a.b": "literal"},
}


async def filled(store: Store) -> MindstoreStore:
    lg = MindstoreStore(store, namespace="filters")
    for key, value in VALUES.items():
        await lg.aput(NS, key, {**value, "text": f"{key} notes"})
    return lg


@pytest.mark.parametrize(
    "flt,expected",
    [
        ({"user.access-level": "admin"}, {"alice", "carol"}),
        ({"user.access-level": {"$ne": "admin"}}, {"bob", "dave", "erin"}),
        ({"user.age": {"$gte": 18}}, {"alice", "carol"}),
        ({"user.age": {"$gt": 20, "$lt": 40}}, {"carol"}),
        ({"user.team.name": "web"}, {"carol"}),
        ({"user.access-level": "admin", "n": {"$lte": 1}}, {"alice"}),
        ({"user.missing": "x"}, set()),
        ({"n.deeper": 1}, set()),  # a path through a non-object matches nothing
        ({"a.b": "literal"}, {"erin"}),  # no nested path: the top-level key of that name
    ],
)
async def test_nested_path_filters(store: Store, flt: dict[str, Any], expected: set[str]) -> None:
    lg = await filled(store)
    assert {i.key for i in await lg.asearch(("users",), filter=flt, limit=20)} == expected
    with_query = await lg.asearch(("users",), query="notes", filter=flt, limit=20)
    assert {i.key for i in with_query} == expected


def _key(namespace: str, ns: tuple[str, ...]) -> ScopeKey:
    return ScopeKey(namespace=namespace, session_id=None, label=encode_namespace(ns))


async def _expiry(store: Store, key: ScopeKey, entry_key: str) -> datetime | None:
    entry = await store.get_entry(key, entry_key)
    assert entry is not None
    return entry.expires_at


@pytest.mark.parametrize(
    "ttl_config,read_kwargs,refreshed",
    [
        (None, {}, False),  # no TTL config: reads never move an expiry
        ({"default_ttl": 60}, {}, False),  # a config without refresh_on_read: neither
        ({"refresh_on_read": True}, {}, True),
        ({"refresh_on_read": True}, {"refresh_ttl": False}, False),
        ({"refresh_on_read": True}, {"refresh_ttl": True}, True),
        ({"refresh_on_read": False}, {"refresh_ttl": True}, False),  # SqliteStore's reading
        ({"refresh_on_read": False}, {}, False),
    ],
)
async def test_reads_refresh_the_ttl_exactly_when_sqlite_store_does(
    store: Store, ttl_config: Any, read_kwargs: dict[str, Any], refreshed: bool
) -> None:
    lg = MindstoreStore(store, namespace="ttl", ttl=ttl_config)
    key = _key("ttl", ("c",))
    await lg.aput(("c",), "g", {"text": "got by get"}, ttl=5)
    await lg.aput(("c",), "s", {"text": "found by search"}, ttl=5)
    await lg.aput(("c",), "never", {"text": "no ttl"}, ttl=None)
    soon = datetime.now(UTC) + timedelta(seconds=30)  # as if 4.5 of the 5 minutes had passed
    await store.set_entry_expiry(key, {"g": soon, "s": soon})
    assert await lg.aget(("c",), "g", **read_kwargs) is not None
    assert [i.key for i in await lg.asearch(("c",), query="search", **read_kwargs)] == ["s"]
    for entry_key in ("g", "s"):
        at = await _expiry(store, key, entry_key)
        assert at is not None
        if refreshed:  # now + the item's own 5 minutes
            assert at > datetime.now(UTC) + timedelta(minutes=4, seconds=50)
        else:
            assert at == soon
    assert await _expiry(store, key, "never") is None  # an item without ttl never gets one


async def test_a_search_refreshes_only_the_page_it_returns(store: Store) -> None:
    lg = MindstoreStore(store, namespace="ttl", ttl={"refresh_on_read": True})
    key = _key("ttl", ("p",))
    for i in range(4):
        await lg.aput(("p",), f"k{i}", {"text": f"item {i}"}, ttl=5)
    soon = datetime.now(UTC) + timedelta(seconds=30)
    await store.set_entry_expiry(key, {f"k{i}": soon for i in range(4)})
    page = await lg.asearch(("p",), limit=2)  # newest first: k3, k2
    assert [i.key for i in page] == ["k3", "k2"]
    assert [await _expiry(store, key, f"k{i}") == soon for i in range(4)] == [
        True,
        True,
        False,
        False,
    ]


async def test_expiry_in_real_time(store: Store) -> None:
    """The report's case in seconds: a 3 s TTL, read at 1.5 s; at 3.5 s the item is gone
    unless the store refreshes on read (then it lives until 4.5 s)."""
    plain = MindstoreStore(store, namespace="rt")
    refreshing = MindstoreStore(store, namespace="rt2", ttl={"refresh_on_read": True})
    for lg in (plain, refreshing):
        await lg.aput(("c",), "k", {"text": "short lived"}, ttl=3 / 60)
    await asyncio.sleep(1.5)
    for lg in (plain, refreshing):
        assert await lg.aget(("c",), "k") is not None
    await asyncio.sleep(2.0)
    assert await plain.aget(("c",), "k") is None
    assert await refreshing.aget(("c",), "k", refresh_ttl=False) is not None


async def test_sync_and_async_sweep(store: Store, backend: str) -> None:
    lg = MindstoreStore(store, namespace="sweep")
    key = _key("sweep", ("c",))
    past = datetime.now(UTC) - timedelta(seconds=1)
    for round_ in range(3):
        await lg.aput(("c",), f"old{round_}", {"v": 1}, ttl=1)
        await lg.aput(("c",), f"older{round_}", {"v": 2}, ttl=1)
        await store.set_entry_expiry(key, {f"old{round_}": past, f"older{round_}": past})
    await lg.aput(("c",), "live", {"v": 3}, ttl=1)
    # a plain thread (no loop) while this loop serves the store, as LangGraph's sync nodes do
    got: list[int] = []
    thread = threading.Thread(target=lambda: got.append(lg.sweep_ttl()))
    await asyncio.to_thread(lambda: (thread.start(), thread.join()))
    assert got == [6]
    await lg.aput(("c",), "again", {"v": 4}, ttl=1)
    await store.set_entry_expiry(key, {"again": past})
    assert await lg.asweep_ttl() == 1
    assert await lg.asweep_ttl() == 0
    if backend == "sqlite":  # inside this running loop: runs on the adapter's loop thread
        await store.set_entry_expiry(key, {"live": past})
        assert lg.sweep_ttl() == 1
    else:  # the pool belongs to this (blocked) loop: refused, nothing deleted
        with pytest.raises(asyncio.InvalidStateError, match=r"mindstore\.sync"):
            lg.sweep_ttl()
    assert await store.count_entries(key) == (0 if backend == "sqlite" else 1)


def test_sync_sweep_in_a_plain_script(tmp_path: Any) -> None:
    from mindstore import sync

    with sync.open_store(f"sqlite:///{tmp_path / 'plain.db'}") as store:
        lg = MindstoreStore(store, namespace="plain")
        lg.put(("c",), "k", {"v": 1}, ttl=1)
        past = datetime.now(UTC) - timedelta(seconds=1)
        store.set_entry_expiry(_key("plain", ("c",)), {"k": past})
        assert lg.sweep_ttl() == 1
        assert lg.get(("c",), "k") is None
