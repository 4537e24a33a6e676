"""Contract: ``Store.transaction()`` — several calls of one task as one transaction.

All of the block commits or none of it; other connections see nothing before the commit; a call
that raises inside undoes only its own writes; ``readonly`` reads one snapshot and refuses
writes; blocks nest. Runs on every backend, with a second store object on the same database
playing another worker.
"""

from __future__ import annotations

import pytest

from backends import Reopen
from mindstore.errors import ConflictError, MessageNotFoundError, StoreError
from mindstore.search import parse_query
from mindstore.store.base import NewMessage, ScopeKey, SessionKey, Store

K = SessionKey(namespace="ns", session_id="s")
BLOCK = ScopeKey(namespace="ns", session_id=None, label="profile")


def m(mid: str, parent: str | None = None) -> NewMessage:
    msg = {"id": mid, "role": "user", "parts": [{"type": "text", "text": f"text {mid}"}]}
    return (
        NewMessage(message=msg, tokens=2)
        if parent is None
        else NewMessage(message=msg, parent=parent, tokens=2)
    )


class Boom(Exception):
    pass


@pytest.fixture
async def pair(store: Store, reopen: Reopen) -> tuple[Store, Store]:
    """Two store objects on one database: the writer under test and another worker."""
    await store.stats()  # the schema exists before the second store opens
    return store, await reopen()


async def ids(store: Store, key: SessionKey = K) -> list[str]:
    return [r.id for r in await store.all_messages(key)]


async def test_block_commits_together_and_is_invisible_until_then(
    pair: tuple[Store, Store],
) -> None:
    store, other = pair
    async with store.transaction():
        await store.create_session(K, name="n")
        await store.append(K, [m("a"), m("b")])
        await store.set_block(BLOCK, "Name: Ada")
        # the block reads its own writes ...
        assert await ids(store) == ["a", "b"]
        assert await store.get_block(BLOCK) == "Name: Ada"
        # ... and nobody else sees any of them yet
        assert await other.get_session(K) is None
        assert await ids(other) == []
        assert await other.get_block(BLOCK) is None
    assert await ids(other) == ["a", "b"]
    assert await other.get_block(BLOCK) == "Name: Ada"
    info = await other.get_session(K)
    assert info is not None and info.name == "n" and info.message_count == 2


async def test_an_exception_rolls_back_every_call_of_the_block(pair: tuple[Store, Store]) -> None:
    store, other = pair
    await store.append(K, [m("a")])
    with pytest.raises(Boom):
        async with store.transaction():
            await store.append(K, [m("b")])
            await store.add_compaction(K, summary="s", from_id="a", to_id="b")
            await store.set_block(BLOCK, "x")
            await store.update_session(K, end_reason="compaction")
            raise Boom
    for s in (store, other):
        assert await ids(s) == ["a"]
        assert await s.get_compactions(K) == []
        assert await s.get_block(BLOCK) is None
        info = await s.get_session(K)
        assert info is not None and info.end_reason is None and info.message_count == 1
    # the store works normally afterwards
    await store.append(K, [m("c")])
    assert await ids(other) == ["a", "c"]


async def test_a_failing_call_inside_undoes_only_itself(pair: tuple[Store, Store]) -> None:
    store, other = pair
    async with store.transaction():
        await store.append(K, [m("a")])
        with pytest.raises(MessageNotFoundError):
            # the first item would be written, the second fails: the call is all or nothing
            await store.append(K, [m("b"), m("c", parent="missing")])
        with pytest.raises(ConflictError):
            await store.create_session(K)
        await store.append(K, [m("d")])
    assert await ids(other) == ["a", "d"]


async def test_blocks_nest_into_one_transaction(pair: tuple[Store, Store]) -> None:
    store, other = pair
    with pytest.raises(Boom):
        async with store.transaction():
            await store.append(K, [m("a")])
            async with store.transaction():
                await store.append(K, [m("b")])
            assert await ids(other) == []  # the inner block's end committed nothing
            raise Boom
    assert await ids(other) == []


async def test_readonly_reads_one_snapshot_and_refuses_writes(pair: tuple[Store, Store]) -> None:
    store, other = pair
    await store.append(K, [m("a")])
    async with store.transaction(readonly=True):
        assert await ids(store) == ["a"]
        # another worker commits meanwhile
        await other.append(K, [m("b")])
        await other.add_compaction(K, summary="s", from_id="a", to_id="b")
        assert await ids(other) == ["a", "b"]
        # the snapshot does not move
        assert await ids(store) == ["a"]
        assert await store.get_compactions(K) == []
        leaf = await store.latest_leaf(K)
        assert leaf is not None and leaf.id == "a"
        assert [r.id for r in await store.path(K, None)] == ["a"]
        with pytest.raises(StoreError):
            await store.append(K, [m("c")])
    assert await ids(store) == ["a", "b"]


async def test_lock_makes_a_check_hold_until_commit(pair: tuple[Store, Store]) -> None:
    """The pattern compact_and_split uses: lock, check, write — a second block locking the
    same session sees the first one's result."""
    store, other = pair
    await store.append(K, [m("a")])
    async with store.transaction(lock=[K]):
        info = await store.get_session(K)
        assert info is not None and info.end_reason is None
        await store.update_session(K, end_reason="done")
    async with other.transaction(lock=[K, SessionKey(namespace="ns", session_id="absent")]):
        info = await other.get_session(K)
        assert info is not None and info.end_reason == "done"


async def test_closed_store_refuses_a_transaction(pair: tuple[Store, Store]) -> None:
    store, _ = pair
    await store.aclose()
    with pytest.raises(StoreError):
        async with store.transaction():
            pass


async def test_search_inside_a_block_sees_the_blocks_writes(store: Store) -> None:
    """Multi-statement reads (search reads statistics, then rows) join the open transaction —
    in a write block and in a read-only one — instead of trying to start their own snapshot."""
    await store.append(K, [m("a")])
    query = parse_query("zebra")
    async with store.transaction():
        await store.append(K, [m("zebra")])
        hits = await store.search(K.namespace, query, session_ids=[K.session_id])
        assert [h.message_id for h in hits] == ["zebra"]
    async with store.transaction(readonly=True):
        hits = await store.search(K.namespace, query, session_ids=[K.session_id])
        assert [h.message_id for h in hits] == ["zebra"]
