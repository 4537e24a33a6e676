"""PostgreSQL's lexical index keeps each document's term rows twice: one row per (key,
document) in ``search_terms`` (read per key) and one row of arrays per document in
``search_docs`` (read when a pruned search looks many keys up in a few documents). Every write
keeps the two equal, and both ways of reading give the same rows. What a search returns is the
contract suite's (tests/contract/test_search_ranking.py prunes on both backends)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from backends import (
    drop_schema,
    new_schema_name,
    postgres_url_or_skip,
    search_docs_mismatch,
    tool_message,
)
from mindstore import PostgresStore, SessionManager
from mindstore.lexical.collections import message_collection
from mindstore.store.base import ScopeKey
from mindstore.store.postgres import lexical

pytestmark = pytest.mark.postgres

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "kettle",
    "harbor",
    "violet",
    "copper",
    "ember",
    "lantern",
    "quartz",
    "meadow",
]


def msg(mid: str, text: str, tool: str | None = None) -> dict[str, Any]:
    return tool_message(mid, text, tool)


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(1, 9)))


@pytest.fixture
async def store() -> AsyncIterator[PostgresStore]:
    url = postgres_url_or_skip()
    schema = new_schema_name()
    opened = await PostgresStore.open(url, schema=schema, min_size=1, max_size=2)
    try:
        yield opened
    finally:
        await opened.aclose()
        await drop_schema(url, schema)


async def mismatch(store: PostgresStore) -> list[tuple[Any, ...]]:
    return await store._db.read(search_docs_mismatch)


async def test_search_docs_mirror_the_term_rows_through_every_write(store: PostgresStore) -> None:
    rng = random.Random(5)
    m = SessionManager(store, namespace="mirror")
    a = m.session((await m.create("a")).id)
    b_id = (await m.create("b")).id
    b = m.session(b_id)
    for i in range(12):  # one at a time: the single-append statement
        tool = sentence(rng) if i % 3 == 0 else None
        await a.append_message(msg(f"a{i}", sentence(rng), tool=tool))
    # a batch: the batched statement (parents' text as context)
    await m.append_all(b_id, [msg(f"b{i}", sentence(rng)) for i in range(30)])
    await b.append_message(msg("empty", ""))  # no words: no rows in either table
    assert await mismatch(store) == []

    await a.update_message(msg("a3", "kettle kettle copper"))  # it and its child re-indexed
    assert await a.delete_messages(["a5", "a6"]) == 2  # their children re-parented
    notes = ScopeKey(
        namespace="mirror", session_id=None, label="notes"
    )  # a keyed entry: its own collection
    await store.put_entry(notes, "k1", "the copper kettle is in the harbor")
    await store.put_entry(notes, "k1", "the violet lantern", description="moved")
    assert await mismatch(store) == []
    await b.clear_messages()
    assert await mismatch(store) == []
    await m.delete_namespace()
    assert await mismatch(store) == []

    # the check itself sees a difference
    c = SessionManager(store, namespace="other").session((await m.create("c")).id)
    await c.append_message(msg("c1", "violet ember violet"))
    await store._db.write(lambda conn: conn.execute("UPDATE search_docs SET tfs[1] = tfs[1] + 1"))
    assert len(await mismatch(store)) == 2  # each way once


async def test_rows_read_by_document_equal_rows_read_by_pairs(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(11)
    m = SessionManager(store, namespace="probe")
    for s in range(3):
        await m.append_all(
            (await m.create(f"s{s}")).id,
            [
                msg(f"m{i}", sentence(rng), tool=sentence(rng) if i % 4 == 0 else None)
                for i in range(40)
            ],
        )
    coll = message_collection("probe")

    async def read(keys: list[str], docs: set[int] | None, by_doc_from: int) -> list[Any]:
        monkeypatch.setattr(lexical, "BY_DOC_KEYS", by_doc_from)
        rows = await store._db.read(lambda conn: lexical._term_rows(conn, coll, keys, docs))
        return sorted(tuple(r) for r in rows)

    everything = await read(WORDS, None, 1)  # every key's rows, read per key
    docs_of = sorted({r[2] for r in everything})
    assert any(r[5] > 0 and r[4] == 0 for r in everything)  # context-only rows exist
    assert any(r[4] % 1 for r in everything)  # tool text counts half
    for _ in range(40):
        keys = rng.sample(WORDS, rng.randint(1, len(WORDS)))
        docs = set(rng.sample(docs_of, rng.randint(1, 30))) | {10**9}  # and a missing one
        by_doc = await read(keys, docs, 1)
        by_pairs = await read(keys, docs, 10**6)
        assert by_doc == by_pairs
        assert by_doc == [r for r in everything if r[1] in keys and r[2] in docs]


def count_snapshot_searches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A list that gets "snapshot" each time a message search runs in a repeatable-read
    snapshot (postgres/_search.py's ``search``) rather than checked without one."""
    from mindstore.store.postgres import _search

    snapshots: list[str] = []
    real_search = _search.search

    async def counted(*args: Any) -> Any:
        snapshots.append("snapshot")
        return await real_search(*args)

    monkeypatch.setattr(_search, "search", counted)
    return snapshots


async def test_a_search_runs_again_in_one_snapshot_when_the_index_changes_under_it(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside a transaction a message search sends no BEGIN/COMMIT and proves at its end that
    the namespace's index did not change since its first statement (the statistics' stamp);
    when it did, the search runs again in one snapshot: never a ranking of one state with the
    rows of another."""
    from mindstore.search import parse_query

    m = SessionManager(store, namespace="race")
    sid = (await m.create("s")).id
    s = m.session(sid)
    for i in range(3):
        await s.append_message(msg(f"m{i}", f"a zebra crossing number {i}"))
    snapshots = count_snapshot_searches(monkeypatch)
    real_candidates = lexical.candidates
    between: list[Any] = []

    async def candidates(*args: Any, **kwargs: Any) -> Any:
        found = await real_candidates(*args, **kwargs)
        while between:  # a write committed between the first and the last statement
            await between.pop(0)()
        return found

    monkeypatch.setattr(lexical, "candidates", candidates)

    async def ids(query: str) -> list[str]:
        return [h.message_id for h in await store.search("race", parse_query(query), limit=5)]

    assert await ids("zebra") == ["m2", "m1", "m0"]
    assert snapshots == []  # checked, no transaction

    async def append() -> None:
        await s.append_message(msg("new", "zebra zebra zebra zebra"))

    between.append(append)
    assert (await ids("zebra"))[0] == "new"  # ranked in the state the rows were read in
    assert snapshots == ["snapshot"]

    async def delete() -> None:
        assert await s.delete_messages(["new"]) == 1

    between.append(delete)
    assert await ids("zebra") == ["m2", "m1", "m0"]
    assert snapshots == ["snapshot"] * 2

    async def append_other() -> None:  # a word nobody had: the empty result is checked too
        await s.append_message(msg("okapi", "an okapi"))

    between.append(append_other)
    assert await ids("okapi") == ["okapi"]
    assert snapshots == ["snapshot"] * 3
    zebras = ["m2", "m1", "m0", "okapi"]  # okapi through its parent's text (context)

    other = SessionManager(store, namespace="elsewhere")  # another namespace: no effect
    other_id = (await other.create("o")).id

    async def append_elsewhere() -> None:
        await other.append(other_id, msg("x", "zebra"))

    between.append(append_elsewhere)
    assert await ids("zebra") == zebras
    assert snapshots == ["snapshot"] * 3

    async with store.transaction():  # inside a transaction: the transaction's snapshot
        assert await ids("zebra") == zebras
    assert snapshots == ["snapshot"] * 4


async def test_the_stamp_of_the_statistics_rows_read_is_the_servers(store: PostgresStore) -> None:
    """A checked search computes the STAMP of the statistics rows its first statement read
    (their versions) in Python; it is the digest the server computes for its last statement:
    no sessions, one, several (parts sorted as numbers, not as text), after a delete."""
    from mindstore.search import parse_query

    m = SessionManager(store, namespace="digest")
    coll = message_collection("digest")

    async def both() -> tuple[str, str]:
        async def run(conn: Any) -> tuple[str, str]:
            cur = await conn.execute(lexical._STATS_ROWS, {"coll": coll})
            versions = [(r[2], r[1]) for r in await cur.fetchall()]
            cur = await conn.execute(f"SELECT {lexical.STAMP}", {"coll": coll})
            row = await cur.fetchone()
            return lexical.stamp_digest(versions), row[0]

        return await store._db.read(run)

    mine, server = await both()
    assert mine == server
    ids = []
    for k in range(12):
        sid = (await m.create(f"s{k}")).id
        ids.append(sid)
        await m.session(sid).append_message(msg(f"m{k}", f"a zebra number {k}"))
        if k in (0, 1, 11):
            mine, server = await both()
            assert mine == server
    assert await m.session(ids[3]).delete_messages(["m3"]) == 1
    mine, server = await both()
    assert mine == server
    hits = await store.search("digest", parse_query("zebra"), limit=20)
    assert len(hits) == 11  # and a checked search with it finds what is there


async def test_the_last_statement_stamps_again_only_when_its_snapshot_moved(
    store: PostgresStore,
) -> None:
    """A checked search's last statement takes the first one's digest when both statements
    read by the same snapshot (no transaction ended in between, so they saw the same rows),
    and computes the stamp again otherwise: a write elsewhere moves the snapshot but leaves
    the digest; a write of the namespace changes it."""
    from mindstore.store.postgres import _search

    m = SessionManager(store, namespace="snap")
    s = m.session((await m.create("s")).id)
    await s.append_message(msg("m0", "a zebra"))
    coll = message_collection("snap")

    async def first() -> tuple[str, str]:
        async def run(conn: Any) -> tuple[str, str]:
            cur = await conn.execute(f"SELECT {lexical.SNAPSHOT}, {lexical.STAMP}", {"coll": coll})
            row = await cur.fetchone()
            return row[0], row[1]

        return await store._db.read(run)

    async def last(snapshot: str, digest: str) -> str:
        async def run(conn: Any) -> str:
            params = {"coll": coll, "snapshot": snapshot, "digest": digest}
            cur = await conn.execute(_search._STAMP_SQL, params)
            row = await cur.fetchone()
            return str(row[0])

        return await store._db.read(run)

    # the same snapshot: the given digest comes back (proved with one the stamp never makes;
    # tried a few times in case another client's transaction ended in between)
    taken = []
    for _ in range(5):
        snapshot, digest = await first()
        taken.append(await last(snapshot, "given") == "given")
    assert any(taken)
    snapshot, digest = await first()
    other = SessionManager(store, namespace="snap-other")
    await other.session((await other.create("o")).id).append_message(msg("x", "zebra"))
    assert await last(snapshot, "given") == digest  # moved: stamped again, same digest
    await s.append_message(msg("m1", "another zebra"))
    assert await last(snapshot, digest) not in (digest, "given")


async def test_a_wide_namespace_is_searched_in_a_snapshot_with_its_statistics_summed(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past STAMP_PARTS sessions a namespace is wide: the stamp and every session's statistics
    row would cost a row per session, so its searches run in a snapshot and read the sums and
    the lengths of the sessions they need; the results and scores are the same. A namespace
    found wide (or narrow again) is searched that way from its next search on."""
    from mindstore.search import parse_query

    m = SessionManager(store, namespace="wide")
    for k in range(3):
        sid = (await m.create(f"s{k}")).id
        await m.session(sid).append_message(msg(f"m{k}", "zebra " * (k + 1)))
    snapshots = count_snapshot_searches(monkeypatch)
    reads: list[tuple[bool, bool]] = []
    real_first = lexical._first_read

    async def first_read(*args: Any) -> Any:
        reads.append(args[-2:])  # (checked, wide)
        return await real_first(*args)

    monkeypatch.setattr(lexical, "_first_read", first_read)

    async def found(query: str) -> list[tuple[str, float]]:
        hits = await store.search("wide", parse_query(query), limit=5)
        return [(h.message_id, h.score) for h in hits]

    queries = ["zebra", "zeb*", "okapi", "zebra zeb*"]
    narrow = {q: await found(q) for q in queries}
    assert [h[0] for h in narrow["zebra"]] == ["m2", "m1", "m0"] and narrow["zeb*"]
    assert snapshots == [] and set(reads) == {(True, False)}
    monkeypatch.setattr(lexical, "STAMP_PARTS", 2)
    reads.clear()
    assert await found("zebra") == narrow["zebra"]  # checked, found wide
    assert {q: await found(q) for q in queries} == narrow  # then summed, in a snapshot
    assert reads == [(True, False)] + [(False, True)] * len(queries)
    assert snapshots == ["snapshot"] * len(queries) and store._wide == {"wide"}
    monkeypatch.setattr(lexical, "STAMP_PARTS", 3)
    reads.clear()
    assert {q: await found(q) for q in queries} == narrow
    assert reads == [(False, True)] + [(True, False)] * (len(queries) - 1)
    assert store._wide == set()
