"""Skill unloads at read time. Pure: no I/O.

Loading a skill stores the ``load_context`` tool call and its result in history like any other
message. Unloading it is non-destructive: the stored result stays, and every read of history
shows ``[skill unloaded: <key>]`` in place of the output of a ``load_context`` result stored
before the unload (``SkillState.unloaded_before_seq``). A skill loaded again later shows its
new result; only results at or before the mark are hidden. Stored rows are never touched: the
replacement is made on copies.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from mindstore.store.base import SkillState, StoredMessage

__all__ = ["LOAD_TOOL", "apply_skill_unloads"]

LOAD_TOOL = "load_context"
"""The name of the generated tool that loads a skill."""


def apply_skill_unloads(
    rows: Sequence[StoredMessage], messages: list[dict[str, Any]], states: Sequence[SkillState]
) -> list[dict[str, Any]]:
    """``messages`` (the messages of ``rows``, one to one) with the outputs of unloaded
    skills' ``load_context`` results replaced (copies; the list is returned as it is when no
    state has an unload mark)."""
    marked = [s for s in states if s.unloaded_before_seq is not None]
    if not rows or not marked:
        return messages
    newest_mark = max(s.unloaded_before_seq or 0 for s in marked)
    seq_by_id = {r.id: r.seq for r in rows}
    out = []
    for message in messages:
        seq = seq_by_id.get(message.get("id"))  # type: ignore[arg-type]
        parts = _parts(message)
        new_parts = None
        if seq is not None and seq <= newest_mark:
            for i, part in enumerate(parts):
                call = _load_call(part)
                if call is None or "output" not in part:
                    continue
                label, key = call
                if _unloaded(marked, label, key, seq):
                    if new_parts is None:
                        new_parts = list(parts)
                    new_parts[i] = {**part, "output": f"[skill unloaded: {key}]"}
        out.append(message if new_parts is None else {**message, "parts": new_parts})
    return out


def _parts(message: Mapping[str, Any]) -> list[Any]:
    parts = message.get("parts")
    return parts if isinstance(parts, list) else []


def _load_call(part: Any) -> tuple[str | None, str] | None:
    """``(label, key)`` when ``part`` is a stored ``load_context`` tool call."""
    if not isinstance(part, Mapping):
        return None
    t = part.get("type")
    if t != f"tool-{LOAD_TOOL}" and not (t == "dynamic-tool" and part.get("toolName") == LOAD_TOOL):
        return None
    args = part.get("input")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    if not isinstance(args, Mapping) or not isinstance(args.get("key"), str):
        return None
    label = args.get("label")
    return (label if isinstance(label, str) else None), args["key"]


def _unloaded(states: Sequence[SkillState], label: str | None, key: str, seq: int) -> bool:
    for s in states:
        if s.key != key or (label is not None and s.label != label):
            continue
        if s.unloaded_before_seq is not None and seq <= s.unloaded_before_seq:
            return True
    return False
