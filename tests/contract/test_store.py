"""Contract: the Store protocol methods below the Session API — overlays, blocks, prompts, skill
state, keyed entries, the session registry, stats — plus input validation: a bad argument raises
a typed error and changes nothing. Runs on every backend."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mindstore.errors import (
    CompactionError,
    ConflictError,
    MessageNotFoundError,
    SessionNotFoundError,
    StoreError,
)
from mindstore.search import parse_query
from mindstore.store.base import NewMessage, ScopeKey, SessionKey, Store

K = SessionKey(namespace="ns", session_id="s")


def m(mid: str, text: str = "") -> NewMessage:
    return NewMessage(
        message={"id": mid, "role": "user", "parts": [{"type": "text", "text": text or mid}]},
        tokens=3,
    )


async def test_compactions_store_level(store: Store) -> None:
    await store.append(K, [m("a"), m("b"), m("c"), m("d")])
    c1 = await store.add_compaction(K, summary="one", from_id="a", to_id="b")
    assert (c1.from_message_id, c1.to_message_id, c1.summary) == ("a", "b", "one")
    assert c1.superseded_by is None and not c1.reverted
    assert c1.created_at.utcoffset() is not None
    c2 = await store.add_compaction(K, summary="two", from_id="a", to_id="c", supersedes=[c1.id])
    listed = await store.get_compactions(K)
    assert [c.id for c in listed] == [c1.id, c2.id]
    assert listed[0].superseded_by == c2.id
    reverted = await store.revert_compaction(K, c2.id)
    assert reverted.reverted
    listed = await store.get_compactions(K)
    assert listed[0].superseded_by is None and listed[1].reverted
    with pytest.raises(MessageNotFoundError):
        await store.add_compaction(K, summary="x", from_id="a", to_id="nope")
    with pytest.raises(CompactionError):
        await store.revert_compaction(K, 999_999)
    with pytest.raises(CompactionError):
        await store.add_compaction(K, summary="x", from_id="a", to_id="b", supersedes=[999_999])
    assert len(await store.get_compactions(K)) == 2
    # deleting a range end drops the overlay; clear drops the rest
    await store.delete(K, ["c"])
    assert [c.id for c in await store.get_compactions(K)] == [c1.id]
    await store.clear(K)
    assert await store.get_compactions(K) == []


async def test_blocks(store: Store) -> None:
    sess = ScopeKey(namespace="ns", session_id="s", label="memory")
    shared = ScopeKey(namespace="ns", session_id=None, label="memory")
    other = ScopeKey(namespace="other", session_id="s", label="memory")
    assert await store.get_block(sess) is None
    await store.set_block(sess, "session text")
    await store.set_block(shared, "shared text")
    assert await store.get_block(sess) == "session text"
    assert await store.get_block(shared) == "shared text"
    assert await store.get_block(other) is None
    assert await store.update_block(sess, lambda cur: cur + "!") == "session text!"
    assert (
        await store.update_block(
            ScopeKey(namespace="ns", session_id="s", label="new"), lambda cur: cur + "x"
        )
        == "x"
    )

    def boom(cur: str) -> str:
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        await store.update_block(sess, boom)
    assert await store.get_block(sess) == "session text!"
    listed = await store.list_blocks("ns", "s")
    assert {(k.session_id, k.label, v) for k, v in listed} == {
        ("s", "memory", "session text!"),
        ("s", "new", "x"),
        (None, "memory", "shared text"),
    }
    assert [(k.session_id, v) for k, v in await store.list_blocks("ns", None)] == [
        (None, "shared text")
    ]
    await store.delete_block(sess)
    assert await store.get_block(sess) is None
    assert await store.get_block(shared) == "shared text"


async def test_update_block_concurrent_appends_lose_nothing(store: Store) -> None:
    key = ScopeKey(namespace="ns", session_id=None, label="log")
    await asyncio.gather(
        *(store.update_block(key, lambda cur, i=i: f"{cur}[{i}]") for i in range(30))
    )
    content = await store.get_block(key) or ""
    assert sorted(content.strip("[]").split("][")) == sorted(str(i) for i in range(30))


async def test_prompt(store: Store) -> None:
    assert await store.get_prompt(K) is None
    assert await store.put_prompt(K, "first", overwrite=False) == "first"
    assert await store.put_prompt(K, "second", overwrite=False) == "first"
    assert await store.put_prompt(K, "third", overwrite=True) == "third"
    assert await store.get_prompt(K) == "third"
    assert await store.get_prompt(SessionKey(namespace="ns", session_id="other")) is None


async def test_skill_states(store: Store) -> None:
    await store.append(K, [m("a"), m("b")])
    assert await store.get_skill_states(K) == []
    assert await store.set_skill_loaded(K, "skills", "api", False) is False
    assert await store.set_skill_loaded(K, "skills", "api", True) is True
    assert await store.set_skill_loaded(K, "skills", "api", True) is False
    [state] = await store.get_skill_states(K)
    assert state.loaded and state.unloaded_before_seq is None
    assert await store.set_skill_loaded(K, "skills", "api", False) is True
    [state] = await store.get_skill_states(K)
    leaf = await store.latest_leaf(K)
    assert leaf is not None
    assert not state.loaded and state.unloaded_before_seq == leaf.seq
    await store.clear(K)
    assert await store.get_skill_states(K) == []


async def test_entries_and_entry_search(store: Store) -> None:
    kb = ScopeKey(namespace="ns", session_id=None, label="kb")
    other = ScopeKey(namespace="ns", session_id="s", label="kb")
    await store.put_entry(kb, "deploy-guide", "How we deploy to production.", description="ops")
    await store.put_entry(kb, "lunch", "Lunch is at noon.")
    await store.put_entry(other, "secret", "deployment secrets")
    assert await store.count_entries(kb) == 2
    e = await store.get_entry(kb, "deploy-guide")
    assert e is not None and e.description == "ops" and e.updated_at.utcoffset() is not None
    assert [x.key for x in await store.list_entries(kb)] == ["lunch", "deploy-guide"]
    assert [x.key for x in await store.list_entries(kb, limit=1)] == ["lunch"]
    hits = await store.search_entries(kb, parse_query("deploying"))
    assert [h.key for h in hits] == ["deploy-guide"]
    assert "deploy" in hits[0].snippet.lower()
    assert [h.key for h in await store.search_entries(kb, parse_query("deplo*"))] == [
        "deploy-guide"
    ]
    assert await store.search_entries(kb, parse_query('NEAR( "')) == []
    # upsert replaces (no ghost of the old content), delete removes
    await store.put_entry(kb, "deploy-guide", "Now about kittens.")
    assert await store.search_entries(kb, parse_query("production")) == []
    assert [h.key for h in await store.search_entries(kb, parse_query("kittens"))] == [
        "deploy-guide"
    ]
    assert await store.count_entries(kb) == 2
    assert await store.delete_entry(kb, "deploy-guide") is True
    assert await store.delete_entry(kb, "deploy-guide") is False
    assert await store.search_entries(kb, parse_query("kittens")) == []
    assert await store.get_entry(kb, "deploy-guide") is None


async def test_session_registry(store: Store) -> None:
    info = await store.create_session(
        SessionKey(namespace="ns", session_id="a"),
        name="A",
        model="m",
        source="cli",
        metadata={"k": [1]},
    )
    assert (info.id, info.name, info.model, info.source, info.metadata) == (
        "a",
        "A",
        "m",
        "cli",
        {"k": [1]},
    )
    assert info.message_count == 0 and info.created_at.utcoffset() is not None
    with pytest.raises(ConflictError):
        await store.create_session(SessionKey(namespace="ns", session_id="a"))
    # appends create the row implicitly and count messages
    await store.append(SessionKey(namespace="ns", session_id="b"), [m("x"), m("y")])
    b = await store.get_session(SessionKey(namespace="ns", session_id="b"))
    assert b is not None and b.message_count == 2
    await store.add_usage(SessionKey(namespace="ns", session_id="c"), 10, 5, 0.25)
    c = await store.add_usage(SessionKey(namespace="ns", session_id="c"), 1, 1, 0.5)
    assert (c.input_tokens, c.output_tokens, c.estimated_cost) == (11, 6, 0.75)
    assert await store.get_session(SessionKey(namespace="other", session_id="a")) is None
    # newest updated first; paging with before
    order = [s.id for s in await store.list_sessions("ns")]
    assert order == ["c", "b", "a"]
    assert [s.id for s in await store.list_sessions("ns", limit=2)] == ["c", "b"]
    assert [s.id for s in await store.list_sessions("ns", limit=2, before="b")] == ["a"]
    assert await store.list_sessions("ns", before="unknown") == []
    updated = await store.update_session(
        SessionKey(namespace="ns", session_id="a"), name="renamed", end_reason="done"
    )
    assert (updated.name, updated.end_reason) == ("renamed", "done")
    assert (await store.list_sessions("ns"))[0].id == "a"
    with pytest.raises(SessionNotFoundError):
        await store.update_session(SessionKey(namespace="ns", session_id="zz"), name="x")


async def test_delete_session_leaves_nothing(store: Store) -> None:
    await store.append(K, [m("a", "unique walrus"), m("b")])
    await store.add_compaction(K, summary="s", from_id="a", to_id="b")
    await store.set_block(ScopeKey(namespace="ns", session_id="s", label="memory"), "x")
    await store.set_block(ScopeKey(namespace="ns", session_id=None, label="shared"), "keep")
    await store.put_prompt(K, "prompt", overwrite=True)
    await store.set_skill_loaded(K, "skills", "k", True)
    await store.put_entry(ScopeKey(namespace="ns", session_id="s", label="kb"), "e", "walrus")
    assert await store.delete_session(K) is True
    assert await store.get_session(K) is None
    assert await store.path(K, None) == []
    assert await store.search("ns", parse_query("walrus")) == []
    assert await store.get_compactions(K) == []
    assert await store.get_block(ScopeKey(namespace="ns", session_id="s", label="memory")) is None
    assert await store.get_prompt(K) is None
    assert await store.get_skill_states(K) == []
    assert await store.count_entries(ScopeKey(namespace="ns", session_id="s", label="kb")) == 0
    assert (
        await store.get_block(ScopeKey(namespace="ns", session_id=None, label="shared")) == "keep"
    )
    assert await store.delete_session(K) is False
    # the id can be used again from scratch
    await store.append(K, [m("a")])
    assert [r.id for r in await store.path(K, None)] == ["a"]


async def test_stats_counts_rows(store: Store) -> None:
    await store.append(K, [m("a"), m("b")])
    stats = await store.stats()
    assert stats["messages"] == 2 and stats["sessions"] == 1
    assert all(isinstance(v, int) for v in stats.values())


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.get_message(K, 5),
        lambda s: s.get_message(K, ""),
        lambda s: s.get_message("ns/s", "a"),
        lambda s: s.path(K, 7),
        lambda s: s.children(K, None),
        lambda s: s.delete(K, "a"),
        lambda s: s.delete(K, [1]),
        lambda s: s.get_messages(K, "ab"),
        lambda s: s.append(K, [{"id": "x"}]),
        lambda s: s.append(K, [NewMessage(message={"id": 3, "role": "user", "parts": []})]),
        lambda s: s.append(
            K, [NewMessage(message={"id": "x", "role": "user", "parts": []}, parent=5)]
        ),  # type: ignore[arg-type]
        lambda s: s.search("ns", "raw string"),
        lambda s: s.set_block(ScopeKey(namespace="ns", session_id="", label="x"), "c"),
        lambda s: s.set_block(ScopeKey(namespace="ns", session_id="s", label="x"), 5),
        lambda s: s.put_entry(ScopeKey(namespace="ns", session_id=None, label="kb"), "", "c"),
        lambda s: s.list_sessions("ns", limit="5"),
        lambda s: s.update_session(K, colour="red"),
        lambda s: s.add_usage(K, "1", 2, 0.1),
    ],
)
async def test_bad_arguments_raise_typed_errors_and_change_nothing(store: Store, call: Any) -> None:
    await store.append(K, [m("a")])
    before = await store.stats()
    with pytest.raises((TypeError, ValueError, LookupError)) as info:
        await call(store)
    assert not isinstance(info.value, StoreError)
    assert await store.stats() == before
    assert [r.id for r in await store.path(K, None)] == ["a"]
