"""The message rules both stores share (``mindstore.store._rules``), without a database."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from mindstore.errors import ConflictError, InvalidMessageError, MessageNotFoundError
from mindstore.messages import dumps
from mindstore.store import _rows, _rules
from mindstore.store.base import AUTO, UNSET, NewMessage, SessionKey, StoredMessage

KEY = SessionKey(namespace="ns", session_id="s1")


def msg(mid: Any = "m1", text: str = "héllo", **extra: Any) -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}], **extra}


# ---- preparation -------------------------------------------------------------------------------
def test_prepared_message_serialises_once_and_counts_utf8_bytes() -> None:
    m = msg()
    p = _rules.PreparedMessage(NewMessage(message=m, tokens=7))
    assert (p.id, p.role, p.content) == ("m1", "user", dumps(m))
    assert p.nbytes == len(dumps(m).encode("utf-8")) == len(p.content) + 1  # é is two bytes
    assert (p.text, p.tool) == ("", "")  # not asked for
    indexed = _rules.PreparedMessage(NewMessage(message=m), index=True)
    assert indexed.text == "héllo"


def test_prepared_message_takes_the_callers_json_as_is() -> None:
    m = msg(text="plain")
    given = dumps(m)
    p = _rules.PreparedMessage(NewMessage(message=m, content=given))
    assert p.content is given and p.nbytes == len(given)


@pytest.mark.parametrize(
    ("item", "error", "match"),
    [
        ("not a NewMessage", TypeError, "append takes NewMessage items, got str"),
        (NewMessage(message="x"), InvalidMessageError, "validated message dict"),  # type: ignore[arg-type]
        (NewMessage(message=msg(mid=None)), InvalidMessageError, "message.id"),
        (NewMessage(message={"id": "a", "role": 3}), InvalidMessageError, "role must be a str"),
        (NewMessage(message=msg(), parent=""), InvalidMessageError, "parent_id"),
        (NewMessage(message=msg(), parent=5), TypeError, "parent must be"),  # type: ignore[arg-type]
        (NewMessage(message=msg(), tokens=True), TypeError, "NewMessage.tokens must be an int"),
        (NewMessage(message=msg(), tokens=2**63), ValueError, "64 bits"),
        (NewMessage(message=msg(x={1, 2})), InvalidMessageError, "not JSON-serialisable"),
    ],
)
def test_prepared_message_refuses_bad_items(item: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        _rules.PreparedMessage(item)


def test_prepare_append_checks_the_expected_leaf_and_knows_when_there_is_nothing_to_do() -> None:
    assert _rules.prepare_append([], UNSET) is None
    assert _rules.prepare_append([], None) == []  # still checks that the session is empty
    assert _rules.prepare_append([], "leaf") == []
    with pytest.raises(InvalidMessageError, match="expected_leaf"):
        _rules.prepare_append([], "")
    [p] = _rules.prepare_append([NewMessage(message=msg())], UNSET) or []
    assert p.id == "m1"


def test_prepared_update() -> None:
    u = _rules.PreparedUpdate(msg(), 3, index=True)
    assert (u.id, u.role, u.tokens, u.content, u.text) == ("m1", "user", 3, dumps(msg()), "héllo")
    assert u.nbytes == len(u.content.encode())
    with pytest.raises(InvalidMessageError, match="update takes a validated message dict"):
        _rules.PreparedUpdate(["no"], 1)
    with pytest.raises(TypeError, match="tokens must be an integer"):
        _rules.PreparedUpdate(msg(), "3")


def test_argument_checks() -> None:
    _rules.check_leaf_id(None)
    with pytest.raises(InvalidMessageError, match="leaf_id"):
        _rules.check_leaf_id("")
    _rules.check_window(None, None, 0)
    with pytest.raises(TypeError, match="max_bytes must be an integer"):
        _rules.check_window(10, 1.5, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="margin must be an integer"):
        _rules.token_estimate_params(KEY, "m", 1, 0, None, "x")  # type: ignore[arg-type]
    assert _rules.token_estimate_params(KEY, "m", 5, 2, None, 3) == (
        "m",
        5,
        None,
        3,
        KEY.namespace,
        KEY.session_id,
        2,
    )
    assert _rules.delete_ids(["a", "b", "a"]) == ["a", "b"]
    assert _rules.message_ids(["a", "a"]) == ["a", "a"]
    for ids in (_rules.delete_ids, _rules.message_ids):
        with pytest.raises(TypeError, match="not a string"):
            ids("abc")


# ---- parents, expected leaf, estimates ---------------------------------------------------------
def test_resolve_parent() -> None:
    known = {"p": 4}
    assert _rules.resolve_parent(KEY, AUTO, 9, known.get) == 9
    assert _rules.resolve_parent(KEY, AUTO, None, known.get) is None  # empty session: a root
    assert _rules.resolve_parent(KEY, None, 9, known.get) is None
    assert _rules.resolve_parent(KEY, "p", 9, known.get) == 4
    with pytest.raises(MessageNotFoundError) as info:
        _rules.resolve_parent(KEY, "gone", 9, known.get)
    assert str(info.value) == (
        "parent message 'gone' does not exist in session 's1'; nothing was written"
    )


def test_expected_leaf_conflict() -> None:
    _rules.check_expected_leaf(KEY, "a", "a")
    _rules.check_expected_leaf(KEY, None, None)
    with pytest.raises(ConflictError) as info:
        _rules.check_expected_leaf(KEY, None, "b")
    assert str(info.value) == (
        "expected the latest leaf of session 's1' to be None but it is 'b': "
        "re-read the history and retry"
    )


def test_extend_estimate() -> None:
    assert _rules.extend_estimate(None, None, None, 5, 3) == (5, 3)  # a new root starts it
    assert _rules.extend_estimate(5, 3, 5, 6, 2) == (6, 5)  # a child of the measured leaf
    assert _rules.extend_estimate(5, 3, 4, 6, 2) == (None, None)  # anything else clears it
    assert _rules.extend_estimate(None, None, 4, 6, 2) == (None, None)


# ---- delete plans ------------------------------------------------------------------------------
def test_plan_delete_reattaches_to_the_nearest_surviving_ancestor() -> None:
    # 1 <- 2 <- 3 <- 4 and 2 <- 5: deleting 2 and 3 moves the children of both (4, 5) to 1
    rows = [(2, "b", 1), (3, "c", 2)]
    assert _rules.plan_delete(KEY, ["b", "c"], rows) == {2: 1, 3: 1}
    # deleting the root too: their children become roots
    rows = [(1, "a", None), (2, "b", 1), (3, "c", 2)]
    assert _rules.plan_delete(KEY, ["c", "a", "b"], rows) == {1: None, 2: None, 3: None}


def test_plan_delete_refuses_a_missing_id() -> None:
    with pytest.raises(MessageNotFoundError) as info:
        _rules.plan_delete(KEY, ["b", "zz", "yy"], [(2, "b", 1)])
    assert str(info.value) == (
        "cannot delete 'zz': no such message in session 's1'; nothing was deleted"
    )


def test_message_not_found_text() -> None:
    e = _rules.message_not_found(KEY, "x")
    assert isinstance(e, MessageNotFoundError)
    assert str(e) == "no message 'x' in session 's1' (namespace 'ns')"


# ---- rows --------------------------------------------------------------------------------------
def test_message_row_builds_the_same_object_as_the_constructor() -> None:
    at = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    content = dumps(msg())
    got = _rows.message_row((7, "m1", "p", content, "ignored", 11, 42), at)
    want = StoredMessage(
        id="m1", parent_id="p", message=msg(), created_at=at, seq=7, tokens=11, nbytes=42
    )
    assert got == want
    assert dataclasses.asdict(got) == dataclasses.asdict(want)
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.seq = 8  # type: ignore[misc]


def test_loads_matches_json_loads_and_its_errors() -> None:
    assert _rows.loads(dumps(msg())) == msg()
    assert _rows.loads(' {"a": 1} ') == {"a": 1}  # not our compact form: the slow path
    with pytest.raises(ValueError):
        _rows.loads('{"a": 1} trailing')
    with pytest.raises(ValueError):
        _rows.loads("")
