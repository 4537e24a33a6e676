"""Contract: path reads stay exact as a session changes shape — a chain, then branches, deletes
and a clear — on every backend.

The SQLite store reads a never-branched session as a range and a branched one by walking the
tree (``sessions.linear``); these tests pin the moments the shape changes.
"""

from __future__ import annotations

from typing import Any

from mindstore.session import Session
from mindstore.store.base import Store


def msg(mid: str, tokens_text: str = "") -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": tokens_text or mid}]}


def ids(messages: list[dict[str, Any]]) -> list[str]:
    return [m["id"] for m in messages]


async def check_reads(s: Session, leaf: str | None, expected: list[str]) -> None:
    """Every path read ending at ``leaf`` agrees with ``expected`` (root first)."""
    assert ids(await s.get_history(leaf)) == expected
    assert await s.get_path_length(leaf) == len(expected)
    whole = await s.get_recent_history(leaf_id=leaf)
    assert ids(whole.messages) == expected and not whole.truncated
    if expected:
        tail = await s.get_recent_history(max_bytes=1, leaf_id=leaf)
        assert ids(tail.messages) == expected[-1:]
        assert tail.truncated == (len(expected) > 1)
        two = await s.get_recent_history(max_bytes=1, min_messages=2, leaf_id=leaf)
        assert ids(two.messages) == expected[-2:]
        node = await s.get_node(expected[-1])
        assert node is not None
        assert node.parent_id == (expected[-2] if len(expected) > 1 else None)


async def test_chain_then_branch_then_delete_then_clear(store: Store) -> None:
    s = Session.create(store, "shapes")
    for m in ("a", "b", "c", "d"):
        await s.append_message(msg(m))
    await check_reads(s, None, ["a", "b", "c", "d"])
    await check_reads(s, "b", ["a", "b"])

    # explicit parent that is the latest leaf: still one chain
    await s.append_message(msg("e"), parent_id="d")
    await check_reads(s, None, ["a", "b", "c", "d", "e"])

    # a branch from an interior message
    await s.append_message(msg("x"), parent_id="b")
    await check_reads(s, None, ["a", "b", "x"])
    await check_reads(s, "e", ["a", "b", "c", "d", "e"])
    await check_reads(s, "c", ["a", "b", "c"])
    await s.append_message(msg("y"))  # auto-parented: extends the branch
    await check_reads(s, None, ["a", "b", "x", "y"])

    # a second root
    await s.append_message(msg("r"), parent_id=None)
    await check_reads(s, None, ["r"])
    await check_reads(s, "y", ["a", "b", "x", "y"])

    # deleting an interior message keeps both paths connected
    await s.delete_messages(["b"])
    await check_reads(s, "y", ["a", "x", "y"])
    await check_reads(s, "e", ["a", "c", "d", "e"])

    # after a clear the session is a chain again
    await s.clear_messages()
    await check_reads(s, None, [])
    for m in ("p", "q", "r2"):
        await s.append_message(msg(m))
    await check_reads(s, None, ["p", "q", "r2"])
    await check_reads(s, "q", ["p", "q"])


async def test_chain_with_deletes_stays_exact(store: Store) -> None:
    s = Session.create(store, "deletes")
    names = [f"m{i}" for i in range(12)]
    for n in names:
        await s.append_message(msg(n))
    await s.delete_messages(["m0", "m5", "m6", "m11"])  # root, interior run, leaf
    left = [n for n in names if n not in {"m0", "m5", "m6", "m11"}]
    await check_reads(s, None, left)
    await check_reads(s, "m7", left[: left.index("m7") + 1])
    await s.append_message(msg("m12"))
    await check_reads(s, None, [*left, "m12"])


async def test_interleaved_sessions_do_not_mix(store: Store) -> None:
    a = Session.create(store, "left")
    b = Session.create(store, "right")
    for i in range(6):
        await a.append_message(msg(f"a{i}"))
        await b.append_message(msg(f"b{i}"))
    await check_reads(a, None, [f"a{i}" for i in range(6)])
    await check_reads(b, "b3", [f"b{i}" for i in range(4)])
    # the same ids in another namespace are another conversation
    c = Session.create(store, "left", namespace="other")
    await c.append_message(msg("a0"))
    await check_reads(c, None, ["a0"])
    await check_reads(a, "a0", ["a0"])
