"""SessionManager contract (DESIGN §7, §1.1): registry, fork, split, usage, cross-session search,
the session_search tool and namespace isolation — on every store backend."""

from __future__ import annotations

import asyncio
import math
import re
import uuid
from typing import Any

import pytest

from backends import Storage
from mindstore import ConflictError, MessageNotFoundError, Session, SessionNotFoundError
from mindstore.errors import InvalidMessageError
from mindstore.manager import SessionManager, format_session_search
from mindstore.search import SearchResult
from mindstore.store.base import ScopeKey, SessionKey, Store


def bodies(out: str) -> list[str]:
    """A session_search output's blocks as ``[role] text`` (date and session dropped)."""
    return [
        re.sub(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d · ([a-z]+) · [^\]]*\]", r"[\1]", b)
        for b in out.split("\n---\n")
    ]


def msg(mid: str, text: str, role: str = "user") -> dict[str, Any]:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": text}]}


async def ids_of(session: Session, leaf: str | None = None) -> list[str]:
    return [m["id"] for m in await session.get_history(leaf)]


# ---- registry ------------------------------------------------------------------------------


async def test_create_get_rename(store: Store) -> None:
    m = SessionManager(store, namespace="ns")
    info = await m.create(
        "Planning",
        parent_session_id="ses_parent",
        model="gpt-x",
        source="web",
        metadata={"user": "u1", "tags": ["a"]},
    )
    assert info.id.startswith("ses_")
    assert (info.name, info.parent_session_id, info.model, info.source) == (
        "Planning",
        "ses_parent",
        "gpt-x",
        "web",
    )
    assert info.metadata == {"user": "u1", "tags": ["a"]}
    assert (info.input_tokens, info.output_tokens, info.estimated_cost) == (0, 0, 0.0)
    assert info.end_reason is None and info.message_count == 0
    assert info.created_at.tzinfo is not None

    got = await m.get(info.id)
    assert got == info
    assert await m.get("ses_nope") is None
    # the same id in another namespace is not visible
    assert await SessionManager(store, namespace="other").get(info.id) is None

    await m.append(info.id, msg("u1", "hello"))
    await m.append(info.id, msg("a1", "hi", "assistant"))
    after = await m.get(info.id)
    assert after is not None and after.message_count == 2
    assert after.updated_at >= info.updated_at

    renamed = await m.rename(info.id, "Deployment planning")
    assert renamed.name == "Deployment planning"
    assert (await m.get(info.id)).name == "Deployment planning"  # type: ignore[union-attr]
    with pytest.raises(SessionNotFoundError):
        await m.rename("ses_nope", "x")
    with pytest.raises(SessionNotFoundError):
        await SessionManager(store, namespace="other").rename(info.id, "stolen")
    assert (await m.get(info.id)).name == "Deployment planning"  # type: ignore[union-attr]

    second = await m.create(None)
    assert second.id != info.id and second.name is None


async def test_list_order_and_pagination_over_120_sessions(store: Store) -> None:
    m = SessionManager(store, namespace="ns")
    created = [await m.create(f"s{i}") for i in range(120)]
    await SessionManager(store, namespace="other").create("not mine")

    def expected_order(infos: list[Any]) -> list[str]:
        return [i.id for i in sorted(infos, key=lambda i: (i.updated_at, i.id), reverse=True)]

    everything = await m.list(limit=1000)
    assert len(everything) == 120
    assert [i.id for i in everything] == expected_order(everything)
    assert {i.id for i in everything} == {i.id for i in created}

    pages: list[list[str]] = []
    before = None
    while True:
        page = await m.list(limit=50, before=before)
        if not page:
            break
        pages.append([i.id for i in page])
        before = page[-1].id
    assert [len(p) for p in pages] == [50, 50, 20]
    assert [i for p in pages for i in p] == [i.id for i in everything]
    assert await m.list() == everything[:50]  # default limit
    assert await m.list(before="ses_unknown") == []

    # touching an old session moves it to the front; pagination stays consistent
    oldest = everything[-1].id
    await m.append(oldest, msg("m1", "bump"))
    first = await m.list(limit=1)
    assert first[0].id == oldest
    again = await m.list(limit=1000)
    assert [i.id for i in again] == [oldest] + [i.id for i in everything if i.id != oldest]

    with pytest.raises(ValueError):
        await m.list(limit=0)


async def test_session_handles_are_cached_and_configured(store: Store) -> None:
    m = SessionManager(store, namespace="ns")
    early = m.session("s1")
    m.with_context("memory", "Facts", max_tokens=500)
    late = m.session("s2")
    assert m.session("s1") is early
    assert early.namespace == "ns" and early.session_id == "s1"
    for s in (early, late):
        block = await s.get_context_block("memory")
        assert block is not None and block.kind == "writable" and block.max_tokens == 500
    with pytest.raises(ValueError):
        m.compact_after(0)  # validated at once, not on first use


# ---- delete leaves nothing -----------------------------------------------------------------


async def _fill(store: Store, ns: str, sid: str, marker: str) -> None:
    """Give a session a row in every kind of table: messages (branching, a tool part), search
    rows, a compaction, session-scoped block and entries, frozen prompt, skill state, usage."""
    m = SessionManager(store, namespace=ns)
    await store.create_session(SessionKey(namespace=ns, session_id=sid), name=f"name {marker}")
    await m.append_all(
        sid,
        [
            msg("m1", f"first {marker}"),
            msg("m2", f"second {marker}", "assistant"),
            msg("m3", f"third {marker}"),
            {
                "id": "m4",
                "role": "assistant",
                "parts": [
                    {
                        "type": "tool-lookup",
                        "toolCallId": "c1",
                        "state": "output-available",
                        "input": {"q": marker},
                        "output": {"r": marker},
                    }
                ],
            },
        ],
    )
    await m.append(sid, msg("b1", f"branch {marker}"), parent_id="m2")
    key = SessionKey(namespace=ns, session_id=sid)
    await store.add_compaction(key, summary=f"summary {marker}", from_id="m1", to_id="m2")
    await store.set_block(ScopeKey(namespace=ns, session_id=sid, label="memory"), f"mem {marker}")
    entries = ScopeKey(namespace=ns, session_id=sid, label="kb")
    await store.put_entry(entries, f"key-{marker}", f"entry {marker}", description=marker)
    await store.put_prompt(key, f"prompt {marker}", overwrite=True)
    await store.set_skill_loaded(key, "skills", f"skill-{marker}", True)
    await store.set_skill_loaded(key, "skills", "other", True)
    await store.set_skill_loaded(key, "skills", "other", False)
    await m.add_usage(sid, 10, 20, 0.5)


async def test_delete_leaves_no_row_behind(store: Store, storage: Storage) -> None:
    m = SessionManager(store, namespace="ns")
    sibling, victim = "sibling-session", "victim-session"
    sib_marker = "sibmark" + uuid.uuid4().hex[:8]
    vic_marker = "vicmark" + uuid.uuid4().hex[:8]
    await _fill(store, "ns", sibling, sib_marker)
    shared = ScopeKey(namespace="ns", session_id=None, label="profile")
    await store.set_block(shared, "namespace-wide profile")
    # the same session id in another namespace must survive too
    other_marker = "othmark" + uuid.uuid4().hex[:8]
    await _fill(store, "elsewhere", victim, other_marker)

    baseline = await storage.table_counts()
    sibling_history = await m.session(sibling).get_history()
    await _fill(store, "ns", victim, vic_marker)
    handle = m.session(victim)
    assert await storage.rows_matching(
        "no-such-session", vic_marker
    )  # the probe can see the victim's rows
    assert await m.search(vic_marker)

    assert await m.delete(victim) is True
    assert m.session(victim) is not handle  # cached handle dropped

    assert await storage.rows_matching("no-such-session", vic_marker) == {}
    # the change feed keeps the victim's events, numbered, but emptied, and says it was deleted
    feed = [c for c in await store.read_changes("ns", limit=10_000) if c.session_id == victim]
    assert feed[-1].kind == "session_deleted"
    assert all(c.data == {} for c in feed)
    counts = await storage.table_counts()
    assert counts.pop("changes") == baseline.pop("changes") + len(feed)
    assert counts == baseline
    assert await m.get(victim) is None
    assert await m.search(vic_marker) == []
    assert await m.session(victim).get_history() == []
    # sibling, namespace-scoped block and the other namespace untouched
    assert await storage.rows_matching("no-such-session", sib_marker)
    assert await m.session(sibling).get_history() == sibling_history
    assert len(await m.search(sib_marker)) >= 4
    assert await store.get_block(shared) == "namespace-wide profile"
    other = SessionManager(store, namespace="elsewhere")
    assert (await other.get(victim)) is not None
    assert len(await other.search(other_marker)) >= 4
    assert await m.delete(victim) is False


# ---- appends, fork, split ------------------------------------------------------------------


async def test_append_all_chains_from_latest_leaf(store: Store) -> None:
    m = SessionManager(store, namespace="ns")
    sid = (await m.create("chat")).id
    before = await m.get(sid)
    assert await m.append(sid, msg("u1", "hello")) is True
    assert await m.append(sid, msg("u1", "hello again")) is False  # first write wins
    assert await m.append_all(
        sid, [msg("a1", "hi", "assistant"), msg("u2", "next"), msg("a2", "ok", "assistant")]
    ) == [True, True, True]
    s = m.session(sid)
    assert await ids_of(s) == ["u1", "a1", "u2", "a2"]
    assert (await s.get_node("a1")).parent_id == "u1"  # type: ignore[union-attr]
    after = await m.get(sid)
    assert after is not None and before is not None
    assert after.updated_at > before.updated_at and after.message_count == 4

    # a second batch continues the chain, not a new root
    await m.append_all(sid, [msg("u3", "more"), msg("a3", "sure", "assistant")])
    assert await ids_of(s) == ["u1", "a1", "u2", "a2", "u3", "a3"]
    # explicit parent: a branch from u1; retried ids are skipped
    assert await m.append_all(sid, [msg("a1", "x"), msg("alt", "alt")], parent_id="u1") == [
        False,
        True,
    ]
    assert await ids_of(s) == ["u1", "a1", "alt"]
    # ids generated when missing
    await m.append_all(sid, [{"role": "user", "parts": [{"type": "text", "text": "gen"}]}])
    assert (await s.get_latest_leaf())["parts"][0]["text"] == "gen"  # type: ignore[index]
    count = (await m.get(sid)).message_count  # type: ignore[union-attr]

    # all or nothing
    with pytest.raises(InvalidMessageError):
        await m.append_all(sid, [msg("ok1", "fine"), {"id": "bad", "role": "robot", "parts": []}])
    with pytest.raises(MessageNotFoundError):
        await m.append_all(sid, [msg("ok2", "fine")], parent_id="missing")
    assert (await m.get(sid)).message_count == count  # type: ignore[union-attr]
    assert await m.append_all(sid, []) == []


async def test_fork_in_the_middle_keeps_ids_and_overlays(store: Store) -> None:
    m = SessionManager(store, namespace="ns")
    src = (await m.create("source", model="gpt-x", metadata={"k": "v"})).id
    await m.append_all(
        src, [msg(f"m{i}", f"message {i}", "user" if i % 2 else "assistant") for i in range(1, 11)]
    )
    s = m.session(src)
    inside = await s.add_compaction("summary of 2..4", "m2", "m4")
    await s.add_compaction("summary of 7..9", "m7", "m9")  # beyond the fork point
    src_history = await s.get_history()
    src_compactions = await s.get_compactions()
    expected = await s.get_history("m6")

    info = await m.fork(src, "m6", "forked")
    assert info.id != src and info.name == "forked" and info.parent_session_id == src
    assert info.model == "gpt-x" and info.message_count == 6
    assert info.metadata == {"k": "v", "forked_from": {"session_id": src, "message_id": "m6"}}
    f = m.session(info.id)
    raw_ids = [r["id"] for r in [await f.get_message(f"m{i}") for i in range(1, 7)] if r]
    assert raw_ids == [f"m{i}" for i in range(1, 7)]
    assert await f.get_message("m7") is None
    comps = await f.get_compactions()
    assert [(c.from_message_id, c.to_message_id, c.summary) for c in comps] == [
        ("m2", "m4", "summary of 2..4")
    ]
    history = await f.get_history()
    # the overlay is an overlay (virtual summary message), not a materialised message
    assert [x["id"] for x in history] == ["m1", f"compaction_{comps[0].id}", "m5", "m6"]
    assert history[1]["parts"][0]["text"] == "summary of 2..4"
    assert [x["id"] for x in expected] == ["m1", f"compaction_{inside.id}", "m5", "m6"]
    assert [x["parts"] for x in history] == [x["parts"] for x in expected]
    assert [m_["id"] for m_ in await f.expand_compaction(comps[0].id)] == ["m2", "m3", "m4"]
    # the fork continues independently; the source is untouched
    await m.append(info.id, msg("f7", "fork only"))
    assert await ids_of(f) == ["m1", f"compaction_{comps[0].id}", "m5", "m6", "f7"]
    assert await s.get_history() == src_history
    assert await s.get_compactions() == src_compactions
    assert await s.get_message("f7") is None
    assert (await m.get(src)).message_count == 10  # type: ignore[union-attr]

    # loaded-skill state comes along (a later load/unload in the fork is the fork's own)
    await store.set_skill_loaded(s.key, "skills", "api", True)
    await store.set_skill_loaded(s.key, "skills", "old", True)
    await store.set_skill_loaded(s.key, "skills", "old", False)
    second = m.session((await m.fork(src, "m6", "with skills")).id)
    states = {(x.label, x.key): x.loaded for x in await store.get_skill_states(second.key)}
    assert states == {("skills", "api"): True, ("skills", "old"): False}
    assert [x["parts"] for x in await second.get_history()] == [x["parts"] for x in history[:4]]

    n_sessions = len(await m.list())
    with pytest.raises(MessageNotFoundError):
        await m.fork(src, "nope", "bad")
    with pytest.raises(SessionNotFoundError):
        await SessionManager(store, namespace="other").fork(src, "m6", "stolen")
    with pytest.raises(SessionNotFoundError):
        await m.fork("no-such-session", "m6", "typo")
    assert len(await m.list()) == n_sessions


async def test_fork_follows_a_side_branch(store: Store) -> None:
    m = SessionManager(store, namespace="ns")
    src = (await m.create("tree")).id
    await m.append_all(src, [msg("r", "root"), msg("a", "a"), msg("b", "b")])
    await m.append_all(src, [msg("x", "x"), msg("y", "y")], parent_id="a")
    await m.append(src, msg("c", "c"), parent_id="b")
    info = await m.fork(src, "y", "side")
    f = m.session(info.id)
    assert await ids_of(f) == ["r", "a", "x", "y"]
    assert await f.get_message("b") is None


async def test_compact_and_split(store: Store) -> None:
    m = SessionManager(store, namespace="ns")
    old = await m.create("Long chat", model="gpt-x", source="cli")
    await m.append_all(old.id, [msg("u1", "hello"), msg("a1", "hi", "assistant")])
    new = await m.compact_and_split(old.id, "We talked about X.")
    assert new.id != old.id and new.name == "Long chat" and new.parent_session_id == old.id
    assert new.model == "gpt-x" and new.source == "cli" and new.message_count == 1
    ended = await m.get(old.id)
    assert ended is not None and ended.end_reason == "compaction" and ended.message_count == 2
    history = await m.session(new.id).get_history()
    assert len(history) == 1
    assert history[0]["role"] == "user"
    assert history[0]["parts"] == [
        {"type": "text", "text": "[Context from previous session]\n\nWe talked about X."}
    ]
    # the new session continues normally; a custom name
    await m.append(new.id, msg("u2", "continue"))
    assert [x["id"] for x in await m.session(new.id).get_history()][1:] == ["u2"]
    newer = await m.compact_and_split(new.id, "Summary 2", name="Part 3")
    assert newer.name == "Part 3" and newer.parent_session_id == new.id

    with pytest.raises(ConflictError):
        await m.compact_and_split(old.id, "again")
    with pytest.raises(SessionNotFoundError):
        await m.compact_and_split("ses_nope", "x")
    with pytest.raises(ValueError):
        await m.compact_and_split(newer.id, "   ")
    assert (await m.get(newer.id)).end_reason is None  # type: ignore[union-attr]


async def test_usage_from_concurrent_tasks_adds_up_exactly(store: Store) -> None:
    m = SessionManager(store, namespace="ns")
    sid = (await m.create("busy")).id

    async def worker(n: int) -> None:
        for _ in range(10):
            await m.add_usage(sid, n, 2 * n, 0.125)

    await asyncio.gather(*(worker(n) for n in range(1, 9)))
    info = await m.get(sid)
    assert info is not None
    assert info.input_tokens == 10 * sum(range(1, 9))
    assert info.output_tokens == 20 * sum(range(1, 9))
    assert info.estimated_cost == 80 * 0.125
    for bad in ((-1, 0, 0.0), (0, 0, float("nan")), (0, 0, -0.5)):
        with pytest.raises(ValueError):
            await m.add_usage(sid, *bad)
    assert (await m.get(sid)).input_tokens == 360  # type: ignore[union-attr]
    # a typo in the id must not create a phantom session
    with pytest.raises(SessionNotFoundError):
        await m.add_usage("no-such-session", 1, 1, 0.0)
    assert await m.get("no-such-session") is None


# ---- search and tools ----------------------------------------------------------------------


async def test_cross_session_search_stays_in_the_namespace(store: Store) -> None:
    a = SessionManager(store, namespace="A").with_searchable_history("history")
    s1 = (await a.create("one")).id
    s2 = (await a.create("two")).id
    await a.append_all(
        s1, [msg("m1", "we deployed the kubernetes cluster"), msg("m2", "ok", "assistant")]
    )
    await a.append(s2, msg("m1", "unrelated chat about lunch"))

    # namespace B: the same session id, the same message id, a namespace-scoped block with the
    # same label, and entries — all containing the query words
    b_session = Session.create(store, s1, namespace="B").with_context(
        "history", "shared", scope="namespace"
    )
    await b_session.append_message(msg("m1", "secret kubernetes deployment of tenant B"))
    await b_session.replace_context_block("history", "kubernetes deployed by B")
    await store.put_entry(
        ScopeKey(namespace="B", session_id=None, label="history"), "k", "kubernetes deployed"
    )

    results = await a.search("kubernetes deploy")
    # m2 ("ok") matches through its context (m1, its parent), below m1
    assert [(r.session_id, r.message_id) for r in results] == [(s1, "m1"), (s1, "m2")]
    assert results[0].role == "user" and "kubernetes" in results[0].text
    assert await a.search("kubernetes", session_ids=[s2]) == []
    assert [r.message_id for r in await a.search("lunch", session_ids=[s1, s2])] == ["m1"]
    assert await a.search("lunch", session_ids=[s1]) == []
    assert await a.search("tenant") == []
    assert await a.search("secret") == []
    assert await a.search("") == []
    assert await a.search("kubernetes", session_ids=[]) == []

    # B sees only B
    b = SessionManager(store, namespace="B")
    assert [(r.session_id, r.text) for r in await b.search("kubernetes")] == [
        (s1, "secret kubernetes deployment of tenant B")
    ]

    # session_search tool and the searchable-history block answer from A only
    tools = await a.tools()
    out = await tools.execute("session_search", {"query": "kubernetes"})
    assert bodies(out) == ["[user] we deployed the kubernetes cluster", "[assistant] ok"]
    ctx_tools = await a.session(s2).tools()
    found = await ctx_tools.execute("search_context", {"label": "history", "query": "kubernetes"})
    assert "we deployed the kubernetes cluster" in found and "tenant" not in found
    assert "B" not in found.replace("[", "")
    block = await a.session(s2).get_context_block("history")
    assert block is not None and block.kind == "searchable"
    assert block.content == "2 sessions available for search."


async def test_session_search_result_format(store: Store) -> None:
    m = SessionManager(store, namespace="ns")
    sid = (await m.create("x")).id
    await m.append_all(
        sid,
        [
            msg("u1", "Where is the zebra report?"),
            msg("a1", "The zebra report is in the shared drive.", "assistant"),
            msg("u2", "thanks"),
        ],
    )
    tools = await m.tools()
    assert list(tools) == ["session_search"]
    assert tools["session_search"].parameters["required"] == ["query"]
    out = await tools.execute("session_search", '{"query": "zebra report"}')
    assert all(b.startswith("[") and ' · "x"] ' in b for b in out.split("\n---\n"))
    blocks = bodies(out)
    assert sorted(blocks[:2]) == [
        "[assistant] The zebra report is in the shared drive.",
        "[user] Where is the zebra report?",
    ]
    assert blocks[2:] == ["[user] thanks"]  # matches through its context only: last
    assert await tools.execute("session_search", {"query": "giraffe"}) == "No results found."
    assert await tools.execute("session_search", {"query": '"unbalanced * ( NEAR'}) == (
        "No results found."
    )
    assert (await tools.execute("session_search", {})).startswith("Error: ")

    async def boom(*args: Any, **kwargs: Any) -> list[SearchResult]:
        raise RuntimeError("database is on fire")

    m.search = boom  # type: ignore[method-assign]
    assert await tools.execute("session_search", {"query": "zebra"}) == (
        "Error: database is on fire"
    )


def test_format_session_search_shapes() -> None:
    from datetime import UTC, datetime

    at = datetime(2023, 5, 8, 14, 2, 31, tzinfo=UTC)

    def hit(role: str, text: str, snippet: str = "", session: str = "s") -> SearchResult:
        return SearchResult(
            session_id=session,
            message_id="m",
            role=role,
            text=text,
            snippet=snippet,
            score=1.0,
            created_at=at,
        )

    assert format_session_search([]) == "No results found."
    names = {"s": 'Trip "planning"', "t": None}
    assert format_session_search(
        [hit("user", "a"), hit("tool", "", "[lookup] x", session="t")], names
    ) == (
        '[2023-05-08 14:02 · user · "Trip \\"planning\\""] a\n---\n'
        "[2023-05-08 14:02 · tool · t] [lookup] x"
    )
    long = format_session_search([hit("assistant", "y" * 5000)])
    assert long == "[2023-05-08 14:02 · assistant · s] " + "y" * 2000 + "..."


async def test_session_search_tool_shows_date_and_session_name(store: Store) -> None:
    m = SessionManager(store, namespace="ns")
    trip = (await m.create("Trip planning")).id
    await m.append(trip, msg("u1", "Let us book the ferry to Naxos"))
    other = (await m.create(None)).id
    await m.append(other, msg("u2", "The ferry timetable changed"))
    tools = await m.tools()
    out = await tools.execute("session_search", {"query": "ferry"})
    blocks = out.split("\n---\n")
    assert len(blocks) == 2
    assert any(
        b.endswith('· user · "Trip planning"] Let us book the ferry to Naxos') for b in blocks
    )
    assert any(f"· user · {other}] The ferry timetable changed" in b for b in blocks)
    for b in blocks:
        day = b[1:11]
        assert day[4] == "-" and day[7] == "-" and b[11] == " " and b[14] == ":"


async def test_merged_tool_set(store: Store) -> None:
    m = SessionManager(store, namespace="ns").with_context("memory", "Facts", max_tokens=200)
    sid = (await m.create("x")).id
    await m.append(sid, msg("u1", "my favourite colour is teal"))
    session = m.session(sid)
    merged = await session.tools() | await m.tools()
    assert "set_context" in merged and "session_search" in merged
    assert bodies(await merged.execute("session_search", {"query": "teal"})) == [
        "[user] my favourite colour is teal"
    ]
    written = await merged.execute(
        "set_context", {"label": "memory", "content": "likes teal", "action": "replace"}
    )
    assert written.startswith("Written to memory.")
    names = {t["function"]["name"] for t in merged.to_openai()}
    assert names == set(merged)


async def test_usage_totals_that_would_overflow_are_refused(store: Store) -> None:
    """A usage total past the 64-bit range, or an infinite cost, is a ValueError on every
    backend and leaves the totals as they were (SQLite turned the total into a float and the
    cost into inf, which export and the viewer could not write; PostgreSQL raised a driver
    error)."""
    m = SessionManager(store, namespace="usage")
    sid = (await m.create("u")).id
    await m.add_usage(sid, 2**62, 2**62, 1.0e308)
    before = await m.get(sid)
    for args in ((2**62, 0, 0.0), (0, 2**62, 0.0), (0, 0, 1.0e308)):
        with pytest.raises(ValueError, match="total would"):
            await m.add_usage(sid, *args)
    with pytest.raises(ValueError, match="finite"):
        await store.add_usage(SessionKey(namespace="usage", session_id=sid), 0, 0, math.inf)
    after = await m.get(sid)
    assert before is not None and after is not None
    assert (after.input_tokens, after.output_tokens, after.estimated_cost) == (
        2**62,
        2**62,
        1.0e308,
    )
