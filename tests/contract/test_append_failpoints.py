"""Contract: the append failpoints exist on every backend and sit inside the append's one
transaction — a failure at either place leaves nothing behind, and the places are reached in
order (before any insert; after every row, before the commit)."""

from __future__ import annotations

from typing import Any

import pytest

from mindstore.search import parse_query
from mindstore.store import failpoints
from mindstore.store.base import NewMessage, SessionKey, Store

KEY = SessionKey(namespace="ns", session_id="s")


def msg(mid: str, text: str = "zebra crossing") -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}


class Injected(Exception):
    pass


def boom() -> None:
    raise Injected


@pytest.mark.parametrize("place", ["append.before_insert", "append.after_insert"])
@pytest.mark.parametrize("count", [1, 3])  # one-row and batch insert paths
async def test_a_failure_inside_an_append_writes_nothing(
    store: Store, place: str, count: int
) -> None:
    assert await store.append(KEY, [NewMessage(message=msg("first", "giraffe"))]) == [True]
    before = await store.get_session(KEY)
    batch = [NewMessage(message=msg(f"m{i}"), tokens=5) for i in range(count)]
    with failpoints.armed(place, boom), pytest.raises(Injected):
        await store.append(KEY, batch)
    assert [m.id for m in await store.all_messages(KEY)] == ["first"]
    assert (await store.latest_leaf(KEY)).id == "first"  # type: ignore[union-attr]
    assert await store.get_session(KEY) == before
    assert await store.search("ns", parse_query("zebra")) == []
    # nothing was left locked or half-written: the same append now succeeds
    assert await store.append(KEY, batch) == [True] * count


async def test_the_places_are_reached_in_order_with_the_rows_written_in_between(
    store: Store,
) -> None:
    seen: list[str] = []
    with (
        failpoints.armed("append.before_insert", lambda: seen.append("before")),
        failpoints.armed("append.after_insert", lambda: seen.append("after")),
    ):
        assert await store.append(KEY, [NewMessage(message=msg("a"))]) == [True]
        # a duplicate inserts nothing but still passes both places inside its transaction
        assert await store.append(KEY, [NewMessage(message=msg("a"))]) == [False]
    assert seen == ["before", "after", "before", "after"]
    assert "append.before_insert" in failpoints.PLACES
    assert "append.after_insert" in failpoints.PLACES
