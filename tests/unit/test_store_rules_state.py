"""The state, entry, registry and search rules both stores share (``store/_rules.py``, second
section) and the search result assembly (``mindstore.lexical.hits``): no database."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest

from mindstore.errors import (
    CompactionError,
    ConflictError,
    InvalidKeyError,
    InvalidMessageError,
    SessionNotFoundError,
)
from mindstore.lexical.hits import Hits
from mindstore.search import SearchResult, parse_query
from mindstore.store import _rows, _rules
from mindstore.store.base import Compaction, Entry, EntryHit, ScopeKey, SessionKey, SkillState

KEY = SessionKey(namespace="ns", session_id="s1")
T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
T1 = datetime(2026, 2, 3, tzinfo=UTC)


def micro(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000)


def from_micro(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1_000_000, UTC)


# ---- rows ---------------------------------------------------------------------------------------
def test_compaction_rows_decode_alike_from_either_time_format() -> None:
    stored = (7, "a", "b", "sum", T0, None, 0)
    expected = Compaction(
        id=7, from_message_id="a", to_message_id="b", summary="sum", created_at=T0
    )
    assert _rows.decode_compaction(stored) == expected
    assert _rows.decode_compaction((7, "a", "b", "sum", micro(T0), None, 0), from_micro) == (
        expected
    )
    reverted = _rows.decode_compaction((8, "a", "b", "s", T0, 9, 1))
    assert reverted.reverted is True and reverted.superseded_by == 9


def test_entry_rows_created_falls_back_to_updated_and_expiry_is_optional() -> None:
    old = _rows.decode_entry(("k", "c", None, T0, None, None, None))
    assert old == Entry(
        key="k", content="c", description=None, updated_at=T0, created_at=T0, data=None
    )
    new = _rows.decode_entry(("k", "c", "d", micro(T1), "x", micro(T0), micro(T1)), from_micro)
    assert (new.created_at, new.updated_at, new.expires_at, new.data) == (T0, T1, T1, "x")


def test_session_rows_decode_metadata_and_times() -> None:
    row = ("s1", "n", None, "m", "cli", json.dumps({"a": 1}), 3, 4, 0.5, None, T0, T1, 2)
    info = _rows.decode_session(row)
    assert (info.id, info.metadata, info.created_at, info.updated_at) == ("s1", {"a": 1}, T0, T1)
    assert _rows.decode_session((*row[:5], None, *row[6:])).metadata is None


def test_skill_state_and_block_rows() -> None:
    assert _rows.decode_skill_state(("skills", "k", 1, None)) == SkillState(
        label="skills", key="k", loaded=True, unloaded_before_seq=None
    )
    listed = _rows.decode_blocks("ns", [("s1", "mem", "x"), ("", "shared", "y")])
    assert listed == [
        (ScopeKey(namespace="ns", session_id="s1", label="mem"), "x"),
        (ScopeKey(namespace="ns", session_id=None, label="shared"), "y"),
    ]


# ---- search -------------------------------------------------------------------------------------
def test_check_search_validates_before_any_io() -> None:
    q = parse_query("tea")
    assert _rules.check_search("ns", q, None, 5) is None
    assert _rules.check_search("ns", q, ("a", "b"), 5) == ["a", "b"]
    assert _rules.check_search("ns", q, [], 5) == []
    with pytest.raises(TypeError, match="not a string"):
        _rules.check_search("ns", q, "abc", 5)
    with pytest.raises(InvalidKeyError, match="session id"):
        _rules.check_search("ns", q, ["ok", ""], 5)
    with pytest.raises(InvalidKeyError, match="namespace"):
        _rules.check_search("", q, None, 5)
    with pytest.raises(TypeError, match="ParsedQuery"):
        _rules.check_search("ns", "tea", None, 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="limit"):
        _rules.check_search("ns", q, None, 2.0)  # type: ignore[arg-type]


def run(hits: Hits[Any, Any], ranked: list[tuple[float, int, int]], rows: dict[int, Any]) -> Any:
    """The backends' loop, with the pages it read."""
    pages = []
    for ids in hits.pages(ranked):
        pages.append(ids)
        hits.add({i: rows[i] for i in ids if i in rows})
    return hits.results, pages


def message_row(doc: int, text: str, tool: str = "") -> tuple[Any, ...]:
    return (doc, "s1", f"m{doc}", "user", text, tool, T0)


def message_hits(query: str, limit: int) -> Hits[Any, SearchResult]:
    return _rules.message_hits(parse_query(query), limit, lambda r: (r[4], r[5]), lambda r: r[6])


def test_hits_read_growing_pages_only_until_the_limit() -> None:
    ranked = [(100.0 - d, d, 0) for d in range(40)]
    rows = {d: message_row(d, f"tea {d}") for d in range(40)}
    results, pages = run(message_hits("tea", 3), ranked, rows)
    assert [r.message_id for r in results] == ["m0", "m1", "m2"]
    assert pages == [list(range(8))]  # one page of max(limit, 8)
    _, pages = run(message_hits("tea", 40), ranked, rows)
    assert [len(p) for p in pages] == [40]


def test_hits_skip_missing_rows_and_failed_phrases_keeping_rank_order() -> None:
    ranked = [(10.0 - d, d, 0) for d in range(30)]
    rows = {d: message_row(d, "red fox" if d % 5 == 4 else "fox red") for d in range(30)}
    del rows[4]  # deleted after ranking
    results, pages = run(message_hits('"red fox"', 3), ranked, rows)
    assert [r.message_id for r in results] == ["m9", "m14", "m19"]
    assert [len(p) for p in pages] == [8, 16]  # the first page's one phrase match was deleted
    assert [r.score for r in results] == [1.0, -4.0, -9.0]
    assert all(r.snippet == "[red] [fox]" for r in results)


def test_message_hit_shows_tool_text_when_the_message_has_no_text() -> None:
    (hit,), _ = run(message_hits("lookup", 5), [(2.0, 1, 0)], {1: message_row(1, "", "lookup")})
    assert (hit.session_id, hit.role, hit.text, hit.created_at) == ("s1", "user", "lookup", T0)


def test_entry_hits_match_phrases_across_key_and_content_and_snip_content_first() -> None:
    rows = {
        1: (1, "red", "fox lives here", None),  # "red fox" across key + content
        2: (2, "other", "red dog, fox", "a red fox"),  # in the description
        3: (3, "none", "red and fox apart", None),
    }
    ranked = [(3.0, 1, 0), (2.0, 2, 0), (1.0, 3, 0)]
    results, _ = run(_rules.entry_hits(parse_query('"red fox"'), 10), ranked, rows)
    assert [h.key for h in results] == ["red", "other"]
    assert results[1] == EntryHit(
        key="other",
        content="red dog, fox",
        description="a red fox",
        snippet=results[1].snippet,
        score=2.0,
    )
    results, _ = run(_rules.entry_hits(parse_query("fox"), 1), ranked, rows)
    assert results[0].snippet.startswith("[fox]")  # from the content, not the key


# ---- compactions --------------------------------------------------------------------------------
def test_check_compaction_one_message_for_bad_supersedes() -> None:
    assert _rules.check_compaction(KEY, "s", "a", "b", [1, 2]) == _rules.NewCompaction(
        summary="s", from_id="a", to_id="b", supersedes=(1, 2)
    )
    with pytest.raises(TypeError, match=r"supersedes must be compaction ids \(integers\), got"):
        _rules.check_compaction(KEY, "s", "a", "b", [1, True])
    with pytest.raises(TypeError, match="supersedes must be compaction ids"):
        _rules.check_compaction(KEY, "s", "a", "b", ["1"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="64-bit"):
        _rules.check_compaction(KEY, "s", "a", "b", [2**63])
    with pytest.raises(InvalidMessageError, match="from_id"):
        _rules.check_compaction(KEY, "s", "", "b", ())
    with pytest.raises(ValueError, match="summary"):
        _rules.check_compaction(KEY, "s\x00", "a", "b", ())


def test_superseded_ids_must_belong_to_the_session() -> None:
    _rules.check_superseded(KEY, [1, 2], {1, 2, 3})
    with pytest.raises(CompactionError, match="cannot supersede compaction 5: not a compaction"):
        _rules.check_superseded(KEY, [1, 5, 6], {1})
    err = _rules.compaction_not_found(KEY, 4)
    assert isinstance(err, CompactionError)
    assert str(err) == "no compaction 4 in session 's1'"


# ---- blocks, skills -----------------------------------------------------------------------------
def test_block_updates_start_from_empty_and_are_checked() -> None:
    assert _rules.updated_block(lambda c: c + "x", None) == "x"
    assert _rules.updated_block(lambda c: c + "x", "a") == "ax"
    with pytest.raises(ValueError, match="update function's result"):
        _rules.updated_block(lambda c: "\x00", None)
    with pytest.raises(TypeError, match="string"):
        _rules.updated_block(lambda c: 3, None)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="callable"):
        _rules.check_block_function("nope")


def test_block_listing_and_skill_state_checks() -> None:
    _rules.check_block_listing("ns", None)
    with pytest.raises(InvalidKeyError, match="session_id"):
        _rules.check_block_listing("ns", "")
    _rules.check_skill_state(KEY, "skills", "k", False)
    with pytest.raises(TypeError, match="loaded must be a bool"):
        _rules.check_skill_state(KEY, "skills", "k", 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidKeyError, match="entry key"):
        _rules.check_skill_state(KEY, "skills", "", True)


# ---- entries ------------------------------------------------------------------------------------
def test_entry_checks() -> None:
    assert _rules.check_entry("k", "c", "d", None, T0) == _rules.NewEntry(
        key="k", content="c", description="d", data=None, expires_at=T0
    )
    with pytest.raises(ValueError, match="description"):
        _rules.check_entry("k", "c", "\x00", None, None)
    with pytest.raises(TypeError, match="timezone-aware"):
        _rules.check_entry("k", "c", None, None, datetime(2026, 1, 1))
    assert _rules.check_expiries({"a": T0, "b": None}) == [("a", T0), ("b", None)]
    with pytest.raises(InvalidKeyError, match="entry key"):
        _rules.check_expiries({"": T0})


def test_entries_come_back_in_request_order_once_each() -> None:
    found = {
        k: Entry(key=k, content=k, description=None, updated_at=T0, created_at=T0) for k in "ab"
    }
    assert [e.key for e in _rules.in_request_order(["b", "x", "a", "b"], found)] == ["b", "a"]


# ---- registry -----------------------------------------------------------------------------------
def test_new_session_fields() -> None:
    assert _rules.check_new_session(KEY, "n", None, None, None, None) == _rules.NewSession(
        name="n", parent_session_id=None, model=None, source=None, metadata=None
    )
    new = _rules.check_new_session(KEY, None, "p", "m", "cli", {"a": "é"})
    assert (new.parent_session_id, new.model, new.source) == ("p", "m", "cli")
    assert new.metadata is not None and json.loads(new.metadata) == {"a": "é"}
    with pytest.raises(TypeError, match="metadata must be a mapping"):
        _rules.check_new_session(KEY, None, None, None, None, [1])  # type: ignore[arg-type]
    with pytest.raises(InvalidKeyError, match="name"):
        _rules.check_new_session(KEY, "\x00", None, None, None, None)


def test_session_listing_and_usage_checks() -> None:
    _rules.check_session_listing("ns", 0, None)
    with pytest.raises(InvalidKeyError, match="before"):
        _rules.check_session_listing("ns", 5, "")
    assert _rules.check_usage(1, 2, 3) == 3.0
    assert isinstance(_rules.check_usage(1, 2, 3), float)
    with pytest.raises(TypeError, match="input_tokens must be an integer"):
        _rules.check_usage(True, 2, 3)
    with pytest.raises(TypeError, match="output_tokens must be an integer"):
        _rules.check_usage(1, 2.0, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cost must be a number"):
        _rules.check_usage(1, 2, math.nan)


def test_registry_errors() -> None:
    assert isinstance(_rules.session_exists(KEY), ConflictError)
    assert str(_rules.session_exists(KEY)) == "session 's1' already exists in namespace 'ns'"
    assert isinstance(_rules.session_not_found(KEY), SessionNotFoundError)
    assert str(_rules.session_not_found(KEY)) == "no session 's1' in namespace 'ns'"
    assert set(_rules.NAMESPACE_TABLES) == {
        "sessions",
        "messages",
        "compactions",
        "blocks",
        "entries",
        "prompts",
        "skill_states",
    }


def test_the_namespace_deletion_failpoint_is_declared_once_for_every_backend() -> None:
    from mindstore.store import failpoints

    assert _rules.DELETE_NAMESPACE_AFTER_DELETE == "delete_namespace.after_delete"
    assert "not yet committed" in failpoints.PLACES["delete_namespace.after_delete"]
