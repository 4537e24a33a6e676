"""Token estimates and the Tokenizer protocol. Pure: no I/O.

``estimate_string_tokens(text) = ceil(max(chars / 4, words * 1.3))`` (0 for ``""``), except that
each CJK ideograph, kana or hangul character counts as at least one token: the plain heuristic
under-counts those scripts badly. ``estimate_message_tokens`` sums ``4 + parts`` per message,
where text and reasoning parts count their text and tool parts the JSON of input and output.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "MESSAGE_OVERHEAD_TOKENS",
    "Tokenizer",
    "estimate_message_tokens",
    "estimate_part_tokens",
    "estimate_string_tokens",
]

MESSAGE_OVERHEAD_TOKENS = 4

# CJK Unified Ideographs (+ext A, compatibility), Hiragana, Katakana, Hangul syllables/jamo.
_CJK = re.compile(
    "[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\u1100-\u11ff"
    "\u3130-\u318f\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002ffff]"
)


@runtime_checkable
class Tokenizer(Protocol):
    """Exact token counting; plug one into ``Session.create(..., tokenizer=...)``."""

    def count(self, text: str) -> int:
        """Return the number of tokens in ``text``."""
        ...


def estimate_string_tokens(text: str) -> int:
    """Estimate the tokens of ``text`` (see the module docstring)."""
    if not text:
        return 0
    chars = len(text)
    words = len(text.split())
    estimate = math.ceil(max(chars / 4, words * 1.3))
    cjk = len(_CJK.findall(text))
    if cjk:
        # Each CJK character is at least one token; the rest keeps the plain heuristic.
        rest = _CJK.sub(" ", text)
        rest_estimate = math.ceil(max(len(rest.replace(" ", "")) / 4, len(rest.split()) * 1.3))
        estimate = max(estimate, cjk + rest_estimate)
    return estimate


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def estimate_part_tokens(part: Mapping[str, Any], count: Any = None) -> int:
    """Tokens of one part: text/reasoning text; tool input and output as JSON; others 0."""
    counter = count or estimate_string_tokens
    t = part.get("type")
    if t in ("text", "reasoning"):
        text = part.get("text")
        return int(counter(text)) if isinstance(text, str) else 0
    if isinstance(t, str) and (t.startswith("tool-") or t == "dynamic-tool"):
        total = 0
        if part.get("input") is not None:
            total += int(counter(_json(part["input"])))
        if part.get("output") is not None:
            total += int(counter(_json(part["output"])))
        return total
    return 0


def estimate_message_tokens(
    messages: Iterable[Mapping[str, Any]], tokenizer: Tokenizer | None = None
) -> int:
    """Σ over messages of (4 + Σ part tokens); with ``tokenizer`` its ``count`` is used."""
    count = tokenizer.count if tokenizer is not None else None
    total = 0
    for message in messages:
        total += MESSAGE_OVERHEAD_TOKENS
        for part in message.get("parts") or ():
            if isinstance(part, Mapping):
                total += estimate_part_tokens(part, count)
    return total
