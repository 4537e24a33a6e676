"""Property tests (hypothesis) against a real SQLite store: round-trips, tree invariants and
search robustness. Example counts are modest so the file runs in a few seconds."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindstore.messages import RESERVED_ID_PREFIX
from mindstore.session import Session
from mindstore.store.sqlite import SQLiteStore

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
_counter = itertools.count()

json_scalar = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_value = st.recursive(
    json_scalar,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
text_part = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "reasoning"]), "text": st.text()}
)
tool_part = st.fixed_dictionaries(
    {
        "type": st.from_regex(r"tool-[a-z_]{1,12}", fullmatch=True),
        "toolCallId": st.text(min_size=1, max_size=12),
    },
    optional={
        "input": json_value,
        "output": json_value,
        "state": st.sampled_from(["input-available", "output-available"]),
    },
)
other_part = st.fixed_dictionaries(
    {"type": st.from_regex(r"(data|file|x)-[a-z]{1,6}", fullmatch=True)},
    optional={"payload": json_value},
)
message = st.fixed_dictionaries(
    {
        # ids starting with RESERVED_ID_PREFIX belong to compaction summaries and are refused
        "id": st.text(min_size=1, max_size=40).filter(
            lambda s: "\x00" not in s and not s.startswith(RESERVED_ID_PREFIX)
        ),
        "role": st.sampled_from(["system", "user", "assistant", "tool"]),
        "parts": st.lists(text_part | tool_part | other_part, max_size=5),
    },
    optional={"metadata": st.dictionaries(st.text(max_size=8), json_value, max_size=3)},
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path_factory.mktemp("props") / "props.db")
    yield s
    asyncio.run(s.aclose())


def fresh(store: SQLiteStore) -> Session:
    return Session.create(store, f"s{next(_counter)}")


@SETTINGS
@given(msg=message)
def test_any_valid_message_round_trips(store: SQLiteStore, msg: dict[str, Any]) -> None:
    async def run() -> None:
        s = fresh(store)
        assert await s.append_message(msg) is True
        assert await s.get_message(msg["id"]) == msg
        assert await s.get_history() == [msg]
        assert await s.get_latest_leaf() == msg

    asyncio.run(run())


# A tree as a list of parent choices: None (new root), -1 (auto: latest leaf) or an index of an
# earlier node (taken modulo the number of nodes so far).
tree_shape = st.lists(
    st.one_of(st.none(), st.just(-1), st.integers(min_value=0, max_value=50)),
    min_size=1,
    max_size=25,
)


@SETTINGS
@given(shape=tree_shape)
def test_history_ends_at_leaf_and_branches_share_prefix(
    store: SQLiteStore, shape: list[int | None]
) -> None:
    async def run() -> None:
        s = fresh(store)
        parents: dict[str, str | None] = {}
        for i, choice in enumerate(shape):
            mid = f"n{i}"
            m = {"id": mid, "role": "user", "parts": [{"type": "text", "text": mid}]}
            if choice == -1:
                leaf = await s.get_latest_leaf()
                await s.append_message(m)
                parents[mid] = leaf["id"] if leaf else None
            elif choice is None or i == 0:
                await s.append_message(m, parent_id=None)
                parents[mid] = None
            else:
                p = f"n{choice % i}"
                await s.append_message(m, parent_id=p)
                parents[mid] = p
        histories = {}
        for mid in parents:
            h = [m["id"] for m in await s.get_history(mid)]
            assert h[-1] == mid
            # each step is a parent link, ending at a root
            expected: list[str] = []
            cur: str | None = mid
            while cur is not None:
                expected.append(cur)
                cur = parents[cur]
            assert h == expected[::-1]
            assert await s.get_path_length(mid) == len(h)
            histories[mid] = h
        for mid, parent in parents.items():
            if parent is not None:
                assert histories[mid] == histories[parent] + [mid]
                assert mid in [c["id"] for c in await s.get_branches(parent)]
        # the latest leaf is the newest message without children
        childless = [m for m in parents if m not in parents.values()]
        newest = max(childless, key=lambda m: int(m[1:]))
        assert (await s.get_latest_leaf() or {})["id"] == newest

    asyncio.run(run())


@pytest.fixture(scope="module")
def search_session(store: SQLiteStore) -> Session:
    s = Session.create(store, "search-props")

    async def fill() -> None:
        for i, text in enumerate(
            ["deployment went fine", "the red car", 'NEAR quotes " and * stars']
        ):
            await s.append_message(
                {"id": f"m{i}", "role": "user", "parts": [{"type": "text", "text": text}]}
            )

    asyncio.run(fill())
    return s


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    query=st.text(max_size=60)
    | st.lists(
        st.sampled_from(
            [
                '"',
                "*",
                "(",
                ")",
                "NEAR",
                "AND",
                "OR",
                "NOT",
                "-",
                ":",
                "^",
                "+",
                "deploy",
                "red",
                " ",
                "'",
                ";",
                "{",
                "}",
            ]
        ),
        max_size=12,
    ).map("".join)
)
def test_no_query_string_raises(search_session: Session, query: str) -> None:
    results = asyncio.run(search_session.search(query))
    assert isinstance(results, list)
    assert all(r.session_id == "search-props" for r in results)
