"""apply_overlays: range replacement, branch locality, newest-wins, windows."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

from mindstore.compaction.overlays import apply_overlays, is_compaction_message, resolve_overlays
from mindstore.store.base import Compaction

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def msgs(*ids: str) -> list[dict[str, object]]:
    return [{"id": i, "role": "user", "parts": [{"type": "text", "text": i}]} for i in ids]


def comp(cid: int, a: str, b: str, *, reverted: bool = False, by: int | None = None) -> Compaction:
    return Compaction(
        id=cid,
        from_message_id=a,
        to_message_id=b,
        summary=f"S{cid}",
        created_at=NOW,
        superseded_by=by,
        reverted=reverted,
    )


def ids(out: list[dict[str, object]]) -> list[object]:
    return [m["id"] for m in out]


def test_range_replaced_by_virtual_message() -> None:
    path = msgs("m0", "m1", "m2", "m3", "m4", "m5")
    out = apply_overlays(path, [comp(7, "m1", "m3")])
    assert ids(out) == ["m0", "compaction_7", "m4", "m5"]
    v = out[1]
    assert v == {
        "id": "compaction_7",
        "role": "assistant",
        "parts": [{"type": "text", "text": "S7"}],
        "metadata": {"compaction": {"id": 7, "from": "m1", "to": "m3"}},
    }
    assert is_compaction_message(v) and not is_compaction_message(path[0])
    assert out[0] is path[0]  # untouched messages are shared, input not modified
    assert ids(path) == ["m0", "m1", "m2", "m3", "m4", "m5"]


def test_only_overlays_on_this_path_apply() -> None:
    # sibling branch: overlay ends on a message that is not on this path
    assert ids(apply_overlays(msgs("m0", "m1", "b2"), [comp(1, "m1", "a2")])) == ["m0", "m1", "b2"]
    # reading a leaf in the middle of a range: the range is not on the path
    assert ids(apply_overlays(msgs("m0", "m1", "m2"), [comp(1, "m1", "m3")])) == ["m0", "m1", "m2"]
    # from after to (invalid data) never applies
    assert ids(apply_overlays(msgs("m0", "m1", "m2"), [comp(1, "m2", "m1")])) == ["m0", "m1", "m2"]


def test_newest_wins_and_reverted_ignored() -> None:
    path = msgs(*(f"m{i}" for i in range(8)))
    out = apply_overlays(path, [comp(1, "m1", "m3"), comp(2, "m1", "m5", reverted=False)])
    assert ids(out) == ["m0", "compaction_2", "m6", "m7"]
    out = apply_overlays(path, [comp(1, "m1", "m3"), comp(2, "m1", "m5", reverted=True)])
    assert ids(out) == ["m0", "compaction_1", "m4", "m5", "m6", "m7"]
    # partial overlap: the newer one wins, the older is dropped entirely
    out = apply_overlays(path, [comp(3, "m1", "m3"), comp(4, "m2", "m5")])
    assert ids(out) == ["m0", "m1", "compaction_4", "m6", "m7"]
    # disjoint overlays both apply
    out = apply_overlays(path, [comp(5, "m1", "m2"), comp(6, "m4", "m5")])
    assert ids(out) == ["m0", "compaction_5", "m3", "compaction_6", "m6", "m7"]


def test_same_range_deterministic_by_id_regardless_of_order() -> None:
    path = msgs("m0", "m1", "m2", "m3")
    a, b = comp(10, "m1", "m2"), comp(11, "m1", "m2")
    assert ids(apply_overlays(path, [a, b])) == ids(apply_overlays(path, [b, a]))
    assert ids(apply_overlays(path, [a, b]))[1] == "compaction_11"


def test_superseded_overlay_still_applies_where_its_superseder_does_not() -> None:
    older = comp(1, "m1", "m2", by=2)
    newer = comp(2, "m1", "a4")
    assert ids(apply_overlays(msgs("m0", "m1", "m2", "m3", "a4"), [older, newer])) == [
        "m0",
        "compaction_2",
    ]
    assert ids(apply_overlays(msgs("m0", "m1", "m2", "m3", "b4"), [older, newer])) == [
        "m0",
        "compaction_1",
        "m3",
        "b4",
    ]


def test_window_starts_with_summary_when_range_begins_before_it() -> None:
    window = msgs("m3", "m4", "m5")  # suffix of m0..m5
    c = comp(1, "m1", "m3")
    assert ids(apply_overlays(window, [c])) == ["m3", "m4", "m5"]  # full-path mode: not on path
    assert ids(apply_overlays(window, [c], partial_start=True)) == ["compaction_1", "m4", "m5"]
    # two partial overlays both cover the window start: the newest wins
    out = apply_overlays(window, [c, comp(2, "m0", "m4")], partial_start=True)
    assert ids(out) == ["compaction_2", "m5"]


def test_start_returns_suffix_of_full_resolution() -> None:
    path = msgs(*(f"m{i}" for i in range(8)))
    cs = [comp(1, "m1", "m5"), comp(2, "m6", "m6")]
    full = apply_overlays(path, cs)
    assert ids(full) == ["m0", "compaction_1", "compaction_2", "m7"]
    assert ids(apply_overlays(path, cs, start=3)) == ["compaction_1", "compaction_2", "m7"]
    assert ids(apply_overlays(path, cs, start=6)) == ["compaction_2", "m7"]
    assert ids(apply_overlays(path, cs, start=7)) == ["m7"]
    assert ids(apply_overlays(path, [], start=7)) == ["m7"]


def test_resolve_many_overlays_is_disjoint_and_ordered() -> None:
    path = [f"m{i}" for i in range(200)]
    cs = [comp(i + 1, f"m{i}", f"m{i + 5}") for i in range(0, 190, 3)]
    chosen = resolve_overlays(path, cs)
    spans = [(s, e) for _, s, e in chosen]
    assert spans == sorted(spans)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(spans))
    # the newest overlay is always chosen
    assert any(c.id == max(x.id for x in cs) for c, _, _ in chosen)
