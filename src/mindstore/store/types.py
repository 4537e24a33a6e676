"""The value types of the store: keys, messages as stored, overlays, entries, registry rows.

Pure: frozen dataclasses and sentinels, no I/O and no import of a backend or a driver, so pure
modules (overlay application, rendering, compaction planning) depend on these values rather
than on the store package. :mod:`mindstore.store.base` re-exports every name.

Keys are composite and never concatenated: a conversation is ``SessionKey(namespace,
session_id)``; a context block or keyed-entry collection is ``ScopeKey(namespace, session_id,
label)`` where ``session_id=None`` means "shared across the namespace". Times are
timezone-aware UTC.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

__all__ = [
    "AUTO",
    "UNSET",
    "Compaction",
    "Entry",
    "EntryHit",
    "MessageNode",
    "NewMessage",
    "ParentSpec",
    "PathWindow",
    "RecentHistory",
    "ScopeKey",
    "SessionInfo",
    "SessionKey",
    "SkillState",
    "StoredMessage",
    "TokenEstimate",
]


class _Sentinel(enum.Enum):
    AUTO = "AUTO"
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return self.value


AUTO: Final = _Sentinel.AUTO
"""``parent_id`` default: attach to the session's latest leaf (new root when empty)."""
UNSET: Final = _Sentinel.UNSET
"""``expected_leaf`` default: no compare-and-append check."""

ParentSpec = str | None | _Sentinel


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionKey:
    namespace: str
    session_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ScopeKey:
    """Where a block or a keyed-entry collection lives; ``session_id=None`` = namespace-wide."""

    namespace: str
    session_id: str | None
    label: str


@dataclass(frozen=True, kw_only=True, slots=True)
class NewMessage:
    """One message to insert. ``message`` is already validated (has an ``id``)."""

    message: dict[str, Any]
    parent: ParentSpec = AUTO
    tokens: int = 0
    """The session's token estimate of this message, kept for budgets (get_recent_history)."""
    content: str | None = None
    """Optional: exactly :func:`mindstore.messages.dumps` of ``message``, when the caller has it
    already (the Session does, from the row-size check). A store may store it instead of
    serialising the message again; it must not be anything else."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StoredMessage:
    id: str
    parent_id: str | None
    message: dict[str, Any]
    created_at: datetime  # timezone-aware UTC, sub-second precision
    seq: int
    tokens: int
    nbytes: int  # UTF-8 bytes of the stored JSON


@dataclass(frozen=True, kw_only=True, slots=True)
class PathWindow:
    """The longest suffix of a root→leaf path within a budget, plus totals over the whole path."""

    messages: list[StoredMessage]  # root-most first
    truncated: bool
    total_tokens: int
    total_bytes: int
    path_length: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Compaction:
    """A stored summary overlay over the contiguous path range ``from``..``to``."""

    id: int
    from_message_id: str
    to_message_id: str
    summary: str
    created_at: datetime
    superseded_by: int | None = None
    reverted: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class TokenEstimate:
    """The running token estimate of a session, kept by the store for ``compact_after``.

    ``tokens`` is the estimate of the path ending at ``leaf_id`` with compaction overlays
    applied (the stored per-message ``tokens`` summed, summaries counted instead of the ranges
    they cover). Every append in the same transaction extends it when the new message's parent
    is ``leaf_id`` (or starts it at a new root) and clears it otherwise; every other write that
    can change what a path reads as (update, delete, clear, add/revert compaction, a skill
    unload) clears it, clears the back-off and increments ``version``. ``leaf_id`` and
    ``tokens`` are None when unknown.

    ``floor``/``margin``: the automatic-compaction back-off — no automatic compaction until the
    context exceeds ``floor``; ``margin`` is the growth the last back-off waited for.
    """

    leaf_id: str | None
    tokens: int | None
    version: int
    floor: int | None = None
    margin: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class SkillState:
    """A skill of a loadable block that was loaded in a session.

    ``loaded`` is False after an unload; ``unloaded_before_seq`` is then the highest message
    ``seq`` of the session at unload time: tool results of ``load_context`` for this key stored in
    messages with ``seq <= unloaded_before_seq`` read back as ``[skill unloaded: <key>]``.
    Loading the skill again keeps that mark (``loaded`` is True, ``unloaded_before_seq`` is
    not None): results from before the unload stay hidden and the new load's result shows.
    The next unload moves the mark to the then-newest message. ``None`` means never unloaded.
    """

    label: str
    key: str
    loaded: bool
    unloaded_before_seq: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Entry:
    """A keyed document in a collection (searchable entries and stored skills)."""

    key: str
    content: str
    description: str | None
    updated_at: datetime
    data: str | None = None
    """An opaque payload stored with the entry and never indexed (the LangGraph store keeps an
    item's JSON value here)."""
    created_at: datetime | None = None
    """When the entry was first written (``updated_at`` for entries older than the column)."""
    expires_at: datetime | None = None
    """When the entry expires (None: never). Expired entries are still returned by ``get_entry``
    and ``get_entries`` until swept; callers that honour expiry check this field."""


@dataclass(frozen=True, kw_only=True, slots=True)
class EntryHit:
    key: str
    content: str
    description: str | None
    snippet: str
    score: float


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionInfo:
    id: str
    name: str | None
    parent_session_id: str | None
    model: str | None
    source: str | None
    metadata: dict[str, Any] | None
    input_tokens: int
    output_tokens: int
    estimated_cost: float
    end_reason: str | None
    created_at: datetime
    updated_at: datetime
    message_count: int


@dataclass(frozen=True, kw_only=True, slots=True)
class MessageNode:
    """A stored message with its place in the tree."""

    message: dict[str, Any]
    parent_id: str | None
    created_at: datetime
    seq: int


@dataclass(frozen=True, kw_only=True, slots=True)
class RecentHistory:
    """The tail of a path within a budget; totals are over the whole path."""

    messages: list[dict[str, Any]]
    truncated: bool
    total_tokens: int
    total_bytes: int
