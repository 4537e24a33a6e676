"""What is embedded, and how a hybrid search uses the embedder, on SQLite, PostgreSQL (exact)
and PostgreSQL with pgvector: the memory tools' own calls and results are never embedded; the
generated ``session_search`` tool searches in the store's default mode (hybrid with an
embedder); a hybrid search embeds its query once, while its lexical half runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from backends import close_test_store
from embedders import HashEmbedder
from mindstore import EmbeddingError, Session, SessionManager
from mindstore.search import MEMORY_TOOLS
from pgvector_server import SEMANTIC_BACKENDS, open_any


@pytest.fixture(params=SEMANTIC_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture
async def vstore(backend: str, tmp_path: Path, embedder: HashEmbedder) -> AsyncIterator[Any]:
    s, token = await open_any(backend, tmp_path, embedder=embedder)
    try:
        yield s
    finally:
        await close_test_store(s, token)


def text(mid: str, body: str, role: str = "user") -> dict[str, Any]:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": body}]}


def tool_call(mid: str, name: str, *, dynamic: bool = False) -> dict[str, Any]:
    part: dict[str, Any] = {
        "type": "dynamic-tool" if dynamic else f"tool-{name}",
        "toolCallId": f"call-{mid}",
        "state": "output-available",
        "input": {"query": "zebra marmalade", "label": "notes", "content": "zebra marmalade"},
        "output": f"[user] zebra marmalade echoed by {name}",
    }
    if dynamic:
        part["toolName"] = name
    return {"id": mid, "role": "assistant", "parts": [part]}


async def test_memory_tool_messages_are_never_embedded(vstore: Any, embedder: HashEmbedder) -> None:
    s = Session.create(vstore, "s1")
    await s.append_message(text("fact", "my zebra eats marmalade on sundays"))
    names = sorted(MEMORY_TOOLS)
    for i, name in enumerate(names):
        await s.append_message(tool_call(f"mem{i}", name, dynamic=i % 2 == 1))
    # a reply under a memory-tool message: embedded alone (its parent adds no context)
    await s.append_message(text("reply", "noted", "assistant"))
    # an ordinary tool is conversation: its call and result are embedded
    await s.append_message(tool_call("weather", "get_weather"))

    assert await vstore.embed_pending() == len(names) + 3
    assert await vstore.pending_embeddings() == 0  # memory-tool rows are done, not pending
    sent = embedder.texts
    assert "noted" in sent
    assert any(t.startswith("get_weather") for t in sent)
    assert not any(name in t for t in sent for name in names)
    assert sum("zebra" in t for t in sent) == 2  # the fact and get_weather's own echo

    hits = await s.search("zebra marmalade", mode="semantic", limit=50)
    ids = {h.message_id for h in hits}
    assert ids >= {"fact", "weather"}
    assert not any(i.startswith("mem") for i in ids)


async def test_session_search_tool_runs_hybrid_with_an_embedder(vstore: Any) -> None:
    s = Session.create(vstore, "s1")
    await s.append_message(text("word", "the billing service was deployed"))
    # another session: no parent whose words would make it a lexical (context) hit
    await Session.create(vstore, "s2").append_message(text("other", "Zurich lakeside flat"))
    await vstore.embed_pending()
    manager = SessionManager(vstore)
    assert [h.message_id for h in await manager.search("billing", mode="lexical")] == ["word"]
    # hybrid also carries the semantic list's k-NN neighbours (no threshold): the tool shows
    # the message lexical search cannot find, so it runs in the store's default mode
    tools = await manager.tools()
    out = await tools.execute("session_search", {"query": "billing"})
    assert out.index("the billing service was deployed") < out.index("Zurich lakeside flat")
    assert [h.message_id for h in await manager.search("billing")] == ["word", "other"]


async def test_session_search_tool_takes_a_mode_with_an_embedder(vstore: Any) -> None:
    s = Session.create(vstore, "s1")
    await s.append_message(text("word", "the billing service was deployed"))
    await Session.create(vstore, "s2").append_message(text("other", "Zurich lakeside flat"))
    await vstore.embed_pending()
    tools = await SessionManager(vstore).tools()
    tool = tools["session_search"]
    assert tool.parameters["properties"]["mode"]["enum"] == ["hybrid", "lexical", "semantic"]
    assert tool.parameters["required"] == ["query"]
    lexical = await tools.execute("session_search", {"query": "billing", "mode": "lexical"})
    assert "the billing service was deployed" in lexical and "Zurich" not in lexical
    hybrid = await tools.execute("session_search", {"query": "billing", "mode": "hybrid"})
    assert "Zurich lakeside flat" in hybrid
    bad = await tools.execute("session_search", {"query": "billing", "mode": "fuzzy"})
    assert bad.startswith("Error:")


async def test_session_search_tool_offers_no_mode_without_an_embedder(tmp_path: Path) -> None:
    from mindstore import SQLiteStore

    async with SQLiteStore(tmp_path / "plain.db") as plain:
        await Session.create(plain, "s1").append_message(text("word", "billing deployed"))
        tools = await SessionManager(plain).tools()
        tool = tools["session_search"]
        assert "mode" not in tool.parameters["properties"]
        # a mode the tool did not offer is ignored rather than failing the call
        out = await tools.execute("session_search", {"query": "billing", "mode": "semantic"})
        assert "billing deployed" in out


async def test_hybrid_embeds_the_query_once(vstore: Any, embedder: HashEmbedder) -> None:
    s = Session.create(vstore, "s1")
    await s.append_message(text("a", "the billing service was deployed"))
    await vstore.embed_pending()
    embedder.calls.clear()
    hits = await s.search("billing deploy", mode="hybrid")
    assert [h.message_id for h in hits] == ["a"]
    assert embedder.calls == [["billing deploy"]]  # started early, used once
    await s.append_message(text("b", "billing again, not embedded yet"))
    both = await SessionManager(vstore).search("billing", mode="hybrid")
    assert {h.message_id for h in both} == {"a", "b"}  # b: lexically only
    assert embedder.calls == [["billing deploy"], ["billing"]]
    embedder.fail = True
    with pytest.raises(EmbeddingError, match="embedder down"):
        await s.search("billing", mode="hybrid")


@pytest.mark.postgres
async def test_pgvector_stores_in_two_schemas_of_one_database(tmp_path: Path) -> None:
    """The extension lives in one schema (the first store's); a store in another schema, whose
    search_path is its own schema only, still finds pgvector's types and operators."""
    first, t1 = await open_any("pgvector", tmp_path, embedder=HashEmbedder())
    try:
        second, t2 = await open_any("pgvector", tmp_path, embedder=HashEmbedder())
        try:
            for store in (first, second):
                assert store.vector_index == "pgvector"
                s = Session.create(store, "s1")
                await s.append_message(text("a", "the billing service was deployed"))
                await s.append_message(text("b", "lunch was pasta", "assistant"))
                assert await store.embed_pending() == 2  # type: ignore[attr-defined]
                hits = await SessionManager(store).search("pasta lunch", mode="semantic")
                assert hits[0].message_id == "b"
        finally:
            await close_test_store(second, t2)
    finally:
        await close_test_store(first, t1)
