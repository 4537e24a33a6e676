"""Contract: search answers the same once the database has statistics about which words are
common (after ANALYZE), rare and common words alike.

PostgreSQL runs a selective query (rare words) as a prepared statement with a generic plan and
any other query with a plan made for its words; both must give exactly the answer the plain
path gives, namespace filter included.
"""

from __future__ import annotations

import time

from mindstore.search import parse_query
from mindstore.session import Session
from mindstore.store.base import Store


def _msg(mid: str, text: str) -> dict[str, object]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}


async def _analyze(store: Store) -> None:
    from mindstore.store.postgres import PostgresStore

    if isinstance(store, PostgresStore):  # SQLite's search does not plan from statistics
        async with store._pool.connection() as conn:
            await conn.execute("ANALYZE message_search")


async def test_rare_and_common_words_after_analyze(store: Store) -> None:
    sessions = [Session.create(store, f"s{i}") for i in range(3)]
    other = Session.create(store, "o", namespace="other")
    n = 0
    for round_ in range(400):
        for s in sessions:
            text = "common gamma delta" if n % 2 == 0 else f"filler{n % 37} words here"
            if n % 197 == 5:
                text = "rareword alpha beta"
            await s.append_message(_msg(f"m{n}", text))
            n += 1
        if round_ % 80 == 0:  # the other namespace has the rare word too: never returned
            await other.append_message(_msg(f"o{round_}", "rareword alpha beta"))
    await _analyze(store)

    rare = await store.search("default", parse_query("rareword"), limit=50)
    expected = [f"m{i}" for i in reversed(range(n)) if i % 197 == 5]
    assert [h.message_id for h in rare] == expected  # equal ranks: newest first
    assert {h.snippet for h in rare} == {"[rareword] alpha beta"}
    assert all(h.session_id in {"s0", "s1", "s2"} for h in rare)

    common = await store.search("default", parse_query("common"), limit=20)
    newest = [f"m{i}" for i in reversed(range(n)) if i % 2 == 0 and i % 197 != 5][:20]
    assert [h.message_id for h in common] == newest

    both = await store.search("default", parse_query('rareword "alpha beta"'), limit=50)
    assert [h.message_id for h in both] == expected
    scoped = await store.search("default", parse_query("rareword"), session_ids=["s1"], limit=50)
    assert [h.message_id for h in scoped] == [m for m in expected if int(m[1:]) % 3 == 1]
    assert [h.message_id for h in await other.search("rareword")] == [
        f"o{r}" for r in (320, 240, 160, 80, 0)
    ]

    from mindstore.store.postgres import PostgresStore

    if isinstance(store, PostgresStore):
        # the statistics made the rare word take the prepared-statement path and the common
        # word the planned one; without statistics both take the planned one, same answers
        assert await store._selective(parse_query("rareword"))
        assert not await store._selective(parse_query("common"))
        store._lexemes = (time.monotonic(), None)
        again = await store.search("default", parse_query("rareword"), limit=50)
        assert again == rare
