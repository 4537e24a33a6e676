"""The protocol methods both backends share: validate → rules → one transaction.

Every public :class:`~mindstore.store.base.Store` method reads the same on SQLite and
PostgreSQL: check the arguments (:mod:`._checks`), apply the domain rules (:mod:`._rules`), then
hand one domain function and its arguments to the backend's transaction runner. What differs
between the backends is only *how* a function runs — :meth:`StoreFront._write` (one write
transaction, a savepoint inside :meth:`transaction`), :meth:`StoreFront._read` (a read) and
:meth:`StoreFront._read_snapshot` (several reads that must agree) — and the domain modules
themselves, which a backend names in :attr:`StoreFront._domains` (its twin ``_messages``,
``_search``, ``_state``, ``_entries`` and ``_registry`` modules: the same function names and
arguments, SQLite's synchronous, PostgreSQL's awaited). So a rule is written once, and a
backend is its connection handling plus SQL.

A backend subclasses :class:`StoreFront` and provides the three runners, ``_domains``,
``_index_in_prepare`` (whether new messages carry their index rows from preparation) and
:meth:`StoreFront._append_prepared` (PostgreSQL settles an append whose commit outcome was lost).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from datetime import datetime
from types import ModuleType, TracebackType
from typing import Any, ClassVar, NamedTuple

from mindstore.changes import Change
from mindstore.errors import InvalidKeyError
from mindstore.search import ParsedQuery, SearchResult
from mindstore.store import _changes, _rules
from mindstore.store._changes import ChangeRow, Describe
from mindstore.store._checks import (
    check_entry_key,
    check_id,
    check_int,
    check_key,
    check_name,
    check_scope,
    check_session_fields,
    check_text,
)
from mindstore.store.types import (
    UNSET,
    Compaction,
    Entry,
    EntryHit,
    NewMessage,
    PathWindow,
    ScopeKey,
    SessionInfo,
    SessionKey,
    SkillState,
    StoredMessage,
    TokenEstimate,
    _Sentinel,
)

__all__ = ["Domains", "StoreFront"]


class Domains(NamedTuple):
    """A backend's domain modules (twin files with the same function names)."""

    messages: ModuleType
    search: ModuleType
    state: ModuleType
    entries: ModuleType
    registry: ModuleType
    changes: ModuleType


#: The events of the writes made inside an open ``store.transaction()`` block, per store (by
#: ``id``): recorded once when the block ends, so the namespace's feed counter — which
#: serialises the namespace's writers on PostgreSQL — is held only while the block commits.
_PENDING: ContextVar[dict[int, list[ChangeRow]] | None] = ContextVar(
    "mindstore_pending_changes", default=None
)


class StoreFront(ABC):
    """The :class:`~mindstore.store.base.Store` methods, written once for every backend."""

    _domains: ClassVar[Domains]
    #: PostgreSQL's notification channel for this store's schema (None on SQLite).
    _change_channel: str | None = None
    #: whether :func:`._rules.prepare_append` also tokenises for the index (PostgreSQL sends
    #: the index rows with the insert; SQLite's domain code indexes inside the transaction).
    _index_in_prepare: ClassVar[bool] = False
    #: whether the store's connections belong to the event loop it was first used on (a
    #: PostgreSQL pool does; SQLite's one connection runs inline on any loop or thread).
    #: Adapters that run sync calls on a loop of their own (the LangGraph store) read it.
    _binds_event_loop: ClassVar[bool] = True

    @abstractmethod
    async def _write(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(conn, *args)`` in one write transaction."""

    @abstractmethod
    async def _read(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(conn, *args)`` as a read."""

    @abstractmethod
    async def _read_snapshot(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(conn, *args)``, several reads, in one snapshot."""

    @abstractmethod
    async def aclose(self) -> None:
        """Close the store (the backend's connection or pool)."""

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # ---- the change feed: every write records its events in its own transaction -----------
    def _logged(
        self, fn: Callable[..., Any], describe: Describe, before: Callable[..., Any] | None = None
    ) -> Callable[..., Any]:
        """``fn`` (a domain function) that also records the events ``describe`` derives from
        its arguments and result, in the same transaction (see :mod:`._changes`)."""
        pending = _PENDING.get()
        mine = pending.get(id(self)) if pending is not None else None
        return self._domains.changes.logged(fn, describe, before, mine, self._change_channel)

    @asynccontextmanager
    async def _collect_changes(self, namespaces: set[str] | None = None) -> AsyncIterator[None]:
        """Around the body of an outermost ``transaction()`` block (inside its transaction):
        hold the events of its writes, then record them as its last statement (and add
        their namespaces to ``namespaces``, for a wake-up after the commit)."""
        pending = _PENDING.get()
        if pending is not None and id(self) in pending:
            yield  # nested: the outer block records
            return
        rows: list[ChangeRow] = []
        token = _PENDING.set({**(pending or {}), id(self): rows})
        try:
            yield
        finally:
            _PENDING.reset(token)
        if rows:
            await self._write(self._domains.changes.record, rows, self._change_channel)
            if namespaces is not None:
                namespaces.update(r[0] for r in rows)

    async def latest_change_seq(self, namespace: str) -> int:
        """See :meth:`mindstore.store.base.ChangeStore.latest_change_seq`."""
        check_name(namespace, "namespace")
        result: int = await self._read(self._domains.changes.latest_seq, namespace)
        return result

    async def read_changes(
        self, namespace: str, *, since: int = 0, limit: int = 500
    ) -> list[Change]:
        """See :meth:`mindstore.store.base.ChangeStore.read_changes`."""
        _changes.check_changes_args(namespace, since, limit, 1)
        result: list[Change] = await self._read(self._domains.changes.read, namespace, since, limit)
        return result

    async def record_changes(
        self, key: SessionKey, events: Sequence[tuple[str, Mapping[str, Any]]]
    ) -> None:
        """See :meth:`mindstore.store.base.ChangeStore.record_changes`."""
        rows = _changes.check_record(key, events)
        if rows:
            await self._write(
                self._logged(self._domains.changes.nothing, _changes.describe_recorded),
                rows,
            )

    async def _append_prepared(
        self, key: SessionKey, prepared: Any, expected_leaf: str | _Sentinel | None
    ) -> list[bool]:
        """Write prepared messages (one transaction)."""
        result: list[bool] = await self._write(
            self._logged(self._domains.messages.append, _changes.describe_append),
            key,
            prepared,
            expected_leaf,
        )
        return result

    # ---- messages ----------------------------------------------------------------------------
    async def append(
        self,
        key: SessionKey,
        items: Sequence[NewMessage],
        *,
        expected_leaf: str | _Sentinel | None = UNSET,
    ) -> list[bool]:
        """See :meth:`mindstore.store.base.Store.append`."""
        check_key(key)
        prepared = _rules.prepare_append(items, expected_leaf, index=self._index_in_prepare)
        if prepared is None:
            return []
        return await self._append_prepared(key, prepared, expected_leaf)

    async def token_estimate(self, key: SessionKey) -> TokenEstimate | None:
        """See :meth:`mindstore.store.base.Store.token_estimate`."""
        check_key(key)
        return await self._read(self._domains.messages.token_estimate, key)

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
        """See :meth:`mindstore.store.base.Store.set_token_estimate`."""
        check_key(key)
        params = _rules.token_estimate_params(key, leaf_id, tokens, version, floor, margin)
        return await self._write(self._domains.messages.set_token_estimate, params)

    async def get_message(self, key: SessionKey, message_id: str) -> StoredMessage | None:
        """See :meth:`mindstore.store.base.Store.get_message`."""
        check_key(key)
        check_id(message_id)
        return await self._read(self._domains.messages.get_message, key, message_id)

    async def get_messages(self, key: SessionKey, ids: Sequence[str]) -> list[StoredMessage]:
        """See :meth:`mindstore.store.base.Store.get_messages`."""
        check_key(key)
        wanted = _rules.message_ids(ids)
        if not wanted:
            return []
        return await self._read(self._domains.messages.get_messages, key, wanted)

    async def all_messages(self, key: SessionKey) -> list[StoredMessage]:
        """See :meth:`mindstore.store.base.Store.all_messages`."""
        check_key(key)
        return await self._read(self._domains.messages.all_messages, key)

    async def path(self, key: SessionKey, leaf_id: str | None) -> list[StoredMessage]:
        """See :meth:`mindstore.store.base.Store.path`."""
        check_key(key)
        _rules.check_leaf_id(leaf_id)
        return await self._read(self._domains.messages.path, key, leaf_id)

    async def path_window(
        self,
        key: SessionKey,
        leaf_id: str | None,
        *,
        max_tokens: int | None,
        max_bytes: int | None,
        min_messages: int,
    ) -> PathWindow:
        """See :meth:`mindstore.store.base.Store.path_window`."""
        check_key(key)
        _rules.check_leaf_id(leaf_id)
        window = _rules.check_window(max_tokens, max_bytes, min_messages)
        return await self._read(self._domains.messages.path_window, key, leaf_id, window)

    async def path_length(self, key: SessionKey, leaf_id: str | None) -> int:
        """See :meth:`mindstore.store.base.Store.path_length`."""
        check_key(key)
        _rules.check_leaf_id(leaf_id)
        return await self._read(self._domains.messages.path_length, key, leaf_id)

    async def children(self, key: SessionKey, message_id: str) -> list[StoredMessage]:
        """See :meth:`mindstore.store.base.Store.children`."""
        check_key(key)
        check_id(message_id)
        return await self._read(self._domains.messages.children, key, message_id)

    async def latest_leaf(self, key: SessionKey) -> StoredMessage | None:
        """See :meth:`mindstore.store.base.Store.latest_leaf`."""
        check_key(key)
        return await self._read(self._domains.messages.latest_leaf, key)

    async def update(self, key: SessionKey, message: dict[str, Any], *, tokens: int) -> None:
        """See :meth:`mindstore.store.base.Store.update`."""
        check_key(key)
        await self._write(
            self._logged(self._domains.messages.update, _changes.describe_update),
            key,
            _rules.PreparedUpdate(message, tokens, index=self._index_in_prepare),
        )

    async def delete(self, key: SessionKey, ids: Sequence[str]) -> int:
        """See :meth:`mindstore.store.base.Store.delete`."""
        check_key(key)
        wanted = _rules.delete_ids(ids)
        if not wanted:
            return 0
        return await self._write(
            self._logged(self._domains.messages.delete, _changes.describe_delete), key, wanted
        )

    async def clear(self, key: SessionKey) -> None:
        """See :meth:`mindstore.store.base.Store.clear`."""
        check_key(key)
        await self._write(
            self._logged(self._domains.messages.clear_session, _changes.describe_clear), key
        )

    async def search(
        self,
        namespace: str,
        query: ParsedQuery,
        *,
        session_ids: Sequence[str] | None = None,
        limit: int = 20,
    ) -> list[SearchResult]:
        """See :meth:`mindstore.store.base.Store.search`."""
        ids = _rules.check_search(namespace, query, session_ids, limit)
        if ids == [] or query.empty or limit <= 0:
            return []
        hits = await self._search_messages(namespace, query, ids, limit)
        if query.ranks_phrases and len(hits) < limit:
            loose = await self._search_messages(namespace, query.loosened(), ids, limit)
            hits = _rules.phrase_first(hits, loose, limit, lambda h: (h.session_id, h.message_id))
        return hits

    async def _search_messages(
        self, namespace: str, query: ParsedQuery, ids: list[str] | None, limit: int
    ) -> list[SearchResult]:
        """The domain search of :meth:`search` in one snapshot (PostgreSQL overrides it)."""
        return await self._read_snapshot(self._domains.search.search, namespace, query, ids, limit)

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
        new = _rules.check_compaction(key, summary, from_id, to_id, supersedes)
        return await self._write(
            self._logged(self._domains.state.add_compaction, _changes.describe_add_compaction),
            key,
            new,
        )

    async def get_compactions(self, key: SessionKey) -> list[Compaction]:
        return await self._read(self._domains.state.get_compactions, check_key(key))

    async def revert_compaction(self, key: SessionKey, compaction_id: int) -> Compaction:
        check_key(key)
        check_int(compaction_id, "compaction_id")
        return await self._write(
            self._logged(
                self._domains.state.revert_compaction, _changes.describe_revert_compaction
            ),
            key,
            compaction_id,
        )

    # ---- context blocks ----------------------------------------------------------------------
    async def get_block(self, key: ScopeKey) -> str | None:
        return await self._read(self._domains.state.get_block, check_scope(key))

    async def set_block(self, key: ScopeKey, content: str) -> None:
        k = check_scope(key)
        await self._write(
            self._logged(self._domains.state.set_block, _changes.describe_block(False)),
            k,
            check_text(content, "content"),
        )

    async def update_block(self, key: ScopeKey, fn: Callable[[str], str]) -> str:
        k = check_scope(key)
        return await self._write(
            self._logged(self._domains.state.update_block, _changes.describe_block(False)),
            k,
            _rules.check_block_function(fn),
        )

    async def delete_block(self, key: ScopeKey) -> None:
        await self._write(
            self._logged(self._domains.state.delete_block, _changes.describe_block(True)),
            check_scope(key),
        )

    async def list_blocks(
        self, namespace: str, session_id: str | None
    ) -> list[tuple[ScopeKey, str]]:
        _rules.check_block_listing(namespace, session_id)
        return await self._read(self._domains.state.list_blocks, namespace, session_id)

    # ---- frozen system prompt ----------------------------------------------------------------
    async def get_prompt(self, key: SessionKey) -> str | None:
        return await self._read(self._domains.state.get_prompt, check_key(key))

    async def put_prompt(self, key: SessionKey, prompt: str, *, overwrite: bool) -> str:
        check_key(key)
        return await self._write(
            self._logged(self._domains.state.put_prompt, _changes.describe_prompt),
            key,
            check_text(prompt, "prompt"),
            overwrite,
        )

    # ---- loaded skills -----------------------------------------------------------------------
    async def get_skill_states(self, key: SessionKey) -> list[SkillState]:
        return await self._read(self._domains.state.get_skill_states, check_key(key))

    async def set_skill_loaded(
        self, key: SessionKey, label: str, skill_key: str, loaded: bool
    ) -> bool:
        _rules.check_skill_state(key, label, skill_key, loaded)
        return await self._write(
            self._logged(self._domains.state.set_skill_loaded, _changes.describe_skill),
            key,
            label,
            skill_key,
            loaded,
        )

    # ---- keyed entries -----------------------------------------------------------------------
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
        k = check_scope(key)
        new = _rules.check_entry(entry_key, content, description, data, expires_at)
        await self._write(
            self._logged(self._domains.entries.put_entry, _changes.describe_put_entry), k, new
        )

    async def get_entry(self, key: ScopeKey, entry_key: str) -> Entry | None:
        found = await self.get_entries(key, [entry_key])
        return found[0] if found else None

    async def get_entries(self, key: ScopeKey, entry_keys: Sequence[str]) -> list[Entry]:
        k, keys = _rules.check_entry_lookup(key, entry_keys)
        return await self._read(self._domains.entries.get_entries, k, keys) if keys else []

    async def list_entries(self, key: ScopeKey, *, limit: int | None = None) -> list[Entry]:
        k = check_scope(key)
        if limit is not None:
            check_int(limit, "limit")
        return await self._read(self._domains.entries.list_entries, k, limit)

    async def list_entry_labels(self, namespace: str, *, prefix: str = "") -> list[str]:
        check_name(namespace, "namespace")
        check_text(prefix, "prefix", InvalidKeyError)
        return await self._read(self._domains.entries.list_entry_labels, namespace, prefix)

    async def set_entry_expiry(self, key: ScopeKey, expiries: Mapping[str, datetime | None]) -> int:
        k = check_scope(key)
        items = _rules.check_expiries(expiries)
        return await self._write(self._domains.entries.set_entry_expiry, k, items) if items else 0

    async def delete_expired_entries(self, namespace: str | None = None) -> int:
        if namespace is not None:
            check_name(namespace, "namespace")
        gone: list[Any] = await self._write(
            self._logged(self._domains.entries.delete_expired_entries, _changes.describe_expired),
            namespace,
        )
        return len(gone)

    async def count_entries(self, key: ScopeKey) -> int:
        return await self._read(self._domains.entries.count_entries, check_scope(key))

    async def delete_entry(self, key: ScopeKey, entry_key: str) -> bool:
        k = check_scope(key)
        return await self._write(
            self._logged(self._domains.entries.delete_entry, _changes.describe_delete_entry),
            k,
            check_entry_key(entry_key),
        )

    async def search_entries(
        self, key: ScopeKey, query: ParsedQuery, *, limit: int = 10
    ) -> list[EntryHit]:
        k = _rules.check_entry_search(key, query, limit)
        if query.empty or limit <= 0:
            return []
        search = self._domains.search.search_entries
        hits: list[EntryHit] = await self._read_snapshot(search, k, query, limit)
        if query.ranks_phrases and len(hits) < limit:
            loose = await self._read_snapshot(search, k, query.loosened(), limit)
            hits = _rules.phrase_first(hits, loose, limit, lambda h: h.key)
        return hits

    # ---- session registry --------------------------------------------------------------------
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
        new = _rules.check_new_session(key, name, parent_session_id, model, source, metadata)
        return await self._write(
            self._logged(
                self._domains.registry.create_session,
                _changes.describe_session("session_created"),
            ),
            key,
            new,
        )

    async def get_session(self, key: SessionKey) -> SessionInfo | None:
        return await self._read(self._domains.registry.get_session, check_key(key))

    async def list_sessions(
        self, namespace: str, *, limit: int = 50, before: str | None = None
    ) -> list[SessionInfo]:
        _rules.check_session_listing(namespace, limit, before)
        if limit <= 0:
            return []
        return await self._read(self._domains.registry.list_sessions, namespace, limit, before)

    async def update_session(self, key: SessionKey, **fields: Any) -> SessionInfo:
        """See :meth:`mindstore.store.base.Store.update_session`."""
        check_key(key)
        return await self._write(
            self._logged(
                self._domains.registry.update_session,
                _changes.describe_session("session_updated"),
            ),
            key,
            check_session_fields(fields),
        )

    async def add_usage(
        self, key: SessionKey, input_tokens: int, output_tokens: int, cost: float
    ) -> SessionInfo:
        check_key(key)
        usd = _rules.check_usage(input_tokens, output_tokens, cost)
        return await self._write(
            self._logged(
                self._domains.registry.add_usage, _changes.describe_session("session_updated")
            ),
            key,
            input_tokens,
            output_tokens,
            usd,
        )

    async def reindex(self, *, progress: Callable[[int, int], None] | None = None) -> int:
        """See :meth:`mindstore.store.base.Store.reindex`."""
        return await self._write(self._domains.registry.reindex, progress)

    async def delete_session(self, key: SessionKey) -> bool:
        check_key(key)
        return await self._write(
            self._logged(
                self._domains.registry.delete_session,
                _changes.describe_session("session_deleted"),
            ),
            key,
            self._domains.messages.clear_session,
        )

    async def delete_namespace(self, namespace: str) -> dict[str, int]:
        """See :meth:`mindstore.store.base.Store.delete_namespace`."""
        check_name(namespace, "namespace")
        return await self._write(self._domains.registry.delete_namespace, namespace)

    async def stats(self) -> dict[str, int]:
        """See :meth:`mindstore.store.base.Store.stats`."""
        return await self._read(self._domains.registry.stats)

    async def list_namespaces(self) -> list[str]:
        return await self._read(self._domains.registry.list_namespaces)
