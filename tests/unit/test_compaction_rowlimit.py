"""enforce_row_limit: never rejects, never over the limit, records what was shrunk."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mindstore.compaction.rowlimit import enforce_row_limit, message_bytes
from mindstore.messages import validate_message

LIMIT = 1_800_000


def check(msg: dict[str, Any], limit: int = LIMIT) -> dict[str, Any]:
    msg = validate_message(msg)
    before = copy.deepcopy(msg)
    out = enforce_row_limit(msg, limit)
    assert msg == before
    assert message_bytes(out) <= limit
    validate_message(out)
    return out


def test_small_message_unchanged_same_object() -> None:
    msg = validate_message({"id": "a", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
    assert enforce_row_limit(msg, LIMIT) is msg


def test_giant_tool_output_shrunk_first_shape_kept() -> None:
    out = check(
        {
            "id": "t",
            "role": "assistant",
            "parts": [
                {"type": "text", "text": "t" * 100_000},
                {
                    "type": "tool-read",
                    "toolCallId": "c",
                    "state": "output-available",
                    "input": {"path": "/x"},
                    "output": {"content": "x" * 2_000_000, "size": 2_000_000},
                },
            ],
        }
    )
    part = out["parts"][1]
    assert set(part["output"]) == {"content", "size", "__truncated"}
    assert part["output"]["size"] == 2_000_000
    assert "re-run the tool" in part["output"]["__truncated"]
    assert len(part["output"]["content"]) < 1_100
    assert out["parts"][0]["text"] == "t" * 100_000  # text untouched: output alone was enough
    record = out["metadata"]["mindstore"]["truncated"]
    assert record == [{"part": 1, "field": "output", "chars": record[0]["chars"]}]
    assert record[0]["chars"] > 2_000_000
    assert out["metadata"]["mindstore"]["original_bytes"] > LIMIT


def test_giant_text_becomes_stub() -> None:
    body = "é" * 2_000_000  # 4 MB of UTF-8
    out = check(
        {
            "id": "u",
            "role": "user",
            "parts": [{"type": "text", "text": body}],
            "metadata": {"keep": 1},
        }
    )
    text = out["parts"][0]["text"]
    assert text == f"[Text truncated for storage (2000000 chars). First 500 chars: {'é' * 500}]"
    assert out["metadata"]["keep"] == 1
    assert out["metadata"]["mindstore"]["truncated"][0]["field"] == "text"


def test_giant_input_unknown_part_and_metadata() -> None:
    check(
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool-w",
                    "toolCallId": "c",
                    "state": "input-available",
                    "input": ["a" * 2_000_000],
                }
            ],
        }
    )
    out = check(
        {"role": "user", "parts": [{"type": "file", "mediaType": "x", "url": "d" * 3_000_000}]}
    )
    assert out["parts"][0]["type"] == "file"
    out = check({"role": "user", "parts": [], "metadata": {"blob": "m" * 3_000_000}})
    assert out["metadata"]["mindstore"]["truncated"][0]["field"] == "metadata"


def test_many_small_parts_still_fit() -> None:
    parts = [{"type": "text", "text": "p" * 400} for _ in range(10_000)]  # ~4.3 MB, all small
    out = check({"role": "user", "parts": parts})
    assert out["parts"][-1]["text"].endswith("parts truncated for storage]")
    assert out["metadata"]["mindstore"]["truncated"][-1]["field"] == "parts"


def test_small_limit() -> None:
    out = check({"role": "user", "parts": [{"type": "text", "text": "q" * 10_000}]}, limit=4096)
    assert out["parts"][0]["text"].startswith("[Text truncated for storage (10000 chars)")
    with pytest.raises(ValueError):
        enforce_row_limit({"id": "a", "role": "user", "parts": []}, 100)
