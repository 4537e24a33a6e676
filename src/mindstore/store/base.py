"""The Store protocol: persistence for namespaced message trees, overlays, blocks and search.

The protocol is split by role — :class:`MessageStore` (message trees, paths, search),
:class:`OverlayStore` (compaction overlays), :class:`BlockStore` (context blocks, the frozen
prompt, loaded skills), :class:`EntryStore` (keyed entries), :class:`RegistryStore` (the session
registry and whole-store operations), :class:`ChangeStore` (the change feed) — and
:class:`Store` is all of them plus the lifecycle and :meth:`Store.transaction`. A component
that needs one role can ask for that role only. The value types live in
:mod:`mindstore.store.types`; this module re-exports them.

Any class that passes ``tests/contract`` is a valid backend. Stores only move rows: validation
of messages, overlay application, token estimates, rendering and compaction planning live in pure
modules and in :class:`mindstore.Session`. Each method is one transaction: it either happens
whole or raises and changes nothing; :meth:`Store.transaction` groups several calls into one.

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

from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from mindstore.changes import Change
from mindstore.search import ParsedQuery, SearchResult
from mindstore.store.types import (
    AUTO,
    UNSET,
    Compaction,
    Entry,
    EntryHit,
    NewMessage,
    ParentSpec,
    PathWindow,
    ScopeKey,
    SessionInfo,
    SessionKey,
    SkillState,
    StoredMessage,
    TokenEstimate,
)
from mindstore.store.types import (
    _Sentinel as _Sentinel,
)

__all__ = [
    "AUTO",
    "UNSET",
    "BlockStore",
    "ChangeStore",
    "Compaction",
    "Entry",
    "EntryHit",
    "EntryStore",
    "MessageStore",
    "NewMessage",
    "OverlayStore",
    "ParentSpec",
    "PathWindow",
    "RegistryStore",
    "ScopeKey",
    "SessionInfo",
    "SessionKey",
    "SkillState",
    "Store",
    "StoredMessage",
    "TokenEstimate",
]


class MessageStore(Protocol):
    """Message trees of sessions: append, read paths and windows, edit, delete, search."""

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

    async def token_estimate(self, key: SessionKey) -> TokenEstimate | None:
        """The session's running token estimate (see :class:`TokenEstimate`) — O(1); None for
        a session that does not exist."""
        ...

    async def set_token_estimate(
        self,
        key: SessionKey,
        *,
        leaf_id: str,
        tokens: int,
        version: int,
        floor: int | None = None,
        margin: int | None = None,
    ) -> bool:
        """Record that the overlaid path ending at ``leaf_id`` is ``tokens`` tokens, and the
        back-off — only if the estimate's ``version`` is still ``version`` (no path-changing
        write happened since it was read); returns whether it was written."""
        ...

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


class OverlayStore(Protocol):
    """Compaction overlays: stored summaries over a contiguous path range."""

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


class BlockStore(Protocol):
    """Per-session and namespace-wide context state: blocks, the frozen system prompt and
    which skills of a loadable block are loaded."""

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


class EntryStore(Protocol):
    """Keyed, searchable entry collections (search and skill providers, the LangGraph store)."""

    # ---- keyed entries (StoreSearchProvider, StoreSkillProvider) -----------------------------
    async def put_entry(
        self,
        key: ScopeKey,
        entry_key: str,
        content: str,
        *,
        description: str | None = None,
        data: str | None = None,
        expires_at: datetime | None = None,
    ) -> None:
        """Upsert by ``entry_key``, reindexing ``content`` (and key, description) for search.
        ``data`` is stored as given and never indexed; ``expires_at`` (None: never) replaces
        the entry's expiry; an update keeps the entry's ``created_at``."""
        ...

    async def get_entries(self, key: ScopeKey, entry_keys: Sequence[str]) -> list[Entry]:
        """The entries among ``entry_keys`` (unknown keys are left out), in the order asked."""
        ...

    async def list_entry_labels(self, namespace: str, *, prefix: str = "") -> list[str]:
        """Sorted distinct labels of the namespace-wide entry collections (``session_id=None``)
        whose label starts with ``prefix`` (taken literally) and that hold at least one entry
        that has not expired."""
        ...

    async def set_entry_expiry(self, key: ScopeKey, expiries: Mapping[str, datetime | None]) -> int:
        """Set the expiry of the named entries (``updated_at`` unchanged); returns how many
        existed. Unknown keys are ignored."""
        ...

    async def delete_expired_entries(self, namespace: str | None = None) -> int:
        """Delete every entry whose ``expires_at`` has passed (in ``namespace``, or in every
        namespace), with its search rows; returns the number deleted."""
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


class RegistryStore(Protocol):
    """The session registry (SessionManager) and whole-store operations (stats, reindex,
    namespaces)."""

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

    async def reindex(self, *, progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild the lexical search index from the stored messages and entries, in one
        transaction; ``progress(done, total)`` is called as documents are indexed. Returns the
        number of documents. (Opening a store written by an older version does this once.)"""

    async def delete_namespace(self, namespace: str) -> dict[str, int]:
        """Remove every row of ``namespace`` in every table — sessions, messages, search rows,
        compactions, blocks (session- and namespace-scoped), entries and their search rows,
        frozen prompts, skill states, usage — in ONE transaction; other namespaces are not
        touched. Returns the number of rows deleted per kind (``sessions``, ``messages``,
        ``compactions``, ``blocks``, ``entries``, ``prompts``, ``skill_states``)."""

    async def list_namespaces(self) -> list[str]:
        """Every namespace that holds a session, a block or a keyed entry, sorted (by code
        point). For browsing a store (the viewer); a namespace with nothing left is not listed."""
        ...


class ChangeStore(Protocol):
    """The change feed (DESIGN §14): every write above records its events, numbered per
    namespace, in its own transaction (see :mod:`mindstore.changes` for the kinds)."""

    def changes(
        self,
        namespace: str,
        *,
        since: int = 0,
        follow: bool = True,
        poll_interval: float = 0.05,
        batch: int = 500,
    ) -> AsyncGenerator[Change, None]:
        """``async for event in store.changes(namespace, since=seq)``: the namespace's events
        numbered above ``since``, in order, then — with ``follow`` (default) — each new one
        as soon as its write commits, in any process; ``follow=False`` stops at the end.

        No event is skipped or given twice: numbers are handed out in commit order without
        gaps, so a reader that stops (or is killed) after handling event ``n`` and starts
        again with ``since=n`` gets exactly the events it had not handled. After
        ``delete_session`` its events keep their numbers with their ``data`` emptied
        (``{}``), followed by ``session_deleted``. After ``delete_namespace`` the feed starts
        again from 1; a follower further on is given a ``namespace_deleted`` event numbered
        0, then the new feed from its start.

        Each follower holds one connection of its own, closed when the iteration ends (close
        the iterator, e.g. ``contextlib.aclosing``, when you stop early). ``poll_interval``:
        how often SQLite checks for a commit while nothing is new; PostgreSQL is woken by
        ``NOTIFY`` instead. ``batch``: events read per query.

        Raises:
            ValueError: a negative ``since``, a ``batch`` below 1, a bad ``poll_interval``.
            InvalidKeyError: a bad namespace.
            StoreError: the store is closed, or its database stayed unreachable.
        """
        ...

    async def read_changes(
        self, namespace: str, *, since: int = 0, limit: int = 500
    ) -> list[Change]:
        """One read of the feed: at most ``limit`` events numbered above ``since``, in order."""
        ...

    async def latest_change_seq(self, namespace: str) -> int:
        """The number of the namespace's latest event (0: none) — follow "from now" with
        ``changes(namespace, since=await store.latest_change_seq(namespace))``."""
        ...

    async def record_changes(
        self, key: SessionKey, events: Sequence[tuple[str, Mapping[str, Any]]]
    ) -> None:
        """Record session-level events that no store write describes — ``compaction_started``,
        ``compaction_failed``, ``status`` (a Session records them) — in one transaction.

        Raises:
            InvalidKeyError: another kind.
            TypeError: data that is not a JSON-serialisable mapping.
        """
        ...


@runtime_checkable
class Store(
    MessageStore, OverlayStore, BlockStore, EntryStore, RegistryStore, ChangeStore, Protocol
):
    """Persistence for namespaced message trees, blocks, overlays and search: every role.

    Any class that passes tests/contract is a valid backend.
    """

    # ---- lifecycle -------------------------------------------------------------------------
    async def aclose(self) -> None: ...

    def transaction(
        self, *, readonly: bool = False, lock: Sequence[SessionKey] = ()
    ) -> AbstractAsyncContextManager[None]:
        """``async with store.transaction():`` — the calls the current task makes on this store
        inside the block are ONE transaction: they all commit when the block ends, or none
        does (an exception, a lost connection or a killed process leaves nothing of the block).

        Multi-step operations use it: import, fork, compact_and_split (writes) and export
        (``readonly=True``: every read sees one snapshot; a write raises StoreError). Each
        call inside stays atomic by itself (a call that raises undoes only its own writes; the
        block decides). ``lock``: sessions whose registry rows are locked at the start, so a
        check made inside the block (e.g. "this session has not ended") still holds at commit
        — concurrent blocks locking the same session run one after the other. Blocks nest
        (an inner block joins the outer one). Inside the block, await nothing but this
        store's calls: an SQLite store has one connection, and another task's call made while
        the block is suspended raises StoreError instead of joining it.
        """
        ...
