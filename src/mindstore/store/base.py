"""The Store protocol: persistence for namespaced message trees, overlays, blocks and search.

Any class that passes ``tests/contract`` is a valid backend. Stores only move rows: validation
of messages, overlay application, token estimates, rendering and compaction planning live in pure
modules and in :class:`mindstore.Session`. Each method is one transaction: it either happens
whole or raises and changes nothing.

Keys are composite and never concatenated: a conversation is ``SessionKey(namespace,
session_id)``; a context block or keyed-entry collection is ``ScopeKey(namespace, session_id,
label)`` where ``session_id=None`` means "shared across the namespace".

Ordering: every message gets ``seq``, a store-wide monotonic integer assigned at insert. Ties
never come from wall-clock time.

Errors: driver failures surface as :class:`~mindstore.errors.StoreError` (original on
``__cause__``); missing ids as :class:`~mindstore.errors.MessageNotFoundError`; lost
compare-and-append races as :class:`~mindstore.errors.ConflictError`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol, runtime_checkable

from mindstore.search import ParsedQuery, SearchResult

__all__ = [
    "AUTO",
    "UNSET",
    "Compaction",
    "Entry",
    "EntryHit",
    "NewMessage",
    "ParentSpec",
    "PathWindow",
    "ScopeKey",
    "SessionInfo",
    "SessionKey",
    "SkillState",
    "Store",
    "StoredMessage",
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


@runtime_checkable
class Store(Protocol):
    """Persistence for namespaced message trees, blocks, overlays and search.

    Any class that passes tests/contract is a valid backend.
    """

    # ---- lifecycle -------------------------------------------------------------------------
    async def aclose(self) -> None: ...

    # ---- messages --------------------------------------------------------------------------
    async def append(
        self,
        key: SessionKey,
        items: Sequence[NewMessage],
        *,
        expected_leaf: str | _Sentinel | None = UNSET,
    ) -> list[bool]:
        """Insert ``items`` in order, in one transaction; return per item whether it was new.

        ``parent``: AUTO → the session's latest leaf at that moment (so a batch forms a chain;
        a new root when the session is empty); None → new root; a string → that message, which
        must exist in the session (MessageNotFoundError, nothing written). An id that already
        exists is skipped (False) and changes nothing. With ``expected_leaf`` (checked once,
        before the first item; None means "the session must be empty") a different latest leaf
        raises ConflictError and nothing is written. Auto-parented appends are serialised per
        session across processes, so concurrent appenders form one chain. Each insert updates
        the session's latest leaf, message count and ``updated_at``, and the search index.
        """
        ...

    async def get_message(self, key: SessionKey, message_id: str) -> StoredMessage | None: ...

    async def get_messages(self, key: SessionKey, ids: Sequence[str]) -> list[StoredMessage]:
        """The stored messages among ``ids`` (unknown ids are left out), ordered by seq."""
        ...

    async def all_messages(self, key: SessionKey) -> list[StoredMessage]:
        """Every message of the session (all branches), in insertion (seq) order — for export,
        fork and model checks. Parents always come before their children."""
        ...

    async def path(self, key: SessionKey, leaf_id: str | None) -> list[StoredMessage]:
        """Root→leaf path ending at ``leaf_id`` (None → latest leaf; [] for an empty session).

        No depth limit. Unknown ``leaf_id`` → MessageNotFoundError.
        """
        ...

    async def path_window(
        self,
        key: SessionKey,
        leaf_id: str | None,
        *,
        max_tokens: int | None,
        max_bytes: int | None,
        min_messages: int,
    ) -> PathWindow:
        """The longest suffix of the path within both budgets (using the stored ``tokens`` and
        ``nbytes``), at least ``min_messages`` long (the leaf always); totals over the whole
        path computed without loading message bodies outside the window."""
        ...

    async def path_length(self, key: SessionKey, leaf_id: str | None) -> int: ...

    async def children(self, key: SessionKey, message_id: str) -> list[StoredMessage]:
        """Direct children ordered by seq. Unknown id → MessageNotFoundError."""
        ...

    async def latest_leaf(self, key: SessionKey) -> StoredMessage | None:
        """The most recently inserted message with no children — O(1), from a maintained
        pointer, correct after deletes and after other processes' writes."""
        ...

    async def update(self, key: SessionKey, message: dict[str, Any], *, tokens: int) -> None:
        """Replace the content of ``message["id"]`` (parent unchanged), reindexing it.
        Unknown id → MessageNotFoundError."""
        ...

    async def delete(self, key: SessionKey, ids: Sequence[str]) -> int:
        """Delete messages; children are re-attached to the deleted message's nearest
        surviving ancestor; compactions whose from/to message was deleted are dropped; search
        rows removed; latest leaf recomputed. Any unknown id → MessageNotFoundError and nothing
        is deleted. Returns the number deleted."""
        ...

    async def clear(self, key: SessionKey) -> None:
        """Remove every message, compaction, search row and skill state of the session
        (blocks, the frozen prompt and the registry row stay)."""
        ...

    async def search(
        self,
        namespace: str,
        query: ParsedQuery,
        *,
        session_ids: Sequence[str] | None = None,
        limit: int = 20,
    ) -> list[SearchResult]:
        """Full-text search over the namespace (optionally only ``session_ids``), best first,
        ties by recency (higher seq first). Empty query → []."""
        ...

    # ---- compaction overlays -----------------------------------------------------------------
    async def add_compaction(
        self,
        key: SessionKey,
        *,
        summary: str,
        from_id: str,
        to_id: str,
        supersedes: Sequence[int] = (),
    ) -> Compaction:
        """Store an overlay (range already validated by the caller; unknown ids still raise
        MessageNotFoundError) and mark ``supersedes`` as superseded by it, atomically."""
        ...

    async def get_compactions(self, key: SessionKey) -> list[Compaction]:
        """Every overlay of the session, reverted ones included, in creation order (id)."""
        ...

    async def revert_compaction(self, key: SessionKey, compaction_id: int) -> Compaction:
        """Mark reverted; overlays it had superseded become active again (superseded_by=None).
        Unknown id → CompactionError."""
        ...

    # ---- context blocks ----------------------------------------------------------------------
    async def get_block(self, key: ScopeKey) -> str | None: ...

    async def set_block(self, key: ScopeKey, content: str) -> None: ...

    async def update_block(self, key: ScopeKey, fn: Callable[[str], str]) -> str:
        """Atomic read-modify-write: ``fn(current or "")`` runs inside the transaction with the
        row locked; its result is stored and returned; if ``fn`` raises, nothing changes and the
        exception propagates. Concurrent updates never lose a write."""
        ...

    async def delete_block(self, key: ScopeKey) -> None: ...

    async def list_blocks(
        self, namespace: str, session_id: str | None
    ) -> list[tuple[ScopeKey, str]]:
        """Stored blocks visible to a session: its own (session_id=that session) plus the
        namespace-scoped ones (session_id=None); with ``session_id=None`` only the latter."""
        ...

    # ---- frozen system prompt ----------------------------------------------------------------
    async def get_prompt(self, key: SessionKey) -> str | None: ...

    async def put_prompt(self, key: SessionKey, prompt: str, *, overwrite: bool) -> str:
        """Store the prompt; with ``overwrite=False`` keep an existing one. Returns the stored
        prompt (so concurrent first freezes agree)."""
        ...

    # ---- loaded skills -----------------------------------------------------------------------
    async def get_skill_states(self, key: SessionKey) -> list[SkillState]: ...

    async def set_skill_loaded(
        self, key: SessionKey, label: str, skill_key: str, loaded: bool
    ) -> bool:
        """Record a load/unload; returns False when it was already in that state. An unload
        records ``unloaded_before_seq`` = the session's highest message seq."""
        ...

    # ---- keyed entries (StoreSearchProvider, StoreSkillProvider) -----------------------------
    async def put_entry(
        self, key: ScopeKey, entry_key: str, content: str, *, description: str | None = None
    ) -> None:
        """Upsert by ``entry_key``, reindexing for search."""
        ...

    async def get_entry(self, key: ScopeKey, entry_key: str) -> Entry | None: ...

    async def list_entries(self, key: ScopeKey, *, limit: int | None = None) -> list[Entry]:
        """Most recently updated first."""
        ...

    async def count_entries(self, key: ScopeKey) -> int: ...

    async def delete_entry(self, key: ScopeKey, entry_key: str) -> bool: ...

    async def search_entries(
        self, key: ScopeKey, query: ParsedQuery, *, limit: int = 10
    ) -> list[EntryHit]: ...

    # ---- session registry (SessionManager) ---------------------------------------------------
    async def create_session(
        self,
        key: SessionKey,
        *,
        name: str | None = None,
        parent_session_id: str | None = None,
        model: str | None = None,
        source: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        """Create the registry row (ConflictError if that session already has one)."""
        ...

    async def get_session(self, key: SessionKey) -> SessionInfo | None:
        """Registry row; sessions that only ever had messages appended also have one."""
        ...

    async def list_sessions(
        self, namespace: str, *, limit: int = 50, before: str | None = None
    ) -> list[SessionInfo]:
        """Newest ``updated_at`` first, ties by id descending; ``before`` = the last id of the
        previous page (unknown → [])."""
        ...

    async def update_session(self, key: SessionKey, **fields: Any) -> SessionInfo:
        """Set ``name`` and/or ``end_reason`` (and touch updated_at); return the updated row.
        Unknown session → SessionNotFoundError."""
        ...

    async def add_usage(
        self, key: SessionKey, input_tokens: int, output_tokens: int, cost: float
    ) -> SessionInfo:
        """Atomically add to the usage counters (creating the registry row if needed)."""
        ...

    async def delete_session(self, key: SessionKey) -> bool:
        """Remove every row of the session in every table (messages, search rows, compactions,
        session-scoped blocks and entries, frozen prompt, skill states, registry row)."""
        ...

    async def stats(self) -> dict[str, int]:
        """Row counts for the CLI's ``stats`` (namespaces, sessions, messages, blocks, …)."""
        ...

    async def delete_namespace(self, namespace: str) -> dict[str, int]:
        """Remove every row of ``namespace`` in every table — sessions, messages, search rows,
        compactions, blocks (session- and namespace-scoped), entries and their search rows,
        frozen prompts, skill states, usage — in ONE transaction; other namespaces are not
        touched. Returns the number of rows deleted per kind (``sessions``, ``messages``,
        ``compactions``, ``blocks``, ``entries``, ``prompts``, ``skill_states``)."""
        ...
