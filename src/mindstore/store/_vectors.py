"""The backend-neutral half of embedding and vector search; backends supply only SQL.

A message is *pending* while it has no vector row for the store's embedder (``name`` and
``dimensions``): never embedded, embedded by another embedder, or its row was dropped because the
message (or its parent, which is part of the embedded text) changed. Rows of another embedder are
never read by a search; embedding replaces them.

What is embedded is the lexical index's text (:func:`mindstore.search.index_text`): text and
reasoning parts, else the tool text. The memory tools' own calls and results
(:data:`mindstore.search.MEMORY_TOOLS`) are left out there, so they are never sent to the
embedder: a message holding nothing else gets an empty vector row (done, not pending, never a
semantic hit) and gives its children no context.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from mindstore._async import maybe_await
from mindstore.embeddings import Embedder, embed_batch
from mindstore.errors import EmbeddingError
from mindstore.search import SearchResult, index_text
from mindstore.store._checks import check_int, check_name
from mindstore.vectors import embedding_text, encode_vector

__all__ = [
    "BackendVectors",
    "EmbedsPending",
    "PendingRow",
    "VectorMethods",
    "check_embedder",
    "message_text",
    "query_embedding_started",
    "query_vector",
    "require_embedder",
    "run_embed_pending",
]


@dataclass(frozen=True, slots=True)
class PendingRow:
    key: int
    content: str
    parent_content: str | None


def message_text(content: str | None) -> str:
    """The indexed text of a stored message's JSON (text parts, else its tool text)."""
    if not content:
        return ""
    try:
        message = json.loads(content)
    except ValueError:
        return ""
    text, tool_text = index_text(message)
    return text or tool_text


@dataclass(slots=True)
class StartedEmbedding:
    """A query embedding started by :func:`query_embedding_started`; ``ready`` is set once a
    search holds its vector (a semantic search then dispatches its scan at once)."""

    embedder: Embedder
    query: str
    task: asyncio.Future[list[list[float]]]
    ready: asyncio.Event


_STARTED: ContextVar[StartedEmbedding | None] = ContextVar(
    "mindstore_query_embedding", default=None
)


@asynccontextmanager
async def query_embedding_started(embedder: Embedder, query: str) -> AsyncIterator[asyncio.Event]:
    """Start embedding ``query`` now, in the background, for the block: a hybrid search runs
    its lexical half meanwhile (the model call often costs more than the lexical search), and
    :func:`query_vector` for the same embedder and query inside the block awaits this one
    instead of embedding again. Yields the event :func:`query_vector` sets when a search has
    the vector. Leaving the block early cancels it."""
    task = asyncio.ensure_future(embed_batch(embedder, [query], query=True))
    started = StartedEmbedding(embedder, query, task, asyncio.Event())
    token = _STARTED.set(started)
    try:
        await asyncio.sleep(0)  # let it reach the embedder (a worker thread or a request)
        yield started.ready
    finally:
        _STARTED.reset(token)
        if not task.done():
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def query_vector(embedder: Embedder, query: str) -> list[float]:
    """The query's vector: the one :func:`query_embedding_started` is computing, else a new
    call to the embedder."""
    started = _STARTED.get()
    if started is not None and started.embedder is embedder and started.query == query:
        [vector] = await started.task
        started.ready.set()
    else:
        [vector] = await embed_batch(embedder, [query], query=True)
    return vector


def check_embedder(embedder: Any) -> Embedder | None:
    if embedder is None:
        return None
    name = getattr(embedder, "name", None)
    dims = getattr(embedder, "dimensions", None)
    if not isinstance(name, str) or not name or not callable(getattr(embedder, "embed", None)):
        raise TypeError(
            "embedder must have a non-empty str name, dimensions and an embed(texts) method "
            "(see mindstore.embeddings.Embedder)"
        )
    if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
        raise TypeError(f"embedder {name!r} must declare dimensions as a positive int")
    return embedder  # type: ignore[no-any-return]


def require_embedder(embedder: Embedder | None, what: str) -> Embedder:
    if embedder is None:
        raise EmbeddingError(
            f"{what} needs an embedder: open the store with embedder=... "
            "(e.g. mindstore.embeddings.default_embedder())"
        )
    return embedder


Fetch = Callable[[int], Sequence[PendingRow] | Awaitable[Sequence[PendingRow]]]
Write = Callable[[list[tuple[PendingRow, bytes | None]]], int | Awaitable[int]]


async def run_embed_pending(
    embedder: Embedder,
    fetch: Fetch,
    write: Write,
    *,
    limit: int | None,
    batch_size: int,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Embed pending messages batch by batch; each batch is written in its own transaction, so
    a crash loses at most the batch being embedded (which stays pending). ``write`` skips rows
    whose message or parent changed since ``fetch`` (they stay pending). Returns the number of
    messages given a vector row."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be None or a non-negative integer, got {limit!r}")
    done = 0
    skipped_keys: set[int] = set()
    while limit is None or done < limit:
        n = batch_size if limit is None else min(batch_size, limit - done)
        rows = fetch(n + len(skipped_keys))
        if inspect.isawaitable(rows):
            rows = await rows
        rows = [r for r in rows if r.key not in skipped_keys][:n]
        if not rows:
            break
        texts: list[str] = []
        embed_rows: list[PendingRow] = []
        out: list[tuple[PendingRow, bytes | None]] = []
        for r in rows:
            own = message_text(r.content)
            if not own.strip():
                out.append((r, None))  # nothing to embed: a row marks it done
                continue
            embed_rows.append(r)
            texts.append(embedding_text(own, message_text(r.parent_content) or None))
        vectors = await embed_batch(embedder, texts)
        out.extend((r, encode_vector(v)) for r, v in zip(embed_rows, vectors, strict=True))
        written = write(out)
        if inspect.isawaitable(written):
            written = await written
        assert isinstance(written, int)
        if written < len(out):
            # Rows that changed under us are left pending; do not loop on them in this call.
            skipped_keys.update(r.key for r, _ in out)
        done += written
        if progress is not None:
            progress(len(out))
        if written == 0 and len(rows) < n:
            break
    return done


class EmbedsPending(ABC):
    """``embed_pending`` for a backend's vector store: the backend gives ``embedder`` and its
    ``_fetch`` (pending rows) / ``_write`` (one batch in one transaction); the loop is
    :func:`run_embed_pending`, the same on every backend."""

    embedder: Embedder

    @abstractmethod
    def _fetch(self, n: int) -> Sequence[PendingRow] | Awaitable[Sequence[PendingRow]]:
        """Up to ``n`` pending rows."""

    @abstractmethod
    def _write(self, rows: list[tuple[PendingRow, bytes | None]]) -> int | Awaitable[int]:
        """Store one batch of vectors in one transaction; the number written."""

    @abstractmethod
    def search_vector(
        self,
        namespace: str,
        vector: Sequence[float],
        *,
        session_ids: Sequence[str] | None,
        limit: int,
    ) -> list[SearchResult] | Awaitable[list[SearchResult]]:
        """k-NN of ``vector`` among the namespace's current vectors (sync on SQLite)."""

    async def search(
        self, namespace: str, query: str, *, session_ids: Sequence[str] | None, limit: int
    ) -> list[SearchResult]:
        """k-NN of ``query``'s embedding in ``namespace`` (optionally ``session_ids``)."""
        if limit <= 0 or not query.strip():
            return []
        vector = await query_vector(self.embedder, query)
        return await maybe_await(
            self.search_vector(namespace, vector, session_ids=session_ids, limit=limit)
        )

    async def embed_pending(
        self,
        *,
        limit: int | None = None,
        batch_size: int = 64,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        return await run_embed_pending(
            self.embedder,
            self._fetch,
            self._write,
            limit=limit,
            batch_size=batch_size,
            progress=progress,
        )


class BackendVectors(Protocol):
    """What a backend's vectors object (``sqlite/vectors.py``, ``postgres/vectors.py``) offers
    the store."""

    async def embed_pending(
        self, *, limit: int | None, batch_size: int, progress: Callable[[int], None] | None
    ) -> int: ...

    async def pending_count(self) -> int: ...

    async def drop_vectors(self) -> int: ...

    async def search(
        self, namespace: str, query: str, *, session_ids: Sequence[str] | None, limit: int
    ) -> list[SearchResult]: ...


class VectorMethods:
    """The vector half of a store's public API, written once for both backends: argument
    checks here, the work in the backend's :class:`BackendVectors` (``_vectors``, None without
    an embedder). A store sets ``_embedder`` (checked with :func:`check_embedder`) and
    ``_vectors`` in its constructor. Every method except :attr:`embedder` and
    :attr:`vector_index` raises :class:`~mindstore.errors.EmbeddingError` without an embedder.
    """

    _embedder: Embedder | None
    _vectors: BackendVectors | None

    @property
    def embedder(self) -> Embedder | None:
        """The embedder given to the store, or None (lexical search only)."""
        return self._embedder

    @property
    def vector_index(self) -> Literal["pgvector", "exact"] | None:
        """How :meth:`semantic_search` finds neighbours: ``"pgvector"`` (pgvector's HNSW
        index, PostgreSQL only), ``"exact"`` (an exact cosine scan), or None without an
        embedder. Decided when the store opens."""
        if self._vectors is None:
            return None
        # PostgresVectors.hnsw: whether the pgvector index is in use; SQLite has none.
        return "pgvector" if getattr(self._vectors, "hnsw", False) else "exact"

    def _require_vectors(self, what: str) -> BackendVectors:
        require_embedder(self._embedder, what)
        assert self._vectors is not None
        return self._vectors

    async def embed_pending(
        self,
        *,
        limit: int | None = None,
        batch_size: int = 64,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Embed messages that have no vector of this store's embedder yet, ``batch_size`` per
        call to the embedder and per transaction; returns how many were embedded.
        ``progress(n)`` is called after each batch."""
        vectors = self._require_vectors("embed_pending")
        return await vectors.embed_pending(limit=limit, batch_size=batch_size, progress=progress)

    async def pending_embeddings(self) -> int:
        """How many messages have no vector of this store's embedder."""
        return await self._require_vectors("pending_embeddings").pending_count()

    async def drop_vectors(self) -> int:
        """Delete every stored vector (any embedder) so the next embed_pending re-embeds all."""
        return await self._require_vectors("drop_vectors").drop_vectors()

    async def semantic_search(
        self,
        namespace: str,
        query: str,
        *,
        session_ids: Sequence[str] | None = None,
        limit: int = 20,
    ) -> list[SearchResult]:
        """Nearest messages of the namespace to ``query`` by the embedder (cosine k-NN over
        the namespace's vectors of this embedder), best first."""
        check_name(namespace, "namespace")
        check_int(limit)
        if session_ids is not None:
            if isinstance(session_ids, str):
                raise TypeError("session_ids must be a sequence of session ids, not a string")
            session_ids = [check_name(s, "session id") for s in session_ids]
        vectors = self._require_vectors("semantic search")
        return await vectors.search(namespace, query, session_ids=session_ids, limit=limit)
