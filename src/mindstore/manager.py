"""SessionManager: many conversations of one namespace, cross-session search.

An agent serving a user has many conversations. :class:`SessionManager` is the registry of the
sessions of one *namespace* (the isolation boundary inside a store): it creates, lists,
renames, forks, splits and deletes them, accumulates usage, searches across them and hands out
configured :class:`Session` objects.

Design and invariants:

* **Isolation.** Every call is scoped to ``(namespace, session_id)`` keys of the manager's own
  namespace; the store never receives another namespace, so nothing of another namespace can
  be read, searched, listed, modified or deleted through a manager.
* **Configuration.** The builder methods of :class:`Session` (``with_context``,
  ``with_cached_prompt``, ``on_compaction``, ``compact_after``, ``on_compaction_error``) plus
  :meth:`SessionManager.with_searchable_history` are validated at once (on a prototype session,
  no I/O) and recorded; they are replayed, in order, on every session the manager hands out —
  including sessions already handed out and cached. ``with_context`` takes exactly the
  arguments of :meth:`Session.with_context` (both are declared with
  :func:`~mindstore.context.spec.block_arguments`).
* **Appends.** :meth:`SessionManager.append` goes through :meth:`Session.append_message`.
  :meth:`SessionManager.append_all` validates every message first (row-size limit applied),
  then inserts the whole batch in ONE store transaction — all or nothing — chained: the first
  message attaches to ``parent_id`` (default: the latest leaf), each following one to its
  predecessor. Auto-compaction then runs as after single appends.
* **Fork** copies the root→``at_message_id`` path with the same message ids and parent links,
  plus the compaction overlays whose whole range lies in the copied path (kept as overlays, not
  materialised; supersession preserved among the copied ones; reverted overlays are not
  copied) and the loaded-skill state. Context blocks are not copied (namespace-scoped blocks
  are shared anyway). The copied messages get new ``created_at``/``seq`` values. The fork is
  one store transaction (:meth:`Store.transaction`): it appears whole or not at all, and the
  source is never written.
* **Split** (:meth:`SessionManager.compact_and_split`) seeds the new session with one **user**
  message ``[Context from previous session]\\n\\n<summary>``: model APIs (Anthropic) require a
  conversation to start with a user turn, so a user-role seed converts to every format. It is
  one store transaction holding the old session's lock: concurrent or retried splits of one
  session make exactly one continuation; the others raise ``ConflictError`` (already ended).
"""

from __future__ import annotations

import builtins
import math
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mindstore.compaction.session_compaction import wait_background_compactions
from mindstore.context.spec import BlockSpec, block_arguments
from mindstore.errors import (
    ConflictError,
    MessageNotFoundError,
    SessionNotFoundError,
    StoreError,
)
from mindstore.hybrid import search_messages
from mindstore.messages import new_session_id, validate_id, validate_message
from mindstore.search import SearchResult, parse_query
from mindstore.session import DEFAULT_MAX_MESSAGE_BYTES, Session, new_message
from mindstore.session_search import (
    SEARCH_TOOL_LIMIT,
    SessionHistoryProvider,
    format_session_search,
    session_search_tool,
)
from mindstore.store._checks import check_name, check_optional_text, check_store
from mindstore.store.base import AUTO, NewMessage, SessionInfo, SessionKey, Store, _Sentinel
from mindstore.tokens import Tokenizer
from mindstore.tools import ToolSet
from mindstore.vectors import DEFAULT_SEMANTIC_WEIGHT

__all__ = [
    "SPLIT_CONTEXT_PREFIX",
    "SessionHistoryProvider",
    "SessionManager",
    "format_session_search",
]

SPLIT_CONTEXT_PREFIX = "[Context from previous session]"
"""First line of the message that seeds a session created by ``compact_and_split``."""

MAX_LIST_LIMIT = 1000
_UPSERT_ATTEMPTS = 4  # read → write rounds an upsert tries while other workers race it
DEFAULT_SESSION_CACHE_SIZE = 1024
"""How many :class:`Session` objects a :class:`SessionManager` keeps cached by default."""

_BuilderCall = Callable[[Session], object]
"""A recorded builder call, replayed on every session handed out."""


class SessionManager:
    """The sessions of one namespace: registry, configured sessions, cross-session search.

    Args:
        store: any :class:`~mindstore.store.base.Store`.
        namespace: the isolation boundary; nothing outside it is ever visible.
        tokenizer: passed to every :class:`Session` handed out.
        max_message_bytes: row-size limit of every session handed out.
        session_cache_size: how many :class:`Session` objects :meth:`session` keeps (least
            recently used ones are dropped beyond it; default
            :data:`DEFAULT_SESSION_CACHE_SIZE`).

    Builder methods return the manager and do no I/O.
    """

    def __init__(
        self,
        store: Store,
        *,
        namespace: str = "default",
        tokenizer: Tokenizer | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        session_cache_size: int = DEFAULT_SESSION_CACHE_SIZE,
    ) -> None:
        if (
            not isinstance(session_cache_size, int)
            or isinstance(session_cache_size, bool)
            or session_cache_size < 0
        ):
            raise ValueError(
                f"session_cache_size must be an integer >= 0 (0 = no cache), "
                f"got {session_cache_size!r}"
            )
        self._store = check_store(store, "mindstore.SessionManager")
        self._namespace = namespace
        self._tokenizer = tokenizer
        self._max_message_bytes = max_message_bytes
        # Validates namespace and max_message_bytes now, and every builder call below.
        self._prototype = self._new_session("prototype")
        self._builder_calls: list[_BuilderCall] = []
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._session_cache_size = session_cache_size

    # ---- identity --------------------------------------------------------------------------
    @property
    def store(self) -> Store:
        return self._store

    @property
    def namespace(self) -> str:
        return self._namespace

    # ---- builder ---------------------------------------------------------------------------
    @block_arguments
    def with_context(self, spec: BlockSpec) -> SessionManager:
        """:meth:`Session.with_context` for every session handed out (same arguments)."""
        return self._record(lambda s: s.blocks.configure(spec))

    def with_cached_prompt(self, provider: Any = True) -> SessionManager:
        """:meth:`Session.with_cached_prompt` for every session handed out. A store-backed
        provider is bound per session (each keeps its own prompt, or the namespace's with
        ``scope="namespace"``); any other provider object is shared by every session."""
        return self._record(lambda s: s.with_cached_prompt(provider))

    def with_blob_store(
        self, url: Any, *, storage_options: Mapping[str, Any] | None = None
    ) -> SessionManager:
        """:meth:`Session.with_blob_store` for every session handed out."""
        return self._record(lambda s: s.with_blob_store(url, storage_options=storage_options))

    def with_media_eviction(self, **options: Any) -> SessionManager:
        """:meth:`Session.with_media_eviction` for every session handed out (same keyword
        arguments)."""
        return self._record(lambda s: s.with_media_eviction(**options))

    def on_compaction(self, fn: Callable[..., Any]) -> SessionManager:
        """:meth:`Session.on_compaction` for every session handed out."""
        return self._record(lambda s: s.on_compaction(fn))

    def compact_after(
        self,
        threshold: int,
        token_counter: Callable[..., Any] | None = None,
        *,
        background: bool = False,
    ) -> SessionManager:
        """:meth:`Session.compact_after` for every session handed out."""
        return self._record(
            lambda s: s.compact_after(threshold, token_counter, background=background)
        )

    def on_compaction_error(self, handler: Callable[[BaseException], Any]) -> SessionManager:
        """:meth:`Session.on_compaction_error` for every session handed out."""
        return self._record(lambda s: s.on_compaction_error(handler))

    def on_status(self, callback: Callable[..., Any]) -> SessionManager:
        """:meth:`Session.on_status` for every session handed out."""
        return self._record(lambda s: s.on_status(callback))

    def with_searchable_history(
        self, label: str = "history", description: str | None = None
    ) -> SessionManager:
        """Add a read-only searchable block over this namespace's conversations.

        Its content is ``N sessions available for search.``; the agent queries it with
        ``search_context`` (label = ``label``), answered by :meth:`search`.
        """
        if description is None:
            description = "Past conversations, searchable"
        return self.with_context(label, description, provider=SessionHistoryProvider(self))

    def _record(self, call: _BuilderCall) -> SessionManager:
        call(self._prototype)  # raises now on bad arguments
        self._builder_calls.append(call)
        for session in self._sessions.values():
            call(session)
        return self

    def _new_session(self, session_id: str) -> Session:
        return Session.create(
            self._store,
            session_id,
            namespace=self._namespace,
            tokenizer=self._tokenizer,
            max_message_bytes=self._max_message_bytes,
        )

    # ---- sessions --------------------------------------------------------------------------
    def session(self, session_id: str) -> Session:
        """The configured :class:`Session` for ``session_id`` (no I/O).

        Sessions are cached, least recently used first out, up to ``session_cache_size``
        (a process serving many users would otherwise keep every session it ever handed out).
        A dropped session keeps working for whoever holds it; the next call builds a fresh
        one with the same configuration (its state — messages, blocks, the cached prompt —
        lives in the store; only the in-memory frozen prompt is rendered again).
        """
        cached = self._sessions.get(session_id)
        if cached is not None:
            self._sessions.move_to_end(session_id)
            return cached
        session = self._new_session(session_id)
        for call in self._builder_calls:
            call(session)
        if self._session_cache_size:
            self._sessions[session_id] = session
            while len(self._sessions) > self._session_cache_size:
                self._sessions.popitem(last=False)
        return session

    def _key(self, session_id: str) -> SessionKey:
        check_name(session_id, "session id")
        return SessionKey(namespace=self._namespace, session_id=session_id)

    async def create(
        self,
        name: str | None,
        *,
        parent_session_id: str | None = None,
        model: str | None = None,
        source: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        """Create a session with a generated id (``ses_…``, time-ordered) and return it."""
        check_optional_text(name, "name")
        if parent_session_id is not None:
            check_name(parent_session_id, "session id")
        check_optional_text(model, "model")
        check_optional_text(source, "source")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise TypeError("metadata must be a JSON object (a dict) or None")
        return await self._store.create_session(
            self._key(new_session_id()),
            name=name,
            parent_session_id=parent_session_id,
            model=model,
            source=source,
            metadata=metadata,
        )

    async def get(self, session_id: str) -> SessionInfo | None:
        """The session's registry entry, or ``None`` if it does not exist in this namespace."""
        return await self._store.get_session(self._key(session_id))

    async def list(self, *, limit: int = 50, before: str | None = None) -> list[SessionInfo]:
        """Sessions newest-updated first (ties: id descending).

        Args:
            limit: page size (1..1000).
            before: the id of the last session of the previous page; an unknown id → ``[]``.
        """
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError("limit must be a positive integer")
        if before is not None:
            check_name(before, "session id")
        return await self._store.list_sessions(
            self._namespace, limit=min(limit, MAX_LIST_LIMIT), before=before
        )

    async def count(self) -> int:
        """Number of sessions in the namespace."""
        total = 0
        before: str | None = None
        while True:
            page = await self._store.list_sessions(
                self._namespace, limit=MAX_LIST_LIMIT, before=before
            )
            total += len(page)
            if len(page) < MAX_LIST_LIMIT:
                return total
            before = page[-1].id

    async def rename(self, session_id: str, name: str | None) -> SessionInfo:
        """Set the session's name.

        Raises:
            SessionNotFoundError: no such session in this namespace.
        """
        check_optional_text(name, "name")
        return await self._store.update_session(self._key(session_id), name=name)

    async def delete(self, session_id: str) -> bool:
        """Delete everything of the session: messages, compactions, search rows,
        session-scoped blocks and entries, frozen prompt, loaded skills, registry row.

        Returns:
            ``False`` when there was nothing to delete.
        """
        key = self._key(session_id)
        deleted = await self._store.delete_session(key)
        self._sessions.pop(session_id, None)
        return deleted

    async def wait_compaction(self) -> None:
        """Return once no background compaction (``compact_after(..., background=True)``) of
        this namespace's sessions on this store is running — whichever ``Session`` object
        started it (tests, shutdown). Their errors went to ``on_compaction_error`` or the log."""
        await wait_background_compactions(self._store, self._namespace)

    async def delete_namespace(self) -> dict[str, int]:
        """Delete everything of this manager's namespace ("forget this user"): every session
        with its messages, compactions and search rows, session- and namespace-scoped blocks,
        knowledge and skill entries, frozen prompts, loaded-skill states and usage — in one
        store transaction, so a failure deletes nothing. Other namespaces are not touched.

        Returns:
            Rows deleted per kind: ``sessions``, ``messages``, ``compactions``, ``blocks``,
            ``entries``, ``prompts``, ``skill_states`` (all 0 when there was nothing).
        """
        counts = await self._store.delete_namespace(self._namespace)
        self._sessions.clear()
        return counts

    # ---- history ---------------------------------------------------------------------------
    async def append(
        self, session_id: str, message: dict[str, Any], parent_id: str | _Sentinel | None = AUTO
    ) -> bool:
        """Append one message (default: child of the latest leaf); see
        :meth:`Session.append_message`. Touches ``updated_at``."""
        return await self.session(session_id).append_message(message, parent_id)

    async def append_all(
        self,
        session_id: str,
        messages: Sequence[dict[str, Any]],
        parent_id: str | _Sentinel | None = AUTO,
    ) -> builtins.list[bool]:
        """Append ``messages`` as a chain in one transaction (all or nothing).

        The first attaches to ``parent_id`` (default: the latest leaf; ``None``: a new root),
        each following one to the message before it. Returns per message whether it was new
        (an id that already exists is skipped, as in :meth:`Session.append_message`).

        Raises:
            InvalidMessageError: a malformed message; nothing written.
            MessageNotFoundError: ``parent_id`` does not exist in the session.
            StoreError: the store failed; ``message_ids`` holds the ids used (generated where
                missing) — retry with them to stay idempotent (see ``maybe_committed``).
        """
        if isinstance(messages, (dict, str)):
            raise TypeError("append_all takes a list of messages")
        if isinstance(parent_id, str):
            validate_id(parent_id, "parent_id")
        elif parent_id is not None and parent_id is not AUTO:
            raise TypeError("parent_id must be a message id, None (new root) or omitted")
        session = self.session(session_id)
        items: builtins.list[NewMessage] = []
        parent: str | _Sentinel | None = parent_id
        for m in messages:
            item = new_message(
                m,
                parent,
                max_message_bytes=session.max_message_bytes,
                tokenizer=session.tokenizer,
            )
            items.append(item)
            parent = item.message["id"]
        if not items:
            return []
        prepared = [item.message for item in items]
        try:
            inserted = await self._store.append(session.key, items)
        except StoreError as e:
            e.message_ids = tuple(msg["id"] for msg in prepared)  # retry with these: idempotent
            raise
        # One compaction check for the batch, after its last new message: the context only
        # grew along the chain, and the store's estimate is for that message.
        fresh = [msg for msg, new in zip(prepared, inserted, strict=True) if new]
        if fresh:
            await session.compactor.after_append(fresh[-1])
        return inserted

    async def upsert(
        self,
        session_id: str,
        message: dict[str, Any],
        parent_id: str | _Sentinel | None = AUTO,
    ) -> str:
        """Update the message with this id if the session has it, else append it (what a
        streaming UI calls on every chunk: the first call appends, later ones replace the
        content). Returns the message id (generated when the message had none). Touches
        ``updated_at`` either way.

        An append goes through :meth:`Session.append_message` (``parent_id`` applies to it
        only, and auto-compaction runs as after any append); an update through
        :meth:`Session.update_message` (the parent never changes; no compaction check, as in
        the reference). Races settle to "the last upsert's content is stored": an append that
        finds the id already inserted by another worker updates it instead, and an update
        whose message was deleted meanwhile appends it again.

        Raises:
            InvalidMessageError: malformed message; nothing written.
            MessageNotFoundError: appending, and ``parent_id`` is not in the session.
            StoreError: the store failed (``message_ids`` holds the id used, as for appends).
        """
        session = self.session(session_id)
        message = validate_message(message)  # refuse before any I/O; an id generated if missing
        mid = str(message["id"])
        for _ in range(_UPSERT_ATTEMPTS):
            if await session.get_message(mid) is not None:
                try:
                    # The session's row first, as appends take it (the same lock order
                    # everywhere: no deadlock with concurrent appends and upserts).
                    async with self._store.transaction(lock=[session.key]):
                        await session.update_message(message)
                        await self._store.update_session(session.key)  # touch updated_at
                    return mid
                except MessageNotFoundError:
                    pass  # deleted since the read: append it again
            if await session.append_message(message, parent_id):
                return mid
            # another worker appended this id since the read: update it
        raise ConflictError(
            f"upsert of message {mid!r} kept racing concurrent appends and deletes of the same "
            f"id in session {session_id!r}; nothing more was written — retry"
        )

    async def fork(self, session_id: str, at_message_id: str, name: str | None) -> SessionInfo:
        """Start a new session whose history is the source path root → ``at_message_id``.

        Message ids, parent links and the compaction overlays lying within the copied path are
        preserved (overlays stay overlays). The source session is not modified. The new
        session's ``parent_session_id`` is the source, and its metadata (a copy of the
        source's) gains ``forked_from: {session_id, message_id}``. One store transaction:
        the fork appears whole or not at all (a killed process leaves no partial fork).

        Raises:
            SessionNotFoundError: no such session in this namespace.
            MessageNotFoundError: ``at_message_id`` is not a message of the source session.
        """
        check_optional_text(name, "name")
        validate_id(at_message_id, "at_message_id")
        src = self._key(session_id)
        dst = self._key(new_session_id())
        # The source's row is locked so path, overlays and skill state are read as one state.
        async with self._store.transaction(lock=[src]):
            info = await self._require(src)
            path = await self._store.path(src, at_message_id)
            if not path:  # pragma: no cover - path() raises for unknown ids
                raise MessageNotFoundError(f"message {at_message_id!r} not found in {session_id!r}")
            compactions = await self._store.get_compactions(src)
            skills = await self._store.get_skill_states(src)
            metadata: dict[str, Any] = dict(info.metadata or {})
            metadata["forked_from"] = {"session_id": session_id, "message_id": at_message_id}
            await self._store.create_session(
                dst,
                name=name,
                parent_session_id=session_id,
                model=info.model,
                source=info.source,
                metadata=metadata,
            )
            items = [
                NewMessage(
                    message=row.message,
                    parent=path[i - 1].id if i else None,
                    tokens=row.tokens,
                )
                for i, row in enumerate(path)
            ]
            await self._store.append(dst, items, expected_leaf=None)
            position = {row.id: i for i, row in enumerate(path)}
            copied: dict[int, int] = {}
            for c in compactions:
                if c.reverted:
                    continue
                start = position.get(c.from_message_id)
                end = position.get(c.to_message_id)
                if start is None or end is None or start > end:
                    continue
                supersedes = [
                    copied[old.id]
                    for old in compactions
                    if old.superseded_by == c.id and old.id in copied
                ]
                new = await self._store.add_compaction(
                    dst,
                    summary=c.summary,
                    from_id=c.from_message_id,
                    to_id=c.to_message_id,
                    supersedes=supersedes,
                )
                copied[c.id] = new.id
            for state in skills:
                await self._store.set_skill_loaded(dst, state.label, state.key, True)
                if not state.loaded:
                    await self._store.set_skill_loaded(dst, state.label, state.key, False)
            created = await self._store.get_session(dst)
        assert created is not None
        return created

    async def compact_and_split(
        self, session_id: str, summary: str, name: str | None = None
    ) -> SessionInfo:
        """End a session and continue in a new one seeded with ``summary``.

        The old session gets ``end_reason="compaction"``. The new one has the old one's name
        (unless ``name`` is given), model, source and metadata, ``parent_session_id`` = the old
        id, and one user message ``[Context from previous session]\\n\\n<summary>``.

        One store transaction that first locks the old session: ending it, creating the
        continuation and seeding it happen together or not at all, and concurrent splits of one
        session make exactly one continuation — the others (and a retry after a split whose
        answer was lost) find the session ended and raise :class:`ConflictError`.

        Raises:
            SessionNotFoundError: no such session in this namespace.
            ConflictError: the session has already ended (e.g. it was split before): nothing
                was written; continue in the session that continued it.
            ValueError: ``summary`` is empty.
        """
        if not isinstance(summary, str) or not summary.strip():
            raise ValueError("summary must be a non-empty string")
        check_optional_text(name, "name")
        old_key = self._key(session_id)
        new_key = self._key(new_session_id())
        session = self.session(new_key.session_id)
        item = new_message(
            {
                "role": "user",
                "parts": [{"type": "text", "text": f"{SPLIT_CONTEXT_PREFIX}\n\n{summary}"}],
                "metadata": {"split_from": session_id},
            },
            None,
            max_message_bytes=session.max_message_bytes,
            tokenizer=session.tokenizer,
        )
        seed = item.message
        try:
            async with self._store.transaction(lock=[old_key]):
                old = await self._require(old_key)
                if old.end_reason is not None:
                    raise ConflictError(
                        f"session {session_id!r} already ended ({old.end_reason}); "
                        "split the session that continued it instead"
                    )
                await self._store.create_session(
                    new_key,
                    name=name if name is not None else old.name,
                    parent_session_id=session_id,
                    model=old.model,
                    source=old.source,
                    metadata=old.metadata,
                )
                await self._store.append(new_key, [item], expected_leaf=None)
                await self._store.update_session(old_key, end_reason="compaction")
                created = await self._store.get_session(new_key)
        except BaseException:
            self._sessions.pop(new_key.session_id, None)
            raise
        assert created is not None
        await session.compactor.after_append(seed)
        return created

    # ---- usage -----------------------------------------------------------------------------
    async def add_usage(
        self, session_id: str, input_tokens: int, output_tokens: int, cost: float
    ) -> SessionInfo:
        """Atomically add token counts and cost to the session's totals.

        Raises:
            SessionNotFoundError: no such session in this namespace (a typo must not create
                a phantom session).
            ValueError: a negative or non-numeric amount.
        """
        for field, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{field} must be a non-negative integer, got {value!r}")
        if (
            not isinstance(cost, (int, float))
            or isinstance(cost, bool)
            or not math.isfinite(cost)
            or cost < 0
        ):
            raise ValueError(f"cost must be a non-negative finite number, got {cost!r}")
        key = self._key(session_id)
        await self._require(key)
        return await self._store.add_usage(key, input_tokens, output_tokens, float(cost))

    async def _require(self, key: SessionKey) -> SessionInfo:
        info = await self._store.get_session(key)
        if info is None:
            raise SessionNotFoundError(
                f"session {key.session_id!r} does not exist in namespace {self._namespace!r}; "
                "create it with SessionManager.create() or append to it first"
            )
        return info

    # ---- search ----------------------------------------------------------------------------
    async def search(
        self,
        query: str,
        *,
        limit: int = 20,
        session_ids: Sequence[str] | None = None,
        match: str = "any",
        mode: str | None = None,
        semantic_weight: float = DEFAULT_SEMANTIC_WEIGHT,
    ) -> builtins.list[SearchResult]:
        """Search across this namespace's sessions: a question or keywords.

        Args:
            query: words, ``"phrases"`` (always required), ``prefix*``; never a syntax error.
            limit: maximum results, best first (BM25 with the namespace's statistics).
            session_ids: only these sessions (``None``: all of the namespace).
            match: ``"any"`` (default): a message matching at least one word is a hit, stop
                words ignored; ``"all"``: every word must occur in the message itself.
            mode: ``"lexical"``, ``"semantic"``, ``"hybrid"``; None = hybrid when the store has
                an embedder, else lexical (see :mod:`mindstore.hybrid`).
            semantic_weight: the semantic list's share of a hybrid score (0..1).
        """
        if isinstance(session_ids, str):
            raise TypeError("session_ids must be a list of session ids, not a string")
        ids: builtins.list[str] | None = None
        if session_ids is not None:
            ids = list(dict.fromkeys(session_ids))
            for sid in ids:
                check_name(sid, "session id")
            if not ids:
                return []
        parsed = parse_query(query, match)

        async def lexical(k: int) -> builtins.list[SearchResult]:
            if parsed.empty or k <= 0:
                return []
            return await self._store.search(self._namespace, parsed, session_ids=ids, limit=k)

        return await search_messages(
            self._store,
            self._namespace,
            query,
            limit=limit,
            session_ids=ids,
            mode=mode,
            lexical=lexical,
            semantic_weight=semantic_weight,
        )

    async def tools(self) -> ToolSet:
        """A :class:`ToolSet` with ``session_search`` over this namespace's conversations."""

        semantic = getattr(self._store, "embedder", None) is not None

        async def search(query: str, mode: str | None) -> list[SearchResult]:
            return await self.search(query, limit=SEARCH_TOOL_LIMIT, mode=mode)

        return ToolSet([session_search_tool(search, semantic=semantic, names=self.session_names)])

    async def session_names(self, session_ids: Sequence[str]) -> dict[str, str | None]:
        """The names of these sessions of the namespace (``None`` for an unnamed or unknown
        one), each read once."""
        out: dict[str, str | None] = {}
        for sid in dict.fromkeys(session_ids):
            info = await self.get(sid)
            out[sid] = None if info is None else info.name
        return out
