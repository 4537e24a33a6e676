"""The strict schemas the framework adapters send (mindstore.integrations._tool_bridge)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mindstore.context.tooling import (
    load_context_tool_spec,
    search_context_tool_spec,
    set_context_tool_spec,
)
from mindstore.integrations._tool_bridge import decode_strict_arguments, drop_nulls, strict_schema
from mindstore.session_search import SEARCH_MODE_PARAMETER
from mindstore.tools import _check_arguments

BLOCKS: Any = [("memory", "writable", "Facts", 100), ("kb", "searchable", None, None)]
SCHEMAS = [
    set_context_tool_spec(BLOCKS)[1],
    load_context_tool_spec([("skills", "loadable", None, None)])[1],
    search_context_tool_spec([("kb", "searchable", None, None)])[1],
    {
        "type": "object",
        "properties": {"query": {"type": "string"}, "mode": SEARCH_MODE_PARAMETER},
        "required": ["query"],
    },
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_the_strict_form_is_what_the_agents_sdk_accepts_unchanged(schema: dict[str, Any]) -> None:
    strict_json = pytest.importorskip("agents.strict_schema")
    original = copy.deepcopy(schema)
    strict = strict_schema(schema)
    assert schema == original  # not mutated
    assert strict_json.ensure_strict_json_schema(copy.deepcopy(strict)) == strict


def test_optional_arguments_become_nullable_and_required() -> None:
    strict = strict_schema(SCHEMAS[0])
    assert strict["required"] == ["label", "content", "action", "metadata"]
    assert strict["properties"]["label"]["type"] == "string"  # required: not nullable
    assert strict["properties"]["action"]["type"] == ["string", "null"]
    assert strict["properties"]["action"]["enum"] == ["replace", "append", None]
    meta = strict["properties"]["metadata"]
    assert meta["type"] == ["object", "null"] and meta["additionalProperties"] is False
    assert meta["properties"]["title"]["type"] == ["string", "null"]


def test_a_strict_call_checks_like_the_original_call_after_drop_nulls() -> None:
    call = {
        "label": "kb",
        "content": "x",
        "action": None,
        "metadata": {"title": "T", "description": None},
    }
    args = decode_strict_arguments(call)
    assert args == {"label": "kb", "content": "x", "metadata": {"title": "T"}}
    assert _check_arguments(SCHEMAS[0], args) is None
    # a required argument sent as null is reported missing
    missing = decode_strict_arguments('{"label": "kb", "content": null}')
    assert _check_arguments(SCHEMAS[0], missing) == "missing required argument 'content'"


@pytest.mark.parametrize("raw", ["not json", "[1, 2]", '"text"'])
def test_arguments_that_are_no_object_pass_through_for_execute_to_refuse(raw: str) -> None:
    assert decode_strict_arguments(raw) == raw


def test_drop_nulls_goes_into_lists() -> None:
    assert drop_nulls([{"a": None, "b": 1}, None]) == [{"b": 1}, None]
    assert decode_strict_arguments("") == {}
