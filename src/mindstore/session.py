"""Session: the builder and every per-conversation operation.

A Session is a handle on one conversation tree ``(namespace, session_id)`` in a store, plus the
configuration of its context blocks and compaction. Builder methods (``with_context``,
``with_cached_prompt``, ``on_compaction``, ``compact_after``, ``on_compaction_error``,
``on_status``) return the session and do no I/O; nothing is resolved until the first async
call.

A Session is composed, not inherited: it owns the history API (appends, reads, search) and
holds three collaborators, each built with the session's store and key:

* :attr:`Session.blocks` — :class:`~mindstore.context.session_context.ContextBlocks`: the
  context blocks, the frozen system prompt, the generated memory tools;
* :attr:`Session.reader` — :class:`~mindstore.compaction.reader.HistoryReader`: stored rows as
  the model sees them (skill unloads, then compaction overlays);
* :attr:`Session.compactor` — :class:`~mindstore.compaction.session_compaction.Compactor`:
  overlays, ``compact()`` and the automatic compaction check after appends;
* :attr:`Session.media` — :class:`~mindstore.media.session_media.MediaEvictor`: old media
  moved to a blob store (``evict_media``, ``with_media_eviction``) and ``hydrate=True`` reads.

The context and compaction methods of the public API delegate to them, one call each. Code that
appends without :meth:`Session.append_message` (``SessionManager.append_all``, the
integrations) builds its rows with :func:`new_message` and then calls
``session.compactor.after_append(last_new_message)``, as ``append_message`` does.

Every append is validated and fitted to the row-size limit before any I/O, so a refused
message changes nothing; a store failure carries the id used, so a retry cannot duplicate.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from mindstore.changes import Status
from mindstore.compaction.reader import HistoryReader
from mindstore.compaction.rowlimit import fit_row
from mindstore.compaction.session_compaction import Compactor
from mindstore.context.session_context import ContextBlocks
from mindstore.context.spec import BlockSpec, block_arguments
from mindstore.errors import (
    ConflictError,
    InvalidMessageError,
    MessageNotFoundError,
    StoreError,
)
from mindstore.hybrid import search_messages
from mindstore.media.blobs import BlobStore
from mindstore.media.session_media import (
    DEFAULT_EVICT_MIN_BYTES,
    DEFAULT_KEEP_RECENT,
    EvictionReport,
    MediaEvictor,
)
from mindstore.messages import validate_id, validate_message
from mindstore.prompt import ContextBlock
from mindstore.search import SearchResult, parse_query
from mindstore.store._checks import check_name, check_store
from mindstore.store.base import (
    AUTO,
    UNSET,
    Compaction,
    NewMessage,
    SessionKey,
    Store,
    _Sentinel,
)
from mindstore.store.types import MessageNode, RecentHistory
from mindstore.tokens import Tokenizer, estimate_message_tokens
from mindstore.tools import ToolSet
from mindstore.vectors import DEFAULT_SEMANTIC_WEIGHT

__all__ = ["MessageNode", "RecentHistory", "Session", "new_message"]

DEFAULT_MAX_MESSAGE_BYTES = 1_800_000


def new_message(
    message: Any,
    parent: str | _Sentinel | None = AUTO,
    *,
    max_message_bytes: int,
    tokenizer: Tokenizer | None = None,
) -> NewMessage:
    """What an append hands the store for ``message``: validated (an id generated when
    missing), fitted to ``max_message_bytes`` of stored JSON, its tokens counted and its JSON
    serialised once.

    Raises:
        InvalidMessageError: malformed message.
    """
    msg, content = fit_row(validate_message(message), max_message_bytes)
    return NewMessage(
        message=msg,
        parent=parent,
        tokens=estimate_message_tokens([msg], tokenizer),
        content=content,
    )


class Session:
    """One conversation: a branching message tree plus its context memory.

    Create with :meth:`Session.create`; configure with the builder methods; then ``await``.

    Attributes:
        blocks: the context blocks, prompt and memory tools (``ContextBlocks``).
        reader: reads paths with skill unloads and overlays applied (``HistoryReader``).
        compactor: overlays, ``compact()`` and automatic compaction (``Compactor``).
        max_message_bytes: the row-size limit of this session's appends.
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
        check_store(store, "mindstore.Session")
        check_name(session_id, "session_id")
        check_name(namespace, "namespace")
        if max_message_bytes < 4096:
            raise ValueError("max_message_bytes must be at least 4096")
        self._store = store
        self._key = SessionKey(namespace=namespace, session_id=session_id)
        self._tokenizer = tokenizer
        self.max_message_bytes = max_message_bytes
        self.blocks = ContextBlocks(store, self._key, tokenizer=tokenizer)
        self.reader = HistoryReader(store, self._key)
        self.compactor = Compactor(
            store, self._key, tokenizer=tokenizer, reader=self.reader, prompt=self.blocks
        )
        self.media = MediaEvictor(store, self._key, tokenizer=tokenizer)
        self.compactor.add_append_hook(self.media.after_append)

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
    @block_arguments
    def with_context(self, spec: BlockSpec) -> Session:
        """Register a context block (no I/O):
        ``with_context(label, description=None, max_tokens=None, provider=None,
        scope="session")``. Without ``provider``: a store-backed writable block.
        ``scope="namespace"`` shares the block across every session of the namespace.

        Raises:
            InvalidKeyError: a bad label.
            ValueError: a bad scope or ``max_tokens``.
            TypeError: ``provider`` is not a provider (no ``get()``).
        """
        self.blocks.configure(spec)
        return self

    def with_cached_prompt(self, provider: Any = True) -> Session:
        """Persist the frozen system prompt, so a new process reuses it without calling any
        provider.

        Args:
            provider: ``True`` (default): in the store, per (namespace, session). A writable
                provider (``get()`` / ``set(content)``, sync or async) of your choosing: the
                prompt lives there — a freeze returns its text when it has one, else renders
                and stores it with ``set``; a refresh stores the new one. A store-backed provider
                (e.g. ``StoreBlockProvider(store, scope="namespace")``, one prompt for the
                namespace) is bound to this session under the label ``"_system_prompt"``.
                ``False``: do not persist.

        Raises:
            TypeError: ``provider`` is neither a bool nor an object with ``get`` and ``set``.
        """
        self.blocks.set_cached_prompt(provider)
        return self

    def with_blob_store(
        self, url: str | BlobStore, *, storage_options: Mapping[str, Any] | None = None
    ) -> Session:
        """Where this session's evicted media lives (a folder, or an fsspec URL such as
        ``s3://bucket/media`` with ``storage_options`` for S3/R2/MinIO): used by
        ``hydrate=True`` reads and as :meth:`evict_media`'s default. Without it, reads use the
        store URL recorded in each evicted message.

        Raises:
            ValueError / TypeError: ``url`` is not a path, URL or ``BlobStore``.
        """
        self.media.set_blob_store(url, storage_options)
        return self

    def with_media_eviction(
        self,
        *,
        older_than_messages: int = DEFAULT_KEEP_RECENT,
        min_bytes: int = DEFAULT_EVICT_MIN_BYTES,
        blob_store: str | BlobStore | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> Session:
        """Evict media automatically after every append: the messages that just left the
        tail (as :meth:`evict_media` with these arguments; ``blob_store`` defaults to
        :meth:`with_blob_store`'s). A failing pass never fails the append; it is logged.

        Raises:
            ValueError: ``older_than_messages`` < 1 or ``min_bytes`` < 256.
        """
        self.media.set_auto(older_than_messages, min_bytes, blob_store, storage_options)
        return self

    def on_compaction(self, fn: Callable[..., Any]) -> Session:
        """Register ``fn(messages, context) -> CompactResult | None`` (sync or async)."""
        self.compactor.on_compaction(fn)
        return self

    def compact_after(
        self,
        threshold: int,
        token_counter: Callable[..., Any] | None = None,
        *,
        background: bool = False,
    ) -> Session:
        """Compact automatically after an append once path + prompt tokens exceed
        ``threshold`` (strictly).

        A failing compaction never fails the append; after a failure the next attempt waits
        until the context has grown by a margin that doubles with each failure in a row
        (one report each: ``on_compaction_error``, else one log line). With
        ``background=True`` the check and the compaction run in a background task, on
        the loop of the append (one per store and session, whichever object appended):
        ``append_message`` returns without waiting for the model;
        :meth:`wait_compaction` waits for that task (tests, shutdown).
        """
        self.compactor.compact_after(threshold, token_counter, background=background)
        return self

    def on_compaction_error(
        self, handler: Callable[[BaseException], Any | Awaitable[Any]]
    ) -> Session:
        """Receive errors of automatic compaction (otherwise they are logged)."""
        self.compactor.on_compaction_error(handler)
        return self

    async def wait_compaction(self) -> None:
        """Return once the background compaction of ``compact_after(..., background=True)``
        has finished (at once when none is running). Its errors went to
        ``on_compaction_error`` (else the log); cancelling this wait leaves it running."""
        await self.compactor.wait()

    def on_status(self, callback: Callable[[Status], Any | Awaitable[Any]]) -> Session:
        """Call ``callback(status)`` (sync or async) in this process after every append of this
        session object and when a compaction starts and ends: a
        :class:`~mindstore.changes.Status` with ``state`` (``"idle"`` / ``"compacting"``), the
        context's ``token_estimate`` and the ``compact_after`` ``threshold``. Callbacks add
        up; one that raises is logged and never fails the append. Other processes follow the
        same compaction states in the change feed (``store.changes()``, DESIGN §14)."""
        self.compactor.on_status(callback)
        return self

    # ---- tokens ----------------------------------------------------------------------------
    def count_message_tokens(self, messages: Sequence[dict[str, Any]]) -> int:
        """The session's token estimate of ``messages`` (its tokenizer when configured)."""
        return estimate_message_tokens(messages, self._tokenizer)

    # ---- history ---------------------------------------------------------------------------
    async def append_message(
        self,
        message: dict[str, Any],
        parent_id: str | _Sentinel | None = AUTO,
        *,
        expected_leaf: str | _Sentinel | None = UNSET,
    ) -> bool:
        """Insert a message. Returns ``False`` when the id already existed (a no-op: the first
        write wins, so retries are safe), ``True`` for a fresh insert.

        ``parent_id`` omitted: the child of the latest leaf (a new root when the session is
        empty); ``None``: a new root; a string: that message. With ``expected_leaf=id`` the
        append happens only while the latest leaf is still ``id`` (compare-and-append).

        Raises:
            InvalidMessageError: malformed message; nothing written.
            MessageNotFoundError: ``parent_id`` does not exist in this session.
            ConflictError: ``expected_leaf`` is no longer the latest leaf.
            StoreError: the store failed. ``message_ids`` holds the id used (generated if the
                message had none): retry with ``{**message, "id": error.message_ids[0]}`` —
                re-appending a stored id is a no-op, so the retry never duplicates. With
                ``maybe_committed`` True the message may already be stored.
        """
        item = new_message(
            message, parent_id, max_message_bytes=self.max_message_bytes, tokenizer=self._tokenizer
        )
        msg = item.message
        if isinstance(parent_id, str):
            validate_id(parent_id, "parent_id")
        elif parent_id is not None and parent_id is not AUTO:
            raise InvalidMessageError(
                f"parent_id must be a message id, None (new root) or omitted, got {parent_id!r:.80}"
            )
        try:
            [inserted] = await self._store.append(self._key, [item], expected_leaf=expected_leaf)
        except StoreError as e:
            e.message_ids = (msg["id"],)  # a retry with this id cannot duplicate the message
            raise
        except ConflictError:
            # A retried compare-and-append whose first attempt landed (its acknowledgement was
            # lost) finds its own message as the leaf: re-appending an existing id is a no-op.
            if await self._store.get_message(self._key, msg["id"]) is not None:
                return False
            raise
        if inserted:
            await self.compactor.after_append(msg)
        return inserted

    async def get_history(
        self, leaf_id: str | None = None, *, hydrate: bool = False
    ) -> list[dict[str, Any]]:
        """The root→``leaf_id`` path (``None``: the latest leaf) with compaction overlays and
        skill unloads applied. Evicted media shows as its markers unless ``hydrate=True``,
        which reads it back from the blob store (identical to the message before eviction).

        Raises:
            MessageNotFoundError: unknown ``leaf_id``.
            MediaNotFoundError: hydrating, and an evicted object is missing or corrupt.
        """
        history = await self.reader.history(leaf_id)
        return await self.media.hydrate(history) if hydrate else history

    async def get_message(self, message_id: str, *, hydrate: bool = False) -> dict[str, Any] | None:
        """The stored message (no overlays), or None; ``hydrate`` as for :meth:`get_history`."""
        row = await self._store.get_message(self._key, message_id)
        if row is None:
            return None
        return (await self.media.hydrate([row.message]))[0] if hydrate else row.message

    async def evict_media(
        self,
        *,
        older_than_messages: int = DEFAULT_KEEP_RECENT,
        min_bytes: int = DEFAULT_EVICT_MIN_BYTES,
        blob_store: str | BlobStore | None = None,
        storage_options: Mapping[str, Any] | None = None,
        leaf_id: str | None = None,
    ) -> EvictionReport:
        """Move large media of old messages out of the database.

        On the path to ``leaf_id`` (default: the latest leaf), every message more than
        ``older_than_messages`` from its end loses its ``file`` parts with ``data:`` URLs and
        the strings inside tool outputs of at least ``min_bytes`` UTF-8 bytes: each value goes
        to ``blob_store`` as a content-addressed object and a marker such as ``[evicted
        image/png, 1398104 bytes]`` takes its place (see :mod:`mindstore.media.markers`).
        Each message is rewritten through the store's message update (search index and token
        counts follow), in its own transaction, after its objects are durable — a crash at
        any instant loses nothing. Reads return the markers; ``hydrate=True`` the originals.

        Raises:
            ValueError: no blob store (none given, none configured), ``older_than_messages``
                < 1 or ``min_bytes`` < 256.
            MessageNotFoundError: unknown ``leaf_id``.
            StoreError: the blob store or the database failed; messages rewritten before the
                failure stay rewritten, the others are untouched.
        """
        return await self.media.evict(
            older_than_messages=older_than_messages,
            min_bytes=min_bytes,
            blob_store=blob_store,
            storage_options=storage_options,
            leaf_id=leaf_id,
        )

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
        hydrate: bool = False,
    ) -> RecentHistory:
        """The longest suffix of the path within the budgets (at least ``min_messages``).

        Budgets apply to the stored messages. Overlays are applied inside the window; when the
        budget cuts through a summarised range, the window starts with that summary instead of
        the covered messages it holds, so the result is always a suffix of ``get_history()``.
        ``hydrate`` as for :meth:`get_history` (budgets count the stored markers).
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
        messages = await self.reader.present(window.messages, window=window.truncated)
        return RecentHistory(
            messages=await self.media.hydrate(messages) if hydrate else messages,
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
        item = new_message(
            message, max_message_bytes=self.max_message_bytes, tokenizer=self._tokenizer
        )
        await self._store.update(self._key, item.message, tokens=item.tokens)

    async def delete_messages(self, ids: Sequence[str]) -> int:
        """Delete messages, re-attaching their children to their parents."""
        if isinstance(ids, str):
            ids = [ids]
        for i in ids:
            if not isinstance(i, str) or not i:
                raise MessageNotFoundError(f"cannot delete {i!r}: message ids are strings")
        deleted = await self._store.delete(self._key, list(dict.fromkeys(ids)))
        return deleted

    async def clear_messages(self) -> None:
        """Remove every message, compaction, search row and loaded skill; refresh the prompt."""
        await self._store.clear(self._key)
        await self.blocks.refresh_system_prompt()

    async def search(
        self,
        query: str,
        *,
        limit: int = 20,
        match: str = "any",
        mode: str | None = None,
        semantic_weight: float = DEFAULT_SEMANTIC_WEIGHT,
    ) -> list[SearchResult]:
        """Search this session: a question or keywords.

        Args:
            query: words, ``"phrases"`` (always required), ``prefix*``; never a syntax error.
            limit: maximum results, best first (BM25 with the namespace's statistics).
            match: ``"any"`` (default): a message matching at least one word is a hit, stop
                words ignored; ``"all"``: every word must occur in the message itself.
            mode: ``"lexical"``, ``"semantic"``, ``"hybrid"``; None = hybrid when the store has
                an embedder, else lexical (see :mod:`mindstore.hybrid`).
            semantic_weight: the semantic list's share of a hybrid score (0..1).
        """
        parsed = parse_query(query, match)

        async def lexical(k: int) -> list[SearchResult]:
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

    # ---- context memory (delegated to self.blocks) ------------------------------------------
    @block_arguments
    async def add_context(self, spec: BlockSpec) -> ContextBlock:
        """Add (or reconfigure) a block at run time; same arguments as :meth:`with_context`.

        The block is usable at once (reads, writes, tools); it appears in the frozen system
        prompt from the next :meth:`refresh_system_prompt`.
        """
        return await self.blocks.add_context(spec)

    async def remove_context(self, label: str) -> None:
        """Stop using a block in this session. Stored content is kept (adding the label back
        brings it back); the frozen prompt changes at the next refresh.

        Raises:
            BlockNotFoundError: no block has that label.
        """
        await self.blocks.remove_context(label)

    async def get_context_block(self, label: str) -> ContextBlock | None:
        """The block as it is now (its provider's current content), or ``None`` if no block
        has that label."""
        return await self.blocks.get_context_block(label)

    async def get_context_blocks(self) -> list[ContextBlock]:
        """Every configured block, in registration order, with current content."""
        return await self.blocks.get_context_blocks()

    async def get_context_provider(self, label: str) -> Any:
        """The provider this session uses for ``label`` — for store-backed providers the copy
        bound to this session, e.g. to fill a knowledge base:
        ``await (await s.get_context_provider("knowledge")).set("key", "text")``.

        Raises:
            BlockNotFoundError: no block has that label.
        """
        return await self.blocks.get_context_provider(label)

    async def replace_context_block(self, label: str, content: str) -> ContextBlock:
        """Replace the content of a writable block.

        Returns:
            The block after the write. The frozen system prompt is unchanged.

        Raises:
            BlockNotFoundError: no block has that label.
            ReadOnlyBlockError: the block is not writable.
            TokenBudgetError: the content exceeds the block's ``max_tokens``; nothing changed.
        """
        return await self.blocks.replace_context_block(label, content)

    async def append_context_block(self, label: str, content: str) -> ContextBlock:
        """Append to a writable block (joined with ``"\\n"`` unless the block is empty or
        ``content`` starts with a newline). The budget applies to the result. For store-backed
        blocks this is one atomic read-modify-write, safe across processes.

        Raises:
            BlockNotFoundError: no block has that label.
            ReadOnlyBlockError: the block is not writable.
            TokenBudgetError: the result would exceed ``max_tokens``; nothing changed.
        """
        return await self.blocks.append_context_block(label, content)

    async def render_system_prompt(self) -> str:
        """Render the blocks as they are now, without freezing or storing anything."""
        return await self.blocks.render_system_prompt()

    async def freeze_system_prompt(self) -> str:
        """The frozen system prompt: rendered on the first call, then identical until
        :meth:`refresh_system_prompt`, even after blocks are written. With
        ``with_cached_prompt()`` it is stored per (namespace, session), and a new process
        returns the stored prompt without calling any provider."""
        return await self.blocks.freeze_system_prompt()

    async def refresh_system_prompt(self) -> str:
        """Reload every provider, re-render, store (with ``with_cached_prompt()``) and return
        the new frozen prompt."""
        return await self.blocks.refresh_system_prompt()

    async def get_loaded_skills(self) -> list[tuple[str, str]]:
        """``(label, key)`` of the skills currently loaded in this session (as
        :meth:`loaded_skills`)."""
        return await self.blocks.get_loaded_skills()

    async def loaded_skills(self) -> list[tuple[str, str]]:
        """``(label, key)`` of the skills currently loaded in this session, read from the store
        (loads and unloads by other workers and earlier processes included)."""
        return await self.blocks.get_loaded_skills()

    async def unload_skill(self, label: str, key: str) -> bool:
        """Unload a loaded skill, reclaiming its context: from now on ``get_history()`` shows
        ``[skill unloaded: <key>]`` instead of the documents loaded so far (the stored result is
        kept). What the ``unload_context`` tool does.

        Returns:
            ``True`` when it was loaded and is now unloaded; ``False`` when it was not loaded
            (or another worker unloaded it first).

        Raises:
            TypeError: ``label`` or ``key`` is not a string.
            BlockNotFoundError: no loadable (skill) block has that label; nothing changed.
        """
        return await self.blocks.unload_skill(label, key)

    async def tools(self) -> ToolSet:
        """The memory tools for the blocks present: ``set_context``, ``load_context``,
        ``unload_context``, ``search_context``. Every tool returns ``"Error: <reason>"``
        instead of raising."""
        return await self.blocks.tools()

    # ---- compaction (delegated to self.compactor) -------------------------------------------
    async def get_compactions(self) -> list[Compaction]:
        """Every overlay of this session in creation order, superseded and reverted included."""
        return await self.compactor.get_compactions()

    async def add_compaction(self, summary: str, from_id: str, to_id: str) -> Compaction:
        """Store a summary overlay over the path range ``from_id``..``to_id``.

        Older overlays of that path lying inside the new range are marked superseded by it.
        A virtual summary id (``compaction_<id>``) stands for the start (as ``from_id``) or the
        end (as ``to_id``) of that overlay's range.

        Raises:
            MessageNotFoundError: either id does not exist in this session.
            ValueError: the ids are not on one path with ``from_id`` at or before ``to_id``, or
                the summary is not a non-blank string.
        """
        return await self.compactor.add_compaction(summary, from_id, to_id)

    async def expand_compaction(self, compaction_id: int) -> list[dict[str, Any]]:
        """The original stored messages behind a summary, oldest first.

        Raises:
            CompactionError: no compaction with that id in this session.
        """
        return await self.compactor.expand_compaction(compaction_id)

    async def revert_compaction(self, compaction_id: int) -> Compaction:
        """Undo one compaction: history reads as before it was added (overlays it superseded
        apply again). The row is kept, marked reverted; returns it.

        Raises:
            CompactionError: no compaction with that id in this session.
        """
        return await self.compactor.revert_compaction(compaction_id)

    async def compact(self, leaf_id: str | None = None) -> Compaction | None:
        """Run the registered compaction function on ``get_history(leaf_id)``.

        The returned range is validated, extended to the start of the oldest overlay visible
        on the path (one growing summary per branch) and stored; the system prompt is then
        refreshed. Returns the stored overlay, or ``None`` when the function returned ``None``.

        Raises:
            CompactionError: no function registered (``on_compaction``), or it returned an
                invalid result: a range not on the path, or a summary without content. Nothing
                is stored then.
            MessageNotFoundError: unknown ``leaf_id``.
        """
        return await self.compactor.compact(leaf_id)
