"""Session resource URIs and the history text of the MCP server (pure helpers)."""

from __future__ import annotations

import pytest

from mindstore.integrations.mcp_history import (
    format_history,
    history_uri,
    parse_session_uri,
    session_uri,
)


@pytest.mark.parametrize("session_id", ["desk", "a/b", "é ü", "x%2Fy", "../up", "s?q#f"])
def test_any_session_id_round_trips_as_one_path_segment(session_id: str) -> None:
    assert parse_session_uri(session_uri(session_id)) == (session_id, False)
    assert parse_session_uri(history_uri(session_id)) == (session_id, True)
    assert "/" not in session_uri(session_id).removeprefix("mindstore://sessions/")


@pytest.mark.parametrize(
    "uri",
    [
        "mindstore://sessions/",
        "mindstore://sessions//history",
        "mindstore://sessions/a/b",
        "mindstore://sessions/a/history/x",
        "mindstore://prompt",
        "file:///etc/passwd",
    ],
)
def test_other_uris_are_not_session_resources(uri: str) -> None:
    assert parse_session_uri(uri) is None


def test_history_text() -> None:
    messages = [
        {"id": "1", "role": "user", "parts": [{"type": "text", "text": "hi"}]},
        {
            "id": "2",
            "role": "assistant",
            "parts": [
                {"type": "tool-get_weather", "toolCallId": "c", "state": "output-available"},
                {"type": "text", "text": "Sunny."},
            ],
        },
    ]
    assert format_history(messages) == "[user] hi\n---\n[assistant] (tool get_weather)\nSunny."
    assert format_history([]) == "No messages yet."
