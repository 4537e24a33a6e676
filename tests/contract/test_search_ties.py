"""Contract: equal scores are broken by recency, across the limit cut, for every way a search
is scoped (one session, several, a namespace; keyed entries)."""

from __future__ import annotations

from mindstore.search import parse_query
from mindstore.session import Session
from mindstore.store.base import ScopeKey, Store


def text_msg(mid: str, text: str) -> dict[str, object]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}


async def test_ties_newest_first_across_the_limit(store: Store) -> None:
    a = Session.create(store, "a")
    b = Session.create(store, "b")
    # identical texts score identically (roots: no parent text as context); interleave the
    # sessions so seqs alternate; both sessions have the same texts, so their session scores
    # are equal too
    for i in range(8):
        await a.append_message(text_msg(f"a{i}", "quarterly budget review"), parent_id=None)
        await b.append_message(text_msg(f"b{i}", "quarterly budget review"), parent_id=None)
        await a.append_message(text_msg(f"x{i}", "unrelated words here"), parent_id=None)
        await b.append_message(text_msg(f"y{i}", "unrelated words here"), parent_id=None)
    # a better match (shorter document) is first whatever its age (a root: no context)
    await b.append_message(text_msg("bestb", "budget"), parent_id=None)
    await a.append_message(text_msg("best", "budget"), parent_id=None)

    hits = await a.search("budget", limit=3)
    assert [h.message_id for h in hits] == ["best", "a7", "a6"]
    hits = await store.search("default", parse_query("budget"), limit=4)
    assert [(h.session_id, h.message_id) for h in hits] == [
        ("a", "best"),
        ("b", "bestb"),
        ("b", "b7"),
        ("a", "a7"),
    ]
    hits = await store.search("default", parse_query("budget"), session_ids=["b", "nope"], limit=3)
    assert [h.message_id for h in hits] == ["bestb", "b7", "b6"]
    # prefix-only and word + prefix queries take the other index
    hits = await store.search("default", parse_query("quart*"), limit=2)
    assert [h.message_id for h in hits] == ["b7", "a7"]
    hits = await store.search("default", parse_query("budget quart*"), limit=2)
    assert [h.message_id for h in hits] == ["b7", "a7"]
    for h in hits:
        assert h.text == "quarterly budget review" and "[" in h.snippet
    # other namespaces never leak in
    other = Session.create(store, "a", namespace="other")
    await other.append_message(text_msg("o1", "budget"))
    hits = await store.search("default", parse_query("budget"), limit=50)
    assert "o1" not in {h.message_id for h in hits} and len(hits) == 18


async def test_entry_ties_most_recently_updated_first(store: Store) -> None:
    kb = ScopeKey(namespace="n", session_id=None, label="kb")
    other = ScopeKey(namespace="n", session_id="s1", label="kb")
    for i in range(6):
        await store.put_entry(kb, f"k{i}", "deploy the service")
        await store.put_entry(other, f"k{i}", "deploy the service")
    await store.put_entry(kb, "k2", "deploy the service")  # updated last: newest
    hits = await store.search_entries(kb, parse_query("deploy"), limit=3)
    assert [h.key for h in hits] == ["k2", "k5", "k4"]
    assert all(h.snippet and "[" in h.snippet for h in hits)
    hits = await store.search_entries(other, parse_query("serv*"), limit=2)
    assert [h.key for h in hits] == ["k5", "k4"]


async def test_ties_with_many_matches(store: Store) -> None:
    """Over a hundred equal matches (the SQLite store ranks large match sets differently)."""
    a = Session.create(store, "many-a")
    b = Session.create(store, "many-b")
    for i in range(60):
        await a.append_message(text_msg(f"a{i:02d}", "incident report filed"), parent_id=None)
        await b.append_message(text_msg(f"b{i:02d}", "incident report filed"), parent_id=None)
    hits = await store.search("default", parse_query("incident"), limit=3)
    assert [h.message_id for h in hits] == ["b59", "a59", "b58"]
    assert all(h.snippet == "[incident] report filed" for h in hits)
    hits = await a.search("incident report", limit=2)
    assert [h.message_id for h in hits] == ["a59", "a58"]
    assert [h.text for h in hits] == ["incident report filed"] * 2
    hits = await store.search("default", parse_query("incid* report"), limit=2)
    assert [h.message_id for h in hits] == ["b59", "a59"]

    kb = ScopeKey(namespace="n", session_id="s", label="many")
    for i in range(80):
        await store.put_entry(kb, f"k{i:02d}", "rollback the release")
    hits = await store.search_entries(kb, parse_query("rollback"), limit=2)
    assert [h.key for h in hits] == ["k79", "k78"]
    assert all(h.snippet == "[rollback] the release" for h in hits)
