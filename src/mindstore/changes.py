"""The change feed's event types: what ``store.changes(namespace, since=seq)`` yields.

Every write to a store records, in the same transaction, one small row per event in the
namespace's feed, numbered by a per-namespace counter: 1, 2, 3, … with no gap (a write that
rolls back takes its numbers with it) and in commit order (the counter is bumped at the end of
the write while it holds the write lock, so number *n* commits before *n + 1* is handed out).
A reader that remembers the last ``seq`` it handled and passes it back as ``since=`` after a
restart sees every later event exactly once, in order.

Events carry identifiers, never message text: the feed is a notification channel (re-read what
changed), small enough that recording it costs one short INSERT per write.

``data`` by kind (``session_id`` is set for every session-level kind, ``None`` for
namespace-wide blocks and entries and for ``namespace_deleted``):

=======================  ======================================================================
kind                     data
=======================  ======================================================================
message_appended         ``message_id``, ``role``, ``tokens`` (the message's estimate)
message_updated          ``message_id``, ``role``
message_deleted          ``message_id``
session_cleared          ``{}`` (every message, compaction and skill state removed)
compaction_started       ``leaf_id``
compaction_finished      ``compaction_id``, ``from_id``, ``to_id``, ``supersedes``
compaction_failed        ``leaf_id``, ``error`` (type and message)
compaction_reverted      ``compaction_id``
status                   ``state`` (``"compacting"`` / ``"idle"``), ``token_estimate`` (context
                         tokens, ``None`` when not measured), ``threshold`` (``compact_after``,
                         ``None`` when not set)
block_written            ``label``, ``deleted`` (``True`` when the block was deleted)
prompt_written           ``{}`` (the frozen system prompt was stored)
skill_loaded             ``label``, ``key``
skill_unloaded           ``label``, ``key``
entry_written            ``label``, ``key``
entry_deleted            ``label``, ``key``
session_created          ``{}``
session_updated          ``fields`` (names of the registry fields written, e.g. ``["name"]``)
session_deleted          ``{}``
namespace_deleted        ``{}`` — not stored: ``delete_namespace`` removes the namespace's
                         feed with everything else, and a follower whose position is past the
                         namespace's counter is given this event, numbered 0, then the new
                         feed from its start
=======================  ======================================================================

Deleting a session empties the ``data`` of its events (``{}``: they keep their kind and number,
so the numbering has no gap and no number is reused) and adds ``session_deleted``.

Not events: the running token estimate, the search index and embeddings (derived data), entry
expiry changes (:meth:`~mindstore.store.base.EntryStore.set_entry_expiry`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal, get_args

__all__ = ["CHANGE_KINDS", "SESSION_EVENT_KINDS", "Change", "ChangeKind", "Status"]

ChangeKind = Literal[
    "message_appended",
    "message_updated",
    "message_deleted",
    "session_cleared",
    "compaction_started",
    "compaction_finished",
    "compaction_failed",
    "compaction_reverted",
    "status",
    "block_written",
    "prompt_written",
    "skill_loaded",
    "skill_unloaded",
    "entry_written",
    "entry_deleted",
    "session_created",
    "session_updated",
    "session_deleted",
    "namespace_deleted",
]

#: Every kind of event the feed holds.
CHANGE_KINDS: Final[frozenset[str]] = frozenset(get_args(ChangeKind))

#: The kinds a Session records itself (:meth:`~mindstore.store.base.ChangeStore.record_changes`);
#: every other kind is written by the store with the write it describes.
SESSION_EVENT_KINDS: Final[frozenset[str]] = frozenset(
    {"compaction_started", "compaction_failed", "status"}
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Change:
    """One event of a namespace's change feed (see the module docstring for ``data``).

    Attributes:
        seq: its number in the namespace's feed (1, 2, 3, … — resume with ``since=seq``).
        namespace: the namespace it happened in.
        kind: what happened.
        session_id: the session it concerns; ``None`` for namespace-wide blocks and entries.
        data: the identifiers of what changed.
        created_at: when it was recorded (the write's transaction time, UTC).
    """

    seq: int
    namespace: str
    kind: ChangeKind
    session_id: str | None
    data: Mapping[str, Any] = field(default_factory=dict)
    created_at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class Status:
    """A session's state as :meth:`mindstore.Session.on_status` callbacks receive it (and the
    ``data`` of a ``status`` event).

    Attributes:
        namespace, session_id: the session.
        state: ``"compacting"`` while a compaction runs, else ``"idle"``.
        token_estimate: the context's tokens (the overlaid path plus the system prompt, as
            ``compact_after`` measures it); ``None`` when it was not measured.
        threshold: the ``compact_after`` threshold, ``None`` when not set.
    """

    namespace: str
    session_id: str
    state: Literal["idle", "compacting"]
    token_estimate: int | None
    threshold: int | None

    def as_data(self) -> dict[str, Any]:
        """The ``data`` of the ``status`` event that records this status."""
        return {
            "state": self.state,
            "token_estimate": self.token_estimate,
            "threshold": self.threshold,
        }
