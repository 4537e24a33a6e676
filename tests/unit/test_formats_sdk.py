"""mindstore.formats checked against the official ``openai`` and ``anthropic`` SDKs' own types.

Requests: every converter output is validated as the SDK's request param type (strictly: no
unknown keys, every iterable consumed). Replies: JSON shaped like the
real APIs' responses is parsed with the SDK response models, then fed to ``from_*``.
A hypothesis property checks that no history ever yields an orphaned call or result.
"""

from __future__ import annotations

import base64
import functools
import itertools
import json
from typing import Any

import anthropic.types as at
import openai.types.chat as oc
import openai.types.responses as orr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from mindstore.formats import (
    from_anthropic,
    from_openai_chat,
    from_openai_responses,
    to_anthropic,
    to_openai_chat,
    to_openai_responses,
)
from mindstore.messages import validate_message


# pydantic validates the SDKs' TypedDict params lazily (Iterable fields become iterators) and
# silently ignores unknown keys: validate_param consumes every iterator and then checks that
# validation kept the value equal, so an unknown or misspelt key fails too.
@functools.cache
def _adapter(tp: Any) -> TypeAdapter[Any]:
    return TypeAdapter(tp)


def _force(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _force(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_force(v) for v in value]
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return value
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_unset=True, by_alias=True, warnings=False)
    if hasattr(value, "__iter__"):
        return [_force(v) for v in value]
    return value


def validate_param(tp: Any, value: Any) -> None:
    """Raise unless ``value`` is exactly an instance of the SDK param type ``tp``."""
    validated = _force(_adapter(tp).validate_python(value))
    assert validated == value, f"SDK type dropped or changed keys:\n{validated!r}\n!=\n{value!r}"


PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG").decode()
PDF = "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.4").decode()
TXT = "data:text/plain;base64," + base64.b64encode(b"notes").decode()
WAV = "data:audio/wav;base64," + base64.b64encode(b"RIFF").decode()

KITCHEN_SINK: list[dict[str, Any]] = [
    {"id": "s", "role": "system", "parts": [{"type": "text", "text": "Be brief."}]},
    {
        "id": "c0",
        "role": "assistant",
        "parts": [{"type": "text", "text": "## Topic\nEarlier"}],
        "metadata": {"compaction": {"id": "1", "from": "x", "to": "y"}},
    },
    {
        "id": "u1",
        "role": "user",
        "parts": [
            {"type": "text", "text": "Look at these"},
            {"type": "file", "mediaType": "image/png", "url": PNG},
            {"type": "file", "mediaType": "image/jpeg", "url": "https://x.test/a.jpg"},
            {"type": "file", "mediaType": "application/pdf", "url": PDF, "filename": "s.pdf"},
            {"type": "file", "mediaType": "application/pdf", "url": "https://x.test/d.pdf"},
            {"type": "file", "mediaType": "text/plain", "url": TXT},
            {"type": "file", "mediaType": "audio/wav", "url": WAV},
            {"type": "file", "mediaType": "application/zip", "url": "https://x.test/z.zip"},
        ],
    },
    {
        "id": "a1",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {
                "type": "reasoning",
                "text": "think",
                "providerMetadata": {
                    "openai": {"itemId": "rs_1"},
                    "anthropic": {"signature": "sig"},
                },
            },
            {"type": "reasoning", "text": "unsigned"},
            {"type": "text", "text": "Checking."},
            {
                "type": "tool-get_status",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {"env": "prod"},
                "output": {"status": "green"},
            },
            {
                "type": "dynamic-tool",
                "toolName": "search",
                "toolCallId": "c2",
                "state": "input-available",
                "input": {"q": "x"},
            },
            {
                "type": "tool-set_context",
                "toolCallId": "c3",
                "state": "output-error",
                "input": {"label": "memory"},
                "errorText": "Error: too long",
            },
            {"type": "tool-wait", "toolCallId": "c4", "state": "input-streaming"},
            {"type": "step-start"},
            {"type": "text", "text": "Done."},
            {"type": "file", "mediaType": "image/png", "url": PNG, "filename": "chart.png"},
            {"type": "source-url", "sourceId": "s1", "url": "https://x.test"},
            {"type": "data-progress", "data": {"pct": 50}},
        ],
    },
    {
        "id": "t1",
        "role": "tool",
        "parts": [
            {
                "type": "dynamic-tool",
                "toolName": "search",
                "toolCallId": "c2",
                "state": "output-available",
                "input": {"q": "x"},
                "output": ["r1", "r2"],
            }
        ],
    },
    {
        "id": "u2",
        "role": "user",
        "parts": [{"type": "text", "text": "thanks"}],
    },
    {
        "id": "a2",
        "role": "assistant",
        "parts": [
            {
                "type": "tool-load_context",
                "toolCallId": "k1",
                "state": "output-available",
                "input": {"label": "skills", "key": "api"},
                "output": "[skill unloaded: api]",
            },
            {
                "type": "tool-danger",
                "toolCallId": "k2",
                "state": "output-denied",
                "input": {},
                "approval": {"id": "ap", "approved": False},
            },
        ],
    },
]


def _validate_chat(messages: list[dict[str, Any]]) -> None:
    for m in messages:
        validate_param(oc.ChatCompletionMessageParam, m)


def _validate_responses(items: list[dict[str, Any]]) -> None:
    for item in items:
        validate_param(orr.ResponseInputItemParam, item)


def _validate_anthropic(system: str | None, messages: list[dict[str, Any]]) -> None:
    assert system is None or isinstance(system, str)
    for m in messages:
        validate_param(at.MessageParam, m)


def test_kitchen_sink_validates_against_sdk_param_types() -> None:
    for pending in ("drop", "stub"):
        _validate_chat(to_openai_chat(KITCHEN_SINK, pending=pending, system="FROZEN"))
        _validate_responses(to_openai_responses(KITCHEN_SINK, pending=pending, system="FROZEN"))
        _validate_anthropic(*to_anthropic(KITCHEN_SINK, pending=pending, system="FROZEN"))


def test_kitchen_sink_pairs_in_every_format() -> None:
    for pending in ("drop", "stub"):
        check_chat_pairing(to_openai_chat(KITCHEN_SINK, pending=pending))
        check_responses_pairing(to_openai_responses(KITCHEN_SINK, pending=pending))
        check_anthropic_pairing(to_anthropic(KITCHEN_SINK, pending=pending)[1])
    chat = to_openai_chat(KITCHEN_SINK)
    ids = [c["id"] for m in chat for c in m.get("tool_calls", [])]
    assert ids == ["c1", "c2", "c3", "k1", "k2"]  # c4 (streaming) dropped
    stub_ids = [
        c["id"]
        for m in to_openai_chat(KITCHEN_SINK, pending="stub")
        for c in m.get("tool_calls", [])
    ]
    assert stub_ids == ["c1", "c2", "c3", "c4", "k1", "k2"]


# ---------------------------------------------------------------- replies via SDK models


def test_chat_completion_parsed_by_sdk_then_converted() -> None:
    raw = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-test",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "logprobs": None,
                "message": {
                    "role": "assistant",
                    "content": "Saving that.",
                    "refusal": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {
                                "name": "set_context",
                                "arguments": '{"label": "memory", "content": "likes tea"}',
                            },
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    }
    completion = oc.ChatCompletion.model_validate(raw)
    for source in (completion, raw, completion.model_dump()):
        msg = from_openai_chat(source, id="m1")
        assert msg == {
            "id": "m1",
            "role": "assistant",
            "parts": [
                {"type": "text", "text": "Saving that."},
                {
                    "type": "tool-set_context",
                    "toolCallId": "call_1",
                    "state": "input-available",
                    "input": {"label": "memory", "content": "likes tea"},
                },
            ],
            "metadata": {
                "model": "gpt-test",
                "responseId": "chatcmpl-1",
                "finishReason": "tool_calls",
                "usage": {"inputTokens": 12, "outputTokens": 5},
            },
        }
    # a mindstore message straight back into a request
    _validate_chat(to_openai_chat([msg], pending="stub"))


def test_responses_reply_parsed_by_sdk_then_converted() -> None:
    raw = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1700000000,
        "model": "gpt-test",
        "status": "completed",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "output": [
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "Plan"}],
                "encrypted_content": "enc",
            },
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Looking.", "annotations": []}],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "search_context",
                "arguments": '{"label": "knowledge", "query": "tea"}',
                "status": "completed",
            },
        ],
        "usage": {
            "input_tokens": 20,
            "output_tokens": 7,
            "total_tokens": 27,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 3},
        },
    }
    response = orr.Response.model_validate(raw)
    msg = from_openai_responses(response, id="m1")
    assert msg["parts"] == [
        {
            "type": "reasoning",
            "text": "Plan",
            "providerMetadata": {"openai": {"itemId": "rs_1", "reasoningEncryptedContent": "enc"}},
        },
        {"type": "text", "text": "Looking."},
        {
            "type": "tool-search_context",
            "toolCallId": "call_1",
            "state": "input-available",
            "input": {"label": "knowledge", "query": "tea"},
        },
    ]
    assert msg["metadata"]["usage"] == {"inputTokens": 20, "outputTokens": 7}
    assert from_openai_responses(raw, id="m1") == msg
    items = to_openai_responses([msg], pending="stub")
    _validate_responses(items)
    assert [i.get("type") for i in items] == [
        "reasoning",
        None,
        "function_call",
        "function_call_output",
    ]


def test_anthropic_message_parsed_by_sdk_then_converted() -> None:
    raw = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [
            {"type": "thinking", "thinking": "Hmm", "signature": "sig"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "Saving.", "citations": None},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "set_context",
                "input": {"label": "memory", "content": "likes tea"},
            },
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 30, "output_tokens": 9},
    }
    message = at.Message.model_validate(raw)
    msg = from_anthropic(message, id="m1")
    assert msg["parts"] == [
        {
            "type": "reasoning",
            "text": "Hmm",
            "providerMetadata": {"anthropic": {"signature": "sig"}},
        },
        {
            "type": "reasoning",
            "text": "",
            "providerMetadata": {"anthropic": {"redactedData": "opaque"}},
        },
        {"type": "text", "text": "Saving."},
        {
            "type": "tool-set_context",
            "toolCallId": "toolu_1",
            "state": "input-available",
            "input": {"label": "memory", "content": "likes tea"},
        },
    ]
    assert msg["metadata"] == {
        "model": "claude-test",
        "responseId": "msg_1",
        "finishReason": "tool_use",
        "usage": {"inputTokens": 30, "outputTokens": 9},
    }
    assert from_anthropic(raw, id="m1") == msg
    result = {
        "id": "t1",
        "role": "tool",
        "parts": [{**msg["parts"][-1], "state": "output-available", "output": "Written"}],
    }
    system, msgs = to_anthropic(
        [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}, msg, result]
    )
    _validate_anthropic(system, msgs)
    assert msgs[1]["content"][:2] == [
        {"type": "thinking", "thinking": "Hmm", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque"},
    ]
    assert msgs[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Written"}
    ]


# ---------------------------------------------------------------- pairing invariants


def check_chat_pairing(messages: list[dict[str, Any]]) -> None:
    """Every tool_call is answered by tool messages immediately after it, and vice versa."""
    seen: set[str] = set()
    i = 0
    while i < len(messages):
        m = messages[i]
        assert m["role"] != "tool", f"orphan tool message at {i}: {m}"
        i += 1
        calls = [c["id"] for c in m.get("tool_calls", [])]
        assert len(calls) == len(set(calls)) and not (set(calls) & seen)
        seen |= set(calls)
        answered = []
        while i < len(messages) and messages[i]["role"] == "tool":
            answered.append(messages[i]["tool_call_id"])
            i += 1
        assert answered == calls, f"calls {calls} answered by {answered}"


def check_responses_pairing(items: list[dict[str, Any]]) -> None:
    calls: list[str] = []
    outputs: list[str] = []
    for item in items:
        if item.get("type") == "function_call":
            calls.append(item["call_id"])
        elif item.get("type") == "function_call_output":
            assert item["call_id"] in calls, f"output before/without its call: {item}"
            outputs.append(item["call_id"])
    assert sorted(calls) == sorted(outputs) and len(set(calls)) == len(calls)
    for i, item in enumerate(items):
        if item.get("type") == "reasoning":
            assert i + 1 < len(items) and items[i + 1].get("type") != "function_call_output"


def check_anthropic_pairing(messages: list[dict[str, Any]]) -> None:
    roles = [m["role"] for m in messages]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles
    seen: set[str] = set()
    for i, m in enumerate(messages):
        assert m["content"], f"empty turn {i}"
        uses = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in m["content"] if b["type"] == "tool_result"]
        assert m["role"] == "assistant" or not uses
        assert m["role"] == "user" or not results
        assert not (set(uses) & seen)
        seen |= set(uses)
        if results:
            prev = messages[i - 1] if i else {"content": []}
            prev_uses = [b["id"] for b in prev["content"] if b["type"] == "tool_use"]
            assert results == prev_uses, f"results {results} do not answer {prev_uses}"
            n = len(results)
            assert all(b["type"] == "tool_result" for b in m["content"][:n])
        if uses:
            nxt = messages[i + 1] if i + 1 < len(messages) else {"content": []}
            nxt_results = [b["tool_use_id"] for b in nxt["content"] if b["type"] == "tool_result"]
            assert nxt_results == uses
        for b in m["content"]:
            if b["type"] == "text":
                assert b["text"].strip()


CALL_IDS = st.sampled_from(["c1", "c2", "c3", "c4"])
STATES = st.sampled_from(
    [
        "input-streaming",
        "input-available",
        "approval-requested",
        "output-available",
        "output-error",
        "output-denied",
        None,
    ]
)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=5,
)


@st.composite
def tool_parts(draw: st.DrawFn) -> dict[str, Any]:
    part: dict[str, Any] = {"toolCallId": draw(CALL_IDS)}
    if draw(st.booleans()):
        part["type"] = "tool-" + draw(st.sampled_from(["a", "set_context", "b_c"]))
    else:
        part["type"] = "dynamic-tool"
        part["toolName"] = draw(st.sampled_from(["x", "mcp.y"]))
    state = draw(STATES)
    if state is not None:
        part["state"] = state
    if draw(st.booleans()):
        part["input"] = draw(JSONISH)
    if state == "output-available":
        part["output"] = draw(JSONISH)
    if state == "output-error" and draw(st.booleans()):
        part["errorText"] = draw(st.text(max_size=5))
    return part


OTHER_PARTS = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=6)),
    st.builds(lambda t: {"type": "reasoning", "text": t}, st.text(max_size=6)),
    st.just({"type": "step-start"}),
    st.just({"type": "file", "mediaType": "image/png", "url": PNG}),
    st.just({"type": "data-x", "data": 1}),
)


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages = []
    for i in range(draw(st.integers(0, 8))):
        role = draw(st.sampled_from(["system", "user", "assistant", "assistant", "tool"]))
        parts = draw(st.lists(st.one_of(tool_parts(), OTHER_PARTS), max_size=5))
        message: dict[str, Any] = {"id": f"m{i}", "role": role, "parts": parts}
        if role == "assistant" and draw(st.integers(0, 9)) == 0:
            message["metadata"] = {"compaction": {"id": "x", "from": "a", "to": "b"}}
        messages.append(validate_message(message))
    return messages


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.sampled_from(["drop", "stub"]))
def test_no_history_yields_an_orphaned_call_or_result(
    history: list[dict[str, Any]], pending: str
) -> None:
    chat = to_openai_chat(history, pending=pending)
    check_chat_pairing(chat)
    items = to_openai_responses(history, pending=pending)
    check_responses_pairing(items)
    system, msgs = to_anthropic(history, pending=pending)
    check_anthropic_pairing(msgs)
    # Everything stays valid JSON and valid for the SDK types.
    json.dumps([chat, items, msgs])
    _validate_chat(chat)
    _validate_responses(items)
    _validate_anthropic(system, msgs)
