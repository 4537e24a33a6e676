"""MediaEvictor: a session's old media moved out of the database, and read back on request.

A :class:`~mindstore.Session` holds one :class:`MediaEvictor` (``session.media``); its
``evict_media`` and the ``hydrate=`` reads delegate to it, and with ``with_media_eviction`` it
runs after every append (hooked into the compactor's after-append step, which every append path
calls).

Which messages: those of the path to ``leaf_id`` (default: the latest leaf) that are more than
``older_than_messages`` from its end — the tail is never touched. What leaves them and what
replaces it: :mod:`mindstore.media.markers`. Where it goes: :mod:`mindstore.media.blobs`.

Crash safety, per message: (1) every object of the message is written and durable in the blob
store; (2) only then, in one store transaction holding the session's lock, the message is read
again and — if it is still exactly what was planned from — replaced through the store's message
update (the search index and token counts follow in that transaction). A kill before (2) leaves
the message as it was (at most an unreferenced object); a kill during (2) rolls it back; after
(2) every marker names an object that exists. A message changed by someone else meanwhile is
left for a later pass (``skipped``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mindstore.errors import MediaNotFoundError
from mindstore.media.blobs import BlobStore
from mindstore.media.markers import (
    MIN_EVICT_BYTES,
    evicted_digests,
    evicted_store_url,
    hydrate_message,
    is_evicted,
    plan_eviction,
)
from mindstore.messages import validate_message
from mindstore.store.base import SessionKey, Store, StoredMessage
from mindstore.tokens import Tokenizer, estimate_message_tokens

__all__ = [
    "DEFAULT_EVICT_MIN_BYTES",
    "DEFAULT_KEEP_RECENT",
    "EvictionReport",
    "MediaEvictor",
]

DEFAULT_KEEP_RECENT = 8
"""``older_than_messages`` by default: the recent span a model still reads in full."""
DEFAULT_EVICT_MIN_BYTES = 32 * 1024
"""``min_bytes`` by default: values smaller than this stay in the message."""
AUTO_LOOKBACK = 8
"""After an append, how many messages just outside the tail the automatic pass looks at (a
batch append moves several out at once; a pass cut short by a crash is finished here)."""
_FETCH_CONCURRENCY = 8

log = logging.getLogger("mindstore.media")


@dataclass(frozen=True, kw_only=True, slots=True)
class EvictionReport:
    """What one eviction pass did."""

    messages: int  # messages rewritten with markers
    items: int  # values moved to the blob store
    bytes_moved: int  # UTF-8 bytes of those values, gone from the database
    skipped: int  # candidates changed by another writer meanwhile (left for a later pass)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Auto:
    keep: int
    min_bytes: int
    blobs: BlobStore | None


def check_pass(older_than_messages: Any, min_bytes: Any) -> tuple[int, int]:
    """Validated ``(older_than_messages, min_bytes)``.

    Raises:
        ValueError: ``older_than_messages`` < 1 (the leaf is always kept) or ``min_bytes`` <
            :data:`~mindstore.media.markers.MIN_EVICT_BYTES`, or either is not an integer.
    """
    for name, value, low in (
        ("older_than_messages", older_than_messages, 1),
        ("min_bytes", min_bytes, MIN_EVICT_BYTES),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r:.40}")
    return older_than_messages, min_bytes


def as_blob_store(
    blob_store: str | BlobStore, storage_options: Mapping[str, Any] | None
) -> BlobStore:
    """A :class:`BlobStore` for a URL (or the one given).

    Raises:
        ValueError: not a URL/path string.
        TypeError: not a string or a BlobStore.
    """
    if isinstance(blob_store, BlobStore):
        return blob_store
    if not isinstance(blob_store, str):
        raise TypeError(
            f"blob_store must be a folder path, an fsspec URL or a BlobStore, got "
            f"{type(blob_store).__name__}"
        )
    return BlobStore(blob_store, storage_options=storage_options)


class MediaEvictor:
    """Media eviction and hydration for one session; see the module docstring."""

    def __init__(self, store: Store, key: SessionKey, *, tokenizer: Tokenizer | None) -> None:
        self._store = store
        self._key = key
        self._tokenizer = tokenizer
        self._blobs: BlobStore | None = None
        self._auto: _Auto | None = None
        self._by_url: dict[str, BlobStore] = {}

    # ---- configuration (no I/O) ---------------------------------------------------------------
    def set_blob_store(self, blob_store: str | BlobStore, storage_options: Any) -> None:
        self._blobs = as_blob_store(blob_store, storage_options)

    def set_auto(
        self,
        older_than_messages: int,
        min_bytes: int,
        blob_store: str | BlobStore | None,
        storage_options: Any,
    ) -> None:
        keep, least = check_pass(older_than_messages, min_bytes)
        blobs = as_blob_store(blob_store, storage_options) if blob_store is not None else None
        self._auto = _Auto(keep=keep, min_bytes=least, blobs=blobs)

    def _resolve(self, blob_store: str | BlobStore | None, storage_options: Any) -> BlobStore:
        if blob_store is not None:
            return as_blob_store(blob_store, storage_options)
        if self._blobs is not None:
            return self._blobs
        raise ValueError(
            "evict_media needs a blob store: pass blob_store= (a folder or an fsspec URL) or "
            "configure one with Session.with_blob_store(url)"
        )

    # ---- eviction -----------------------------------------------------------------------------
    async def evict(
        self,
        *,
        older_than_messages: int,
        min_bytes: int,
        blob_store: str | BlobStore | None,
        storage_options: Any,
        leaf_id: str | None,
    ) -> EvictionReport:
        """One pass over the path to ``leaf_id``; see :meth:`mindstore.Session.evict_media`."""
        keep, least = check_pass(older_than_messages, min_bytes)
        blobs = self._resolve(blob_store, storage_options)
        totals = [0, 0, 0, 0]
        row = await self._leaf(leaf_id)
        depth = 0
        # Walk up the parent links one message at a time: memory stays at one message however
        # much media the session holds.
        while row is not None:
            if depth >= keep:
                _add(totals, await self._evict_row(row, least, blobs))
            depth += 1
            parent = row.parent_id
            row = await self._store.get_message(self._key, parent) if parent else None
        return EvictionReport(
            messages=totals[0], items=totals[1], bytes_moved=totals[2], skipped=totals[3]
        )

    async def _leaf(self, leaf_id: str | None) -> StoredMessage | None:
        if leaf_id is None:
            return await self._store.latest_leaf(self._key)
        # path_length raises MessageNotFoundError for an unknown id, as get_history does
        await self._store.path_length(self._key, leaf_id)
        return await self._store.get_message(self._key, leaf_id)

    async def _evict_row(
        self, row: StoredMessage, min_bytes: int, blobs: BlobStore
    ) -> tuple[int, int, int, int]:
        plan = plan_eviction(row.message, min_bytes=min_bytes, store_url=blobs.url)
        if plan is None:
            return (0, 0, 0, 0)
        new = validate_message(plan.message, generate_id=False)
        tokens = estimate_message_tokens([new], self._tokenizer)
        for data in plan.blobs.values():  # (1) objects durable first
            await blobs.put(data)
        async with self._store.transaction(lock=[self._key]):  # (2) then the row, if unchanged
            current = await self._store.get_message(self._key, row.id)
            if current is None or current.message != row.message:
                return (0, 0, 0, 1)
            await self._store.update(self._key, new, tokens=tokens)
        return (1, plan.items, plan.bytes_removed, 0)

    async def after_append(self, message: dict[str, Any]) -> None:
        """The automatic pass after an append (``with_media_eviction``): the few messages that
        just left the tail of the path to ``message``. Never raises: the message is stored
        already; failures are logged (the next append's pass, or ``evict_media``, retries)."""
        auto = self._auto
        if auto is None:
            return
        try:
            blobs = auto.blobs or self._resolve(None, None)
            window = await self._store.path_window(
                self._key,
                str(message["id"]),
                max_tokens=0,
                max_bytes=0,
                min_messages=auto.keep + AUTO_LOOKBACK,
            )
            for row in window.messages[: max(0, len(window.messages) - auto.keep)]:
                await self._evict_row(row, auto.min_bytes, blobs)
        except Exception:
            log.exception(
                "automatic media eviction failed in session %r of namespace %r (the message "
                "is stored; the media stays in the database until a later pass)",
                self._key.session_id,
                self._key.namespace,
            )

    # ---- hydration ----------------------------------------------------------------------------
    def _store_for(self, message: Mapping[str, Any]) -> BlobStore:
        if self._blobs is not None:
            return self._blobs
        url = evicted_store_url(message)
        if url is None:
            raise MediaNotFoundError(
                f"message {message.get('id')!r:.80} holds evicted media but no blob store is "
                "known: configure the session with with_blob_store(url)"
            )
        if url not in self._by_url:
            self._by_url[url] = BlobStore(url)
        return self._by_url[url]

    async def hydrate(self, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` with every evicted value read back from the blob store (messages
        without markers are returned as they are).

        Raises:
            MediaNotFoundError: an object is missing or corrupt, or no blob store is known.
        """
        wanted: dict[tuple[int, str], BlobStore] = {}
        for message in messages:
            if is_evicted(message):
                blobs = self._store_for(message)
                for digest in evicted_digests(message):
                    wanted[(id(blobs), digest)] = blobs
        if not wanted:
            return list(messages)
        gate = asyncio.Semaphore(_FETCH_CONCURRENCY)

        async def fetch(blobs: BlobStore, digest: str) -> bytes:
            async with gate:
                return await blobs.get(digest)

        keys = list(wanted)
        values = await asyncio.gather(*(fetch(wanted[k], k[1]) for k in keys))
        got = dict(zip(keys, values, strict=True))
        out = []
        for message in messages:
            if not is_evicted(message):
                out.append(message)
                continue
            owner = id(self._store_for(message))

            def read(digest: str, owner: int = owner) -> bytes:
                return got[(owner, digest)]

            out.append(hydrate_message(message, read))
        return out


def _add(totals: list[int], step: tuple[int, int, int, int]) -> None:
    for i, n in enumerate(step):
        totals[i] += n
