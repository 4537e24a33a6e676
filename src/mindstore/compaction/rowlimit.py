"""The row-size limit (DESIGN §6.4). Pure: no I/O.

:func:`enforce_row_limit` makes any valid message fit in ``max_bytes`` UTF-8 bytes of stored
JSON. It never rejects a message and never returns one over the limit. It shrinks, largest
first and only as far as needed, in this order:

1. tool outputs, to about :data:`TOOL_OUTPUT_CHARS` characters of JSON, keeping their shape
   (see :func:`~mindstore.compaction.truncation.shrink_json`);
2. text and reasoning parts, to
   ``[Text truncated for storage (N chars). First 500 chars: ...]``;
3. tool inputs and error texts (shape kept);
4. any other large part field (file data URLs, unknown part types, provider metadata), keeping
   the part's ``type`` and ``toolCallId``/``toolName``;
5. the message's own ``metadata`` (other than the record below);
6. as a last resort, whole parts are replaced by one text part saying how many were dropped.

What was shrunk is recorded in ``metadata["mindstore"]["truncated"]``: a list of
``{"part": index, "field": name, "chars": original JSON size}`` (``"part": None`` for message
metadata), plus ``metadata["mindstore"]["original_bytes"]``. A message that fits is returned
unchanged (the same object).
"""

from __future__ import annotations

import json
from typing import Any

from mindstore.compaction.truncation import json_size, shrink_json
from mindstore.messages import dumps, is_tool_part

__all__ = ["TEXT_PREVIEW_CHARS", "TOOL_OUTPUT_CHARS", "enforce_row_limit", "message_bytes"]

TOOL_OUTPUT_CHARS = 1_000
TEXT_PREVIEW_CHARS = 500
_MAX_RECORDS = 50
_KEEP_KEYS = ("type", "toolCallId", "toolName", "state")


def message_bytes(message: dict[str, Any]) -> int:
    """UTF-8 bytes of the message's stored JSON."""
    return len(dumps(message).encode("utf-8"))


def _text_stub(text: str) -> str:
    return (
        f"[Text truncated for storage ({len(text)} chars). "
        f"First {TEXT_PREVIEW_CHARS} chars: {text[:TEXT_PREVIEW_CHARS]}]"
    )


class _Shrinker:
    def __init__(self, message: dict[str, Any], max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.original_bytes = message_bytes(message)
        self.parts: list[Any] = list(message.get("parts") or [])
        self.message = message
        self.records: list[dict[str, Any]] = []
        self.dropped_records = 0
        self.metadata: Any = message.get("metadata")
        self.current = self.original_bytes

    def build(self) -> dict[str, Any]:
        out = {k: v for k, v in self.message.items() if k not in ("parts", "metadata")}
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

    def size(self) -> int:
        return message_bytes(self.build())

    def fits(self) -> bool:
        self.current = self.size()
        return self.current <= self.max_bytes

    def record(self, part: int | None, field: str, chars: int) -> None:
        rec = {"part": part, "field": field, "chars": chars}
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
        targets: list[tuple[int, int, str]] = []
        for i, part in enumerate(self.parts):
            if isinstance(part, dict):
                for field in select(part):
                    if field in part:
                        size = json_size(part[field])
                        if size > floor:
                            targets.append((size, i, field))
        targets.sort(key=lambda t: (-t[0], t[1], t[2]))
        for size, i, field in targets:
            if self.current <= self.max_bytes:
                break
            part = self.parts[i]
            old_value = part[field]
            new_value = shrink(old_value)
            if json_size(new_value) >= size:
                continue
            self.parts[i] = {**part, field: new_value}
            self.current += _bytes(new_value) - _bytes(old_value)
            self.record(i, field, size)
        return self.fits()


def _bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def _tool_outputs(part: dict[str, Any]) -> list[str]:
    return ["output"] if is_tool_part(part) else []


def _texts(part: dict[str, Any]) -> list[str]:
    return ["text"] if part.get("type") in ("text", "reasoning") else []


def _tool_inputs(part: dict[str, Any]) -> list[str]:
    return ["input", "errorText"] if is_tool_part(part) else []


def _other_fields(part: dict[str, Any]) -> list[str]:
    return [k for k in part if k not in _KEEP_KEYS]


def enforce_row_limit(message: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """Return ``message`` shrunk to at most ``max_bytes`` of stored JSON (see module docstring).

    ``message`` must already be validated; it is never mutated. ``max_bytes`` must leave room
    for the record (at least 4096).
    """
    if max_bytes < 4096:
        raise ValueError("max_bytes must be at least 4096")
    if message_bytes(message) <= max_bytes:
        return message
    s = _Shrinker(message, max_bytes)

    def shrink_tool(value: Any) -> Any:
        return shrink_json(value, TOOL_OUTPUT_CHARS)

    def shrink_text(value: Any) -> Any:
        if isinstance(value, str) and len(value) > TEXT_PREVIEW_CHARS + 100:
            return _text_stub(value)
        return value

    def shrink_other(value: Any) -> Any:
        if isinstance(value, str) and len(value) > TEXT_PREVIEW_CHARS + 100:
            return _text_stub(value)
        return shrink_json(value, TOOL_OUTPUT_CHARS)

    floor = TOOL_OUTPUT_CHARS + 100
    if s.shrink_fields(_tool_outputs, shrink_tool, floor=floor):
        return s.build()
    if s.shrink_fields(_texts, shrink_text, floor=TEXT_PREVIEW_CHARS + 100):
        return s.build()
    if s.shrink_fields(_tool_inputs, shrink_tool, floor=floor):
        return s.build()
    if s.shrink_fields(_other_fields, shrink_other, floor=floor):
        return s.build()
    # the message's own metadata
    meta = s.metadata
    if isinstance(meta, dict):
        rest = {k: v for k, v in meta.items() if k != "mindstore"}
        size = json_size(rest)
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
                return s.build()
        own = s.metadata.get("mindstore") if isinstance(s.metadata, dict) else None
        if own is not None and json_size(own) > TOOL_OUTPUT_CHARS:
            s.metadata = {k: v for k, v in s.metadata.items() if k != "mindstore"}
            s.record(None, "metadata.mindstore", json_size(own))
            if s.fits():
                return s.build()
    # last resort: keep leading parts while they fit, replace the rest by one note
    return _drop_parts(s)


def _drop_parts(s: _Shrinker) -> dict[str, Any]:
    parts = s.parts
    total = len(parts)
    s.parts = []
    base = s.size() + 200  # room for the note part and the record
    kept: list[Any] = []
    used = base
    for part in parts:
        size = len(dumps(part).encode("utf-8")) + 1
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
    return s.build()
