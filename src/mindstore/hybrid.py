"""Search modes (DESIGN §5.2): one entry point for Session, SessionManager and the tools.

``mode``: ``"lexical"`` (BM25, the store's full-text index), ``"semantic"`` (cosine k-NN over
the store's embedder's vectors), ``"hybrid"`` (both lists fused by min-max, see
:func:`mindstore.vectors.fuse_minmax`); ``None`` means ``"hybrid"`` when the store has an
embedder, else ``"lexical"``. Semantic and hybrid search only see messages already embedded
(``await store.embed_pending()``); lexical search sees every message at once.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from mindstore.errors import EmbeddingError
from mindstore.lexical.snippet import Deferred, deferred_snippets
from mindstore.search import SearchResult, search_result
from mindstore.store._checks import check_int
from mindstore.store._vectors import query_embedding_started
from mindstore.vectors import CANDIDATES, DEFAULT_SEMANTIC_WEIGHT, MODES, fuse_minmax

__all__ = ["HEAD_START", "resolve_mode", "search_messages"]

HEAD_START = 0.002
"""Seconds a hybrid search waits for the query's vector before it runs its lexical half: a
quick embedder's vector lets the semantic scan (a worker thread, mostly outside the GIL) run
beside the lexical half; a model slower than this embeds beside it instead. (On the
bench/semantic.py store of 100,000 messages the scan alone is ~13 ms.)"""


def resolve_mode(mode: str | None, store: Any) -> str:
    """The mode a search runs in; ValueError for an unknown one, EmbeddingError when semantic
    or hybrid is asked of a store without an embedder."""
    has_embedder = getattr(store, "embedder", None) is not None
    if mode is None:
        return "hybrid" if has_embedder else "lexical"
    if mode not in MODES:
        raise ValueError(f"mode must be 'lexical', 'semantic', 'hybrid' or None, got {mode!r}")
    if mode != "lexical" and not has_embedder:
        raise EmbeddingError(
            f"{mode} search needs an embedder: open the store with embedder=... "
            "(e.g. mindstore.embeddings.default_embedder()), or use mode='lexical'"
        )
    return mode


def check_weight(semantic_weight: float) -> float:
    if (
        isinstance(semantic_weight, bool)
        or not isinstance(semantic_weight, int | float)
        or math.isnan(semantic_weight)
        or not 0.0 <= semantic_weight <= 1.0
    ):
        raise ValueError(f"semantic_weight must be between 0 and 1, got {semantic_weight!r}")
    return float(semantic_weight)


async def search_messages(
    store: Any,
    namespace: str,
    query: str,
    *,
    limit: int,
    session_ids: Sequence[str] | None,
    mode: str | None,
    lexical: Callable[[int], Awaitable[list[SearchResult]]],
    semantic_weight: float = DEFAULT_SEMANTIC_WEIGHT,
) -> list[SearchResult]:
    """Run a search in ``mode``; ``lexical(k)`` runs the caller's full-text search for ``k``
    results (so the query language stays in one place)."""
    resolved = resolve_mode(mode, store)
    weight = check_weight(semantic_weight)
    if not isinstance(query, str):
        raise TypeError(f"query must be a string, got {type(query).__name__}")
    if check_int(limit) < 0:
        raise ValueError(f"limit must be 0 or more (0 returns no results), got {limit}")
    if limit == 0 or not query.strip():
        return []
    if resolved == "lexical":
        return await lexical(limit)
    if resolved == "semantic":
        return list(
            await store.semantic_search(namespace, query, session_ids=session_ids, limit=limit)
        )
    k = max(3 * limit, CANDIDATES)
    # The halves overlap. The query's embedding starts first; when it is back within
    # HEAD_START (a fast embedder, a local server), the semantic half starts its scan of the
    # vectors in a worker thread before the lexical half runs; a slower model embeds while
    # the lexical half runs, and the scan follows.
    async with query_embedding_started(store.embedder, query) as ready:
        semantic = asyncio.ensure_future(
            store.semantic_search(namespace, query, session_ids=session_ids, limit=k)
        )
        waiting = asyncio.ensure_future(ready.wait())
        try:
            await asyncio.wait(
                {waiting, semantic}, timeout=HEAD_START, return_when=asyncio.FIRST_COMPLETED
            )
            waiting.cancel()
            with deferred_snippets() as snippets:
                lex = await lexical(k)
        except BaseException:
            semantic.cancel()
            waiting.cancel()
            await asyncio.gather(semantic, waiting, return_exceptions=True)
            raise
        sem = await semantic
    fused = fuse_minmax(lex, sem, limit=limit, semantic_weight=weight)
    return [_with_snippet(r, snippets) for r in fused]


def _with_snippet(result: SearchResult, snippets: Deferred) -> SearchResult:
    make = snippets.get((result.session_id, result.message_id))
    if make is None:
        return result
    r = result
    return search_result(r.session_id, r.message_id, r.role, r.text, make(), r.score, r.created_at)
