"""A hybrid search starts the query's embedding before its lexical half runs, and reuses it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mindstore.errors import EmbeddingError
from mindstore.hybrid import search_messages
from mindstore.search import SearchResult, search_result
from mindstore.store._vectors import query_vector


class SlowEmbedder:
    name = "slow"
    dimensions = 2

    def __init__(self, lexical_done: asyncio.Event, fail: bool = False) -> None:
        self.lexical_done = lexical_done
        self.fail = fail
        self.events: list[str] = []

    async def embed(self, texts: list[str]) -> list[list[float]]:
        self.events.append("embed-start")
        await asyncio.wait_for(self.lexical_done.wait(), 5)
        self.events.append("embed-end")
        if self.fail:
            raise RuntimeError("model down")
        return [[1.0, 0.0] for _ in texts]


class FakeStore:
    def __init__(self, embedder: SlowEmbedder) -> None:
        self.embedder = embedder

    async def semantic_search(
        self, namespace: str, query: str, *, session_ids: Any, limit: int
    ) -> list[SearchResult]:
        vector = await query_vector(self.embedder, query)  # type: ignore[arg-type]
        assert vector == [1.0, 0.0]
        return [hit("sem", 0.9)]


def hit(mid: str, score: float) -> SearchResult:
    from datetime import UTC, datetime

    return search_result("s", mid, "user", mid, mid, score, datetime.now(UTC))


async def run(store: FakeStore, done: asyncio.Event, lexical_fails: bool = False) -> list[str]:
    async def lexical(k: int) -> list[SearchResult]:
        store.embedder.events.append("lexical")
        done.set()  # the embedding (already started) may finish now
        if lexical_fails:
            raise ValueError("lexical broke")
        return [hit("lex", 2.0)]

    out = await search_messages(
        store, "ns", "q", limit=5, session_ids=None, mode="hybrid", lexical=lexical
    )
    return [h.message_id for h in out]


async def test_embedding_starts_before_the_lexical_half_and_is_used_once() -> None:
    done = asyncio.Event()
    store = FakeStore(SlowEmbedder(done))
    assert set(await run(store, done)) == {"lex", "sem"}
    # sequential code would have logged lexical first (and deadlocked without the timeout)
    assert store.embedder.events == ["embed-start", "lexical", "embed-end"]


async def test_failures_on_either_half() -> None:
    done = asyncio.Event()
    store = FakeStore(SlowEmbedder(done, fail=True))
    with pytest.raises(EmbeddingError, match="model down"):
        await run(store, done)
    done = asyncio.Event()
    store = FakeStore(SlowEmbedder(done))
    with pytest.raises(ValueError, match="lexical broke"):
        await run(store, done, lexical_fails=True)
    await asyncio.sleep(0)
    # the started embedding was cancelled or finished, never left running
    assert store.embedder.events[-1] in ("embed-start", "embed-end")
    assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]


class FastEmbedder:
    name = "fast"
    dimensions = 2

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]


class ScanningStore:
    """A store whose vector scan takes a while (as a worker thread's numpy scan does)."""

    def __init__(self) -> None:
        self.embedder = FastEmbedder()
        self.events: list[str] = []

    async def semantic_search(
        self, namespace: str, query: str, *, session_ids: Any, limit: int
    ) -> list[SearchResult]:
        await query_vector(self.embedder, query)  # type: ignore[arg-type]
        self.events.append("scan-start")
        await asyncio.sleep(0.05)
        self.events.append("scan-end")
        return [hit("sem", 0.9)]


async def test_a_quick_embedder_lets_the_scan_run_beside_the_lexical_half(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the query's vector is back within HEAD_START, the semantic scan starts first and
    the lexical half runs while it scans (the wait ends as soon as the vector is there)."""
    import mindstore.hybrid

    monkeypatch.setattr(mindstore.hybrid, "HEAD_START", 5.0)  # a busy CI machine's thread hop
    store = ScanningStore()

    async def lexical(k: int) -> list[SearchResult]:
        store.events.append("lexical")
        return [hit("lex", 2.0)]

    loop = asyncio.get_running_loop()
    started = loop.time()
    out = await search_messages(
        store, "ns", "q", limit=5, session_ids=None, mode="hybrid", lexical=lexical
    )
    assert {h.message_id for h in out} == {"lex", "sem"}
    assert store.events == ["scan-start", "lexical", "scan-end"]
    assert loop.time() - started < 2.0  # did not wait out HEAD_START
