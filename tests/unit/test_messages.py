"""Unit: message validation, id generation and part helpers (DESIGN §2). No database."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from mindstore.errors import InvalidMessageError, UnserialisableValueError
from mindstore.messages import (
    dumps,
    is_tool_part,
    new_message_id,
    tool_name,
    validate_id,
    validate_message,
)


def user(text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "text": text}], **extra}


def test_valid_message_is_copied_not_mutated() -> None:
    m = {
        "id": "a",
        "role": "assistant",
        "metadata": {"k": [1]},
        "parts": [{"type": "text", "text": "x"}],
    }
    out = validate_message(m)
    assert out == m
    assert out is not m and out["parts"] is not m["parts"]
    out["metadata"]["k"].append(2)
    assert m["metadata"]["k"] == [1]


def test_missing_id_is_generated_and_unique() -> None:
    a = validate_message(user())
    b = validate_message(user())
    assert a["id"] != b["id"]
    assert a["id"].startswith("msg_")
    with pytest.raises(InvalidMessageError, match="id is required"):
        validate_message(user(), generate_id=False)


def test_explicit_none_id_is_generated() -> None:
    assert validate_message({**user(), "id": None})["id"].startswith("msg_")


def test_generated_ids_are_time_ordered() -> None:
    ids = [new_message_id() for _ in range(2000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ("not a dict", "a message must be a dict"),
        ({"id": "a", "parts": []}, "message.role"),
        ({"id": "a", "role": "robot", "parts": []}, "message.role"),
        ({"id": "a", "role": "user"}, "message.parts"),
        ({"id": "a", "role": "user", "parts": {}}, "message.parts"),
        ({"id": "a", "role": "user", "parts": ["x"]}, r"message.parts\[0\]"),
        ({"id": "a", "role": "user", "parts": [{"text": "x"}]}, r"message.parts\[0\].type"),
        ({"id": "a", "role": "user", "parts": [{"type": "text"}]}, r"message.parts\[0\].text"),
        ({"id": "a", "role": "user", "parts": [{"type": "reasoning", "text": 3}]}, r"\.text"),
        ({"id": "a", "role": "user", "parts": [{"type": "tool-x"}]}, "toolCallId"),
        ({"id": "a", "role": "user", "parts": [{"type": "tool-", "toolCallId": "c"}]}, "tool name"),
        (
            {"id": "a", "role": "user", "parts": [{"type": "dynamic-tool", "toolCallId": "c"}]},
            "toolName",
        ),
        ({"id": "", "role": "user", "parts": []}, "message.id"),
        ({"id": 5, "role": "user", "parts": []}, "message.id"),
        ({"id": "x" * 257, "role": "user", "parts": []}, "at most 256"),
        ({"id": "a\x00", "role": "user", "parts": []}, "NUL"),
        ({"id": "a", "role": "user", "parts": [], "metadata": []}, "metadata"),
        ({"id": "a", "role": "user", "parts": [], "metadata": {"x": math.nan}}, "NaN"),
        ({"id": "a", "role": "user", "parts": [], "metadata": {"x": math.inf}}, "NaN"),
        ({"id": "a", "role": "user", "parts": [], "metadata": {"x": {1, 2}}}, "set"),
        ({"id": "a", "role": "user", "parts": [], "metadata": {1: "x"}}, "non-string key"),
        ({"id": "a", "role": "user", "parts": [{"type": "text", "text": "\ud800"}]}, "surrogate"),
    ],
)
def test_malformed_messages_name_the_field(message: Any, field: str) -> None:
    with pytest.raises(InvalidMessageError, match=field):
        validate_message(message)


def test_invalid_message_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        validate_message({"role": "nobody", "parts": []})


@pytest.mark.parametrize(
    "value", [object(), {1, 2}, b"bytes", {(1, 2): "tuple key"}, {"k": [Exception("x")]}]
)
def test_a_value_json_cannot_hold_is_also_a_type_error(value: Any) -> None:
    message = {"role": "user", "parts": [{"type": "data-x", "data": value}]}
    with pytest.raises(TypeError):
        json.dumps(value)  # what the standard library raises for it
    with pytest.raises(UnserialisableValueError) as caught:
        validate_message(message)
    assert isinstance(caught.value, TypeError)
    assert isinstance(caught.value, InvalidMessageError)
    assert "message.parts[0].data" in str(caught.value)


def test_nan_stays_a_value_error_only() -> None:
    message = {"role": "user", "parts": [{"type": "data-x", "data": math.nan}]}
    with pytest.raises(InvalidMessageError) as caught:
        validate_message(message)
    assert not isinstance(caught.value, TypeError)


def test_deep_nesting_is_refused() -> None:
    deep: Any = "x"
    for _ in range(100):
        deep = [deep]
    with pytest.raises(InvalidMessageError, match="nested deeper"):
        validate_message(user(metadata={"d": deep}))


def test_unknown_part_types_are_kept() -> None:
    part = {"type": "data-chart", "data": {"points": [1, 2, 3]}, "extra": None}
    m = validate_message({"id": "a", "role": "assistant", "parts": [part]})
    assert m["parts"] == [part]


def test_tuples_become_lists_and_round_trip_through_json() -> None:
    m = validate_message(user(metadata={"t": (1, 2)}))
    assert m["metadata"]["t"] == [1, 2]
    assert json.loads(dumps(m)) == m


def test_dumps_is_compact_and_keeps_unicode() -> None:
    m = validate_message({"id": "a", "role": "user", "parts": [{"type": "text", "text": "日本 é"}]})
    s = dumps(m)
    assert "日本 é" in s and ", " not in s and ": " not in s


def test_validate_id() -> None:
    assert validate_id("ok") == "ok"
    for bad in ("", None, 3, "x" * 257, "a\x00b"):
        with pytest.raises(InvalidMessageError):
            validate_id(bad)


def test_tool_part_helpers() -> None:
    static = {"type": "tool-get_status", "toolCallId": "c1"}
    dynamic = {"type": "dynamic-tool", "toolName": "search", "toolCallId": "c2"}
    assert is_tool_part(static) and is_tool_part(dynamic)
    assert not is_tool_part({"type": "text", "text": "x"})
    assert not is_tool_part({"type": 5})
    assert tool_name(static) == "get_status"
    assert tool_name(dynamic) == "search"


def test_the_compaction_id_prefix_is_reserved() -> None:
    # get_history shows overlays as virtual "compaction_<id>" messages; a stored message with
    # such an id would be indistinguishable from one.
    with pytest.raises(InvalidMessageError, match="reserved"):
        validate_message({**user(), "id": "compaction_1"})
    assert validate_message({**user(), "id": "compactions"})["id"] == "compactions"
