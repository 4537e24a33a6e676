"""Rows as values: how a row of either backend becomes a message, compaction, session, entry,
skill state or block. Pure (no I/O): the SELECT column lists of both backends are in the same
order, so one decoder serves both; ``when`` turns a stored time into an aware datetime (SQLite
stores integer microseconds, PostgreSQL returns ``timestamptz`` values as they are).
"""

from __future__ import annotations

import json
import types
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from mindstore.store.types import (
    Compaction,
    Entry,
    ScopeKey,
    SessionInfo,
    SkillState,
    StoredMessage,
)

# Message rows. Path reads build thousands of StoredMessage objects, so both are fast paths:
_scan_json: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def loads(text: str) -> Any:
    """``json.loads`` of a stored message, without its per-call overhead.

    Stored JSON is always our own compact :func:`~mindstore.messages.dumps` output, so the C
    scanner can start at offset 0; ``json.loads``' type checks and two whitespace regex matches
    cost ~40% of decoding a small message. Anything unexpected goes through ``json.loads`` (and
    its error).
    """
    try:
        value, end = _scan_json(text, 0)
    except StopIteration:
        return json.loads(text)
    if end != len(text):
        return json.loads(text)
    return value


STORED_FIELDS = ("id", "parent_id", "message", "created_at", "seq", "tokens", "nbytes")


def _stored_message_factory() -> Callable[..., StoredMessage]:
    """A fast constructor for :class:`StoredMessage`, positional in :data:`STORED_FIELDS` order.

    The dataclass is frozen with slots; its generated ``__init__`` goes through
    ``object.__setattr__`` per field, which costs about as much as decoding a small message.
    Setting the slots through their member descriptors is ~3x faster and produces an identical
    object. Falls back to the normal constructor if the class ever stops using slots.
    """
    setters = [StoredMessage.__dict__.get(n) for n in STORED_FIELDS]
    if not all(isinstance(d, types.MemberDescriptorType) for d in setters):
        return lambda *a: StoredMessage(**dict(zip(STORED_FIELDS, a, strict=True)))
    new = object.__new__
    s_id, s_parent, s_msg, s_created, s_seq, s_tokens, s_nbytes = (
        d.__set__  # type: ignore[union-attr]
        for d in setters
    )

    def make(
        id: str,
        parent_id: str | None,
        message: dict[str, Any],
        created_at: datetime,
        seq: int,
        tokens: int,
        nbytes: int,
    ) -> StoredMessage:
        obj = new(StoredMessage)
        s_id(obj, id)
        s_parent(obj, parent_id)
        s_msg(obj, message)
        s_created(obj, created_at)
        s_seq(obj, seq)
        s_tokens(obj, tokens)
        s_nbytes(obj, nbytes)
        return obj

    return make


make_stored = _stored_message_factory()


def message_row(row: Sequence[Any], created_at: datetime) -> StoredMessage:
    """A message row of both backends — ``(seq, id, parent id, content, <time>, tokens,
    nbytes)`` — as a StoredMessage; ``created_at`` is the row's time as an aware datetime."""
    return make_stored(row[1], row[2], loads(row[3]), created_at, row[0], row[5], row[6])


def _as_is(value: Any) -> datetime:
    return value  # type: ignore[no-any-return]


def decode_compaction(row: Sequence[Any], when: Callable[[Any], datetime] = _as_is) -> Compaction:
    """A row ``(id, from_id, to_id, summary, created, superseded_by, reverted)``."""
    return Compaction(
        id=row[0],
        from_message_id=row[1],
        to_message_id=row[2],
        summary=row[3],
        created_at=when(row[4]),
        superseded_by=row[5],
        reverted=bool(row[6]),
    )


def decode_session(row: Sequence[Any], when: Callable[[Any], datetime] = _as_is) -> SessionInfo:
    """A registry row: ``session_id, name, parent_session_id, model, source, metadata,
    input_tokens, output_tokens, estimated_cost, end_reason, created, updated,
    message_count``."""
    return SessionInfo(
        id=row[0],
        name=row[1],
        parent_session_id=row[2],
        model=row[3],
        source=row[4],
        metadata=json.loads(row[5]) if row[5] is not None else None,
        input_tokens=row[6],
        output_tokens=row[7],
        estimated_cost=row[8],
        end_reason=row[9],
        created_at=when(row[10]),
        updated_at=when(row[11]),
        message_count=row[12],
    )


def decode_entry(row: Sequence[Any], when: Callable[[Any], datetime] = _as_is) -> Entry:
    """A row ``(key, content, description, updated, data, created, expires)``; a row written
    before entries had a creation time was created when it was last updated."""
    updated = when(row[3])
    return Entry(
        key=row[0],
        content=row[1],
        description=row[2],
        updated_at=updated,
        data=row[4],
        created_at=updated if row[5] is None else when(row[5]),
        expires_at=None if row[6] is None else when(row[6]),
    )


def decode_skill_state(row: Sequence[Any]) -> SkillState:
    """A row ``(label, skill_key, loaded, unloaded_before_seq)``."""
    return SkillState(label=row[0], key=row[1], loaded=bool(row[2]), unloaded_before_seq=row[3])


def decode_blocks(namespace: str, rows: Sequence[Sequence[Any]]) -> list[tuple[ScopeKey, str]]:
    """Rows ``(scope, label, content)`` of ``namespace``; scope ``''`` is namespace-wide."""
    return [
        (ScopeKey(namespace=namespace, session_id=scope or None, label=label), content)
        for scope, label, content in rows
    ]


# Search: candidates ranked by the backend's index become results through one assembly loop
# (:class:`mindstore.lexical.hits.Hits`); these say what a row is and what a result looks like.
