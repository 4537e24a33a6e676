"""Contract: ``SessionManager.delete_namespace()`` forgets a namespace completely (issue 14.8).

The proof reads EVERY table of the schema, enumerated from the database itself (so a table
added later cannot be forgotten): before the deletion each data table must hold rows of the
doomed namespace (the test fills every kind of state), afterwards no row anywhere mentions it,
and every row of the other namespace is still there byte for byte. Tables that hold no
namespace data (schema bookkeeping, FTS5 internals) are named explicitly below; a new table
must either be filled by :func:`populate` or be added to that list with a reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from backends import close_test_store, database_location, dump_tables, open_test_store
from mindstore.context.providers import StoreSearchProvider, StoreSkillProvider
from mindstore.manager import SessionManager
from mindstore.store import failpoints
from mindstore.store.base import Store

GONE = "forgetzq"  # every row written for the doomed namespace carries this marker
KEPT = "keepzq"

# Tables that never hold rows of a namespace, and why.
BOOKKEEPING = {
    "sqlite": {
        "sqlite_sequence": "AUTOINCREMENT counters",
        # the lexical index moves new documents from search_pending to search_terms in
        # batches of 32: a small namespace's rows are all still pending (checked there)
        "search_terms": "lexical index, filled in batches from search_pending",
        # vectors need a store with an embedder: test_semantic.py checks that
        # delete_namespace takes them (triggers / cascade from messages)
        "message_vectors": "vectors (tested in test_semantic.py)",
        "vector_generations": "per-namespace cache counter, harmless",
    },
    "postgres": {
        "mindstore_schema": "the schema version",
        # vectors need a store with an embedder: test_semantic.py checks that
        # delete_namespace takes them (triggers / cascade from messages)
        "message_vectors": "vectors (tested in test_semantic.py)",
        "vector_generations": "per-namespace cache counter, harmless",
    },
}


def msg(mid: str, text: str, role: str = "user") -> dict[str, Any]:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": text}]}


def configured(store: Store, namespace: str) -> SessionManager:
    return (
        SessionManager(store, namespace=namespace)
        .with_context("memory", "Facts")
        .with_context("shared", "Team notes", scope="namespace")
        .with_context("kb", provider=StoreSearchProvider(store))
        .with_context("notes", provider=StoreSearchProvider(store, scope="session"))
        .with_context("skills", provider=StoreSkillProvider(store))
        .with_cached_prompt()
    )


async def populate(store: Store, namespace: str, word: str) -> SessionManager:
    """Every kind of state a namespace can own, each row carrying ``word``."""
    m = configured(store, namespace)
    info = await m.create(f"{word} chat", model=f"{word}-model", metadata={"who": word})
    s = m.session(info.id)
    await s.append_message(msg("u1", f"{word} likes tea"))
    await s.append_message(msg("a1", f"{word} noted", "assistant"))
    await s.append_message(
        {
            "id": "a2",
            "role": "assistant",
            "parts": [
                {
                    "type": "tool-lookup",
                    "toolCallId": "c1",
                    "state": "output-available",
                    "input": {"q": word},
                    "output": {"hit": f"{word} found"},
                }
            ],
        }
    )
    await s.append_message(msg("u2", f"{word} again"))
    await store.add_compaction(s.key, summary=f"{word} summary", from_id="u1", to_id="a1")
    await s.replace_context_block("memory", f"{word} memory")
    await s.replace_context_block("shared", f"{word} shared")
    kb = await s.get_context_provider("kb")
    await kb.set(f"{word}-fact", f"{word} knowledge", description=f"{word} desc")
    notes = await s.get_context_provider("notes")
    await notes.set(f"{word}-note", f"{word} session note")
    skills = await s.get_context_provider("skills")
    await skills.set(f"{word}-skill", f"{word} skill body", description=f"{word} skill")
    tools = await s.tools()
    loaded = await tools.execute("load_context", {"label": "skills", "key": f"{word}-skill"})
    assert word in loaded
    await s.freeze_system_prompt()  # the cached prompt row
    await m.add_usage(info.id, input_tokens=10, output_tokens=5, cost=0.01)
    await m.fork(info.id, "a1", f"{word} fork")
    return m


def _mentions(value: Any, word: str) -> bool:
    if isinstance(value, str):
        return word in value
    if isinstance(value, bytes | bytearray | memoryview):
        return word.encode() in bytes(value)
    return word in str(value)


@pytest.fixture
async def opened(backend: str, tmp_path: Path) -> Any:
    """The store and where its database is (for :func:`dump_tables`)."""
    store, token = await open_test_store(backend, tmp_path)
    try:
        yield store, database_location(backend, tmp_path, token)
    finally:
        await close_test_store(store, token)


async def test_delete_namespace_removes_every_row_and_keeps_others(
    backend: str, opened: Any
) -> None:
    store, location = opened
    gone = await populate(store, f"{GONE}-user", GONE)
    kept = await populate(store, f"{KEPT}-user", KEPT)

    before = await dump_tables(backend, location)
    bookkeeping = BOOKKEEPING[backend]
    data_tables = sorted(set(before) - set(bookkeeping))
    assert data_tables, "no tables found"
    unfilled = [t for t in data_tables if not any(_mentions(r, GONE) for r in before[t])]
    assert not unfilled, (
        f"tables {unfilled} hold no row of the namespace: fill them in populate() (and make "
        "delete_namespace delete them), or list them in BOOKKEEPING with the reason"
    )
    assert not set(bookkeeping) - set(before), "BOOKKEEPING names a table that does not exist"

    counts = await gone.delete_namespace()
    assert counts == {
        "compactions": 2,  # the overlay u1..a1 and its copy in the fork
        "messages": 4 + 2,  # the session and its fork (u1, a1)
        "sessions": 2,
        "blocks": 2,  # the session's memory + the namespace's shared (forks copy no blocks)
        "entries": 3,
        "prompts": 1,
        "skill_states": 2,  # the session and its fork (loaded skills are copied)
    }

    after = await dump_tables(backend, location)
    assert set(after) == set(before)
    for table in sorted(after):
        rows = after[table]
        leaked = [r for r in rows if _mentions(r, GONE)]
        assert not leaked, f"{table} still holds rows of the deleted namespace: {leaked[:3]}"
        if table in bookkeeping:
            continue
        survivors = [r for r in before[table] if not _mentions(r, GONE)]
        assert sorted(map(repr, rows)) == sorted(map(repr, survivors)), (
            f"{table}: rows of other namespaces changed"
        )
        assert any(_mentions(r, KEPT) for r in rows), f"{table} lost the other namespace"

    # the other namespace still works in full; the deleted one is empty and usable again
    assert [r.text for r in await kept.search(KEPT)]
    assert await gone.search(GONE) == []
    assert await gone.list() == []
    s = gone.session("fresh")
    assert await s.get_context_block("shared") is not None
    assert (await s.get_context_block("shared")).content == ""  # type: ignore[union-attr]
    await s.append_message(msg("n1", "new life"))
    assert [m["id"] for m in await s.get_history()] == ["n1"]
    assert await gone.delete_namespace() == {
        **dict.fromkeys(counts, 0),
        "sessions": 1,
        "messages": 1,
    }
    assert await gone.delete_namespace() == dict.fromkeys(counts, 0)


async def test_delete_namespace_is_one_transaction(backend: str, opened: Any) -> None:
    """A failure after every row of the namespace was deleted, before the commit, leaves every
    table exactly as it was: the deletion is one transaction and rolls back whole."""
    store, location = opened
    m = await populate(store, f"{GONE}-user", GONE)
    before = await dump_tables(backend, location)
    assert any(_mentions(r, GONE) for r in before["messages"])

    def boom() -> None:
        raise RuntimeError("injected failure")

    with (
        failpoints.armed("delete_namespace.after_delete", boom),
        pytest.raises(RuntimeError, match="injected failure"),
    ):
        await m.delete_namespace()
    assert await dump_tables(backend, location) == before

    # the store is unharmed: the same deletion then goes through
    counts = await m.delete_namespace()
    assert counts["messages"] == 6 and counts["sessions"] == 2
    after = await dump_tables(backend, location)
    assert not any(_mentions(r, GONE) for r in after["messages"])


async def test_delete_namespace_validates_the_name(store: Store) -> None:
    with pytest.raises(ValueError, match="namespace must be a non-empty string"):
        await store.delete_namespace("")
