"""SessionManager.session() keeps a bounded LRU cache of sessions (issue 13.11)."""

from __future__ import annotations

import pytest

from mindstore.manager import DEFAULT_SESSION_CACHE_SIZE, SessionManager
from mindstore.store.base import Store


async def test_session_cache_is_bounded_lru(store: Store) -> None:
    m = SessionManager(store, namespace="ns", session_cache_size=3).with_context("memory")
    a, b, c = m.session("a"), m.session("b"), m.session("c")
    assert m.session("a") is a  # a is now the most recently used
    d = m.session("d")  # evicts b, the least recently used
    assert len(m._sessions) == 3
    assert m.session("a") is a and m.session("c") is c and m.session("d") is d
    fresh_b = m.session("b")
    assert fresh_b is not b
    # a dropped session keeps working, and its state lives in the store
    await b.replace_context_block("memory", "from the dropped object")
    block = await fresh_b.get_context_block("memory")
    assert block is not None and block.content == "from the dropped object"
    # builder calls made later reach cached sessions and newly built ones alike
    m.with_context("notes")
    assert await m.session("zzz").get_context_block("notes") is not None
    assert await m.session("a").get_context_block("notes") is not None


async def test_many_sessions_do_not_grow_the_cache(store: Store) -> None:
    m = SessionManager(store, namespace="ns")
    for i in range(DEFAULT_SESSION_CACHE_SIZE + 500):
        m.session(f"s{i}")
    assert len(m._sessions) == DEFAULT_SESSION_CACHE_SIZE == 1024
    off = SessionManager(store, namespace="ns", session_cache_size=0)
    assert off.session("x") is not off.session("x")
    assert len(off._sessions) == 0


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True, None])
def test_cache_size_is_validated(bad: object) -> None:
    with pytest.raises(ValueError, match="session_cache_size must be an integer >= 0"):
        SessionManager(None, session_cache_size=bad)  # type: ignore[arg-type]
