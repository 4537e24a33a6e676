"""Token estimates and the Tokenizer protocol. Pure: no I/O.

``estimate_string_tokens(text) = ceil(max(chars / 4, words * 1.3))`` (0 for ``""``), except that
each CJK ideograph, kana or hangul character counts as at least one token: the plain heuristic
under-counts those scripts badly. ``estimate_message_tokens`` sums ``4 + parts`` per message,
where text and reasoning parts count their text and tool parts the JSON of input and output.

Exact counting plugs in through the :class:`Tokenizer` protocol (``count(text) -> int``).
:class:`TiktokenTokenizer` (extra ``tiktoken``) and :class:`HuggingFaceTokenizer` (extra
``tokenizers``) adapt the two common libraries; they import them lazily, so the extras are only
needed when used, and raise :class:`~mindstore.errors.MissingDependencyError` naming the extra.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from mindstore.errors import MissingDependencyError

__all__ = [
    "MESSAGE_OVERHEAD_TOKENS",
    "HuggingFaceTokenizer",
    "TiktokenTokenizer",
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


class TiktokenTokenizer:
    """Exact counts with OpenAI's ``tiktoken`` (install ``mindstore[tiktoken]``).

    Args:
        encoding: an encoding name (``"o200k_base"``, ``"cl100k_base"``) or a
            ``tiktoken.Encoding`` object (e.g. one built offline from your own ranks).
        model: a model name to pick the encoding for (``"gpt-4o"``); overrides ``encoding``.

    Text that looks like a special token (``<|endoftext|>``) is counted as ordinary text, so
    counting never raises on user content. Named encodings may be downloaded by tiktoken the
    first time they are used; pass an ``Encoding`` to stay offline.

    Raises:
        MissingDependencyError: ``tiktoken`` is not installed.
    """

    def __init__(self, encoding: Any = "o200k_base", *, model: str | None = None) -> None:
        try:
            import tiktoken
        except ImportError as exc:
            raise MissingDependencyError("tiktoken", "tiktoken") from exc
        if model is not None:
            self.encoding = tiktoken.encoding_for_model(model)
        elif isinstance(encoding, str):
            self.encoding = tiktoken.get_encoding(encoding)
        else:
            self.encoding = encoding

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        if not text:
            return 0
        return len(self.encoding.encode(text, disallowed_special=()))

    def __repr__(self) -> str:
        return f"TiktokenTokenizer({getattr(self.encoding, 'name', '?')!r})"


class HuggingFaceTokenizer:
    """Exact counts with Hugging Face ``tokenizers`` (install ``mindstore[tokenizers]``).

    Args:
        tokenizer: a ``tokenizers.Tokenizer``, a path to a ``tokenizer.json`` file, or a model
            id on the Hugging Face Hub (fetched by ``tokenizers`` — needs network once).
        add_special_tokens: count the special tokens the post-processor adds (BOS/EOS);
            off by default because they are added once per request, not per block.

    Raises:
        MissingDependencyError: ``tokenizers`` is not installed.
    """

    def __init__(self, tokenizer: Any, *, add_special_tokens: bool = False) -> None:
        try:
            import tokenizers
        except ImportError as exc:
            raise MissingDependencyError("tokenizers", "tokenizers") from exc
        if isinstance(tokenizer, (str, Path)):
            path = Path(tokenizer)
            if path.is_file():
                tokenizer = tokenizers.Tokenizer.from_file(str(path))
            else:
                tokenizer = tokenizers.Tokenizer.from_pretrained(str(tokenizer))
        self.tokenizer = tokenizer
        self.add_special_tokens = add_special_tokens

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        if not text:
            return 0
        encoding = self.tokenizer.encode(text, add_special_tokens=self.add_special_tokens)
        return len(encoding.ids)

    def __repr__(self) -> str:
        return f"HuggingFaceTokenizer({type(self.tokenizer).__name__})"
