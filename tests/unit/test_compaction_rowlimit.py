"""enforce_row_limit: never rejects, never over the limit, records what was shrunk."""

from __future__ import annotations

import copy
import json
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
    prefix, marker = text.split("\n\n[Text truncated for storage: ", 1)
    assert set(prefix) == {"é"} and len(prefix) > 890_000  # ~1.8 MB of 2-byte characters
    assert (
        marker
        == f"kept the first {len(prefix)} of 2000000 chars; {2_000_000 - len(prefix)} chars cut]"
    )
    assert out["metadata"]["keep"] == 1
    record = out["metadata"]["mindstore"]["truncated"][0]
    assert record["field"] == "text" and record["kept_chars"] == len(prefix)


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
    assert out["parts"][0]["text"].startswith("q" * 3_500)
    assert "kept the first" in out["parts"][0]["text"]
    with pytest.raises(ValueError):
        enforce_row_limit({"id": "a", "role": "user", "parts": []}, 100)


# ---- issue 14 item 6: no cliff just over the limit -------------------------------------------


def _json_text(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _kept(out: dict[str, Any], i: int = 0) -> str:
    return str(out["parts"][i]["text"]).split("\n\n[Text truncated for storage: ")[0]


@pytest.mark.parametrize("over", [1, 100, 10_000, 300_000])
def test_text_just_over_the_limit_keeps_almost_everything(over: int) -> None:
    body = "".join(f"line {i}: the deploy went fine\n" for i in range(70_000))
    body = body[: LIMIT + over]
    out = check({"id": "u", "role": "user", "parts": [{"type": "text", "text": body}]})
    kept = _kept(out)
    assert body.startswith(kept)
    # Everything but the overflow, the marker and the record: within 1 KB of the limit.
    assert message_bytes(out) > LIMIT - 1_024
    assert len(_json_text(kept)) > LIMIT - 1_024
    text = out["parts"][0]["text"]
    assert text.endswith(
        f"kept the first {len(kept)} of {len(body)} chars; {len(body) - len(kept)} chars cut]"
    )


@pytest.mark.parametrize(
    "unit",
    ["a", "é", "日本", "😀", "\x01", '"\\', "a\x02é😀\n"],
    ids=["ascii", "2-byte", "3-byte", "4-byte", "json-escape", "quote-backslash", "mixed"],
)
def test_cut_never_exceeds_the_limit_for_any_encoding_width(unit: str) -> None:
    body = unit * (2_000_000 // len(unit))
    out = check({"role": "assistant", "parts": [{"type": "reasoning", "text": body}]})
    kept = _kept(out)
    assert body.startswith(kept)
    assert message_bytes(out) > LIMIT - 8_192  # close to the limit, not a 500-char preview


def test_two_texts_cut_largest_first_only_as_needed() -> None:
    small = "s" * 100_000
    big = "b" * 1_800_000
    out = check(
        {"role": "user", "parts": [{"type": "text", "text": small}, {"type": "text", "text": big}]}
    )
    assert out["parts"][0]["text"] == small  # the largest part alone absorbs the overflow
    assert len(_kept(out, 1)) > 1_690_000
    (record,) = out["metadata"]["mindstore"]["truncated"]
    assert record["part"] == 1 and record["kept_chars"] == len(_kept(out, 1))
