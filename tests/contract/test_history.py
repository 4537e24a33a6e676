"""Contract: the conversation tree (DESIGN §3), through the Session API, on every backend."""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Any

import pytest

from mindstore.errors import ConflictError, InvalidMessageError, MessageNotFoundError
from mindstore.session import Session
from mindstore.store.base import NewMessage, Store


def msg(mid: str | None, text: str = "", role: str = "user") -> dict[str, Any]:
    m: dict[str, Any] = {"role": role, "parts": [{"type": "text", "text": text or f"text {mid}"}]}
    if mid is not None:
        m["id"] = mid
    return m


def ids(messages: list[dict[str, Any]]) -> list[str]:
    return [m["id"] for m in messages]


async def chain(session: Session, *names: str) -> None:
    for n in names:
        assert await session.append_message(msg(n)) is True


async def test_empty_history(store: Store) -> None:
    s = Session.create(store, "empty")
    assert await s.get_history() == []
    assert await s.get_latest_leaf() is None
    assert await s.get_path_length() == 0
    assert await s.get_message("nope") is None
    assert await s.get_node("nope") is None
    recent = await s.get_recent_history(max_tokens=10)
    assert recent.messages == [] and recent.truncated is False
    assert recent.total_tokens == 0 and recent.total_bytes == 0
    assert await s.search("anything") == []


async def test_chain_reads_back_in_order_and_exactly(store: Store) -> None:
    s = Session.create(store, "chain")
    tool = {
        "id": "t1",
        "role": "assistant",
        "metadata": {"model": "x", "n": [1, 2.5, None, True]},
        "parts": [
            {"type": "text", "text": "Checking…"},
            {
                "type": "tool-get_status",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {"env": "prod"},
                "output": {"status": "green"},
            },
            {"type": "custom-thing", "payload": {"deep": ["ünïcødé", "日本語"]}},
        ],
    }
    await chain(s, "a", "b")
    assert await s.append_message(tool) is True
    history = await s.get_history()
    assert ids(history) == ["a", "b", "t1"]
    assert history[-1] == tool
    assert await s.get_message("t1") == tool
    assert (await s.get_latest_leaf()) == tool
    assert await s.get_path_length() == 3
    assert await s.get_path_length("b") == 2


async def test_generated_id_when_missing(store: Store) -> None:
    s = Session.create(store, "gen")
    await s.append_message(msg(None, "one"))
    await s.append_message(msg(None, "two"))
    history = await s.get_history()
    assert len(history) == 2
    assert all(isinstance(m["id"], str) and m["id"] for m in history)
    assert history[0]["id"] != history[1]["id"]


async def test_branching(store: Store) -> None:
    s = Session.create(store, "branch")
    await chain(s, "root", "q1", "a1")
    # regenerate: a second answer to q1
    assert await s.append_message(msg("a1b", role="assistant"), parent_id="q1") is True
    assert ids(await s.get_branches("q1")) == ["a1", "a1b"]
    assert ids(await s.get_history("a1")) == ["root", "q1", "a1"]
    assert ids(await s.get_history("a1b")) == ["root", "q1", "a1b"]
    # the latest leaf is the newest childless message
    assert (await s.get_latest_leaf() or {})["id"] == "a1b"
    assert ids(await s.get_history()) == ["root", "q1", "a1b"]
    # auto-parent continues from the latest leaf
    await s.append_message(msg("q2"))
    assert ids(await s.get_history()) == ["root", "q1", "a1b", "q2"]
    # continuing the older branch makes it the latest again
    await s.append_message(msg("q2x"), parent_id="a1")
    assert ids(await s.get_history()) == ["root", "q1", "a1", "q2x"]
    assert await s.get_branches("q2x") == []
    with pytest.raises(MessageNotFoundError):
        await s.get_branches("missing")
    with pytest.raises(MessageNotFoundError):
        await s.get_history("missing")
    with pytest.raises(MessageNotFoundError):
        await s.get_path_length("missing")


async def test_explicit_none_parent_starts_new_root(store: Store) -> None:
    s = Session.create(store, "roots")
    await chain(s, "a", "b")
    assert await s.append_message(msg("r2"), parent_id=None) is True
    assert ids(await s.get_history()) == ["r2"]
    assert ids(await s.get_history("b")) == ["a", "b"]
    node = await s.get_node("r2")
    assert node is not None and node.parent_id is None


async def test_unknown_parent_raises_and_writes_nothing(store: Store) -> None:
    s = Session.create(store, "unknown-parent")
    await chain(s, "a")
    with pytest.raises(MessageNotFoundError):
        await s.append_message(msg("b"), parent_id="nope")
    assert await s.get_message("b") is None
    assert ids(await s.get_history()) == ["a"]
    # a batch with one bad parent writes nothing at all
    items = [
        NewMessage(message=msg("x"), parent="a"),
        NewMessage(message=msg("y"), parent="nope"),
    ]
    with pytest.raises(MessageNotFoundError):
        await store.append(s.key, items)
    assert await s.get_message("x") is None
    assert (await s.get_latest_leaf() or {})["id"] == "a"


async def test_invalid_message_writes_nothing(store: Store) -> None:
    s = Session.create(store, "invalid")
    with pytest.raises(InvalidMessageError):
        await s.append_message({"id": "a", "role": "robot", "parts": []})
    with pytest.raises(InvalidMessageError):
        await s.append_message({"id": "a", "role": "user", "parts": [{"type": "text"}]})
    assert await s.get_history() == []


async def test_idempotent_ids(store: Store) -> None:
    s = Session.create(store, "idem")
    assert await s.append_message(msg("a", "first")) is True
    assert await s.append_message(msg("b")) is True
    # first write wins; a retry changes nothing (not even the leaf)
    assert await s.append_message(msg("a", "second")) is False
    assert await s.append_message(msg("a", "third"), parent_id=None) is False
    assert (await s.get_message("a") or {})["parts"][0]["text"] == "first"
    assert ids(await s.get_history()) == ["a", "b"]
    assert await s.get_path_length() == 2


async def test_same_id_in_two_sessions(store: Store) -> None:
    s1 = Session.create(store, "one")
    s2 = Session.create(store, "two")
    assert await s1.append_message(msg("same", "in one")) is True
    assert await s2.append_message(msg("same", "in two")) is True
    assert (await s1.get_message("same") or {})["parts"][0]["text"] == "in one"
    assert (await s2.get_message("same") or {})["parts"][0]["text"] == "in two"


async def test_namespace_and_session_isolation(store: Store) -> None:
    a = Session.create(store, "chat", namespace="user-a")
    b = Session.create(store, "chat", namespace="user-b")
    other = Session.create(store, "other", namespace="user-a")
    await a.append_message(msg("m1", "secret deployment plan"))
    assert await b.get_history() == []
    assert await b.get_message("m1") is None
    assert await b.search("deployment") == []
    assert await other.get_history() == []
    assert await other.search("deployment") == []
    with pytest.raises(MessageNotFoundError):
        await b.append_message(msg("m2"), parent_id="m1")
    with pytest.raises(MessageNotFoundError):
        await other.delete_messages(["m1"])
    assert len(await a.search("deployment")) == 1


async def test_expected_leaf_compare_and_append(store: Store) -> None:
    s = Session.create(store, "cas")
    assert await s.append_message(msg("a"), expected_leaf=None) is True
    with pytest.raises(ConflictError):
        await s.append_message(msg("b"), expected_leaf=None)
    assert await s.append_message(msg("b"), expected_leaf="a") is True
    with pytest.raises(ConflictError):
        await s.append_message(msg("c"), expected_leaf="a")
    assert await s.get_message("c") is None
    assert ids(await s.get_history()) == ["a", "b"]
    # a retry of a compare-and-append that already landed is a no-op, not a conflict
    assert await s.append_message(msg("b"), expected_leaf="a") is False
    assert ids(await s.get_history()) == ["a", "b"]


async def test_get_node_created_at_and_seq(store: Store) -> None:
    s = Session.create(store, "node")
    await chain(s, "a", "b")
    a = await s.get_node("a")
    b = await s.get_node("b")
    assert a is not None and b is not None
    assert a.parent_id is None and b.parent_id == "a"
    assert a.created_at.tzinfo is not None
    assert a.created_at.utcoffset() == timedelta(0)
    assert a.created_at.tzinfo == UTC or a.created_at.utcoffset() == timedelta(0)
    assert b.seq > a.seq
    assert b.created_at >= a.created_at
    assert b.message == msg("b")


async def test_update_message(store: Store) -> None:
    s = Session.create(store, "update")
    await chain(s, "a", "b", "c")
    await s.update_message(
        {"id": "b", "role": "assistant", "parts": [{"type": "text", "text": "new"}]}
    )
    assert await s.get_message("b") == {
        "id": "b",
        "role": "assistant",
        "parts": [{"type": "text", "text": "new"}],
    }
    assert ids(await s.get_history()) == ["a", "b", "c"]  # parent unchanged
    node = await s.get_node("b")
    assert node is not None and node.parent_id == "a"
    with pytest.raises(MessageNotFoundError):
        await s.update_message(msg("zzz"))
    with pytest.raises(InvalidMessageError):
        await s.update_message({"role": "user", "parts": []})


async def test_delete_leaf(store: Store) -> None:
    s = Session.create(store, "del-leaf")
    await chain(s, "a", "b", "c")
    assert await s.delete_messages(["c"]) == 1
    assert ids(await s.get_history()) == ["a", "b"]
    assert (await s.get_latest_leaf() or {})["id"] == "b"
    await s.append_message(msg("d"))
    assert ids(await s.get_history()) == ["a", "b", "d"]


async def test_delete_interior_keeps_path_connected(store: Store) -> None:
    s = Session.create(store, "del-mid")
    await chain(s, "a", "b", "c", "d")
    await s.append_message(msg("c2"), parent_id="b")
    assert await s.delete_messages(["b", "c"]) == 2
    # d's parent c and grandparent b are gone: it hangs from a now
    assert ids(await s.get_history("d")) == ["a", "d"]
    assert ids(await s.get_history("c2")) == ["a", "c2"]
    assert ids(await s.get_branches("a")) == ["d", "c2"]
    node = await s.get_node("d")
    assert node is not None and node.parent_id == "a"
    # deleting the root promotes its children to roots
    await s.delete_messages(["a"])
    assert ids(await s.get_history("d")) == ["d"]
    assert ids(await s.get_history("c2")) == ["c2"]


async def test_delete_cached_latest_leaf_falls_back(store: Store) -> None:
    s = Session.create(store, "del-latest")
    await chain(s, "a", "b")
    await s.append_message(msg("x"), parent_id="a")  # latest leaf: x (other branch)
    assert (await s.get_latest_leaf() or {})["id"] == "x"
    await s.delete_messages(["x"])
    assert (await s.get_latest_leaf() or {})["id"] == "b"
    assert ids(await s.get_history()) == ["a", "b"]
    await s.delete_messages(["a", "b"])
    assert await s.get_latest_leaf() is None
    assert await s.get_history() == []


async def test_delete_unknown_id_deletes_nothing(store: Store) -> None:
    s = Session.create(store, "del-unknown")
    await chain(s, "a", "b")
    with pytest.raises(MessageNotFoundError):
        await s.delete_messages(["b", "nope"])
    assert ids(await s.get_history()) == ["a", "b"]


async def test_clear(store: Store) -> None:
    s = Session.create(store, "clear")
    other = Session.create(store, "keep")
    await chain(s, "a", "b")
    await other.append_message(msg("a", "kept deployment"))
    await s.clear_messages()
    assert await s.get_history() == []
    assert await s.get_latest_leaf() is None
    assert await s.get_message("a") is None
    assert await s.search("text") == []
    assert ids(await other.get_history()) == ["a"]
    # the session is usable again, ids may be reused
    await chain(s, "a")
    assert ids(await s.get_history()) == ["a"]


async def test_large_message_round_trip(store: Store) -> None:
    s = Session.create(store, "large")
    text = ("lorem ipsum dolor sit amet ünïcødé 日本語 " * 6000)[:200_000]
    m = {"id": "big", "role": "user", "parts": [{"type": "text", "text": text}]}
    await s.append_message(m)
    assert await s.get_message("big") == m
    assert (await s.get_history())[0] == m


async def test_long_chain_read_whole(store: Store) -> None:
    s = Session.create(store, "long")
    n = 20_000
    batch = 2_000
    for start in range(0, n, batch):
        items = [
            NewMessage(message={"id": f"m{i}", "role": "user", "parts": []})
            for i in range(start, start + batch)
        ]
        await store.append(s.key, items)
    history = await s.get_history()
    assert len(history) == n
    assert history[0]["id"] == "m0" and history[-1]["id"] == f"m{n - 1}"
    assert ids(history) == [f"m{i}" for i in range(n)]
    assert await s.get_path_length() == n
    recent = await s.get_recent_history(max_bytes=500)
    assert recent.truncated and 1 <= len(recent.messages) < 20
    assert recent.messages[-1]["id"] == f"m{n - 1}"


async def test_recent_history_budgets(store: Store) -> None:
    s = Session.create(store, "recent")
    for i in range(10):
        await s.append_message(msg(f"m{i}", "word " * 40))  # ~52 tokens each
    full = await s.get_recent_history()
    assert ids(full.messages) == [f"m{i}" for i in range(10)]
    assert full.truncated is False
    per = full.total_tokens // 10
    assert full.total_tokens == per * 10 and per > 0
    three = await s.get_recent_history(max_tokens=per * 3)
    assert ids(three.messages) == ["m7", "m8", "m9"]
    assert three.truncated is True
    assert three.total_tokens == full.total_tokens
    assert three.total_bytes == full.total_bytes
    just_under = await s.get_recent_history(max_tokens=per * 3 - 1)
    assert ids(just_under.messages) == ["m8", "m9"]
    # the leaf always, and at least min_messages
    tiny = await s.get_recent_history(max_tokens=1)
    assert ids(tiny.messages) == ["m9"]
    assert ids((await s.get_recent_history(max_tokens=1, min_messages=4)).messages) == [
        "m6",
        "m7",
        "m8",
        "m9",
    ]
    # byte budget; both budgets apply
    nb = full.total_bytes // 10
    by_bytes = await s.get_recent_history(max_bytes=nb * 2 + 5)
    assert ids(by_bytes.messages) == ["m8", "m9"]
    both = await s.get_recent_history(max_tokens=per * 5, max_bytes=nb * 2 + 5)
    assert ids(both.messages) == ["m8", "m9"]
    # from another leaf
    at = await s.get_recent_history(max_tokens=per * 2, leaf_id="m4")
    assert ids(at.messages) == ["m3", "m4"]
    assert at.total_tokens == per * 5
