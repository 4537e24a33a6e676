"""The row-size limit (DESIGN §6.4). Pure: no I/O.

:func:`enforce_row_limit` makes any valid message fit in ``max_bytes`` UTF-8 bytes of stored
JSON. It never rejects a message and never returns one over the limit. It shrinks, largest
first and only as far as needed, in this order:

1. tool outputs, to about :data:`TOOL_OUTPUT_CHARS` characters of JSON, keeping their shape
   (see :func:`~mindstore.compaction.truncation.shrink_json`);
2. text and reasoning parts, largest first, each cut only as far as needed: the part keeps as
   much of the start of its text as fits under the limit, followed by a marker
   ``[Text truncated for storage: kept the first K of N chars; M chars cut]`` (at least
   :data:`TEXT_PREVIEW_CHARS` characters are kept) — so a text just over the limit loses only
   its end, not all but a preview;
3. tool inputs and error texts (shape kept);
4. any other large part field (file data URLs, unknown part types, provider metadata), keeping
   the part's ``type`` and ``toolCallId``/``toolName``;
5. the message's own ``metadata`` (other than the record below);
6. as a last resort, whole parts are replaced by one text part saying how many were dropped.

What was shrunk is recorded in ``metadata["mindstore"]["truncated"]``: a list of
``{"part": index, "field": name, "chars": original JSON size}`` (``"part": None`` for message
metadata; a cut text part adds ``"kept_chars": K``), plus
``metadata["mindstore"]["original_bytes"]``. A message that fits is returned unchanged (the same
object).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mindstore.compaction.truncation import json_size, shrink_json, shrink_tool_output
from mindstore.messages import dumps, is_tool_part

__all__ = [
    "TEXT_PREVIEW_CHARS",
    "TOOL_OUTPUT_CHARS",
    "enforce_row_limit",
    "fit_row",
    "message_bytes",
]

TOOL_OUTPUT_CHARS = 1_000
TEXT_PREVIEW_CHARS = 500
_MAX_RECORDS = 50
_KEEP_KEYS = ("type", "toolCallId", "toolName", "state")


def message_bytes(message: dict[str, Any]) -> int:
    """UTF-8 bytes of the message's stored JSON."""
    return _utf8_len(dumps(message))


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _text_stub(text: str) -> str:
    return (
        f"[Text truncated for storage ({len(text)} chars). "
        f"First {TEXT_PREVIEW_CHARS} chars: {text[:TEXT_PREVIEW_CHARS]}]"
    )


_RECORD_ROOM = 128
"""Bytes set aside for a text cut's record in metadata when choosing how much text to keep."""


def _cut_marker(kept: int, total: int) -> str:
    return (
        f"\n\n[Text truncated for storage: kept the first {kept} of {total} chars; "
        f"{total - kept} chars cut]"
    )


def _cut_text(text: str, budget: int, text_bytes: int) -> tuple[str, int]:
    """The longest ``text[:k] + marker`` whose JSON is at most ``budget`` UTF-8 bytes (``k`` at
    least :data:`TEXT_PREVIEW_CHARS`), and ``k``.

    A proportional first guess, then corrections: each character is 1 to 6 bytes of JSON, so
    an overshoot of ``d`` bytes is removed by dropping ``d`` characters and spare room of ``d``
    bytes can take at least ``d // 6`` more. A few measurements of the prefix, not a search.
    ``text_bytes`` is the size of ``text``'s JSON (already known to the caller).
    """
    n = len(text)
    floor = min(TEXT_PREVIEW_CHARS, n)

    def size(k: int) -> int:
        return _utf8_len(_json(text[:k] + _cut_marker(k, n)))

    k = max(floor, min(n - 1, n * budget // max(1, text_bytes)))
    for _ in range(32):
        over = size(k) - budget
        if over > 0:
            if k <= floor:
                return text[:floor] + _cut_marker(floor, n), floor
            k = max(floor, k - over)
            continue
        step = (-over) // 6
        if step < 1 or k >= n - 1:
            break
        k = min(n - 1, k + step)
    while size(k) > budget and k > floor:  # pragma: no cover - the loop above converges
        k -= 1
    return text[:k] + _cut_marker(k, n), k


class _Pieces:
    """Compact JSON of values, each serialised at most once.

    JSON is compositional: an object's compact JSON is ``{`` + ``"key":value`` pieces joined by
    ``,`` + ``}``. So the size of the message being shrunk (and finally its text) is assembled
    from its fields' pieces, and only a value that changed is serialised again — a 50 MB tool
    output is dumped once, not once per measurement. Entries are keyed by ``id`` and hold the
    value, so an id cannot be reused while cached; values are never mutated here.
    """

    def __init__(self) -> None:
        self._cache: dict[int, tuple[Any, str, int]] = {}

    def get(self, value: Any) -> tuple[str, int]:
        """``(json text, utf-8 bytes)`` of ``value``."""
        hit = self._cache.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1], hit[2]
        text = _json(value)
        size = _utf8_len(text)
        self._cache[id(value)] = (value, text, size)
        return text, size

    def chars(self, value: Any) -> int:
        """Characters of ``value``'s compact JSON (what ``json_size`` measures)."""
        return len(self.get(value)[0])

    def bytes(self, value: Any) -> int:
        return self.get(value)[1]

    def object_bytes(self, obj: dict[str, Any]) -> int:
        """Bytes of a dict's JSON from its items' pieces (keys and values cached)."""
        if not obj:
            return 2
        return 1 + sum(self.bytes(k) + 1 + self.bytes(v) + 1 for k, v in obj.items())

    def object_chars(self, obj: dict[str, Any]) -> int:
        """Characters of a dict's JSON (what ``json_size`` measures), from cached pieces."""
        if not obj:
            return 2
        return 1 + sum(self.chars(k) + 1 + self.chars(v) + 1 for k, v in obj.items())

    def object_text(self, obj: dict[str, Any]) -> str:
        return "{" + ",".join(f"{self.get(k)[0]}:{self.get(v)[0]}" for k, v in obj.items()) + "}"

    def list_bytes(self, items: list[Any], item_bytes: Callable[[Any], int]) -> int:
        if not items:
            return 2
        return 1 + sum(item_bytes(item) + 1 for item in items)


class _Shrinker:
    def __init__(self, message: dict[str, Any], max_bytes: int, original_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.original_bytes = original_bytes
        self.parts: list[Any] = list(message.get("parts") or [])
        self.message = message
        self.records: list[dict[str, Any]] = []
        self.dropped_records = 0
        self.metadata: Any = message.get("metadata")
        self.current = self.original_bytes
        self.pieces = _Pieces()
        self.base = {k: v for k, v in message.items() if k not in ("parts", "metadata")}

    def build(self) -> dict[str, Any]:
        out = dict(self.base)
        out["parts"] = self.parts
        out["metadata"] = self._metadata_with_record()
        return out

    def _metadata_with_record(self) -> dict[str, Any]:
        meta = dict(self.metadata) if isinstance(self.metadata, dict) else {}
        own = meta.get("mindstore")
        own = dict(own) if isinstance(own, dict) else {}
        records = self.records[:_MAX_RECORDS]
        own["truncated"] = records
        more = self.dropped_records + max(0, len(self.records) - _MAX_RECORDS)
        if more:
            own["truncated_more"] = more
        own["original_bytes"] = self.original_bytes
        meta["mindstore"] = own
        return meta

    # Sizes are assembled from cached pieces; see _Pieces.
    def part_bytes(self, part: Any) -> int:
        if isinstance(part, dict):
            return self.pieces.object_bytes(part)
        return self.pieces.bytes(part)

    def _part_text(self, part: Any) -> str:
        if isinstance(part, dict):
            return self.pieces.object_text(part)
        return self.pieces.get(part)[0]

    def size(self) -> int:
        """Exact UTF-8 bytes of ``dumps(self.build())``, from the cached pieces."""
        p = self.pieces
        meta = self._metadata_with_record()
        meta_bytes = 1 + sum(
            p.bytes(k) + 1 + (_bytes(v) if k == "mindstore" else p.bytes(v)) + 1
            for k, v in meta.items()
        )
        items = [p.bytes(k) + 1 + p.bytes(v) for k, v in self.base.items()]
        items.append(8 + p.list_bytes(self.parts, self.part_bytes))  # "parts":
        items.append(11 + meta_bytes)  # "metadata":
        return 1 + sum(n + 1 for n in items)

    def text(self) -> str:
        """``dumps(self.build())``, assembled from the cached pieces."""
        p = self.pieces
        meta = self._metadata_with_record()
        items = [f"{p.get(k)[0]}:{p.get(v)[0]}" for k, v in self.base.items()]
        items.append('"parts":[' + ",".join(self._part_text(x) for x in self.parts) + "]")
        meta_items = (
            f"{p.get(k)[0]}:{_json(v) if k == 'mindstore' else p.get(v)[0]}"
            for k, v in meta.items()
        )
        items.append('"metadata":{' + ",".join(meta_items) + "}")
        return "{" + ",".join(items) + "}"

    def fits(self) -> bool:
        self.current = self.size()
        return self.current <= self.max_bytes

    def record(
        self, part: int | None, field: str, chars: int, kept_chars: int | None = None
    ) -> None:
        rec: dict[str, Any] = {"part": part, "field": field, "chars": chars}
        if kept_chars is not None:
            rec["kept_chars"] = kept_chars
        if len(self.records) < _MAX_RECORDS:
            self.current += _bytes(rec) + 1
        self.records.append(rec)

    def shrink_fields(self, select: Any, shrink: Any, *, floor: int) -> bool:
        """Shrink the selected (part index, field) values larger than ``floor`` characters,
        largest first, until the message fits; True when it fits.

        Sizes are tracked incrementally (re-serialising a 2 MB message per step would be
        quadratic); the final answer is measured for real.
        """
        if self.fits():
            return True
        pieces = self.pieces
        targets: list[tuple[int, int, str]] = []
        for i, part in enumerate(self.parts):
            if isinstance(part, dict):
                for field in select(part):
                    if field in part:
                        size = pieces.chars(part[field])
                        if size > floor:
                            targets.append((size, i, field))
        targets.sort(key=lambda t: (-t[0], t[1], t[2]))
        for size, i, field in targets:
            if self.current <= self.max_bytes:
                break
            part = self.parts[i]
            old_value = part[field]
            new_value = shrink(old_value)
            if new_value is old_value or pieces.chars(new_value) >= size:
                continue
            self.parts[i] = {**part, field: new_value}
            self.current += pieces.bytes(new_value) - pieces.bytes(old_value)
            self.record(i, field, size)
        return self.fits()

    def cut_texts(self, floor: int) -> bool:
        """Cut text/reasoning parts longer than ``floor`` characters, largest first, each only
        as far as the limit needs (keeping the start of the text); True when it fits."""
        for _ in range(3):  # sizes are tracked incrementally; re-measure and go again if short
            if self.fits():
                return True
            targets: list[tuple[int, int, str]] = []
            for i, part in enumerate(self.parts):
                if isinstance(part, dict) and part.get("type") in ("text", "reasoning"):
                    value = part.get("text")
                    if isinstance(value, str) and len(value) > floor:
                        targets.append((self.pieces.chars(value), i, "text"))
            targets.sort(key=lambda t: (-t[0], t[1]))
            changed = False
            for size, i, field in targets:
                if self.current <= self.max_bytes:
                    break
                part = self.parts[i]
                old = part[field]
                old_bytes = self.pieces.bytes(old)
                budget = old_bytes - (self.current - self.max_bytes) - _RECORD_ROOM
                new, kept = _cut_text(old, budget, old_bytes)
                if self.pieces.bytes(new) >= old_bytes:
                    continue
                self.parts[i] = {**part, field: new}
                self.current += self.pieces.bytes(new) - old_bytes
                self.record(i, field, size, kept)
                changed = True
            if not changed:
                break
        return self.fits()


def _bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def _tool_outputs(part: dict[str, Any]) -> list[str]:
    return ["output"] if is_tool_part(part) else []


def _tool_inputs(part: dict[str, Any]) -> list[str]:
    return ["input", "errorText"] if is_tool_part(part) else []


def _other_fields(part: dict[str, Any]) -> list[str]:
    return [k for k in part if k not in _KEEP_KEYS]


def enforce_row_limit(message: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """Return ``message`` shrunk to at most ``max_bytes`` of stored JSON (see module docstring).

    ``message`` must already be validated; it is never mutated. ``max_bytes`` must leave room
    for the record (at least 4096).
    """
    return fit_row(message, max_bytes)[0]


def fit_row(message: dict[str, Any], max_bytes: int) -> tuple[dict[str, Any], str]:
    """:func:`enforce_row_limit` plus the stored JSON of its result (``dumps(result)``).

    The size check serialises the message anyway; handing that text on (``NewMessage.content``)
    saves the store from serialising it again. A message that fits is returned unchanged (the
    same object).
    """
    if max_bytes < 4096:
        raise ValueError("max_bytes must be at least 4096")
    text = dumps(message)
    size = _utf8_len(text)
    if size <= max_bytes:
        return message, text
    s = _shrink(_Shrinker(message, max_bytes, size))
    return s.build(), s.text()


def _shrink(s: _Shrinker) -> _Shrinker:
    def shrink_tool(value: Any) -> Any:
        return shrink_json(value, TOOL_OUTPUT_CHARS)

    def shrink_output(value: Any) -> Any:
        return shrink_tool_output(value, TOOL_OUTPUT_CHARS)

    def shrink_other(value: Any) -> Any:
        if isinstance(value, str) and len(value) > TEXT_PREVIEW_CHARS + 100:
            return _text_stub(value)
        return shrink_json(value, TOOL_OUTPUT_CHARS)

    floor = TOOL_OUTPUT_CHARS + 100
    if s.shrink_fields(_tool_outputs, shrink_output, floor=floor):
        return s
    if s.cut_texts(floor=TEXT_PREVIEW_CHARS + 100):
        return s
    if s.shrink_fields(_tool_inputs, shrink_tool, floor=floor):
        return s
    if s.shrink_fields(_other_fields, shrink_other, floor=floor):
        return s
    # the message's own metadata
    meta = s.metadata
    if isinstance(meta, dict):
        rest = {k: v for k, v in meta.items() if k != "mindstore"}
        size = s.pieces.object_chars(rest)
        if size > TOOL_OUTPUT_CHARS:
            shrunk = shrink_json(rest, TOOL_OUTPUT_CHARS)
            if not isinstance(shrunk, dict):
                shrunk = {"truncated": shrunk}
            if json_size(shrunk) > 4 * TOOL_OUTPUT_CHARS:
                shrunk = {}
            keep = meta.get("mindstore")
            s.metadata = {**shrunk, **({"mindstore": keep} if isinstance(keep, dict) else {})}
            s.record(None, "metadata", size)
            if s.fits():
                return s
        own = s.metadata.get("mindstore") if isinstance(s.metadata, dict) else None
        if own is not None and json_size(own) > TOOL_OUTPUT_CHARS:
            s.metadata = {k: v for k, v in s.metadata.items() if k != "mindstore"}
            s.record(None, "metadata.mindstore", json_size(own))
            if s.fits():
                return s
    # last resort: keep leading parts while they fit, replace the rest by one note
    _drop_parts(s)
    return s


def _drop_parts(s: _Shrinker) -> None:
    parts = s.parts
    total = len(parts)
    s.parts = []
    base = s.size() + 200  # room for the note part and the record
    kept: list[Any] = []
    used = base
    for part in parts:
        size = s.part_bytes(part) + 1
        if used + size > s.max_bytes:
            break
        kept.append(part)
        used += size
    dropped = total - len(kept)
    s.parts = [
        *kept,
        {"type": "text", "text": f"[{dropped} parts truncated for storage]"},
    ]
    s.dropped_records += dropped
    s.record(len(kept), "parts", dropped)
    while not s.fits() and s.parts[:-1]:
        s.parts.pop(-2)
    if not s.fits():  # nothing left to cut but the record itself
        s.records = s.records[:1]
        s.metadata = None
