"""fit_row: the row-size limit plus the stored JSON of its result, each big value dumped once."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mindstore.compaction import rowlimit
from mindstore.compaction.rowlimit import enforce_row_limit, fit_row, message_bytes
from mindstore.messages import dumps, validate_message

LIMIT = 1_800_000

SHAPES: dict[str, dict[str, Any]] = {
    "fits": {"role": "user", "parts": [{"type": "text", "text": "hi"}]},
    "tool output": {
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "t" * 100_000},
            {
                "type": "tool-read",
                "toolCallId": "c",
                "state": "output-available",
                "input": {"path": "/x"},
                "output": {"content": 'x"é\n' * 1_000_000, "size": 1},
            },
        ],
    },
    "text": {"role": "user", "parts": [{"type": "text", "text": "日本" * 1_000_000}]},
    "several texts": {
        "role": "user",
        "parts": [{"type": "text", "text": f"{i}" * 600_000} for i in range(6)],
    },
    "file": {"role": "user", "parts": [{"type": "file", "mediaType": "x", "url": "d" * 3_000_000}]},
    "metadata": {
        "role": "user",
        "parts": [],
        "metadata": {"blob": ["m" * 1_000_000] * 3, "mindstore": {"note": "kept"}},
    },
    "many parts": {
        "role": "user",
        "parts": [{"type": "text", "text": f"{i:05d}" + "p" * 395} for i in range(6_000)],
    },
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_text_is_the_stored_json_of_the_result(shape: str) -> None:
    msg = validate_message(SHAPES[shape])
    out, text = fit_row(msg, LIMIT)
    assert text == dumps(out)
    assert message_bytes(out) <= LIMIT
    assert enforce_row_limit(msg, LIMIT) == out
    if shape == "fits":
        assert out is msg
    else:
        assert out["metadata"]["mindstore"]["original_bytes"] == message_bytes(msg)


def test_big_values_are_serialised_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 20 MB value is dumped by rowlimit itself at most twice (the size check, its piece);
    the old code re-serialised the whole message at every measurement."""
    big_dumps = 0
    real = json.dumps

    def counting(value: Any, *args: Any, **kwargs: Any) -> str:
        nonlocal big_dumps
        out = real(value, *args, **kwargs)
        if len(out) > 10_000_000:
            big_dumps += 1
        return out

    monkeypatch.setattr(rowlimit.json, "dumps", counting)
    msg = validate_message(
        {
            "role": "user",
            "parts": [{"type": "file", "mediaType": "x", "url": "u" * 20_000_000}],
            "metadata": {"k": 1},
        }
    )
    out, text = fit_row(msg, LIMIT)
    assert big_dumps <= 2
    assert len(text) < 10_000 and out["parts"][0]["url"].startswith("[Text truncated")
