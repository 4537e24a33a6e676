"""LangGraph long-term memory on mindstore: :class:`MindstoreStore`, a LangGraph ``BaseStore``.

Install with ``pip install 'mindstore[langgraph]'``. A LangGraph agent's memories (``put``,
``get``, ``search``, ``delete``, ``list_namespaces`` and their ``a``-prefixed async twins, or
``batch``/``abatch`` of ops) are stored as keyed entries of a mindstore :class:`Store`, so they
live in the same SQLite file or PostgreSQL database as the conversations, inside one mindstore
namespace (the tenant), and ``query`` is served by mindstore's full-text search.

Design (see :mod:`mindstore.integrations._store_rules` for the pure rules):

- **Keys.** ``(namespace tuple, key)`` → entry ``key`` in the namespace-wide collection labelled
  ``langgraph:<namespace as a JSON array>``. JSON is injective, so tuples never collide.
- **Values** round-trip as JSON (stored in the entry's unindexed ``data``); ``created_at`` is
  kept across updates, ``updated_at`` moves on every put.
- **Search.** Without a semantic index (below), ``query`` runs mindstore's lexical search
  (BM25 ranking, stemming, phrases and prefixes; see ``docs/search.md``) over the text of the
  indexed fields: the strings of the whole value by default, or of the ``index`` fields (the
  store's ``index={"fields": [...]}``, or ``put(..., index=[...])``; ``index=False`` makes an
  item unfindable by ``query``, though ``filter`` still finds it). Without ``query`` items
  come newest-updated first. ``filter`` is LangGraph's (equality and ``$eq``/``$ne``/``$gt``/
  ``$gte``/``$lt``/``$lte``; a dotted key such as ``"user.access-level"`` reads a nested field,
  as ``SqliteStore`` does), applied to the values before ``offset``/``limit``.
- **index config.** LangGraph's ``{"dims", "embed", "fields"}`` is honoured as
  ``InMemoryStore`` honours it (:mod:`mindstore.integrations._langgraph_vectors`): puts embed
  the texts at ``fields`` with ``embed`` (or, without one, the mindstore store's embedder) and
  keep the vectors in the entry's ``data``; ``query`` then ranks by cosine similarity with
  ``InMemoryStore``'s scores. ``fields`` alone, on a store without an embedder, only chooses
  the text of the full-text search.
- **TTL** (``supports_ttl``), as LangGraph's ``SqliteStore`` does it. ``put(..., ttl=minutes)``
  (or ``ttl={"default_ttl": m}``) makes an item expire ``m`` minutes after its last write; a
  read (``get``, ``search``) pushes the expiry of what it returns to ``m`` minutes from then
  only when the store's config says ``ttl={"refresh_on_read": True}`` and the read does not
  pass ``refresh_ttl=False``. An expired item is never returned or listed, even before a sweep
  deletes it (``SqliteStore`` returns it until then); :meth:`MindstoreStore.sweep_ttl` (sync)
  and :meth:`MindstoreStore.asweep_ttl` delete them (``start_ttl_sweeper`` runs it every
  ``sweep_interval_minutes``).
- **Batches** run their ops in order: a ``get`` after a ``put`` in the same batch sees the put.
- **Sync calls** (``put``, ``get``, …) work from any thread, also where an event loop is
  running in the calling thread (a Jupyter cell, a sync node under ``graph.invoke`` there), as
  ``InMemoryStore``'s do. Given a ``mindstore.sync`` store, every call (sync and async) runs on
  that store's own loop thread. Given an async store: on its loop when that loop runs in
  another thread (LangGraph runs sync nodes in worker threads); in a fresh loop when no loop
  runs in this thread; inside a running loop, a SQLite store (bound to no loop) runs the call
  on the adapter's own loop thread, while a PostgreSQL store — whose connections belong to the
  blocked loop — raises ``asyncio.InvalidStateError`` naming the fix: pass
  ``mindstore.sync.PostgresStore.open(url)`` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import defaultdict
from collections.abc import Callable, Coroutine, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from mindstore.errors import MissingDependencyError
from mindstore.integrations._store_rules import (
    decode_label,
    encode_namespace,
    in_prefix,
    label_prefix,
    literal_prefix,
    matches_filter,
    select_namespaces,
    text_leaves,
)
from mindstore.search import ParsedQuery, parse_query
from mindstore.store._checks import check_name, check_store
from mindstore.store.base import Entry, ScopeKey, Store
from mindstore.sync import Loop

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        IndexConfig,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        get_text_at_path,
        validate_op_namespace,
    )
except ImportError as exc:  # pragma: no cover - exercised by tests/meta/test_extras.py
    raise MissingDependencyError("langgraph", "langgraph") from exc

from mindstore.integrations._langgraph_vectors import (  # needs langgraph: after the try
    SemanticIndex,
    decode_vectors,
    encode_vectors,
    index_fields,
    max_similarity,
)

__all__ = ["MindstoreStore"]

_T = TypeVar("_T")
_FETCH_MIN = 50  # search hits fetched per collection before filtering, at least


class MindstoreStore(BaseStore):
    """A LangGraph ``BaseStore`` over a mindstore :class:`~mindstore.store.base.Store`.

    Args:
        store: an open mindstore store (``SQLiteStore``, ``PostgresStore``, ``open_store``),
            async or from :mod:`mindstore.sync`. It is not closed by this adapter.
        namespace: the mindstore namespace (tenant) the items live in.
        index: LangGraph's index config: ``embed`` + ``dims`` (or the store's embedder) make
            ``query`` semantic; ``fields`` selects what is embedded and full-text indexed
            (default ``["$"]``: the whole value).
        ttl: LangGraph's TTL config (``default_ttl`` and ``sweep_interval_minutes`` in minutes,
            ``refresh_on_read``).

    Raises:
        ValueError: an empty or over-long ``namespace``.
        ConfigError: a bad ``index`` (``dims`` not a positive integer, ``embed`` without
            ``dims``, ``dims`` unlike the store embedder's).
    """

    supports_ttl = True

    def __init__(
        self,
        store: Store,
        *,
        namespace: str = "default",
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        self._runner: Loop | None = None
        sync_loop = getattr(store, "_loop", None)
        if type(store).__module__ == "mindstore.sync" and isinstance(sync_loop, Loop):
            # a mindstore.sync store: every call runs on that store's own loop thread
            self._runner = sync_loop
            store = getattr(store, "aio")  # noqa: B009 - Store (the annotation) has no .aio
        self.store = check_store(store, "MindstoreStore (LangGraph runs it on its own loop)")
        self._own_loop: Loop | None = None  # see batch(): a loop-free store inside a loop
        self.namespace = check_name(namespace, "namespace")
        self.index_config = index
        self.ttl_config = ttl
        self._fields: list[str] = index_fields(index)
        self._semantic = SemanticIndex.from_config(index, getattr(self.store, "embedder", None))
        #: the LangChain ``Embeddings`` of ``index["embed"]`` (as on ``InMemoryStore``), or None
        self.embeddings = None if self._semantic is None else self._semantic.embeddings
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sweeper: asyncio.Task[None] | None = None
        with contextlib.suppress(RuntimeError):
            self._loop = asyncio.get_running_loop()

    # ---- the two primitives LangGraph builds everything on --------------------------------
    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; one result per op (``None`` for puts)."""
        runner = self._runner
        if runner is not None and not runner.in_thread():
            return list(await asyncio.wrap_future(runner.submit(self._abatch, list(ops))))
        return await self._abatch(ops)

    async def _abatch(self, ops: Iterable[Op]) -> list[Result]:
        if self._runner is None:
            self._loop = asyncio.get_running_loop()
        ops = list(ops)
        vectors = await self._embed_puts(ops)  # before any op runs: a failure writes nothing
        results: list[Result] = []
        for i, op in enumerate(ops):
            for field in ("namespace", "namespace_prefix"):
                if isinstance(getattr(op, field, None), str):  # ("users" became u, s, e, r, s)
                    raise InvalidNamespaceError(
                        f"a namespace is a tuple of labels, e.g. ({getattr(op, field)!r},), "
                        f"not the string {getattr(op, field)!r}"
                    )
            validate_op_namespace(op)
            if isinstance(op, GetOp):
                results.append(await self._get(op))
            elif isinstance(op, SearchOp):
                results.append(await self._search(op))
            elif isinstance(op, PutOp):
                await self._put(op, vectors.get(i))
                results.append(None)
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._list_namespaces(op))
            else:
                raise TypeError(f"unknown LangGraph store operation: {type(op).__name__}")
        return results

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """The synchronous :meth:`abatch`; callable from any thread, also one whose event loop
        is running (a Jupyter cell, a sync node under ``graph.invoke`` there).

        Where it runs: on the ``mindstore.sync`` store's loop thread when given one; else on
        the loop the store was last used from when that loop runs in another thread (LangGraph
        runs sync nodes in worker threads); else, with no loop in this thread, in a fresh one.
        With a loop running in this thread, a SQLite store (which is bound to no loop) runs the
        call on this adapter's own loop thread; a PostgreSQL store's connections belong to that
        running loop, which cannot serve a call while this thread blocks, so that raises
        ``asyncio.InvalidStateError`` naming the fix (pass a ``mindstore.sync`` store).
        """
        return list(self._run_sync(self._abatch, list(ops)))

    def _run_sync(self, fn: Callable[..., Coroutine[Any, Any, _T]], *args: Any) -> _T:
        """``await fn(*args)`` from synchronous code, on the loop :meth:`batch` describes."""
        if self._runner is not None:
            result: _T = self._runner.call(fn, *args)
            return result
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        loop = self._loop
        if loop is not None and loop is not running and loop.is_running():
            return asyncio.run_coroutine_threadsafe(fn(*args), loop).result()
        if running is None:
            return asyncio.run(self._detached(fn, *args))
        if getattr(self.store, "_binds_event_loop", True):
            raise asyncio.InvalidStateError(
                "MindstoreStore: a synchronous call (put/get/search/...) was made in a thread "
                f"whose event loop is running, and the {type(self.store).__name__}'s "
                "connections belong to that loop. Use the async methods (aput/aget/asearch/"
                "...) there, or give MindstoreStore a mindstore.sync store (e.g. "
                "mindstore.sync.PostgresStore.open(url)), which runs on its own loop thread"
            )
        if self._own_loop is None:
            self._own_loop = Loop()
        result = self._own_loop.call(self._detached, fn, *args)
        return result

    async def _detached(self, fn: Callable[..., Coroutine[Any, Any, _T]], *args: Any) -> _T:
        # A throwaway (or the adapter's own) loop must not become "the store's loop" for later
        # sync calls.
        loop = self._loop
        try:
            return await fn(*args)
        finally:
            self._loop = loop

    # ---- operations ---------------------------------------------------------------------------
    def _refreshes(self, refresh_ttl: bool) -> bool:
        """Whether a read refreshes the TTL of what it returns — exactly LangGraph's
        ``SqliteStore``: the op asks for it (``refresh_ttl``, which ``BaseStore`` defaults to
        the config's ``refresh_on_read``, else True) *and* the store's TTL config has
        ``refresh_on_read`` set true. Without a TTL config, or without that key, reads never
        move an expiry: an item expires ``ttl`` minutes after its last write."""
        config = self.ttl_config
        return bool(refresh_ttl and config and config.get("refresh_on_read", False))

    def _key(self, namespace: tuple[str, ...]) -> ScopeKey:
        return ScopeKey(
            namespace=self.namespace, session_id=None, label=encode_namespace(namespace)
        )

    async def _get(self, op: GetOp) -> Item | None:
        key = self._key(op.namespace)
        entry = await self.store.get_entry(key, op.key)
        if entry is None or _expired(entry, datetime.now(UTC)):
            return None
        record = _record(entry)
        if self._refreshes(op.refresh_ttl):
            await self._refresh(key, [(entry.key, record)])
        item: Item = _item(op.namespace, entry, record, Item)
        return item

    async def _embed_puts(self, ops: list[Op]) -> dict[int, dict[str, Any]]:
        """The vector records of the batch's puts (by op position), in one embed call."""
        semantic = self._semantic
        if semantic is None:
            return {}
        wanted: list[tuple[int, list[tuple[str, str]]]] = []
        for i, op in enumerate(ops):
            if isinstance(op, PutOp) and isinstance(op.value, Mapping) and op.index is not False:
                with contextlib.suppress(TypeError, ValueError):  # _put reports a bad value
                    value = json.loads(json.dumps(op.value, ensure_ascii=False))
                    wanted.append((i, semantic.texts(value, op.index)))
        flat = await semantic.embed_documents([t for _, pairs in wanted for _, t in pairs])
        out: dict[int, dict[str, Any]] = {}
        at = 0
        for i, pairs in wanted:
            got = flat[at : at + len(pairs)]
            at += len(pairs)
            out[i] = encode_vectors([p for p, _ in pairs], got, semantic.dims)
        return out

    async def _put(self, op: PutOp, vectors: dict[str, Any] | None = None) -> None:
        key = self._key(op.namespace)
        if op.value is None:
            await self.store.delete_entry(key, op.key)
            return
        if not isinstance(op.value, Mapping):
            raise TypeError(f"a LangGraph store value must be a mapping, got {type(op.value)}")
        ttl = op.ttl
        if ttl is not None and (not isinstance(ttl, int | float) or ttl <= 0):
            raise ValueError(f"ttl must be a positive number of minutes or None, got {ttl!r}")
        try:
            record = {"value": op.value, "ttl": ttl}
            if vectors is not None:
                record["vectors"] = vectors
            data = json.dumps(record, ensure_ascii=False)
        except (TypeError, ValueError) as e:
            raise TypeError(f"a LangGraph store value must be JSON-serialisable: {e}") from e
        value = json.loads(data)["value"]  # index what get() will return
        fields = self._fields if op.index is None else (op.index or [])
        await self.store.put_entry(
            key,
            op.key,
            "\n".join(_indexed_text(value, fields)),
            data=data,
            expires_at=None if ttl is None else datetime.now(UTC) + timedelta(minutes=ttl),
        )

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.limit <= 0:
            return []
        offset = max(0, op.offset)
        labels = await self.store.list_entry_labels(
            self.namespace, prefix=label_prefix(op.namespace_prefix)
        )
        spaces = [
            (label, ns)
            for label in labels
            if (ns := decode_label(label)) is not None and in_prefix(ns, op.namespace_prefix)
        ]
        now = datetime.now(UTC)
        if op.query and self._semantic is not None:
            return await self._semantic_search(op, spaces, offset, now)
        parsed = parse_query(op.query) if op.query else None
        found: list[tuple[tuple[str, ...], Entry, dict[str, Any], float | None]] = []
        for label, ns in spaces:
            key = ScopeKey(namespace=self.namespace, session_id=None, label=label)
            if parsed is None or parsed.empty:
                entries = await self._list_collection(key, op, offset, now)
                scores: dict[str, float | None] = {e.key: None for e in entries}
            else:
                entries, scores = await self._query_collection(key, parsed, op, offset)
            for entry in entries:
                if _expired(entry, now):
                    continue
                record = _record(entry)
                if matches_filter(record["value"], op.filter):
                    found.append((ns, entry, record, scores[entry.key]))
        if parsed is None or parsed.empty:
            found.sort(key=lambda f: (f[1].updated_at, f[0], f[1].key), reverse=True)
        else:
            found.sort(key=lambda f: (f[3] or 0.0, f[1].updated_at), reverse=True)
        page = found[offset : offset + op.limit]
        if self._refreshes(op.refresh_ttl):
            await self._refresh_page([(ns, entry, record) for ns, entry, record, _ in page])
        return [_item(ns, entry, record, SearchItem, score) for ns, entry, record, score in page]

    async def _semantic_search(
        self,
        op: SearchOp,
        spaces: list[tuple[str, tuple[str, ...]]],
        offset: int,
        now: datetime,
    ) -> list[SearchItem]:
        """``InMemoryStore``'s semantic search: every live item of the prefix that passes the
        filter, ranked by its best vector's cosine similarity with the query; items without
        vectors (``index=False``, put before the index was configured) fill a short page
        after them, unscored."""
        semantic = self._semantic
        assert semantic is not None and op.query
        query = await semantic.embed_query(op.query)
        found: list[tuple[tuple[str, ...], Entry, dict[str, Any]]] = []
        for label, ns in spaces:
            key = ScopeKey(namespace=self.namespace, session_id=None, label=label)
            for entry in await self.store.list_entries(key):
                if _expired(entry, now):
                    continue
                record = _record(entry)
                if matches_filter(record["value"], op.filter):
                    found.append((ns, entry, record))
        scores = max_similarity(
            query,
            (decode_vectors(r.get("vectors"), semantic.dims) for _, _, r in found),
            semantic.dims,
        )
        scored = [(f, s) for f, s in zip(found, scores, strict=True) if s is not None]
        scored.sort(key=lambda fs: (fs[1], fs[0][1].updated_at), reverse=True)
        page: list[tuple[tuple[tuple[str, ...], Entry, dict[str, Any]], float | None]]
        page = list(scored[offset : offset + op.limit])
        if len(page) < op.limit:
            unscored = [f for f, s in zip(found, scores, strict=True) if s is None]
            page.extend((f, None) for f in unscored[: op.limit - len(page)])
        if self._refreshes(op.refresh_ttl):
            await self._refresh_page([f for f, _ in page])
        return [_item(ns, e, r, SearchItem, score) for (ns, e, r), score in page]

    async def _list_collection(
        self, key: ScopeKey, op: SearchOp, offset: int, now: datetime
    ) -> list[Entry]:
        """A collection's entries, newest first: without a filter only the first
        ``offset + limit`` can reach the page (the merge across collections is by the same
        order), unless expired ones among them leave it short — then all of them."""
        if op.filter:
            return await self.store.list_entries(key)
        want = offset + op.limit
        entries = await self.store.list_entries(key, limit=want)
        if len(entries) == want and any(_expired(e, now) for e in entries):
            entries = await self.store.list_entries(key)
        return entries

    async def _query_collection(
        self, key: ScopeKey, parsed: ParsedQuery, op: SearchOp, offset: int
    ) -> tuple[list[Entry], dict[str, float | None]]:
        """The query's hits in one collection, enough of them to fill the page after the filter
        (fetching more while the filter rejects hits and the collection has more)."""
        want = max(_FETCH_MIN, offset + op.limit)
        while True:
            hits = await self.store.search_entries(key, parsed, limit=want)
            entries = await self.store.get_entries(key, [h.key for h in hits])
            kept = [e for e in entries if matches_filter(_record(e)["value"], op.filter)]
            if len(hits) < want or len(kept) >= offset + op.limit:
                return entries, {h.key: h.score for h in hits}
            want *= 4

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = [(c.match_type, tuple(c.path)) for c in op.match_conditions or ()]
        labels = await self.store.list_entry_labels(
            self.namespace, prefix=label_prefix(literal_prefix(conditions))
        )
        spaces = [ns for label in labels if (ns := decode_label(label)) is not None]
        return select_namespaces(
            spaces, conditions, max_depth=op.max_depth, limit=op.limit, offset=max(0, op.offset)
        )

    async def _refresh_page(
        self, page: list[tuple[tuple[str, ...], Entry, dict[str, Any]]]
    ) -> None:
        by_space: dict[tuple[str, ...], list[tuple[str, dict[str, Any]]]] = defaultdict(list)
        for ns, entry, record in page:
            by_space[ns].append((entry.key, record))
        for ns, items in by_space.items():
            await self._refresh(self._key(ns), items)

    async def _refresh(self, key: ScopeKey, items: list[tuple[str, dict[str, Any]]]) -> None:
        now = datetime.now(UTC)
        expiries = {
            k: now + timedelta(minutes=r["ttl"]) for k, r in items if r.get("ttl") is not None
        }
        if expiries:
            await self.store.set_entry_expiry(key, expiries)

    # ---- TTL sweeping -------------------------------------------------------------------------
    def sweep_ttl(self) -> int:
        """Delete the expired items of this store's mindstore namespace; returns how many.
        Synchronous, like ``SqliteStore.sweep_ttl`` (runs where :meth:`batch` runs)."""
        return self._run_sync(self.asweep_ttl)

    async def asweep_ttl(self) -> int:
        """The async :meth:`sweep_ttl` (``AsyncSqliteStore.sweep_ttl``'s counterpart)."""
        runner = self._runner
        if runner is not None and not runner.in_thread():
            swept = await asyncio.wrap_future(runner.submit(self.asweep_ttl))
            return int(swept)
        return await self.store.delete_expired_entries(self.namespace)

    async def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> None:
        """Start a background task sweeping every ``sweep_interval_minutes`` (default: the TTL
        config's, else 5). A second call while one runs does nothing."""
        if self._sweeper is not None and not self._sweeper.done():
            return
        minutes = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes")
        interval = 60.0 * (minutes or 5)

        async def sweep_forever() -> None:
            while True:
                await asyncio.sleep(interval)
                await self.asweep_ttl()

        self._sweeper = asyncio.get_running_loop().create_task(sweep_forever())

    async def stop_ttl_sweeper(self) -> None:
        """Stop the background sweeper (if running) and wait for it to end."""
        task, self._sweeper = self._sweeper, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _record(entry: Entry) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(entry.data or '{"value": {}}')
    return record


def _expired(entry: Entry, now: datetime) -> bool:
    return entry.expires_at is not None and entry.expires_at <= now


def _item(
    namespace: tuple[str, ...],
    entry: Entry,
    record: dict[str, Any],
    cls: type[Any],
    score: float | None = None,
) -> Any:
    kwargs: dict[str, Any] = {
        "namespace": namespace,
        "key": entry.key,
        "value": record["value"],
        "created_at": entry.created_at or entry.updated_at,
        "updated_at": entry.updated_at,
    }
    if cls is SearchItem:
        kwargs["score"] = score
    return cls(**kwargs)


def _indexed_text(value: Any, fields: Iterable[str]) -> list[str]:
    """The text of ``fields`` (LangGraph JSON paths; ``"$"`` = the whole value) as strings."""
    out: list[str] = []
    for field in fields:
        if field == "$":
            out.extend(text_leaves(value))
            continue
        for text in get_text_at_path(value, field):
            try:
                nested = json.loads(text) if text[:1] in ("{", "[") else None
            except ValueError:
                nested = None
            out.extend(text_leaves(nested) if nested is not None else [text])
    return out
