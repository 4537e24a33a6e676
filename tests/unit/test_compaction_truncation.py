"""truncate_older_messages and shrink_json: non-mutating, shape-preserving micro-compaction."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from mindstore.compaction.truncation import (
    json_size,
    shrink_json,
    truncate_older_messages,
    truncate_text,
)


def tool_msg(mid: str, output: Any) -> dict[str, Any]:
    part = {
        "type": "tool-fetch",
        "toolCallId": f"c-{mid}",
        "state": "output-available",
        "input": {"url": "https://example.com"},
        "output": output,
    }
    return {"id": mid, "role": "assistant", "parts": [part]}


def text_msg(mid: str, body: str) -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": body}]}


def history(old: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return old + [text_msg(f"r{i}", "x" * 20_000) for i in range(4)]


def test_string_output_cut_with_suffix() -> None:
    msgs = history([tool_msg("a", "y" * 3000)])
    before = copy.deepcopy(msgs)
    out = truncate_older_messages(msgs)
    assert msgs == before  # never mutated
    assert out is not msgs and len(out) == len(msgs)
    output = out[0]["parts"][0]["output"]
    assert isinstance(output, str)
    assert output.startswith("y" * 400)
    removed = 3000 - len(output.split("...")[0])
    # the note says what was cut and that the tool can be re-run (reference fidelity, 14.7)
    assert output.endswith(
        f"... [truncated {removed} chars; re-run the tool if you need the full output]"
    )
    assert json_size(output) <= 520
    assert out[0]["parts"][0]["input"] == {"url": "https://example.com"}
    # the recent messages are untouched (same objects)
    assert all(a is b for a, b in zip(out[1:], msgs[1:], strict=True))


def test_nested_object_keeps_keys() -> None:
    output = {
        "status": "ok",
        "count": 3,
        "data": {"body": "z" * 5000, "headers": {"a": "1", "b": "2"}, "tags": ["t"] * 300},
        "flag": True,
        "none": None,
    }
    out = truncate_older_messages(history([tool_msg("a", output)]), max_tool_output_chars=500)
    shrunk = out[0]["parts"][0]["output"]
    assert list(shrunk) == [*output, "__truncated"]
    assert "re-run the tool" in shrunk["__truncated"]
    assert list(shrunk["data"]) == ["body", "headers", "tags"]
    assert shrunk["status"] == "ok" and shrunk["count"] == 3 and shrunk["flag"] is True
    assert shrunk["none"] is None
    assert shrunk["data"]["headers"] == {"a": "1", "b": "2"}
    assert shrunk["data"]["body"].startswith("zzz") and "[truncated" in shrunk["data"]["body"]
    assert isinstance(shrunk["data"]["tags"], list)
    assert json_size(shrunk) <= 600


def test_array_shortened_with_count() -> None:
    rows = [{"id": i, "name": f"row {i}"} for i in range(1000)]
    out = truncate_older_messages(history([tool_msg("a", rows)]))
    shrunk = out[0]["parts"][0]["output"]
    assert isinstance(shrunk, list)
    kept = [r for r in shrunk if isinstance(r, dict)]
    assert kept == rows[: len(kept)] and len(kept) > 5
    assert shrunk[-2] == f"... [{1000 - len(kept)} more items]"
    assert shrunk[-1].startswith("[tool output truncated from ")
    assert shrunk[-1].endswith("chars; re-run the tool if you need the full output]")
    assert json_size(shrunk) <= 520


def test_long_old_text_cut_recent_kept() -> None:
    msgs = [text_msg("old", "a" * 12000), text_msg("short", "hi"), *history([])]
    out = truncate_older_messages(msgs)
    assert out[0]["parts"][0]["text"] == "a" * 10_000 + "... [truncated 2000 chars]"
    assert out[1] is msgs[1]
    assert out[-1]["parts"][0]["text"] == "x" * 20_000  # recent untouched


def test_keep_recent_zero_and_validation() -> None:
    msgs = [tool_msg("a", "q" * 2000)]
    assert "[truncated" in truncate_older_messages(msgs, keep_recent=0)[0]["parts"][0]["output"]
    assert truncate_older_messages(msgs)[0] is msgs[0]  # within keep_recent
    with pytest.raises(ValueError):
        truncate_older_messages(msgs, keep_recent=-1)


def test_marker_only_when_nothing_else_fits() -> None:
    many_keys = {f"key_{i}": i for i in range(500)}
    # a very wide object stays an object: leading keys plus a marker key (14.7)
    wide = shrink_json(many_keys, 200)
    assert isinstance(wide, dict) and json_size(wide) <= 200
    kept = [k for k in wide if k != "__truncated"]
    assert kept == [f"key_{i}" for i in range(len(kept))] and len(kept) >= 5
    assert wide["__truncated"] == f"[{500 - len(kept)} more keys, {json_size(many_keys)} chars]"
    assert shrink_json(many_keys, 20) == f"[truncated {json_size(many_keys)} chars]"
    assert shrink_json({"a": "b" * 100}, 60) != f"[truncated {json_size({'a': 'b' * 100})} chars]"
    assert shrink_json(12345, 1) == 12345 and shrink_json(None, 0) is None


def test_shrink_json_is_valid_json_and_near_budget() -> None:
    value = {"a": ["é" * 3000, {"b": "\n" * 2000}], "c": [[1, 2, 3]] * 500}
    for budget in (100, 500, 1000, 5000):
        shrunk = shrink_json(value, budget)
        json.loads(json.dumps(shrunk))
        assert json_size(shrunk) <= budget + 120


def test_truncate_text() -> None:
    assert truncate_text("abc", 5) == "abc"
    assert truncate_text("abcdef", 2) == "ab... [truncated 4 chars]"


def test_very_wide_object_output_stays_an_object() -> None:
    """Reference fidelity (14.7): some keys plus a marker key, never a bare string."""
    wide = {f"field_{i:04d}": f"value {i}" for i in range(3000)}
    out = truncate_older_messages(history([tool_msg("a", wide)]), max_tool_output_chars=500)
    shrunk = out[0]["parts"][0]["output"]
    assert isinstance(shrunk, dict)
    kept = [k for k in shrunk if k != "__truncated"]
    assert kept and all(shrunk[k] == wide[k] for k in kept)
    assert "re-run the tool" in shrunk["__truncated"]
    assert json_size(shrunk) <= 520
