"""MindstoreStore honours LangGraph's ``index={"dims", "embed", "fields"}``: it embeds what
``InMemoryStore`` embeds, ranks as it does and gives the same scores, on every backend — with
the config's ``embed`` function or, without one, the mindstore store's own embedder. The
vectors persist with the items (a reopened store searches without re-embedding) and a failing
embed function writes nothing."""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Any

import pytest
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore

from backends import Reopen
from mindstore.errors import ConfigError, EmbeddingError
from mindstore.integrations.langgraph import MindstoreStore
from mindstore.store.base import Store

# A scripted "model": words of one concept share a direction, every other word gets a small
# hashed component (so no two different texts tie), like a real model's near-synonyms.
CONCEPTS = {
    "cat": 0,
    "cats": 0,
    "feline": 0,
    "kitten": 0,
    "dog": 1,
    "dogs": 1,
    "canine": 1,
    "puppy": 1,
    "mat": 2,
    "rug": 2,
    "python": 3,
    "code": 3,
    "programming": 3,
    "tea": 4,
    "coffee": 4,
    "drink": 4,
}
DIMS = 12


class ConceptEmbed:
    """``embed`` for LangGraph's index config (a sync function of a list of texts), counting
    the texts it was given."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.fail = False
        self.wrong_size = False

    def __call__(self, texts: list[str]) -> list[list[float]]:
        if self.fail:
            raise RuntimeError("model API down")
        self.texts.extend(texts)
        return [self.vector(t) for t in texts]

    def vector(self, text: str) -> list[float]:
        v = [0.0] * (DIMS + 1 if self.wrong_size else DIMS)
        v[DIMS - 1] = 0.2  # a shared bias: unrelated texts are near 0, never tied at exactly 0
        for word in re.findall(r"[a-z]+", text.lower()):
            if word in CONCEPTS:
                v[CONCEPTS[word]] += 1.0
            else:
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big")
                v[5 + h % (DIMS - 6)] += 0.1 + (h % 997) / 2000
        return v


class ConceptEmbedder:
    """The same model as a mindstore :class:`~mindstore.embeddings.Embedder`."""

    name = "concepts"
    dimensions = DIMS

    def __init__(self) -> None:
        self.model = ConceptEmbed()

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self.model(texts)


DOCS: list[tuple[tuple[str, ...], str, dict[str, Any], Any]] = [
    (("docs", "a"), "cat", {"text": "the cat sat on the mat", "tags": ["home"], "n": 1}, None),
    (
        ("docs", "a"),
        "dog",
        {"text": "a dog barks at night", "tags": ["puppy", "loud"], "n": 2},
        None,
    ),
    (("docs", "b"), "py", {"text": "writing python code daily", "tags": [], "n": 3}, None),
    (("docs", "b"), "tea", {"text": "green tea in the morning", "tags": ["drink"], "n": 4}, None),
    (("docs", "b"), "hidden", {"text": "kitten on a rug", "tags": [], "n": 5}, False),
    (
        ("docs", "c"),
        "own",
        {"text": "unrelated words", "other": "feline friends", "n": 6},
        ["other"],
    ),
    (("misc",), "cat2", {"text": "cats and dogs", "tags": ["kitten"], "n": 7}, None),
]
FIELDS = ["text", "tags[*]"]


async def fill(store: Any) -> None:
    for ns, key, value, index in DOCS:
        await store.aput(ns, key, value, index=index)


def ranked(items: list[Any]) -> list[tuple[str, float | None]]:
    return [(i.key, None if i.score is None else round(i.score, 5)) for i in items]


async def both(lg: MindstoreStore, ref: InMemoryStore, *args: Any, **kwargs: Any) -> Any:
    ours = ranked(await lg.asearch(*args, **kwargs))
    theirs = ranked(await ref.asearch(*args, **kwargs))
    return ours, theirs


async def test_feline_finds_the_cat_as_in_memory_store_does(store: Store) -> None:
    embed = ConceptEmbed()
    index = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    lg = MindstoreStore(store, index=index)
    ref = InMemoryStore(index=index)
    for s in (lg, ref):
        await s.aput(("docs",), "cat", {"text": "the cat sat on the mat"})
        await s.aput(("docs",), "code", {"text": "python code review"})
    ours, theirs = await both(lg, ref, ("docs",), query="feline")
    assert ours[0][0] == "cat" and ours == theirs
    assert ours[0][1] is not None and ours[0][1] > 0.5


@pytest.mark.parametrize(
    "query,kwargs",
    [
        ("feline", {}),
        ("puppy", {}),
        ("a drink of coffee", {}),
        ("programming", {"limit": 2}),
        ("cat", {"offset": 2, "limit": 2}),
        ("cat", {"filter": {"n": {"$gte": 2}}}),
        ("dog", {"limit": 20}),  # more than the scored items: the unscored fill the page
    ],
)
async def test_rankings_and_scores_equal_in_memory_store(
    store: Store, query: str, kwargs: dict[str, Any]
) -> None:
    embed = ConceptEmbed()
    index = {"dims": DIMS, "embed": embed, "fields": FIELDS}
    lg = MindstoreStore(store, index=index)
    ref = InMemoryStore(index=index)
    await fill(lg)
    await fill(ref)
    for prefix in [("docs",), ("docs", "b"), ()]:
        ours, theirs = await both(lg, ref, prefix, query=query, **kwargs)
        scored = [r for r in theirs if r[1] is not None]
        assert ours[: len(scored)] == scored, (prefix, query)
        # unscored items (index=False) fill a short page; their order is each store's own
        assert sorted(ours[len(scored) :]) == sorted(theirs[len(scored) :])


async def test_store_embedder_serves_an_index_without_embed(reopen: Reopen) -> None:
    embedder = ConceptEmbedder()
    store = await reopen(embedder=embedder)
    lg = MindstoreStore(store, index={"fields": FIELDS})
    ref = InMemoryStore(index={"dims": DIMS, "embed": ConceptEmbed(), "fields": FIELDS})
    await fill(lg)
    await fill(ref)
    assert embedder.model.texts  # the store's embedder embedded the puts
    ours, theirs = await both(lg, ref, ("docs",), query="feline")
    assert ours == theirs and ours[0][0] in ("cat", "own")
    with pytest.raises(ConfigError, match="dims"):
        MindstoreStore(store, index={"dims": DIMS + 1, "fields": FIELDS})


async def test_vectors_persist_with_the_items(store: Store, reopen: Reopen) -> None:
    embed = ConceptEmbed()
    index = {"dims": DIMS, "embed": embed, "fields": FIELDS}
    await fill(MindstoreStore(store, index=index))
    embedded = len(embed.texts)
    again = MindstoreStore(await reopen(), index=index)
    hits = await again.asearch(("docs",), query="feline")
    assert hits[0].key in ("cat", "own")
    assert len(embed.texts) == embedded + 1  # only the query was embedded
    # an update replaces the vectors, a delete removes them with the item
    await again.aput(("docs", "a"), "cat", {"text": "python programming", "tags": []})
    assert (await again.asearch(("docs", "a"), query="programming", limit=1))[0].key == "cat"
    await again.adelete(("docs", "a"), "cat")
    assert "cat" not in [h.key for h in await again.asearch(("docs",), query="feline")]


async def test_a_failing_embed_function_writes_nothing(store: Store) -> None:
    embed = ConceptEmbed()
    lg = MindstoreStore(store, index={"dims": DIMS, "embed": embed, "fields": ["text"]})
    embed.fail = True
    ops = [PutOp(("d",), "a", {"text": "cat"}), PutOp(("d",), "b", {"text": "dog"})]
    with pytest.raises(EmbeddingError, match="model API down"):
        await lg.abatch(ops)
    embed.fail, embed.wrong_size = False, True
    with pytest.raises(EmbeddingError, match="dims=12"):
        await lg.abatch(ops)
    assert await lg.asearch(("d",)) == []
    embed.wrong_size = False
    await lg.abatch(ops)
    assert (await lg.asearch(("d",), query="kitten"))[0].key == "a"


async def test_bad_index_configs_are_refused(store: Store) -> None:
    with pytest.raises(ConfigError, match="positive"):
        MindstoreStore(store, index={"dims": 0, "embed": ConceptEmbed()})
    with pytest.raises(ConfigError, match="dims"):
        MindstoreStore(store, index={"embed": ConceptEmbed()})
    # fields only, store without an embedder: full-text search over those fields, as before
    lg = MindstoreStore(store, index={"fields": ["text"]})
    await lg.aput(("d",), "a", {"text": "the cat sat", "other": "dog"})
    assert [i.key for i in await lg.asearch(("d",), query="cat")] == ["a"]
    assert await lg.asearch(("d",), query="dog") == []


async def test_async_embed_and_sync_calls(store: Store, backend: str) -> None:
    model = ConceptEmbed()

    async def aembed(texts: list[str]) -> list[list[float]]:
        await asyncio.sleep(0)
        return model(texts)

    lg = MindstoreStore(store, index={"dims": DIMS, "embed": aembed, "fields": ["text"]})
    await lg.aput(("d",), "a", {"text": "the cat sat on the mat"})
    await lg.aput(("d",), "b", {"text": "python code"})
    assert [i.key for i in await lg.asearch(("d",), query="kitten")] == ["a", "b"]
    # the sync API from a worker thread (LangGraph's sync nodes under ainvoke)
    hits = await asyncio.to_thread(lambda: lg.search(("d",), query="programming"))
    assert [i.key for i in hits] == ["b", "a"]


async def test_sqlite_store_spelling_text_fields_and_the_embeddings_attribute(store: Store) -> None:
    """``SqliteStore`` names the paths ``text_fields`` (a list or one string) and exposes the
    LangChain ``embeddings`` it made, as ``InMemoryStore`` does."""
    embed = ConceptEmbed()
    ref = InMemoryStore(index={"dims": DIMS, "embed": embed, "fields": ["title"]})
    for text_fields in (["title"], "title"):
        lg = MindstoreStore(
            store,
            namespace=f"tf-{type(text_fields).__name__}",
            index={"dims": DIMS, "embed": embed, "text_fields": text_fields},
        )
        assert lg.embeddings is not None and lg.embeddings.embed_query("cat") == embed.vector("cat")
        for s in (lg, ref):
            await s.aput(("d",), "a", {"title": "python code", "body": "the cat"})
            await s.aput(("d",), "b", {"title": "a kitten", "body": "python"})
        ours, theirs = await both(lg, ref, ("d",), query="feline")
        assert ours == theirs and ours[0][0] == "b"
    assert MindstoreStore(store).embeddings is None
    with pytest.raises(ConfigError, match="fields"):
        MindstoreStore(store, index={"dims": DIMS, "embed": embed, "fields": [1]})
