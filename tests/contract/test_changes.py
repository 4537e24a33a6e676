"""Contract: the change feed (DESIGN §14) — every write records its events, numbered per
namespace 1, 2, 3, … in commit order, in its own transaction.

Runs on every backend; a second store object on the same database plays another worker (its
follower must be woken by the first one's commits). The two-process proof is
tests/reliability/test_change_feed_processes.py.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta

import pytest

from backends import Reopen
from mindstore import Session
from mindstore.changes import CHANGE_KINDS, Change
from mindstore.errors import InvalidKeyError, MessageNotFoundError, StoreError
from mindstore.store.base import NewMessage, ScopeKey, SessionKey, Store

K = SessionKey(namespace="ns", session_id="s")


def m(mid: str) -> NewMessage:
    msg = {"id": mid, "role": "user", "parts": [{"type": "text", "text": f"text {mid}"}]}
    return NewMessage(message=msg, tokens=2)


async def feed(store: Store, namespace: str = "ns", since: int = 0) -> list[Change]:
    return [c async for c in store.changes(namespace, since=since, follow=False)]


def kinds(changes: list[Change]) -> list[str]:
    return [c.kind for c in changes]


async def test_every_write_records_its_events_numbered_without_gaps(store: Store) -> None:
    await store.create_session(K, name="chat")
    await store.append(K, [m("a"), m("b")])
    await store.append(K, [m("a")])  # already there: nothing happened, no event
    await store.update(K, {"id": "a", "role": "user", "parts": []}, tokens=1)
    await store.delete(K, ["b"])
    c = await store.add_compaction(K, summary="sum", from_id="a", to_id="a")
    await store.revert_compaction(K, c.id)
    block = ScopeKey(namespace="ns", session_id=None, label="profile")
    await store.set_block(block, "x")
    await store.update_block(
        ScopeKey(namespace="ns", session_id="s", label="mem"), lambda s: s + "y"
    )
    await store.delete_block(block)
    await store.put_prompt(K, "prompt", overwrite=False)
    await store.put_prompt(K, "other", overwrite=False)  # kept the first: nothing written
    await store.set_skill_loaded(K, "skills", "k1", True)
    await store.set_skill_loaded(K, "skills", "k1", True)  # already loaded: nothing
    await store.set_skill_loaded(K, "skills", "k1", False)
    kb = ScopeKey(namespace="ns", session_id=None, label="kb")
    await store.put_entry(kb, "e1", "entry")
    assert await store.delete_entry(kb, "e1")
    assert not await store.delete_entry(kb, "e1")
    await store.update_session(K, name="renamed")
    await store.add_usage(K, 1, 2, 0.5)
    await store.clear(K)

    changes = await feed(store)
    assert [c.seq for c in changes] == list(range(1, len(changes) + 1))
    assert kinds(changes) == [
        "session_created",
        "message_appended",
        "message_appended",
        "message_updated",
        "message_deleted",
        "compaction_finished",
        "compaction_reverted",
        "block_written",
        "block_written",
        "block_written",
        "prompt_written",
        "skill_loaded",
        "skill_unloaded",
        "entry_written",
        "entry_deleted",
        "session_updated",
        "session_updated",
        "session_cleared",
    ]
    assert set(kinds(changes)) <= CHANGE_KINDS
    assert all(c.namespace == "ns" for c in changes)
    assert changes[1].data == {"message_id": "a", "role": "user", "tokens": 2}
    assert changes[4].data == {"message_id": "b"}
    assert changes[5].data == {
        "compaction_id": c.id,
        "from_id": "a",
        "to_id": "a",
        "supersedes": [],
    }
    assert (changes[7].session_id, changes[7].data) == (
        None,
        {"label": "profile", "deleted": False},
    )
    assert (changes[8].session_id, changes[8].data["label"]) == ("s", "mem")
    assert changes[9].data == {"label": "profile", "deleted": True}
    assert changes[11].data == {"label": "skills", "key": "k1"}
    assert (changes[13].session_id, changes[13].data) == (None, {"label": "kb", "key": "e1"})
    assert changes[15].data == {"fields": ["name"]}
    assert changes[16].data == {"fields": ["usage"]}
    assert all(c.created_at.tzinfo is not None for c in changes)
    assert await store.latest_change_seq("ns") == len(changes)
    assert await store.latest_change_seq("elsewhere") == 0


async def test_since_resumes_after_a_seq_and_namespaces_are_numbered_apart(store: Store) -> None:
    other = SessionKey(namespace="other", session_id="s")
    for i in range(5):
        await store.append(K, [m(f"m{i}")])
        await store.append(other, [m(f"o{i}")])
    assert [c.seq for c in await feed(store, since=3)] == [4, 5]
    assert [c.data["message_id"] for c in await feed(store, "other", since=2)] == ["o2", "o3", "o4"]
    assert await feed(store, since=5) == []
    assert [c.seq for c in await store.read_changes("ns", since=1, limit=2)] == [2, 3]
    # batches smaller than the feed still give every event once
    got = [c.seq async for c in store.changes("ns", follow=False, batch=2)]
    assert got == [1, 2, 3, 4, 5]


async def test_a_failed_write_records_nothing_and_leaves_no_gap(store: Store) -> None:
    await store.append(K, [m("a")])
    with pytest.raises(MessageNotFoundError):
        await store.delete(K, ["a", "missing"])
    with pytest.raises(MessageNotFoundError):
        await store.append(K, [NewMessage(message=m("x").message, parent="nope", tokens=1)])

    def boom(_: str) -> str:
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        await store.update_block(ScopeKey(namespace="ns", session_id="s", label="b"), boom)
    await store.append(K, [m("b")])
    assert [(c.seq, c.data["message_id"]) for c in await feed(store)] == [(1, "a"), (2, "b")]


async def test_a_transaction_block_records_at_its_end_or_not_at_all(store: Store) -> None:
    async with store.transaction():
        await store.append(K, [m("a")])
        await store.set_block(ScopeKey(namespace="ns", session_id="s", label="b"), "x")
        await store.append(SessionKey(namespace="other", session_id="s"), [m("o")])
        with pytest.raises(MessageNotFoundError):
            await store.delete(K, ["missing"])  # undoes only itself: no event
    assert kinds(await feed(store)) == ["message_appended", "block_written"]
    assert kinds(await feed(store, "other")) == ["message_appended"]

    with pytest.raises(RuntimeError):
        async with store.transaction():
            await store.append(K, [m("b")])
            raise RuntimeError("roll back")
    await store.append(K, [m("c")])
    assert [c.seq for c in await feed(store)] == [1, 2, 3]
    assert (await feed(store))[-1].data["message_id"] == "c"


async def test_a_follower_is_woken_by_another_workers_commits(store: Store, reopen: Reopen) -> None:
    other = await reopen()
    await store.append(K, [m("before")])
    got: list[Change] = []

    async def follow() -> None:
        async with contextlib.aclosing(store.changes("ns", since=1, poll_interval=0.01)) as it:
            async for change in it:
                got.append(change)
                if len(got) == 3:
                    return

    task = asyncio.create_task(follow())
    await asyncio.sleep(0.3)  # the follower is waiting by now
    await other.append(K, [m("x1")])
    await Session.create(other, "s", namespace="ns").append_message(
        {"id": "x2", "role": "assistant", "parts": [{"type": "text", "text": "ok"}]}
    )
    await store.append(K, [m("x3")])  # this store's own commits wake it too
    await asyncio.wait_for(task, 10)
    assert [(c.seq, c.data["message_id"]) for c in got] == [(2, "x1"), (3, "x2"), (4, "x3")]


async def test_delete_session_empties_its_events_and_keeps_their_numbers(store: Store) -> None:
    keep = SessionKey(namespace="ns", session_id="keep")
    await store.append(K, [m("a")])
    await store.append(keep, [m("k")])
    await store.set_skill_loaded(K, "skills", "secret-key", True)
    assert await store.delete_session(K)
    assert not await store.delete_session(K)  # nothing there: no event
    changes = await feed(store)
    assert [(c.seq, c.kind, c.session_id, dict(c.data)) for c in changes] == [
        (1, "message_appended", "s", {}),
        (2, "message_appended", "keep", {"message_id": "k", "role": "user", "tokens": 2}),
        (3, "skill_loaded", "s", {}),
        (4, "session_deleted", "s", {}),
    ]
    await store.append(keep, [m("k2")])
    assert (await feed(store, since=4))[0].seq == 5  # numbers are never handed out twice


async def test_delete_namespace_restarts_the_feed_and_tells_followers(store: Store) -> None:
    for i in range(3):
        await store.append(K, [m(f"m{i}")])
    await store.delete_namespace("ns")
    assert await store.latest_change_seq("ns") == 0
    [gone] = await feed(store, since=3)
    assert (gone.kind, gone.seq, gone.namespace, gone.session_id) == (
        "namespace_deleted",
        0,
        "ns",
        None,
    )
    await store.append(K, [m("new")])
    after = [c async for c in store.changes("ns", since=3, follow=False)]
    assert [(c.kind, c.seq) for c in after] == [("namespace_deleted", 0), ("message_appended", 1)]


async def test_expired_entries_are_reported_deleted(store: Store) -> None:
    kb = ScopeKey(namespace="ns", session_id="s", label="kb")
    past = datetime.now(UTC) - timedelta(seconds=5)
    await store.put_entry(kb, "old", "x", expires_at=past)
    await store.put_entry(kb, "fresh", "y")
    assert await store.delete_expired_entries() == 1
    last = (await feed(store))[-1]
    assert (last.kind, last.session_id, last.data) == (
        "entry_deleted",
        "s",
        {"label": "kb", "key": "old"},
    )


async def test_record_changes_takes_session_level_kinds_only(store: Store) -> None:
    await store.record_changes(
        K, [("compaction_started", {"leaf_id": "a"}), ("status", {"state": "compacting"})]
    )
    assert kinds(await feed(store)) == ["compaction_started", "status"]
    with pytest.raises(InvalidKeyError):
        await store.record_changes(K, [("message_appended", {})])
    with pytest.raises(TypeError):
        await store.record_changes(K, [("status", {"x": object()})])
    assert len(await feed(store)) == 2  # the refused calls wrote nothing


async def test_bad_arguments_are_refused_before_any_io(store: Store) -> None:
    for bad in ({"since": -1}, {"batch": 0}, {"poll_interval": 0}, {"since": True}):
        with pytest.raises(ValueError):
            store.changes("ns", **bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidKeyError):
        store.changes("")


async def test_a_closed_store_ends_its_followers_with_store_error(
    store: Store, reopen: Reopen
) -> None:
    other = await reopen()
    it = other.changes("ns", poll_interval=0.01)
    task = asyncio.create_task(it.__anext__())
    await asyncio.sleep(0.2)
    await other.aclose()
    with pytest.raises(StoreError):
        await asyncio.wait_for(task, 10)
