"""Whole-history converters (``from_*_messages``) and reply converters that never change roles.

Every history fed in is first validated as the official SDK's request param type, so the tests
use real API shapes; round trips are checked on the output of the ``to_*`` converters for the
kitchen-sink history of ``test_formats_sdk``.
"""

from __future__ import annotations

from typing import Any

import openai.types.responses as orr
import pytest
from test_formats_sdk import (
    KITCHEN_SINK,
    _validate_anthropic,
    _validate_chat,
    _validate_responses,
)

import mindstore
from mindstore.errors import InvalidMessageError
from mindstore.formats import (
    from_anthropic,
    from_anthropic_messages,
    from_openai_chat,
    from_openai_chat_messages,
    from_openai_responses,
    from_openai_responses_items,
    to_anthropic,
    to_openai_chat,
    to_openai_responses,
)

# ---------------------------------------------------------------- reply converters: no role change


@pytest.mark.parametrize("role", ["user", "system", "developer", "tool"])
def test_from_openai_chat_refuses_a_non_assistant_message(role: str) -> None:
    with pytest.raises(InvalidMessageError, match="from_openai_chat_messages"):
        from_openai_chat({"role": role, "content": "hi"})


@pytest.mark.parametrize(
    "item",
    [
        {"role": "user", "content": "hi"},
        {"type": "message", "role": "developer", "content": "be brief"},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
        {"type": "computer_call_output", "call_id": "c1", "output": {}},
    ],
)
def test_from_openai_responses_refuses_input_items(item: dict[str, Any]) -> None:
    with pytest.raises(InvalidMessageError, match="from_openai_responses_items"):
        from_openai_responses([item])


def test_from_anthropic_refuses_user_turns_and_tool_results() -> None:
    with pytest.raises(InvalidMessageError, match="from_anthropic_messages"):
        from_anthropic({"role": "user", "content": "hi"})
    result = {"type": "tool_result", "tool_use_id": "t", "content": "x"}
    with pytest.raises(InvalidMessageError, match="from_anthropic_messages"):
        from_anthropic({"content": [result]})


def test_exported_from_the_package_root() -> None:
    assert mindstore.from_openai_chat_messages is from_openai_chat_messages
    assert mindstore.from_openai_responses_items is from_openai_responses_items
    assert mindstore.from_anthropic_messages is from_anthropic_messages


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("pending", ["drop", "stub"])
def test_openai_chat_round_trip(pending: str) -> None:
    sent = to_openai_chat(KITCHEN_SINK, pending=pending, system="FROZEN")
    _validate_chat(sent)
    back = from_openai_chat_messages(sent)
    assert [m["role"] for m in back][:3] == ["system", "system", "user"]
    assert to_openai_chat(back, pending=pending) == sent


@pytest.mark.parametrize("pending", ["drop", "stub"])
def test_openai_responses_round_trip(pending: str) -> None:
    sent = to_openai_responses(KITCHEN_SINK, pending=pending, system="FROZEN")
    _validate_responses(sent)
    back = from_openai_responses_items(sent)
    assert to_openai_responses(back, pending=pending) == sent


@pytest.mark.parametrize("pending", ["drop", "stub"])
def test_anthropic_round_trip(pending: str) -> None:
    system, sent = to_anthropic(KITCHEN_SINK, pending=pending, system="FROZEN")
    _validate_anthropic(system, sent)
    back = from_anthropic_messages(sent, system=system)
    assert to_anthropic(back, pending=pending) == (system, sent)


def test_user_turns_stay_user_turns_and_results_join_their_calls() -> None:
    chat = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
    ]
    _validate_chat(chat)
    user, assistant = from_openai_chat_messages(chat)
    assert user["role"] == "user" and user["parts"] == [{"type": "text", "text": "hi"}]
    assert assistant["parts"] == [
        {
            "type": "tool-f",
            "toolCallId": "c1",
            "state": "output-available",
            "input": {},
            "output": "42",
        }
    ]
    items = [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
    ]
    _validate_responses(items)
    user, assistant = from_openai_responses_items(items)
    assert user["role"] == "user"
    assert assistant["parts"][0]["output"] == "42"  # the output is not dropped


def test_developer_role_is_a_system_message() -> None:
    chat = [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    _validate_chat(chat)
    assert [m["role"] for m in from_openai_chat_messages(chat)] == ["system", "user"]
    items = [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    _validate_responses(items)
    back = from_openai_responses_items(items)
    assert [m["role"] for m in back] == ["system", "user"]
    assert to_openai_responses(back)[0] == {"role": "system", "content": "Be brief."}


def test_responses_interleaved_calls_keep_their_order() -> None:
    items = [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": '{"n": 1}'},
        {"type": "function_call_output", "call_id": "a", "output": "1"},
        {"type": "function_call", "call_id": "b", "name": "f", "arguments": '{"n": 2}'},
        {"type": "function_call_output", "call_id": "b", "output": "2"},
        {"role": "assistant", "content": "done"},
    ]
    _validate_responses(items)
    back = from_openai_responses_items(items)
    assert len(back) == 2
    assert to_openai_responses(back) == items


def test_responses_builtin_tool_items_are_kept_but_not_sent_again() -> None:
    response = orr.Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "gpt-test",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                {
                    "type": "web_search_call",
                    "id": "ws_1",
                    "status": "completed",
                    "action": {"type": "search", "query": "paris weather"},
                },
                {
                    "type": "file_search_call",
                    "id": "fs_1",
                    "status": "completed",
                    "queries": ["q"],
                    "results": None,
                },
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}],
                },
            ],
        }
    )
    items = [{"role": "user", "content": "weather?"}, *response.output]
    (user, assistant) = from_openai_responses_items(items)
    web, files, text = assistant["parts"]
    assert web["type"] == "tool-web_search" and web["providerExecuted"] is True
    assert web["input"]["query"] == "paris weather" and web["output"]["status"] == "completed"
    assert files["type"] == "tool-file_search" and files["input"] == ["q"]
    assert text == {"type": "text", "text": "Sunny."}
    assert to_openai_responses([user, assistant]) == [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "Sunny."},
    ]
    assert to_openai_chat([user, assistant])[1] == {"role": "assistant", "content": "Sunny."}


def test_anthropic_error_results_become_output_error() -> None:
    msgs = [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": True}
            ],
        },
    ]
    _validate_anthropic(None, msgs)
    back = from_anthropic_messages(msgs)
    assert [m["role"] for m in back] == ["user", "assistant"]
    assert back[1]["parts"][0]["state"] == "output-error"
    assert back[1]["parts"][0]["errorText"] == "boom"
    assert to_anthropic(back) == (None, msgs)


@pytest.mark.parametrize(
    ("convert", "history", "match"),
    [
        (from_openai_chat_messages, [{"role": "tool", "tool_call_id": "x", "content": "1"}], "x"),
        (from_openai_chat_messages, [{"role": "function", "name": "f", "content": "1"}], "role"),
        (from_openai_chat_messages, [{"role": "user", "content": 3}], r"messages\[0\].content"),
        (from_openai_chat_messages, {"role": "user", "content": "hi"}, "must be a list"),
        (from_openai_chat_messages, ["hi"], r"messages\[0\]"),
        (
            from_openai_responses_items,
            [{"type": "function_call_output", "call_id": "x", "output": "1"}],
            "no earlier",
        ),
        (from_openai_responses_items, [{"type": "bogus"}], "bogus"),
        (from_anthropic_messages, [{"role": "system", "content": "x"}], "role"),
        (
            from_anthropic_messages,
            [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}],
            "no earlier",
        ),
    ],
)
def test_malformed_histories_raise_naming_the_entry(convert: Any, history: Any, match: str) -> None:
    with pytest.raises(InvalidMessageError, match=match):
        convert(history)
