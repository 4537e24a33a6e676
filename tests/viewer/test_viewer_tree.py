"""Unit tests of the viewer's pure session model (:func:`mindstore.viewer.tree.session_view`):
path choice, branch links, overlays as the model sees them, windows, focus and token totals."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from mindstore.store.base import Compaction, StoredMessage
from mindstore.viewer.tree import COVERED_PREVIEW, MAX_LIMIT, TreeIndex, session_view

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def rows(*spec: tuple[str, str | None]) -> list[StoredMessage]:
    """Messages (id, parent) in seq order, each 10 tokens."""
    return [
        StoredMessage(
            id=mid,
            parent_id=parent,
            message={"id": mid, "role": "user", "parts": [{"type": "text", "text": mid}]},
            created_at=T0,
            seq=i + 1,
            tokens=10,
            nbytes=50,
        )
        for i, (mid, parent) in enumerate(spec)
    ]


def comp(cid: int, a: str, b: str, **kw: Any) -> Compaction:
    return Compaction(
        id=cid, from_message_id=a, to_message_id=b, summary=f"sum{cid}", created_at=T0, **kw
    )


# u1 → a1 → u2 → {a2, a2b → u3}; latest leaf u3
TREE = rows(("u1", None), ("a1", "u1"), ("u2", "a1"), ("a2", "u2"), ("a2b", "u2"), ("u3", "a2b"))


def ids(view: dict[str, Any]) -> list[str]:
    return [
        i["id"] if i["kind"] == "message" else f"c{i['compaction']['id']}" for i in view["items"]
    ]


def test_latest_path_by_default_with_branch_links_to_latest_leaves() -> None:
    view = session_view(TREE, [], "u3")
    assert ids(view) == ["u1", "a1", "u2", "a2b", "u3"]
    assert view["is_latest"] and view["path_length"] == 5
    a2b = view["items"][3]
    assert [(b["id"], b["leaf"], b["current"]) for b in a2b["branches"]] == [
        ("a2", "a2", False),
        ("a2b", "u3", True),
    ]
    assert view["items"][0]["branches"] == []  # a single root is no branch
    assert [i["running_tokens"] for i in view["items"]] == [10, 20, 30, 40, 50]
    (bp,) = view["branch_points"]
    assert bp["id"] == "u2" and bp["on_path"]
    assert [(c["id"], c["on_path"]) for c in bp["children"]] == [("a2", False), ("a2b", True)]


def test_other_branch_and_a_leaf_in_the_middle() -> None:
    view = session_view(TREE, [], "u3", leaf="a2")
    assert ids(view) == ["u1", "a1", "u2", "a2"] and not view["is_latest"]
    mid = session_view(TREE, [], "u3", leaf="a2b")
    assert mid["leaf_has_children"] and mid["continue_to"] == "u3"


def test_focus_picks_the_latest_leaf_under_it_and_unknown_ids_raise() -> None:
    assert session_view(TREE, [], "u3", focus="a2")["leaf"] == "a2"
    assert session_view(TREE, [], "u3", focus="u2")["leaf"] == "u3"
    with pytest.raises(KeyError):
        session_view(TREE, [], "u3", leaf="nope")
    with pytest.raises(KeyError):
        session_view(TREE, [], "u3", leaf="a2", focus="u3")  # not on that path


def test_overlays_fold_into_summaries_and_raw_shows_every_message() -> None:
    c1 = comp(1, "a1", "u2", superseded_by=2)
    c2 = comp(2, "u1", "a2b")
    c3 = comp(3, "a1", "a2", reverted=True)
    view = session_view(TREE, [c1, c2, c3], "u3")
    assert ids(view) == ["c2", "u3"]
    summary = view["items"][0]
    assert summary["covered_count"] == 4 and summary["covered_tokens"] == 40
    assert [m["id"] for m in summary["covered"]] == ["u1", "a1", "u2", "a2b"]
    # the superseded overlay is marked where it starts and ends; the reverted c3 ends on the
    # other branch (a2), so it covers nothing of this path and is not marked on it
    a1 = summary["covered"][1]
    assert a1["overlay_marks"] == [{"compaction": 1, "status": "superseded", "edge": "from"}]
    assert view["items"][1]["running_tokens"] == summary["tokens"] + 10
    status = {c["id"]: (c["status"], c["applied"]) for c in view["compactions"]}
    assert status == {1: ("superseded", False), 2: ("active", True), 3: ("reverted", False)}
    raw = session_view(TREE, [c1, c2, c3], "u3", raw=True)
    assert ids(raw) == ["u1", "a1", "u2", "a2b", "u3"]
    assert raw["items"][0]["covered_by"] == [2] and raw["items"][4]["covered_by"] == []
    # on the other branch c2 does not apply; the superseded c1 does (its range is there)
    other = session_view(TREE, [c1, c2, c3], "u3", leaf="a2")
    assert ids(other) == ["u1", "c1", "a2"]


def test_an_overlay_of_another_branch_is_not_shown_active_on_this_one() -> None:
    """Regression: c2 (u1..a2b) was listed and marked "active" on the path to a2, which it
    does not cover (it only shares u1..u2 with it)."""
    c2 = comp(2, "u1", "a2b")
    c1 = comp(1, "a1", "a1")  # on both paths; on the path to u3 the newer c2 covers it
    here = session_view(TREE, [c1, c2], "u3", leaf="a2", raw=True)
    status = {c["id"]: (c["status"], c["status_here"], c["applied"]) for c in here["compactions"]}
    assert status == {2: ("active", "other branch", False), 1: ("active", "active", True)}
    assert all(mark["compaction"] != 2 for item in here["items"] for mark in item["overlay_marks"])
    assert here["items"][1]["overlay_marks"] == [
        {"compaction": 1, "status": "active", "edge": "from"},
        {"compaction": 1, "status": "active", "edge": "to"},
    ]
    latest = session_view(TREE, [c1, c2], "u3", raw=True)
    status = {c["id"]: c["status_here"] for c in latest["compactions"]}
    assert status == {1: "not applied", 2: "active"}  # c1 lies inside the newer c2 here
    assert latest["items"][0]["overlay_marks"] == [
        {"compaction": 2, "status": "active", "edge": "from"}
    ]


def test_window_defaults_to_the_end_and_focus_opens_its_summary() -> None:
    long = rows(("m0", None), *((f"m{i}", f"m{i - 1}") for i in range(1, 1000)))
    view = session_view(long, [comp(1, "m10", "m899")], "m999", limit=50)
    assert view["total_items"] == 1000 - 890 + 1
    assert view["offset"] == view["total_items"] - 50 and len(view["items"]) == 50
    assert view["items"][-1]["id"] == "m999"
    assert view["items"][-1]["running_tokens"] == view["context_tokens"]
    focused = session_view(long, [comp(1, "m10", "m899")], "m999", focus="m500", limit=50)
    summary = next(i for i in focused["items"] if i["kind"] == "compaction")
    assert summary["open"] and summary["covered_count"] == 890
    assert len(summary["covered"]) == COVERED_PREVIEW
    first = session_view(long, [], "m999", offset=0, limit=10_000)
    assert len(first["items"]) == MAX_LIMIT and first["items"][0]["id"] == "m0"
    past_end = session_view(long, [], "m999", offset=5000, limit=10)
    assert [i["id"] for i in past_end["items"]] == ["m999"]


def test_empty_session() -> None:
    view = session_view([], [], None)
    assert view["items"] == [] and view["path_length"] == 0 and view["leaf"] is None


def test_latest_leaf_under_every_node_matches_a_brute_force_walk() -> None:
    import random

    rng = random.Random(7)
    for _ in range(50):
        spec: list[tuple[str, str | None]] = []
        for i in range(rng.randint(1, 60)):
            parent = None if i == 0 or rng.random() < 0.05 else f"n{rng.randrange(i)}"
            spec.append((f"n{i}", parent))
        tree = TreeIndex.build(rows(*spec))
        kids: dict[str, list[str]] = {}
        for mid, parent in spec:
            if parent is not None:
                kids.setdefault(parent, []).append(mid)
        for mid, _ in spec:
            stack, leaves = [mid], []
            while stack:
                node = stack.pop()
                stack.extend(kids.get(node, []))
                if not kids.get(node):
                    leaves.append(node)
            assert tree.latest_under[mid] == max(leaves, key=lambda n: int(n[1:])), mid
