"""Compaction overlays: replacing summarised ranges of a path at read time. Pure: no I/O.

An overlay (a stored :class:`~mindstore.store.types.Compaction`) covers the contiguous range
``from_message_id``..``to_message_id`` of one root→leaf path. Reading a path never deletes or
edits a stored message; the covered range is replaced by one *virtual* message::

    {"id": "compaction_<cid>", "role": "assistant",
     "parts": [{"type": "text", "text": summary}],
     "metadata": {"compaction": {"id": cid, "from": from_id, "to": to_id}}}

Resolution rules (the same for every backend, because they live here):

* Only overlays whose ``to`` *and* ``from`` lie on the path being read apply, with ``from`` at or
  before ``to``. Because ``from`` was validated to be an ancestor of ``to``, a path containing
  ``to`` always contains ``from``: a sibling branch that does not contain ``to`` never sees the
  summary.
* Reverted overlays never apply.
* Where applicable overlays overlap, the newest wins: candidates are taken in descending ``id``
  order (ids are assigned by the store in creation order, so two overlays created in the same
  millisecond still resolve deterministically) and an overlay is dropped when it overlaps one
  already taken. A *superseded* overlay is no different: on the path where its superseder lies
  the superseder is newer and covers it; on a sibling branch where the superseder does not lie,
  the older summary still applies (``superseded_by`` is an audit record of the path it was
  compacted on, not a global switch).
* Windows (``get_recent_history``): when the messages are only a suffix of the path
  (``partial_start=True``) an overlay whose ``to`` is inside the window but whose ``from`` is
  before it still applies: the window *starts with the summary* in place of the covered messages
  it holds. So a window read is always a suffix of the full ``get_history`` read, and a message
  that was compacted away never reappears raw just because the budget cut through its range.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any

from mindstore.messages import RESERVED_ID_PREFIX
from mindstore.store.types import Compaction

__all__ = [
    "COMPACTION_ID_PREFIX",
    "apply_overlays",
    "compaction_message",
    "is_compaction_message",
    "resolve_overlays",
]

COMPACTION_ID_PREFIX = RESERVED_ID_PREFIX  # message ids can never start with it


def compaction_message(compaction: Compaction) -> dict[str, Any]:
    """The virtual message that stands in for ``compaction``'s range."""
    return {
        "id": f"{COMPACTION_ID_PREFIX}{compaction.id}",
        "role": "assistant",
        "parts": [{"type": "text", "text": compaction.summary}],
        "metadata": {
            "compaction": {
                "id": compaction.id,
                "from": compaction.from_message_id,
                "to": compaction.to_message_id,
            }
        },
    }


def is_compaction_message(message: Mapping[str, Any]) -> bool:
    """True for a virtual summary message produced by :func:`apply_overlays`."""
    meta = message.get("metadata")
    return (
        isinstance(meta, Mapping)
        and isinstance(meta.get("compaction"), Mapping)
        and str(message.get("id", "")).startswith(COMPACTION_ID_PREFIX)
    )


def resolve_overlays(
    ids: Sequence[str],
    compactions: Sequence[Compaction],
    *,
    partial_start: bool = False,
) -> list[tuple[Compaction, int, int]]:
    """Which overlays apply to the path ``ids`` and where.

    Returns ``(compaction, start, end)`` triples (inclusive indices into ``ids``), disjoint and
    ordered by position. See the module docstring for the rules.
    """
    if not compactions or not ids:
        return []
    pos: dict[str, int] | None = None
    candidates: list[tuple[Compaction, int, int]] = []
    for c in compactions:
        if c.reverted:
            continue
        if pos is None:
            pos = {mid: i for i, mid in enumerate(ids)}
        end = pos.get(c.to_message_id)
        if end is None:
            continue
        start = pos.get(c.from_message_id)
        if start is None:
            if not partial_start:
                continue
            start = 0  # the range begins before the window
        if start > end:
            continue
        candidates.append((c, start, end))
    if not candidates:
        return []
    candidates.sort(key=lambda t: t[0].id, reverse=True)
    starts: list[int] = []  # chosen intervals, kept sorted by start (they are disjoint)
    ends: list[int] = []
    chosen: list[tuple[Compaction, int, int]] = []
    for c, start, end in candidates:
        i = bisect.bisect_right(starts, end)
        # the chosen interval starting at or before ``end`` that starts last is the only one
        # that can overlap [start, end] (chosen intervals are disjoint)
        if i > 0 and ends[i - 1] >= start:
            continue
        starts.insert(i, start)
        ends.insert(i, end)
        chosen.append((c, start, end))
    chosen.sort(key=lambda t: t[1])
    return chosen


def apply_overlays(
    messages: Sequence[Mapping[str, Any]],
    compactions: Sequence[Compaction],
    *,
    partial_start: bool = False,
    start: int = 0,
) -> list[dict[str, Any]]:
    """Return ``messages`` (a root→leaf path, or a suffix of one with ``partial_start``) with
    every applicable overlay's range replaced by its virtual summary message.

    With ``start``, only the part of the result from path index ``start`` on is returned (a
    summary whose range reaches ``start`` included): the window of a path resolved with the
    whole path's overlays.

    Messages outside any overlay are returned as the same objects (not copied); the input list
    is not modified.
    """
    if not compactions:
        return [m if isinstance(m, dict) else dict(m) for m in messages[start:]]
    chosen = resolve_overlays([m["id"] for m in messages], compactions, partial_start=partial_start)
    result: list[dict[str, Any]] = []
    cursor = start
    for c, first, last in chosen:
        if last < start:
            continue
        result.extend(_as_dicts(messages[cursor:first]))
        result.append(compaction_message(c))
        cursor = max(cursor, last + 1)
    result.extend(_as_dicts(messages[cursor:]))
    return result


def _as_dicts(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [m if isinstance(m, dict) else dict(m) for m in messages]
