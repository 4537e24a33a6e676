"""Keyed entries as records: an unindexed payload, creation time, expiry, label listing.

These are what the LangGraph store (mindstore.integrations.langgraph) builds on; every backend
must agree on them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mindstore.search import parse_query
from mindstore.store.base import ScopeKey, Store


def ns_key(label: str, namespace: str = "n") -> ScopeKey:
    return ScopeKey(namespace=namespace, session_id=None, label=label)


async def test_data_round_trips_and_is_not_indexed(store: Store) -> None:
    k = ns_key("col")
    payload = '{"secret_field": "zebra", "n": 1}'
    await store.put_entry(k, "a", "the indexed text", data=payload)
    entry = await store.get_entry(k, "a")
    assert entry is not None and entry.data == payload and entry.content == "the indexed text"
    assert await store.search_entries(k, parse_query("zebra")) == []
    assert [h.key for h in await store.search_entries(k, parse_query("indexed"))] == ["a"]
    # An entry written without data (StoreSearchProvider's) has none.
    await store.put_entry(k, "b", "plain")
    plain = await store.get_entry(k, "b")
    assert plain is not None and plain.data is None and plain.expires_at is None


async def test_update_keeps_created_at_and_moves_updated_at(store: Store) -> None:
    k = ns_key("col")
    await store.put_entry(k, "a", "one", data="1")
    first = await store.get_entry(k, "a")
    await store.put_entry(k, "a", "two", data="2")
    second = await store.get_entry(k, "a")
    assert first is not None and second is not None
    assert second.created_at == first.created_at == first.updated_at
    assert second.updated_at > first.updated_at
    assert second.data == "2" and second.content == "two"


async def test_get_entries_keeps_the_order_asked_and_skips_unknown(store: Store) -> None:
    k = ns_key("col")
    for key in ("a", "b", "c"):
        await store.put_entry(k, key, key)
    got = await store.get_entries(k, ["c", "zz", "a", "c"])
    assert [e.key for e in got] == ["c", "a"]
    assert await store.get_entries(k, []) == []
    assert await store.get_entries(ns_key("col", "other"), ["a"]) == []


async def test_expiry_set_refresh_and_sweep(store: Store) -> None:
    k = ns_key("col")
    past = datetime.now(UTC) - timedelta(seconds=5)
    future = datetime.now(UTC) + timedelta(hours=1)
    await store.put_entry(k, "old", "expired text", expires_at=past)
    await store.put_entry(k, "new", "living text", expires_at=future)
    await store.put_entry(k, "forever", "kept text")
    old = await store.get_entry(k, "old")
    assert old is not None and old.expires_at is not None and old.expires_at < datetime.now(UTC)
    # Refresh moves the expiry without touching updated_at.
    assert await store.set_entry_expiry(k, {"new": future + timedelta(hours=1), "nope": None}) == 1
    new = await store.get_entry(k, "new")
    assert new is not None and new.expires_at is not None and new.expires_at > future
    # Another namespace's expired entry is left alone by a namespaced sweep.
    await store.put_entry(ns_key("col", "other"), "old", "x", expires_at=past)
    assert await store.delete_expired_entries("n") == 1
    assert await store.get_entry(k, "old") is None
    assert await store.search_entries(k, parse_query("expired")) == []
    assert {e.key for e in await store.list_entries(k)} == {"new", "forever"}
    assert await store.delete_expired_entries() == 1  # the other namespace's
    assert await store.delete_expired_entries() == 0


async def test_naive_expiry_is_refused(store: Store) -> None:
    k = ns_key("col")
    with pytest.raises(TypeError, match="timezone-aware"):
        await store.put_entry(k, "a", "x", expires_at=datetime(2030, 1, 1))
    with pytest.raises(TypeError, match="timezone-aware"):
        await store.set_entry_expiry(k, {"a": datetime(2030, 1, 1)})
    assert await store.get_entry(k, "a") is None


async def test_list_entry_labels_prefix_is_literal_and_skips_expired(store: Store) -> None:
    for label in ("a%b", "a_b", "axb", "a", "b", "a%c"):
        await store.put_entry(ns_key(label), "k", "x")
    await store.put_entry(ScopeKey(namespace="n", session_id="s1", label="a-session"), "k", "x")
    await store.put_entry(ns_key("a-other-ns", "m"), "k", "x")
    past = datetime.now(UTC) - timedelta(seconds=1)
    await store.put_entry(ns_key("a-gone"), "k", "x", expires_at=past)
    assert await store.list_entry_labels("n") == sorted(["a%b", "a_b", "axb", "a", "b", "a%c"])
    assert await store.list_entry_labels("n", prefix="a%") == ["a%b", "a%c"]
    assert await store.list_entry_labels("n", prefix="a_") == ["a_b"]
    assert await store.list_entry_labels("n", prefix="zz") == []
    assert await store.list_entry_labels("m") == ["a-other-ns"]


async def test_list_entry_labels_prefix_at_code_point_edges(store: Store) -> None:
    labels = ["a\U0010ffff", "a\U0010ffffb", "b", "\ud7ffx", "\ue000", "Z[", 'Z["', "Z\\"]
    for label in labels:
        await store.put_entry(ns_key(label), "k", "x")
    assert await store.list_entry_labels("n", prefix="a\U0010ffff") == [
        "a\U0010ffff",
        "a\U0010ffffb",
    ]
    assert await store.list_entry_labels("n", prefix="\ud7ff") == ["\ud7ffx"]
    assert await store.list_entry_labels("n", prefix="Z[") == ["Z[", 'Z["']
    assert await store.list_entry_labels("n", prefix="") == sorted(labels)


async def test_a_new_entry_was_created_when_it_was_updated(store: Store) -> None:
    """One clock reading for both times (PostgreSQL used two and they differed by 1 µs)."""
    for i in range(30):
        await store.put_entry(ns_key("col"), f"k{i}", "x")
    for entry in await store.list_entries(ns_key("col")):
        assert entry.created_at == entry.updated_at
