"""Session: the builder and every per-conversation operation.

A Session is a handle on one conversation tree ``(namespace, session_id)`` in a store, plus the
configuration of its context blocks and compaction. Builder methods (``with_context``,
``with_cached_prompt``, ``on_compaction``, ``compact_after``, ``on_compaction_error``) return the
session and do no I/O; nothing is resolved until the first async call.

The context-memory operations live in :class:`mindstore.context.session_context.ContextMixin`
and the compaction operations in :class:`mindstore.compaction.session_compaction.CompactionMixin`;
this module holds the builder and the history API (DESIGN §3).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mindstore.compaction.rowlimit import fit_row
from mindstore.compaction.session_compaction import CompactionMixin
from mindstore.context.providers import as_provider
from mindstore.context.session_context import ContextMixin
from mindstore.context.spec import BlockSpec, Scope
from mindstore.errors import ConflictError, InvalidMessageError, MessageNotFoundError
from mindstore.hybrid import search_messages
from mindstore.messages import validate_id, validate_message
from mindstore.search import SearchResult, parse_query
from mindstore.store._checks import check_name
from mindstore.store.base import AUTO, UNSET, NewMessage, SessionKey, Store, _Sentinel
from mindstore.tokens import Tokenizer, estimate_message_tokens
from mindstore.vectors import DEFAULT_SEMANTIC_WEIGHT

__all__ = ["MessageNode", "RecentHistory", "Session"]

DEFAULT_MAX_MESSAGE_BYTES = 1_800_000


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


class Session(ContextMixin, CompactionMixin):
    """One conversation: a branching message tree plus its context memory.

    Create with :meth:`Session.create`; configure with the builder methods; then ``await``.
    """

    def __init__(
        self,
        store: Store,
        session_id: str = "default",
        *,
        namespace: str = "default",
        tokenizer: Tokenizer | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        _check_name(session_id, "session_id")
        _check_name(namespace, "namespace")
        if max_message_bytes < 4096:
            raise ValueError("max_message_bytes must be at least 4096")
        self._store = store
        self._key = SessionKey(namespace=namespace, session_id=session_id)
        self._tokenizer = tokenizer
        self.max_message_bytes = max_message_bytes
        # context configuration (ContextMixin)
        self._block_specs: dict[str, BlockSpec] = {}
        self._cached_prompt = False
        # compaction configuration (CompactionMixin)
        self._compact_fn: Callable[..., Any] | None = None
        self._compact_threshold: int | None = None
        self._compact_token_counter: Callable[..., Any] | None = None
        self._compaction_error_handler: Callable[[BaseException], Any] | None = None
        self._init_context_state()
        self._init_compaction_state()

    @classmethod
    def create(
        cls,
        store: Store,
        session_id: str = "default",
        *,
        namespace: str = "default",
        tokenizer: Tokenizer | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> Session:
        """Return a session handle. Does no I/O."""
        return cls(
            store,
            session_id,
            namespace=namespace,
            tokenizer=tokenizer,
            max_message_bytes=max_message_bytes,
        )

    # ---- identity --------------------------------------------------------------------------
    @property
    def store(self) -> Store:
        return self._store

    @property
    def session_id(self) -> str:
        return self._key.session_id

    @property
    def namespace(self) -> str:
        return self._key.namespace

    @property
    def key(self) -> SessionKey:
        return self._key

    @property
    def tokenizer(self) -> Tokenizer | None:
        return self._tokenizer

    # ---- builder ---------------------------------------------------------------------------
    def with_context(
        self,
        label: str,
        description: str | None = None,
        max_tokens: int | None = None,
        provider: Any = None,
        scope: Scope = "session",
    ) -> Session:
        """Register a context block (no I/O). Without ``provider``: a store-backed writable
        block. ``scope="namespace"`` shares the block across every session of the namespace."""
        self._block_specs[label] = _make_spec(label, description, max_tokens, provider, scope)
        self._on_blocks_changed()
        return self

    def with_cached_prompt(self, enabled: bool = True) -> Session:
        """Persist the frozen system prompt per (namespace, session)."""
        self._cached_prompt = enabled
        return self

    def on_compaction(self, fn: Callable[..., Any]) -> Session:
        """Register ``fn(messages, context) -> CompactResult | None`` (sync or async)."""
        if not callable(fn):
            raise TypeError("on_compaction takes a callable fn(messages, context)")
        self._compact_fn = fn
        return self

    def compact_after(
        self, threshold: int, token_counter: Callable[..., Any] | None = None
    ) -> Session:
        """Compact automatically after an append once path + prompt tokens exceed
        ``threshold`` (strictly)."""
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or threshold <= 0:
            raise ValueError("compact_after threshold must be a positive number of tokens")
        if token_counter is not None and not callable(token_counter):
            raise TypeError("token_counter must be a callable counter(messages, system_prompt)")
        self._compact_threshold = threshold
        self._compact_token_counter = token_counter
        return self

    def on_compaction_error(
        self, handler: Callable[[BaseException], Any | Awaitable[Any]]
    ) -> Session:
        """Receive errors of automatic compaction (otherwise they are logged)."""
        if not callable(handler):
            raise TypeError("on_compaction_error takes a callable handler(error)")
        self._compaction_error_handler = handler
        return self

    # ---- tokens ----------------------------------------------------------------------------
    def count_message_tokens(self, messages: Sequence[dict[str, Any]]) -> int:
        """The session's token estimate of ``messages`` (its tokenizer when configured)."""
        return estimate_message_tokens(messages, self._tokenizer)

    # ---- history (DESIGN §3) ---------------------------------------------------------------
    async def append_message(
        self,
        message: dict[str, Any],
        parent_id: str | _Sentinel | None = AUTO,
        *,
        expected_leaf: str | _Sentinel | None = UNSET,
    ) -> bool:
        """Insert a message; see DESIGN §3. Returns False when the id already existed.

        Raises:
            InvalidMessageError: malformed message; nothing written.
            MessageNotFoundError: ``parent_id`` does not exist in this session.
            ConflictError: ``expected_leaf`` is no longer the latest leaf.
        """
        # validate + row-size limit; the size check's JSON goes to the store (serialised once)
        msg, content = fit_row(validate_message(message), self.max_message_bytes)
        if isinstance(parent_id, str):
            validate_id(parent_id, "parent_id")
        elif parent_id is not None and parent_id is not AUTO:
            raise InvalidMessageError(
                f"parent_id must be a message id, None (new root) or omitted, got {parent_id!r:.80}"
            )
        item = NewMessage(
            message=msg,
            parent=parent_id,
            tokens=self.count_message_tokens([msg]),
            content=content,
        )
        try:
            [inserted] = await self._store.append(self._key, [item], expected_leaf=expected_leaf)
        except ConflictError:
            # A retried compare-and-append whose first attempt landed (its acknowledgement was
            # lost) finds its own message as the leaf: re-appending an existing id is a no-op.
            if await self._store.get_message(self._key, msg["id"]) is not None:
                return False
            raise
        if inserted:
            await self._after_append(msg)
        return inserted

    def _prepare_message(self, message: Any) -> dict[str, Any]:
        """Validate and apply the row-size limit (DESIGN §6.4)."""
        return self._enforce_row_limit(validate_message(message))

    async def get_history(self, leaf_id: str | None = None) -> list[dict[str, Any]]:
        """Root→leaf path with compaction overlays and skill unloads applied."""
        rows = await self._store.path(self._key, leaf_id)
        return await self._present(rows)

    async def get_message(self, message_id: str) -> dict[str, Any] | None:
        """The stored message (no overlays), or None."""
        row = await self._store.get_message(self._key, message_id)
        return row.message if row is not None else None

    async def get_node(self, message_id: str) -> MessageNode | None:
        row = await self._store.get_message(self._key, message_id)
        if row is None:
            return None
        return MessageNode(
            message=row.message, parent_id=row.parent_id, created_at=row.created_at, seq=row.seq
        )

    async def get_latest_leaf(self) -> dict[str, Any] | None:
        row = await self._store.latest_leaf(self._key)
        return row.message if row is not None else None

    async def get_branches(self, message_id: str) -> list[dict[str, Any]]:
        """Direct children of ``message_id``, oldest first."""
        return [r.message for r in await self._store.children(self._key, message_id)]

    async def get_path_length(self, leaf_id: str | None = None) -> int:
        return await self._store.path_length(self._key, leaf_id)

    async def get_recent_history(
        self,
        *,
        max_tokens: int | None = None,
        max_bytes: int | None = None,
        min_messages: int = 1,
        leaf_id: str | None = None,
    ) -> RecentHistory:
        """The longest suffix of the path within the budgets (at least ``min_messages``).

        Budgets apply to the stored messages. Overlays are applied inside the window; when the
        budget cuts through a summarised range, the window starts with that summary instead of
        the covered messages it holds, so the result is always a suffix of ``get_history()``.
        """
        for name, value in (("max_tokens", max_tokens), ("max_bytes", max_bytes)):
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ValueError(f"{name} must be a non-negative integer or None, got {value!r}")
        if not isinstance(min_messages, int) or min_messages < 0:
            raise ValueError(f"min_messages must be a non-negative integer, got {min_messages!r}")
        window = await self._store.path_window(
            self._key,
            leaf_id,
            max_tokens=max_tokens,
            max_bytes=max_bytes,
            min_messages=max(1, min_messages),
        )
        return RecentHistory(
            messages=await self._present(window.messages, window=window.truncated),
            truncated=window.truncated,
            total_tokens=window.total_tokens,
            total_bytes=window.total_bytes,
        )

    async def update_message(self, message: dict[str, Any]) -> None:
        """Replace the content of an existing message (same id).

        Raises:
            InvalidMessageError: malformed message (an id is required).
            MessageNotFoundError: no message with that id in this session.
        """
        if isinstance(message, dict) and message.get("id") is None:
            validate_message(message, generate_id=False)
        msg = self._prepare_message(message)
        await self._store.update(self._key, msg, tokens=self.count_message_tokens([msg]))
        self._invalidate_token_cache()

    async def delete_messages(self, ids: Sequence[str]) -> int:
        """Delete messages, re-attaching their children to their parents."""
        if isinstance(ids, str):
            ids = [ids]
        for i in ids:
            if not isinstance(i, str) or not i:
                raise MessageNotFoundError(f"cannot delete {i!r}: message ids are strings")
        deleted = await self._store.delete(self._key, list(dict.fromkeys(ids)))
        self._invalidate_token_cache()
        return deleted

    async def clear_messages(self) -> None:
        """Remove every message, compaction, search row and loaded skill; refresh the prompt."""
        await self._store.clear(self._key)
        self._invalidate_token_cache()
        await self._after_clear()

    async def search(
        self,
        query: str,
        *,
        limit: int = 20,
        mode: str | None = None,
        semantic_weight: float = DEFAULT_SEMANTIC_WEIGHT,
    ) -> list[SearchResult]:
        """Search this session (DESIGN §5).

        Args:
            mode: ``"lexical"``, ``"semantic"``, ``"hybrid"``; None = hybrid when the store has
                an embedder, else lexical (see :mod:`mindstore.hybrid`).
            semantic_weight: the semantic list's share of a hybrid score (0..1).
        """

        async def lexical(k: int) -> list[SearchResult]:
            parsed = parse_query(query)
            if parsed.empty or k <= 0:
                return []
            return await self._store.search(
                self._key.namespace, parsed, session_ids=[self._key.session_id], limit=k
            )

        return await search_messages(
            self._store,
            self._key.namespace,
            query,
            limit=limit,
            session_ids=[self._key.session_id],
            mode=mode,
            lexical=lexical,
            semantic_weight=semantic_weight,
        )


def _check_name(value: Any, field: str) -> None:
    # The stores' own check, so a Session refuses exactly what the backends refuse.
    check_name(value, field)


def _make_spec(
    label: str, description: str | None, max_tokens: int | None, provider: Any, scope: Scope
) -> BlockSpec:
    _check_name(label, "label")
    if scope not in ("session", "namespace"):
        raise ValueError(f"scope must be 'session' or 'namespace', got {scope!r}")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens <= 0):
        raise ValueError("max_tokens must be a positive integer")
    return BlockSpec(
        label=label,
        description=description,
        max_tokens=max_tokens,
        provider=as_provider(provider),
        scope=scope,
    )
