"""Semantic and hybrid search on every backend, with a deterministic embedder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from backends import Reopen, Storage
from embedders import AsyncHashEmbedder, HashEmbedder
from mindstore import EmbeddingError, Session, SessionManager
from mindstore.store.base import Store
from pgvector_server import SEMANTIC_BACKENDS


@pytest.fixture(params=SEMANTIC_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def msg(mid: str, text: str, role: str = "user") -> dict[str, Any]:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": text}]}


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture
async def vstore(storage: Storage, embedder: HashEmbedder) -> AsyncIterator[Any]:
    s = await storage.open(embedder=embedder)
    try:
        yield s
    finally:
        await s.aclose()


async def test_appends_never_call_the_embedder_and_embed_pending_catches_up(
    vstore: Any, embedder: HashEmbedder
) -> None:
    s = Session.create(vstore, "s1")
    await s.append_message(msg("a", "we went hiking in the alps"))
    await s.append_message(msg("b", "the coffee machine is broken", "assistant"))
    assert embedder.calls == []
    assert await vstore.pending_embeddings() == 2
    # not embedded yet: semantic search sees nothing, lexical finds it at once
    assert await s.search("hiking alps", mode="semantic") == []
    assert (await s.search("hiking", mode="lexical"))[0].message_id == "a"
    assert await vstore.embed_pending() == 2
    assert await vstore.pending_embeddings() == 0
    assert await vstore.embed_pending() == 0
    hits = await s.search("alps hiking trip", mode="semantic")
    assert hits[0].message_id == "a"
    assert hits[0].session_id == "s1" and hits[0].role == "user"
    assert hits[0].text == "we went hiking in the alps"
    assert hits[0].snippet == "we went hiking in the alps"
    assert hits[0].score > hits[-1].score


async def test_embed_pending_batches_and_limit(vstore: Any, embedder: HashEmbedder) -> None:
    s = Session.create(vstore, "s1")
    for i in range(7):
        await s.append_message(msg(f"m{i}", f"fact number {i}"))
    assert await vstore.embed_pending(limit=3, batch_size=2) == 3
    assert [len(b) for b in embedder.calls] == [2, 1]
    assert await vstore.pending_embeddings() == 4
    seen: list[int] = []
    assert await vstore.embed_pending(batch_size=3, progress=seen.append) == 4
    assert sum(seen) == 4
    with pytest.raises(ValueError, match="batch_size"):
        await vstore.embed_pending(batch_size=0)
    with pytest.raises(ValueError, match="limit"):
        await vstore.embed_pending(limit=-1)


async def test_contextual_embedding_includes_the_parent(
    vstore: Any, embedder: HashEmbedder
) -> None:
    s = Session.create(vstore, "s1")
    await s.append_message(msg("q", "did you go to the climbing gym"))
    await s.append_message(msg("r", "yes, last week", "assistant"))
    await vstore.embed_pending()
    assert any("yes, last week" in t and "climbing gym" in t for t in embedder.texts)
    hits = await s.search("climbing gym", mode="semantic", limit=5)
    assert {h.message_id for h in hits} == {"q", "r"}
    # the reply's own text is what a result shows
    reply = next(h for h in hits if h.message_id == "r")
    assert reply.text == "yes, last week" and reply.snippet == "yes, last week"


async def test_semantic_search_is_per_namespace_and_obeys_session_ids(vstore: Any) -> None:
    m1 = SessionManager(vstore, namespace="tenant-1")
    m2 = SessionManager(vstore, namespace="tenant-2")
    await m1.append("a", msg("x", "secret launch codes for the rocket"))
    await m1.append("b", msg("y", "rocket launch on friday"))
    await m2.append("a", msg("z", "rocket launch codes"))
    await vstore.embed_pending()
    hits = await m1.search("rocket launch codes", mode="semantic")
    assert {(h.session_id, h.message_id) for h in hits} == {("a", "x"), ("b", "y")}
    only_b = await m1.search("rocket launch codes", mode="semantic", session_ids=["b"])
    assert [h.message_id for h in only_b] == ["y"]
    assert [h.message_id for h in await m2.search("rocket", mode="semantic")] == ["z"]
    # a session search never sees other sessions
    s = Session.create(vstore, "a", namespace="tenant-1")
    assert [h.message_id for h in await s.search("rocket launch", mode="semantic")] == ["x"]


async def test_vectors_follow_updates_and_deletes(vstore: Any, embedder: HashEmbedder) -> None:
    s = Session.create(vstore, "s1")
    await s.append_message(msg("a", "the cat sleeps on the sofa"))
    await s.append_message(msg("b", "ok noted", "assistant"))
    await s.append_message(msg("c", "unrelated weather talk"))
    await vstore.embed_pending()
    assert (await s.search("cat sofa", mode="semantic"))[0].message_id == "a"
    # editing a message drops its vector and its child's (the child embeds the parent's text)
    await s.update_message(msg("a", "the dog barks in the garden"))
    assert await vstore.pending_embeddings() == 2
    hits = await s.search("cat sofa", mode="semantic")
    assert all(h.message_id not in ("a", "b") for h in hits)
    assert await vstore.embed_pending() == 2
    assert (await s.search("dog garden", mode="semantic"))[0].message_id == "a"
    old_words = {h.message_id: h.score for h in await s.search("cat sofa", mode="semantic")}
    assert old_words["a"] < 0.01  # the old text's vector is gone
    # deleting removes the vector: never a ghost
    await s.delete_messages(["a"])
    hits = await s.search("dog garden barks", mode="semantic")
    assert "a" not in {h.message_id for h in hits}
    # "b" was re-attached to the root position: its context changed, so it is pending again
    assert await vstore.pending_embeddings() == 1
    await s.clear_messages()
    assert await s.search("weather", mode="semantic") == []
    assert await vstore.pending_embeddings() == 0


async def test_vectors_of_another_embedder_are_ignored_until_reembedded(
    vstore: Any, reopen: Reopen
) -> None:
    s = Session.create(vstore, "s1")
    await s.append_message(msg("a", "bananas are yellow"))
    await vstore.embed_pending()
    for other in (HashEmbedder(name="another-model"), HashEmbedder(dimensions=128)):
        store2 = await reopen(embedder=other)
        s2 = Session.create(store2, "s1")
        assert await s2.search("bananas yellow", mode="semantic") == []
        assert await store2.pending_embeddings() == 1  # type: ignore[attr-defined]
        assert await store2.embed_pending() == 1  # type: ignore[attr-defined]
        assert [h.message_id for h in await s2.search("bananas", mode="semantic")] == ["a"]
        await store2.aclose()
    # the original embedder's vector was replaced: it is pending for it again
    assert await vstore.pending_embeddings() == 1
    assert await s.search("bananas", mode="semantic") == []
    # drop_vectors (embed --rebuild) re-embeds everything
    await vstore.embed_pending()
    assert await vstore.drop_vectors() == 1
    assert await vstore.pending_embeddings() == 1


async def test_modes_and_hybrid_fusion(vstore: Any) -> None:
    s = Session.create(vstore, "s1")
    await s.append_message(msg("lex", "deploying the billing service today"))
    await s.append_message(msg("other", "lunch was pasta", "assistant"))
    await vstore.embed_pending()
    # None = hybrid when the store has an embedder: the lexical hit comes first, with its
    # matched-word snippet; a semantic-only hit still has a snippet
    hybrid = await s.search("deploy billing pasta")
    assert hybrid == await s.search("deploy billing pasta", mode="hybrid")
    ids = [h.message_id for h in hybrid]
    assert set(ids) == {"lex", "other"}
    assert all(h.snippet for h in hybrid)
    assert all(0.0 <= h.score <= 1.0 for h in hybrid)
    # the lexical hits' snippets are made after fusion, for the results returned only: the
    # same snippets as a lexical search gives
    by_id = {
        h.message_id: h.snippet for h in await s.search("deploy billing pasta", mode="lexical")
    }
    assert all(h.snippet == by_id[h.message_id] for h in hybrid if h.message_id in by_id)
    assert "[deploying]" in by_id["lex"]
    lexical = await s.search("deploy", mode="lexical")
    assert lexical[0].message_id == "lex"
    # only lexical matches "deploy" to "deploying" (stemmed): the bag-of-words vectors share
    # nothing with it, yet semantic search still returns the nearest (k-NN, no threshold)
    sem = await s.search("deploy", mode="semantic")
    assert {h.message_id for h in sem} == {"lex", "other"}
    assert all(abs(h.score) < 0.01 for h in sem)
    assert (await s.search("deploy", mode="hybrid"))[0].message_id == "lex"
    # weight 1.0 ranks purely by the semantic list, 0.0 purely by the lexical one
    w1 = await s.search("pasta", semantic_weight=1.0)
    w0 = await s.search("billing", semantic_weight=0.0)
    assert (w1[0].message_id, w1[0].score) == ("other", 1.0)
    assert (w0[0].message_id, w0[0].score) == ("lex", 1.0)
    assert [h.score for h in w0[1:]] == [0.0] * len(w0[1:])
    with pytest.raises(ValueError, match="semantic_weight"):
        await s.search("x", semantic_weight=1.5)
    with pytest.raises(ValueError, match="mode"):
        await s.search("x", mode="fuzzy")
    assert await s.search("   ", mode="semantic") == []
    assert await s.search("billing", mode="semantic", limit=0) == []


async def test_without_an_embedder_search_is_lexical(store: Store) -> None:
    s = Session.create(store, "s1")
    await s.append_message(msg("a", "deploying billing"))
    assert [h.message_id for h in await s.search("deploy")] == ["a"]
    assert await s.search("deploy") == await s.search("deploy", mode="lexical")
    for mode in ("semantic", "hybrid"):
        with pytest.raises(EmbeddingError, match="embedder"):
            await s.search("deploy", mode=mode)
        with pytest.raises(EmbeddingError, match="embedder"):
            await SessionManager(store).search("deploy", mode=mode)
    with pytest.raises(EmbeddingError, match="embedder"):
        await store.embed_pending()  # type: ignore[attr-defined]


async def test_embedder_failure_writes_nothing_and_leaves_rows_pending(
    vstore: Any, embedder: HashEmbedder
) -> None:
    s = Session.create(vstore, "s1")
    await s.append_message(msg("a", "alpha"))
    embedder.fail = True
    with pytest.raises(EmbeddingError, match="embedder down"):
        await vstore.embed_pending()
    assert await vstore.pending_embeddings() == 1
    embedder.fail = False
    assert await vstore.embed_pending() == 1


async def test_bad_vectors_are_refused(storage: Storage) -> None:
    class Wrong(HashEmbedder):
        def embed(self, texts: list[str]) -> list[list[float]]:
            return [v[:-1] for v in super().embed(texts)]

    store = await storage.open(embedder=Wrong())
    try:
        await Session.create(store, "s").append_message(msg("a", "alpha"))
        with pytest.raises(EmbeddingError, match="dimensions"):
            await store.embed_pending()  # type: ignore[attr-defined]
        assert await store.pending_embeddings() == 1  # type: ignore[attr-defined]
    finally:
        await store.aclose()
    with pytest.raises(TypeError, match="embedder"):
        await storage.open(embedder=object())


async def test_async_embedder_and_messages_without_text(storage: Storage) -> None:
    emb = AsyncHashEmbedder()
    store = await storage.open(embedder=emb)
    try:
        s = Session.create(store, "s")
        await s.append_message(msg("a", "alpha beta"))
        await s.append_message(
            {
                "id": "f",
                "role": "user",
                "parts": [
                    {"type": "file", "mediaType": "image/png", "url": "https://example.com/x.png"}
                ],
            }
        )
        assert await store.embed_pending() == 2  # type: ignore[attr-defined]
        assert emb.texts == ["alpha beta"]  # nothing to embed for the file: done, not pending
        assert await store.pending_embeddings() == 0  # type: ignore[attr-defined]
        hits = await s.search("alpha", mode="semantic")
        assert [h.message_id for h in hits] == ["a"]
    finally:
        await store.aclose()


async def test_hnsw_and_exact_agree(storage: Storage) -> None:
    """The approximate index returns what the exact scan returns on a small namespace."""
    store = await storage.open(embedder=HashEmbedder())
    try:
        m = SessionManager(store, namespace="n")
        words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
        for i in range(60):
            text = " ".join(words[(i * k) % len(words)] for k in (1, 3, 5)) + f" item{i}"
            await m.append(f"s{i % 3}", msg(f"m{i}", text), None)
        await store.embed_pending()
        for q in ("alpha bravo", "golf hotel echo", "item7 delta"):
            whole = await m.search(q, mode="semantic", limit=10)
            # session_ids always takes the exact path; all three sessions = the namespace
            exact = await m.search(q, mode="semantic", limit=10, session_ids=["s0", "s1", "s2"])
            assert [round(h.score, 2) for h in whole] == [round(h.score, 2) for h in exact]
            assert whole[0].message_id == exact[0].message_id
    finally:
        await store.aclose()


async def test_open_store_takes_an_embedder(storage: Storage) -> None:
    from mindstore import open_store

    emb = HashEmbedder()
    store = await open_store(storage.url_string, **storage.open_options(embedder=emb))
    try:
        assert store.embedder is emb  # type: ignore[attr-defined]
        assert store.vector_index in ("pgvector", "exact")  # type: ignore[attr-defined]
        await Session.create(store, "s").append_message(msg("a", "open store"))
        assert await store.embed_pending() == 1  # type: ignore[attr-defined]
    finally:
        await store.aclose()


async def test_vector_index_is_none_without_an_embedder(store: Store) -> None:
    assert store.vector_index is None  # type: ignore[attr-defined]
    assert store.embedder is None  # type: ignore[attr-defined]


async def test_delete_namespace_takes_its_vectors(vstore: Any) -> None:
    keep = SessionManager(vstore, namespace="keep")
    gone = SessionManager(vstore, namespace="gone")
    await keep.append("s", msg("k", "kiwi fruit"))
    await gone.append("s", msg("g", "kiwi bird"))
    await vstore.embed_pending()
    await vstore.delete_namespace("gone")
    assert await gone.search("kiwi", mode="semantic") == []
    assert [h.message_id for h in await keep.search("kiwi", mode="semantic")] == ["k"]
    assert await vstore.pending_embeddings() == 0
