"""mindstore.formats: conversion behaviour and round trips for every format and part type."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from mindstore.errors import InvalidMessageError
from mindstore.formats import (
    PENDING_STUB,
    SUMMARY_PREFIX,
    from_anthropic,
    from_openai_chat,
    from_openai_responses,
    to_anthropic,
    to_openai_chat,
    to_openai_responses,
)

PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG fake").decode()
PDF = "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.4 fake").decode()
TXT = "data:text/plain;base64," + base64.b64encode("héllo notes".encode()).decode()
WAV = "data:audio/wav;base64," + base64.b64encode(b"RIFF fake").decode()


def user(text: str, mid: str = "u", **extra: Any) -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}], **extra}


def call(
    cid: str, name: str = "get_status", state: str = "input-available", **extra: Any
) -> dict[str, Any]:
    return {
        "type": f"tool-{name}",
        "toolCallId": cid,
        "state": state,
        "input": {"env": "prod"},
        **extra,
    }


def assistant(*parts: dict[str, Any], mid: str = "a") -> dict[str, Any]:
    return {"id": mid, "role": "assistant", "parts": list(parts)}


# ---------------------------------------------------------------- pairing: OpenAI chat


def test_chat_call_and_output_in_one_part_become_tool_calls_plus_tool_message() -> None:
    history = [
        user("status?"),
        assistant(
            {"type": "text", "text": "Checking..."},
            call("c1", state="output-available", output={"status": "green"}),
        ),
    ]
    assert to_openai_chat(history) == [
        {"role": "user", "content": "status?"},
        {
            "role": "assistant",
            "content": "Checking...",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_status", "arguments": '{"env": "prod"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"status": "green"}'},
    ]


def test_result_in_a_later_tool_message_is_moved_right_after_its_call() -> None:
    history = [
        user("go"),
        assistant(call("c1"), call("c2", name="search"), mid="a1"),
        user("(meanwhile) hurry", mid="u2"),
        {
            "id": "t1",
            "role": "tool",
            "parts": [
                call("c2", name="search", state="output-available", output="found"),
                call("c1", state="output-error", errorText="Error: timeout"),
            ],
        },
    ]
    out = to_openai_chat(history)
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "tool", "user"]
    assert [c["id"] for c in out[1]["tool_calls"]] == ["c1", "c2"]
    assert out[2] == {"role": "tool", "tool_call_id": "c1", "content": "Error: timeout"}
    assert out[3] == {"role": "tool", "tool_call_id": "c2", "content": "found"}
    assert out[1]["content"] is None


def test_pending_calls_are_dropped_or_stubbed_never_orphaned() -> None:
    history = [
        user("go"),
        assistant(
            {"type": "text", "text": "Let me look."},
            call("c1"),
            call("c2", state="input-streaming"),
            call("c3", state="approval-requested"),
        ),
    ]
    dropped = to_openai_chat(history)
    assert dropped[-1] == {"role": "assistant", "content": "Let me look."}
    stubbed = to_openai_chat(history, pending="stub")
    assert [c["id"] for c in stubbed[1]["tool_calls"]] == ["c1", "c2", "c3"]
    assert [m.get("tool_call_id") for m in stubbed[2:]] == ["c1", "c2", "c3"]
    assert all(m["content"] == PENDING_STUB for m in stubbed[2:])

    only_call = [user("go"), assistant(call("c1"))]
    assert to_openai_chat(only_call) == [{"role": "user", "content": "go"}]
    _, anthropic_msgs = to_anthropic(only_call)
    assert anthropic_msgs == [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    assert to_openai_responses(only_call) == [{"role": "user", "content": "go"}]


def test_bad_pending_value_is_rejected() -> None:
    with pytest.raises(ValueError, match="pending"):
        to_openai_chat([], pending="keep")


def test_orphan_results_and_duplicate_calls_are_not_sent() -> None:
    history = [
        user("go"),
        {"id": "t0", "role": "tool", "parts": [call("ghost", state="output-available", output=1)]},
        assistant(call("c1", state="output-available", output="one"), mid="a1"),
        # A later assistant part reusing c1 is neither a second call nor a second result.
        assistant(call("c1", state="output-available", output="two"), mid="a2"),
    ]
    for convert in (to_openai_chat, to_openai_responses, lambda h: to_anthropic(h)[1]):
        dumped = json.dumps(convert(history))
        assert "ghost" not in dumped
        assert '"two"' not in dumped and dumped.count('"one"') <= 1


def test_output_error_and_denied_and_non_string_outputs() -> None:
    history = [
        user("go"),
        assistant(
            call("c1", state="output-error", errorText="boom"),
            call("c2", state="output-denied", approval={"id": "x", "reason": "not allowed"}),
            call("c3", state="output-available", output=[1, {"a": "é"}]),
            call("c4", state="output-available", output=None),
        ),
    ]
    tools = to_openai_chat(history)[2:]
    assert [t["content"] for t in tools] == [
        "boom",
        "Error: the tool call was denied. not allowed",
        '[1, {"a": "é"}]',
        "",
    ]
    _, msgs = to_anthropic(history)
    results = msgs[-1]["content"]
    assert [r.get("is_error", False) for r in results] == [True, True, False, False]
    items = to_openai_responses(history)
    outputs = [i["output"] for i in items if i.get("type") == "function_call_output"]
    assert outputs[2] == '[1, {"a": "é"}]'


def test_dynamic_tool_parts_use_tool_name() -> None:
    part = {
        "type": "dynamic-tool",
        "toolName": "mcp.search",
        "toolCallId": "d1",
        "state": "output-available",
        "input": {"q": "x"},
        "output": "hit",
    }
    out = to_openai_chat([user("q"), assistant(part)])
    assert out[1]["tool_calls"][0]["function"]["name"] == "mcp.search"
    _, msgs = to_anthropic([user("q"), assistant(part)])
    assert msgs[1]["content"][0]["name"] == "mcp.search"


def test_multi_step_assistant_message_is_split_at_steps() -> None:
    history = [
        user("go"),
        assistant(
            {"type": "step-start"},
            {"type": "text", "text": "first"},
            call("c1", state="output-available", output="r1"),
            {"type": "step-start"},
            {"type": "text", "text": "second"},
            call("c2", state="output-available", output="r2"),
            {"type": "text", "text": "done"},
        ),
    ]
    out = to_openai_chat(history)
    assert [(m["role"], m.get("content")) for m in out] == [
        ("user", "go"),
        ("assistant", "first"),
        ("tool", "r1"),
        ("assistant", "second"),
        ("tool", "r2"),
        ("assistant", "done"),
    ]
    _, msgs = to_anthropic(history)
    assert [m["role"] for m in msgs] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert msgs[2]["content"][0]["type"] == "tool_result"


# ---------------------------------------------------------------- system, overlays, skills


def test_system_messages_and_system_argument() -> None:
    history = [
        {"id": "s", "role": "system", "parts": [{"type": "text", "text": "Be brief."}]},
        user("hi"),
    ]
    assert to_openai_chat(history, system="FROZEN") == [
        {"role": "system", "content": "FROZEN"},
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    system, msgs = to_anthropic(history, system="FROZEN")
    assert system == "FROZEN\n\nBe brief."
    assert msgs == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert to_anthropic([user("hi")])[0] is None
    assert to_openai_responses(history)[0] == {"role": "system", "content": "Be brief."}


def test_compaction_overlay_is_a_user_summary_turn() -> None:
    overlay = {
        "id": "compaction_1",
        "role": "assistant",
        "parts": [{"type": "text", "text": "## Topic\nDeploys"}],
        "metadata": {"compaction": {"id": "1", "from": "u0", "to": "a0"}},
    }
    history = [overlay, user("and now?")]
    assert to_openai_chat(history) == [
        {"role": "user", "content": SUMMARY_PREFIX + "## Topic\nDeploys"},
        {"role": "user", "content": "and now?"},
    ]
    _, msgs = to_anthropic(history)
    # Anthropic: the summary may start the conversation, and same-role turns are merged.
    assert msgs == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": SUMMARY_PREFIX + "## Topic\nDeploys"},
                {"type": "text", "text": "and now?"},
            ],
        }
    ]


def test_unloaded_skill_result_stays_paired_as_its_marker() -> None:
    history = [
        user("load it"),
        assistant(
            {
                "type": "tool-load_context",
                "toolCallId": "k1",
                "state": "output-available",
                "input": {"label": "skills", "key": "api-ref"},
                "output": "[skill unloaded: api-ref]",
            }
        ),
    ]
    out = to_openai_chat(history)
    assert out[-1] == {"role": "tool", "tool_call_id": "k1", "content": "[skill unloaded: api-ref]"}
    _, msgs = to_anthropic(history)
    assert msgs[-1]["content"][0]["content"] == "[skill unloaded: api-ref]"


def test_anthropic_merges_same_role_turns_and_drops_blank_text() -> None:
    history = [
        user("one", mid="u1"),
        user("two", mid="u2"),
        assistant({"type": "text", "text": "  "}, mid="a1"),
        assistant({"type": "text", "text": "three"}, mid="a2"),
        assistant({"type": "reasoning", "text": "unsigned thoughts"}, mid="a3"),
        user("four", mid="u3"),
    ]
    _, msgs = to_anthropic(history)
    assert msgs == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "three"}]},
        {"role": "user", "content": [{"type": "text", "text": "four"}]},
    ]


def test_tool_role_text_is_sent_as_user_text() -> None:
    history = [{"id": "t", "role": "tool", "parts": [{"type": "text", "text": "note"}]}]
    assert to_openai_chat(history) == [{"role": "user", "content": "note"}]


def test_invalid_messages_raise() -> None:
    with pytest.raises(InvalidMessageError, match="role"):
        to_openai_chat([{"role": "robot", "parts": []}])
    with pytest.raises(InvalidMessageError, match="dict"):
        to_anthropic(["hello"])  # type: ignore[list-item]


# ---------------------------------------------------------------- files


def file(url: str, media_type: str, filename: str | None = None) -> dict[str, Any]:
    part = {"type": "file", "mediaType": media_type, "url": url}
    if filename:
        part["filename"] = filename
    return part


def test_files_to_openai_chat() -> None:
    msg = {
        "id": "u",
        "role": "user",
        "parts": [
            {"type": "text", "text": "look"},
            file(PNG, "image/png"),
            file("https://x.test/cat.jpg", "image/jpeg"),
            file(PDF, "application/pdf", "spec.pdf"),
            file(TXT, "text/plain"),
            file(WAV, "audio/wav"),
            file("https://x.test/a.zip", "application/zip"),
        ],
    }
    (out,) = to_openai_chat([msg])
    assert out["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": PNG}},
        {"type": "image_url", "image_url": {"url": "https://x.test/cat.jpg"}},
        {"type": "file", "file": {"file_data": PDF, "filename": "spec.pdf"}},
        {"type": "text", "text": "héllo notes"},
        {"type": "input_audio", "input_audio": {"data": WAV.split(",")[1], "format": "wav"}},
        {"type": "text", "text": "[file: https://x.test/a.zip (application/zip)]"},
    ]


def test_files_to_openai_responses() -> None:
    msg = {
        "id": "u",
        "role": "user",
        "parts": [
            file(PNG, "image/png"),
            file(PDF, "application/pdf"),
            file("https://x.test/doc.pdf", "application/pdf"),
            file(TXT, "text/plain"),
        ],
    }
    (out,) = to_openai_responses([msg])
    assert out["content"] == [
        {"type": "input_image", "image_url": PNG, "detail": "auto"},
        {"type": "input_file", "file_data": PDF, "filename": "file"},
        {"type": "input_file", "file_url": "https://x.test/doc.pdf"},
        {"type": "input_text", "text": "héllo notes"},
    ]


def test_files_to_anthropic_use_base64_sources_for_data_urls() -> None:
    msg = {
        "id": "u",
        "role": "user",
        "parts": [
            file(PNG, "image/png"),
            file("https://x.test/cat.jpg", "image/jpeg"),
            file(PDF, "application/pdf", "spec.pdf"),
            file("https://x.test/doc.pdf", "application/pdf"),
            file(TXT, "text/plain", "notes.txt"),
            file("data:image/bmp;base64,AAAA", "image/bmp", "old.bmp"),
            file("data:,hello%20world", "text/plain"),
        ],
    }
    _, (out,) = to_anthropic([msg])
    assert out["content"] == [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": PNG.split(",")[1]},
        },
        {"type": "image", "source": {"type": "url", "url": "https://x.test/cat.jpg"}},
        {
            "type": "document",
            "source": {
                "type": "base64",
                "media_type": "application/pdf",
                "data": PDF.split(",")[1],
            },
            "title": "spec.pdf",
        },
        {"type": "document", "source": {"type": "url", "url": "https://x.test/doc.pdf"}},
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "héllo notes"},
            "title": "notes.txt",
        },
        {"type": "text", "text": "[file: old.bmp (image/bmp)]"},
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "hello world"},
        },
    ]


def test_assistant_files_become_text_references() -> None:
    history = [user("draw"), assistant(file(PNG, "image/png", "cat.png"))]
    assert to_openai_chat(history)[-1] == {
        "role": "assistant",
        "content": "[file: cat.png (image/png)]",
    }
    assert to_anthropic(history)[1][-1]["content"] == [
        {"type": "text", "text": "[file: cat.png (image/png)]"}
    ]


# ---------------------------------------------------------------- round trips (reply shapes)


ASSISTANT_PARTS: list[dict[str, Any]] = [
    {"type": "text", "text": "Checking two things."},
    {
        "type": "tool-get_status",
        "toolCallId": "c1",
        "state": "input-available",
        "input": {"env": "prod", "n": [1, 2.5, None, True]},
    },
    {
        "type": "tool-search_context",
        "toolCallId": "c2",
        "state": "input-available",
        "input": {"label": "knowledge", "query": "dark mode"},
    },
]


def _strip(message: dict[str, Any]) -> list[dict[str, Any]]:
    return message["parts"]


def test_round_trip_openai_chat() -> None:
    msg = assistant(*ASSISTANT_PARTS)
    sent = to_openai_chat([user("go"), msg], pending="stub")[1]
    assert _strip(from_openai_chat(sent)) == ASSISTANT_PARTS
    # several text parts survive as several parts
    multi = assistant({"type": "text", "text": "a"}, {"type": "text", "text": "b"})
    assert _strip(from_openai_chat(to_openai_chat([multi])[0])) == multi["parts"]


def test_round_trip_openai_responses_with_reasoning() -> None:
    reasoning = {
        "type": "reasoning",
        "text": "Thinking about it",
        "providerMetadata": {"openai": {"itemId": "rs_1", "reasoningEncryptedContent": "enc"}},
    }
    msg = assistant(reasoning, *ASSISTANT_PARTS)
    items = [
        i
        for i in to_openai_responses([msg], pending="stub")
        if i.get("type") != "function_call_output"
    ]
    assert items[0] == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Thinking about it"}],
        "encrypted_content": "enc",
    }
    assert _strip(from_openai_responses(items)) == [reasoning, *ASSISTANT_PARTS]


def test_round_trip_anthropic_with_thinking() -> None:
    thinking = {
        "type": "reasoning",
        "text": "Let me think",
        "providerMetadata": {"anthropic": {"signature": "sig=="}},
    }
    redacted = {
        "type": "reasoning",
        "text": "",
        "providerMetadata": {"anthropic": {"redactedData": "opaque"}},
    }
    msg = assistant(thinking, redacted, *ASSISTANT_PARTS)
    _, msgs = to_anthropic([user("go"), msg], pending="stub")
    assert msgs[1]["content"][:2] == [
        {"type": "thinking", "thinking": "Let me think", "signature": "sig=="},
        {"type": "redacted_thinking", "data": "opaque"},
    ]
    assert _strip(from_anthropic(msgs[1])) == [thinking, redacted, *ASSISTANT_PARTS]


@pytest.mark.parametrize("dynamic", [False, True])
def test_from_replies_dynamic_option(dynamic: bool) -> None:
    reply = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c9", "type": "function", "function": {"name": "x", "arguments": "{}"}}
        ],
    }
    (part,) = from_openai_chat(reply, dynamic=dynamic)["parts"]
    if dynamic:
        assert part == {
            "type": "dynamic-tool",
            "toolName": "x",
            "toolCallId": "c9",
            "state": "input-available",
            "input": {},
        }
    else:
        assert part["type"] == "tool-x"


def test_from_openai_chat_keeps_invalid_arguments_raw_and_reads_reasoning_content() -> None:
    reply = {
        "role": "assistant",
        "content": "hm",
        "reasoning_content": "why",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{oops"}}
        ],
    }
    msg = from_openai_chat(reply, id="fixed")
    assert msg["id"] == "fixed"
    assert msg["parts"][0] == {"type": "reasoning", "text": "why"}
    assert msg["parts"][2]["input"] == "{oops"
    # the raw string goes back out unchanged rather than double-encoded
    out = to_openai_chat([msg], pending="stub")
    assert out[0]["tool_calls"][0]["function"]["arguments"] == "{oops"
    _, msgs = to_anthropic([user("x"), msg], pending="stub")
    assert msgs[1]["content"][-1]["input"] == {"input": "{oops"}


def test_from_rejects_non_dicts() -> None:
    with pytest.raises(InvalidMessageError):
        from_openai_chat("nope")
    with pytest.raises(InvalidMessageError):
        from_anthropic({"content": 3})
    with pytest.raises(InvalidMessageError, match="choice"):
        from_openai_chat({"choices": []})


DYNAMIC_PARTS: list[dict[str, Any]] = [
    {"type": "text", "text": "Using MCP."},
    {
        "type": "dynamic-tool",
        "toolName": "mcp_search",
        "toolCallId": "d1",
        "state": "input-available",
        "input": {"q": "x"},
    },
]


def test_round_trip_dynamic_tool_parts_in_every_format() -> None:
    msg = assistant(*DYNAMIC_PARTS)
    chat = to_openai_chat([msg], pending="stub")[0]
    assert from_openai_chat(chat, dynamic=True)["parts"] == DYNAMIC_PARTS
    items = to_openai_responses([msg], pending="stub")[:-1]
    assert from_openai_responses(items, dynamic=True)["parts"] == DYNAMIC_PARTS
    _, msgs = to_anthropic([user("go"), msg], pending="stub")
    assert from_anthropic(msgs[1], dynamic=True)["parts"] == DYNAMIC_PARTS


def test_from_openai_chat_skips_empty_content_next_to_tool_calls() -> None:
    reply = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": ""}}],
    }
    assert from_openai_chat(reply)["parts"] == [
        {"type": "tool-f", "toolCallId": "c", "state": "input-available", "input": {}}
    ]


def test_from_openai_responses_reads_refusals_and_skips_builtin_tool_items() -> None:
    items = [
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "refusal", "refusal": "I can't help with that."}],
        },
    ]
    assert from_openai_responses(items)["parts"] == [
        {"type": "text", "text": "I can't help with that."}
    ]
