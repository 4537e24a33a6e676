"""Micro-compaction: shrinking old tool outputs and long texts. Pure: no I/O.

:func:`truncate_older_messages` is a read-side helper (DESIGN §6.4): it returns a new list in
which messages older than the last ``keep_recent`` have long text parts cut and tool outputs
shrunk *keeping their JSON shape*, so a model (or code) reading the output still sees the same
keys and types:

* a string longer than its budget keeps a prefix plus ``"... [truncated N chars]"``;
* an array keeps as many leading items as fit, followed by one ``"... [N more items]"`` string;
* an object keeps every key, its values shrunk to share the budget; an object with more keys
  than the budget has room for keeps its leading keys that fit plus one marker key
  ``"__truncated": "[K more keys, N chars]"`` — it stays an object;
* numbers, booleans and null are kept;
* only when nothing else fits (a budget too small for even the marker) is the value replaced
  by a single marker string ``"[truncated N chars]"``.

A shrunk *tool output* (:func:`shrink_tool_output`) also tells the model what happened and that
it can re-run the tool: a string gets ``... [truncated N chars; re-run the tool …]``, an array a
last item, an object the ``"__truncated"`` key with that note.

The input is never mutated; messages and parts that needed no change are returned as they are
(shared, not copied).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from mindstore.messages import is_tool_part

__all__ = [
    "MARKER_KEY",
    "RERUN_HINT",
    "json_size",
    "shrink_json",
    "shrink_tool_output",
    "truncate_older_messages",
    "truncate_text",
]

_MIN_STRING = 16  # a cut string keeps at least this many characters when it can
MARKER_KEY = "__truncated"
"""The key an object keeps to say that some of its keys (or the output) were cut."""
RERUN_HINT = "re-run the tool if you need the full output"


def json_size(value: Any) -> int:
    """Length in characters of ``value``'s compact JSON."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))


def truncate_text(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters plus ``"... [truncated N chars]"`` (N = removed)."""
    if len(text) <= limit:
        return text
    limit = max(0, limit)
    return f"{text[:limit]}... [truncated {len(text) - limit} chars]"


def _marker(size: int) -> str:
    return f"[truncated {size} chars]"


def _shrink_string(value: str, budget: int) -> str:
    size = json_size(value)
    if size <= budget:
        return value
    # the suffix and the quotes take room; keep what is left (at least a few characters)
    removed_guess = len(value)
    suffix = len(f"... [truncated {removed_guess} chars]") + 2
    escape_ratio = size / max(1, len(value))  # escaped characters take more room in JSON
    keep = max(min(_MIN_STRING, len(value)), int((budget - suffix) / max(1.0, escape_ratio)))
    keep = min(keep, len(value))
    return truncate_text(value, keep)


def shrink_json(value: Any, budget: int, *, _depth: int = 0) -> Any:
    """Shrink ``value`` so its compact JSON is about ``budget`` characters, keeping its shape.

    See the module docstring for the rules. The result may exceed ``budget`` by a small
    constant (markers have a minimum size); callers that need a hard limit measure the result.
    """
    budget = max(0, budget)
    if isinstance(value, str):
        return _shrink_string(value, budget)
    if isinstance(value, Mapping):
        return _shrink_object(value, budget, _depth)
    if isinstance(value, list | tuple):
        return _shrink_array(list(value), budget, _depth)
    return value


def _shrink_array(items: list[Any], budget: int, depth: int) -> Any:
    total = json_size(items)
    if total <= budget:
        return items
    out: list[Any] = []
    used = 2  # brackets
    for i, item in enumerate(items):
        remaining_items = len(items) - i
        marker_room = len(f'"... [{remaining_items} more items]"') + 1
        room = budget - used - marker_room - 1
        if room <= 0:
            break
        size = json_size(item)
        if size <= room:
            out.append(item)
            used += size + 1
            continue
        # a big item: shrink it into what is left, if that leaves something meaningful
        if room >= 24:
            shrunk = shrink_json(item, room, _depth=depth + 1)
            if json_size(shrunk) <= room:
                out.append(shrunk)
                used += json_size(shrunk) + 1
        break
    dropped = len(items) - len(out)
    if dropped:
        if not out and budget < len(f'["... [{dropped} more items]"]'):
            return _marker(total)
        out.append(f"... [{dropped} more items]")
    return out


def _shrink_object(obj: Mapping[str, Any], budget: int, depth: int) -> Any:
    total = json_size(obj)
    if total <= budget:
        return dict(obj)
    keys = list(obj)
    key_room = 2 + sum(json_size(k) + 2 for k in keys)  # braces, "key":, commas
    values_room = budget - key_room
    minimum = 2 * len(keys)  # every value needs at least a couple of characters
    if values_room < minimum:
        return _shrink_wide_object(obj, budget, total)
    sizes = {k: json_size(obj[k]) for k in keys}
    # water-filling: small values stay whole, big ones share what is left equally
    out: dict[str, Any] = {}
    left = values_room
    pending = sorted(keys, key=lambda k: sizes[k])
    for n, k in enumerate(pending):
        share = left // (len(pending) - n)
        if sizes[k] <= share:
            out[k] = obj[k]
            left -= sizes[k]
        else:
            shrunk = shrink_json(obj[k], share, _depth=depth + 1)
            out[k] = shrunk
            left -= min(share, json_size(shrunk))
    return {k: out[k] for k in keys}  # original key order


def _shrink_wide_object(obj: Mapping[str, Any], budget: int, total: int) -> Any:
    """Too many keys for the budget: the leading keys that fit (values shrunk to a small share)
    plus ``MARKER_KEY`` naming what was left out. Still an object."""
    keys = list(obj)
    out: dict[str, Any] = {}
    used = 2
    for i, k in enumerate(keys):
        marker = f"[{len(keys) - i} more keys, {total} chars]"
        marker_room = json_size(MARKER_KEY) + json_size(marker) + 2
        room = budget - used - marker_room - json_size(k) - 2
        if room <= 0:
            break
        value = obj[k]
        if json_size(value) > room:
            if room < 24:
                break
            value = shrink_json(value, room)
            if json_size(value) > room:
                break
        out[k] = value
        used += json_size(k) + json_size(value) + 2
    marker = f"[{len(keys) - len(out)} more keys, {total} chars]"
    if not out and budget < json_size({MARKER_KEY: marker}):
        return _marker(total)
    out[MARKER_KEY] = marker
    return out


def shrink_tool_output(output: Any, budget: int) -> Any:
    """:func:`shrink_json` for a tool's output, plus a note telling the model the output was
    cut and that it can re-run the tool (see the module docstring). Returns ``output`` itself
    when it fits."""
    total = json_size(output)
    if total <= budget:
        return output
    note = f"[tool output truncated from {total} chars; {RERUN_HINT}]"
    # the note takes room from the budget (while that leaves half of it for the output)
    shrunk = shrink_json(output, max(budget - len(note) - 20, budget // 2))
    if isinstance(shrunk, dict):
        return {**shrunk, MARKER_KEY: note}
    if isinstance(shrunk, list):
        return [*shrunk, note]
    if isinstance(output, str):
        # one note instead of the plain "[truncated N chars]" suffix; N = characters removed
        escape_ratio = total / max(1, len(output))
        keep = max(_MIN_STRING, int((budget - len(note) - 10) / max(1.0, escape_ratio)))
        keep = min(keep, len(output))
        note = f"[truncated {len(output) - keep} chars; {RERUN_HINT}]"
        return f"{output[:keep]}... {note}"
    if isinstance(shrunk, str):
        return f"{shrunk} {note}"
    return shrunk


def _shrink_part(
    part: dict[str, Any], max_tool_output_chars: int, max_text_chars: int
) -> dict[str, Any]:
    ptype = part.get("type")
    if ptype in ("text", "reasoning"):
        text = part.get("text")
        if isinstance(text, str) and len(text) > max_text_chars:
            return {**part, "text": truncate_text(text, max_text_chars)}
        return part
    if is_tool_part(part) and "output" in part:
        output = part["output"]
        if json_size(output) > max_tool_output_chars:
            return {**part, "output": shrink_tool_output(output, max_tool_output_chars)}
    return part


def truncate_older_messages(
    messages: Sequence[Mapping[str, Any]],
    *,
    keep_recent: int = 4,
    max_tool_output_chars: int = 500,
    max_text_chars: int = 10_000,
) -> list[dict[str, Any]]:
    """Return a new list where messages older than the last ``keep_recent`` are shrunk.

    Older text and reasoning parts longer than ``max_text_chars`` become their prefix plus
    ``"... [truncated N chars]"``; older tool outputs are shrunk to about
    ``max_tool_output_chars`` characters of JSON, keeping their shape. ``messages`` is never
    mutated.

    Args:
        messages: a history, e.g. from ``await session.get_history()``.
        keep_recent: how many trailing messages stay untouched.
        max_tool_output_chars: budget for each older tool output's JSON.
        max_text_chars: longest older text or reasoning part kept whole.
    """
    if keep_recent < 0 or max_tool_output_chars < 0 or max_text_chars < 0:
        raise ValueError("keep_recent and the limits must be >= 0")
    cut = max(0, len(messages) - keep_recent)
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        msg = message if isinstance(message, dict) else dict(message)
        if i >= cut:
            out.append(msg)
            continue
        parts = msg.get("parts")
        if not isinstance(parts, list):
            out.append(msg)
            continue
        new_parts = [
            _shrink_part(p, max_tool_output_chars, max_text_chars) if isinstance(p, dict) else p
            for p in parts
        ]
        if any(a is not b for a, b in zip(new_parts, parts, strict=True)):
            out.append({**msg, "parts": new_parts})
        else:
            out.append(msg)
    return out
