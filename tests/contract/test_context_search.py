"""Contract: StoreSearchProvider and StoreSkillProvider over keyed entries, on every backend."""

from __future__ import annotations

import pytest

from mindstore.context.providers import StoreSearchProvider, StoreSkillProvider
from mindstore.errors import InvalidKeyError
from mindstore.session import Session
from mindstore.store.base import Store

HOSTILE = ['"', "*", "a OR", "NOT", "(x", "x:y", "'; --", "\\", "\x00", "日本", "-", "^", "NEAR/2"]


def kb(store: Store, *, session: str = "s", namespace: str = "n", **kw: object) -> Session:
    return Session.create(store, session, namespace=namespace).with_context(
        "knowledge",
        provider=StoreSearchProvider(store, **kw),  # type: ignore[arg-type]
    )


async def test_get_names_count_and_recent_keys(store: Store) -> None:
    s = kb(store, recent=3)
    p = await s.get_context_provider("knowledge")
    assert await p.get() == "0 entries indexed."
    await p.set("alpha", "first entry")
    assert await p.get() == "1 entry indexed. Most recent: alpha."
    for key in ("beta", "gamma", "delta"):
        await p.set(key, f"{key} entry")
    assert await p.get() == "4 entries indexed. Most recent: delta, gamma, beta."
    await p.set("alpha", "rewritten")  # upsert: no new entry, but now the most recent
    assert await p.get() == "4 entries indexed. Most recent: alpha, delta, gamma."
    assert await p.delete("beta") is True
    assert await p.delete("beta") is False
    assert (await p.get()).startswith("3 entries indexed.")


async def test_search_ranked_stemmed_prefix_and_upsert(store: Store) -> None:
    p = await kb(store).get_context_provider("knowledge")
    await p.set("deploy", "We deployed the service to production on Friday.", "Deploy log")
    await p.set("pasta", "Boil water, add salt, cook the pasta.")
    await p.set("deploy-2", "deploying deploying deploying again; rollout deploy.")
    out = await p.search("deploying")
    assert out is not None
    assert out.splitlines()[0] in ("[1] deploy — Deploy log", "[1] deploy-2")
    assert "[2] " in out and "pasta" not in out
    assert "deploy — Deploy log" in out
    assert await p.search("deploy*") is not None
    assert await p.search('"the service"') is not None
    # quotes rank, they do not filter (DESIGN §5.1): no entry holds "service the", its words
    # still find the one with "service"
    assert (await p.search('"service the"') or "").startswith("[1] deploy")
    assert await p.search("") is None
    await p.set("pasta", "Now about deployment pipelines.")
    assert await p.search("salt") is None  # the old content left no ghost
    assert "pasta" in (await p.search("pipelines") or "")


async def test_long_hits_are_cut(store: Store) -> None:
    p = await kb(store, max_chars=50).get_context_provider("knowledge")
    await p.set("long", "needle " + "x" * 500)
    out = await p.search("needle")
    assert out is not None and out.endswith("... [truncated 457 chars]")


async def test_hostile_queries_never_raise(store: Store) -> None:
    p = await kb(store).get_context_provider("knowledge")
    await p.set("k", "some content with words")
    for query in HOSTILE:
        result = await p.search(query)
        assert result is None or result.startswith("[1] ")


async def test_scopes_isolate_entries(store: Store) -> None:
    shared_a = await kb(store, session="a").get_context_provider("knowledge")
    shared_b = await kb(store, session="b").get_context_provider("knowledge")
    other_ns = await kb(store, session="a", namespace="other").get_context_provider("knowledge")
    private_a = await kb(store, session="a", scope="session").get_context_provider("knowledge")
    private_b = await kb(store, session="b", scope="session").get_context_provider("knowledge")
    await shared_a.set("k1", "namespace wide fact")
    await private_a.set("k2", "private fact")
    assert await shared_b.search("fact") is not None  # shared across the namespace
    assert await other_ns.search("fact") is None  # never across namespaces
    assert await private_b.search("fact") is None  # session scope
    assert "k2" in (await private_a.search("private") or "")
    assert await shared_a.search("private") is None
    # a different label is a different collection
    notes = await (
        Session.create(store, "a", namespace="n")
        .with_context("notes", provider=StoreSearchProvider(store))
        .get_context_provider("notes")
    )
    assert await notes.search("fact") is None


async def test_entry_keys_validated(store: Store) -> None:
    p = await kb(store).get_context_provider("knowledge")
    for key in ["", "   ", "x" * 257, "a\x00b"]:
        with pytest.raises(InvalidKeyError):
            await p.set(key, "content")
    assert await p.get() == "0 entries indexed."


async def test_store_skill_provider(store: Store) -> None:
    s = Session.create(store, "s").with_context("skills", provider=StoreSkillProvider(store))
    p = await s.get_context_provider("skills")
    assert await p.get() == ""
    await p.set("zeta", "---\nname: zeta\ndescription: From front matter\n---\n\nBody Z\n")
    await p.set("alpha", "Body A", description="Explicit")
    await p.set("beta", "Body B")
    assert await p.get() == "- alpha: Explicit\n- beta\n- zeta: From front matter"
    assert await p.load("zeta") == "Body Z"
    assert await p.load("missing") is None
    assert await p.load("../zeta") is None
    with pytest.raises(InvalidKeyError):
        await p.set("../escape", "x")
    # shared by the namespace by default; other namespaces see nothing
    other = await (
        Session.create(store, "t")
        .with_context("skills", provider=StoreSkillProvider(store))
        .get_context_provider("skills")
    )
    assert await other.load("alpha") == "Body A"
    elsewhere = await (
        Session.create(store, "t", namespace="x")
        .with_context("skills", provider=StoreSkillProvider(store))
        .get_context_provider("skills")
    )
    assert await elsewhere.get() == ""
