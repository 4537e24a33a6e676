"""Namespace isolation (DESIGN §1.1, issue 8 point 5), on every store backend.

Namespaces A and B live in one store with the SAME session ids, message ids, block labels and
entry/skill keys. Every public Session and SessionManager method is called through namespace A;
nothing it returns may contain B's data (B's text carries a marker word), and afterwards every
row of B — read straight from the store — is exactly what it was before.

A guard test lists the public methods of Session and SessionManager: a new public method fails
it until this file exercises the method through namespace A.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from mindstore import (
    CompactionError,
    ConflictError,
    MessageNotFoundError,
    MindstoreError,
    Session,
    SessionManager,
)
from mindstore.compaction.compact_function import CompactResult
from mindstore.context.providers import StoreSearchProvider, StoreSkillProvider
from mindstore.store.base import ScopeKey, SessionKey, Store

MARK = "bravosecret"
SIDS = ("s1", "s2")
BLOBS = "memory://isolation-blobs"


def msg(mid: str, text: str, role: str = "user") -> dict[str, Any]:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": text}]}


def chain(word: str) -> list[dict[str, Any]]:
    return [
        msg(f"m{i}", f"{word} message {i} about the deployment", "user" if i % 2 else "assistant")
        for i in range(1, 7)
    ]


def compact_fn(messages: list[dict[str, Any]], context: Any) -> CompactResult | None:
    if len(messages) < 4:
        return None
    return CompactResult(
        from_message_id=messages[0]["id"],
        to_message_id=messages[-3]["id"],
        summary="## Topic\nalpha compacted conversation",
    )


def configured(store: Store, namespace: str) -> SessionManager:
    return (
        SessionManager(store, namespace=namespace)
        .with_context("memory", "Facts", max_tokens=500)
        .with_context("profile", "Shared profile", scope="namespace")
        .with_context("kb", "Knowledge", provider=StoreSearchProvider(store))
        .with_context(
            "notes", "Per-session notes", provider=StoreSearchProvider(store, scope="session")
        )
        .with_context("skills", provider=StoreSkillProvider(store))
        .with_cached_prompt()
        .with_searchable_history("history")
        .on_compaction(compact_fn)
    )


async def populate_b(store: Store) -> SessionManager:
    b = configured(store, "B")
    for sid in SIDS:
        await b.append_all(sid, chain(MARK))
        s = b.session(sid)
        await s.add_compaction(f"{MARK} summary", "m2", "m3")
        await s.replace_context_block("memory", f"{MARK} memory of {sid}")
        tools = await s.tools()
        for label in ("kb", "notes", "skills"):
            out = await tools.execute(
                "set_context",
                {"label": label, "content": f"{MARK} {label} doc", "metadata": {"title": "doc"}},
            )
            assert not out.startswith("Error"), out
        assert "bravosecret" in await tools.execute(
            "load_context", {"label": "skills", "key": "doc"}
        )
        await s.freeze_system_prompt()
        await b.add_usage(sid, 100, 200, 1.5)
        await b.rename(sid, f"{MARK} chat {sid}")
    await b.session("s1").replace_context_block("profile", f"{MARK} profile")
    await b.create(f"{MARK} registry only", metadata={"secret": MARK})
    return b


async def snapshot_b(store: Store) -> dict[str, Any]:
    """Every row of namespace B, read straight from the store."""
    out: dict[str, Any] = {
        "sessions": await store.list_sessions("B", limit=1000),
        "ns_blocks": await store.list_blocks("B", None),
    }
    for label in ("kb", "skills"):
        out[f"entries:{label}"] = await store.list_entries(
            ScopeKey(namespace="B", session_id=None, label=label)
        )
    for sid in SIDS:
        key = SessionKey(namespace="B", session_id=sid)
        out[sid] = (
            await store.all_messages(key),
            await store.get_compactions(key),
            await store.get_prompt(key),
            await store.get_skill_states(key),
            await store.list_blocks("B", sid),
            await store.list_entries(ScopeKey(namespace="B", session_id=sid, label="notes")),
            await store.get_session(key),
        )
    return out


class Probe:
    """Calls through namespace A, asserting that nothing of B ever comes back."""

    def __init__(self) -> None:
        self.called: set[str] = set()

    async def ok(self, name: str, value: Any) -> Any:
        self.called.add(name)
        result = await value if inspect.isawaitable(value) else value
        assert MARK not in repr(result), f"{name} leaked namespace B: {result!r}"
        return result

    async def fails(self, name: str, value: Any, error: type[BaseException]) -> None:
        self.called.add(name)
        with pytest.raises(error) as info:
            await value
        assert MARK not in str(info.value)


async def test_namespace_a_never_sees_or_touches_namespace_b(store: Store) -> None:
    await populate_b(store)
    b_compaction_id = (await store.get_compactions(SessionKey(namespace="B", session_id="s1")))[
        0
    ].id
    before = await snapshot_b(store)
    assert MARK in repr(before)  # the probe's marker is really there

    a = configured(store, "A")
    p = Probe()
    s = a.session("s1")

    # ---- reads of an empty namespace A ------------------------------------------------------
    assert await p.ok("get", a.get("s1")) is None
    assert await p.ok("list", a.list()) == []
    assert await p.ok("count", a.count()) == 0
    assert await p.ok("search", a.search(MARK)) == []
    assert await p.ok("session_names", a.session_names(["s1"])) == {"s1": None}
    assert await p.ok("get_history", s.get_history()) == []
    await p.fails("get_history", s.get_history("m1"), MessageNotFoundError)
    assert await p.ok("get_message", s.get_message("m1")) is None
    assert await p.ok("get_node", s.get_node("m1")) is None
    assert await p.ok("get_latest_leaf", s.get_latest_leaf()) is None
    await p.fails("get_branches", s.get_branches("m1"), MessageNotFoundError)
    assert await p.ok("get_path_length", s.get_path_length()) == 0
    assert (await p.ok("get_recent_history", s.get_recent_history(max_tokens=50))).messages == []
    assert await p.ok("search", s.search(MARK)) == []
    block = await p.ok("get_context_block", s.get_context_block("memory"))
    assert block.content == ""
    assert (await p.ok("get_context_block", s.get_context_block("profile"))).content == ""
    await p.ok("get_context_blocks", s.get_context_blocks())
    await p.ok("get_context_provider", s.get_context_provider("kb"))
    await p.ok("render_system_prompt", s.render_system_prompt())
    await p.ok("freeze_system_prompt", s.freeze_system_prompt())
    assert await p.ok("get_loaded_skills", s.get_loaded_skills()) == []
    assert await p.ok("loaded_skills", s.loaded_skills()) == []
    assert await p.ok("unload_skill", s.unload_skill("skills", "doc")) is False  # B's is loaded
    assert await p.ok("get_compactions", s.get_compactions()) == []
    await p.fails("expand_compaction", s.expand_compaction(b_compaction_id), MindstoreError)
    await p.fails("revert_compaction", s.revert_compaction(b_compaction_id), CompactionError)
    assert await p.ok("count_message_tokens", s.count_message_tokens([msg("x", "hi")])) > 0
    tools = await p.ok("tools", s.tools())
    m_tools = await p.ok("tools", a.tools())
    for label in ("kb", "notes", "history"):
        out = await p.ok("tools", tools.execute("search_context", {"label": label, "query": MARK}))
        assert out == "No results found.", (label, out)
    out = await p.ok("tools", tools.execute("load_context", {"label": "skills", "key": "doc"}))
    assert out == "Not found: doc"
    await p.ok("tools", tools.execute("unload_context", {"label": "skills", "key": "doc"}))
    assert await p.ok("tools", m_tools.execute("session_search", {"query": MARK})) == (
        "No results found."
    )

    # ---- writes that must fail without touching B --------------------------------------------
    await p.fails("update_message", s.update_message(msg("m1", "x")), MessageNotFoundError)
    await p.fails("delete_messages", s.delete_messages(["m1"]), MessageNotFoundError)
    await p.fails("add_compaction", s.add_compaction("x", "m1", "m2"), MessageNotFoundError)
    await p.fails("append_message", s.append_message(msg("x", "x"), "m6"), MessageNotFoundError)
    await p.fails(
        "append_message", s.append_message(msg("x", "x"), expected_leaf="m6"), ConflictError
    )
    await p.fails("append", a.append("s1", msg("x", "x"), parent_id="m6"), MessageNotFoundError)
    await p.fails("append_all", a.append_all("s1", [msg("x", "x")], "m6"), MessageNotFoundError)
    await p.fails("fork", a.fork("s1", "m3", "stolen"), LookupError)
    await p.fails("compact_and_split", a.compact_and_split("s1", "x"), LookupError)
    await p.fails("rename", a.rename("s1", "stolen"), LookupError)
    assert await p.ok("delete", a.delete("s2")) is False
    assert await p.ok("compact", s.compact()) is None  # empty history in A: nothing to compact
    assert await snapshot_b(store) == before

    # ---- the same ids written in A are A's own --------------------------------------------------
    assert await p.ok("append_all", a.append_all("s1", chain("alpha"))) == [True] * 6
    assert await p.ok("append", a.append("s2", msg("m1", "alpha other"))) is True
    assert await p.ok("append_message", s.append_message(msg("m7", "alpha seven"))) is True
    await p.ok("update_message", s.update_message(msg("m1", "alpha updated")))
    assert await p.ok("upsert", a.upsert("s1", msg("m1", "alpha upserted"))) == "m1"  # update
    assert await p.ok("upsert", a.upsert("s2", msg("m9", "alpha nine"))) == "m9"  # append
    await p.ok("evict_media", s.evict_media(older_than_messages=1, min_bytes=256, blob_store=BLOBS))
    assert await p.ok("delete_messages", s.delete_messages(["m2"])) == 1
    comp = await p.ok("add_compaction", s.add_compaction("alpha summary", "m3", "m4"))
    await p.ok("expand_compaction", s.expand_compaction(comp.id))
    await p.ok("revert_compaction", s.revert_compaction(comp.id))
    await p.ok("compact", s.compact())
    await p.ok("wait_compaction", s.wait_compaction())  # nothing in the background: returns
    await p.ok("wait_compaction", a.wait_compaction())
    await p.ok("replace_context_block", s.replace_context_block("memory", "alpha memory"))
    await p.ok("append_context_block", s.append_context_block("profile", "alpha profile"))
    await p.ok("add_context", s.add_context("extra", "Extra"))
    await p.ok("remove_context", s.remove_context("extra"))
    tools = await s.tools()
    for label in ("kb", "notes", "skills"):
        await p.ok(
            "tools",
            tools.execute(
                "set_context",
                {"label": label, "content": f"alpha {label} doc", "metadata": {"title": "doc"}},
            ),
        )
    loaded = await p.ok("tools", tools.execute("load_context", {"label": "skills", "key": "doc"}))
    assert loaded == "alpha skills doc"
    await p.ok("tools", tools.execute("unload_context", {"label": "skills", "key": "doc"}))
    await p.ok("refresh_system_prompt", s.refresh_system_prompt())
    await p.ok("clear_messages", a.session("s2").clear_messages())
    await p.ok("add_usage", a.add_usage("s1", 1, 1, 0.0))
    await p.ok("rename", a.rename("s1", "alpha chat"))
    forked = await p.ok("fork", a.fork("s1", "m4", "alpha fork"))
    split = await p.ok("compact_and_split", a.compact_and_split("s1", "alpha summary"))
    created = await p.ok("create", a.create("alpha new"))
    await p.ok("session", a.session(created.id))
    # everything A reads now is A's
    for sid in ("s1", forked.id, split.id):
        await p.ok("get_history", a.session(sid).get_history())
    assert {i.id for i in await p.ok("list", a.list())} == {
        "s1",
        "s2",
        forked.id,
        split.id,
        created.id,
    }
    assert await p.ok("count", a.count()) == 5
    assert {r.session_id for r in await p.ok("search", a.search("alpha"))} <= {
        "s1",
        forked.id,
        split.id,
    }
    for label in ("kb", "notes"):
        found = await p.ok(
            "tools", tools.execute("search_context", {"label": label, "query": "doc"})
        )
        assert "alpha" in found
    assert await p.ok("delete", a.delete("s1")) is True
    assert await p.ok("delete", a.delete("s2")) is True
    deleted = await p.ok("delete_namespace", a.delete_namespace())
    assert deleted["sessions"] == 3  # the fork, the split and the created session
    assert await a.list() == [] and await a.search("alpha") == []

    # ---- B is exactly as it was -----------------------------------------------------------
    assert await snapshot_b(store) == before
    b = SessionManager(store, namespace="B")
    assert len(await b.search(MARK, limit=100)) >= 12
    assert p.called >= EXERCISED


SESSION_BUILDERS = {
    "create",
    "with_context",
    "with_cached_prompt",
    "on_compaction",
    "compact_after",
    "on_compaction_error",
    "on_status",  # in-process callbacks, no I/O of their own (the feed is tested per namespace)
    "with_searchable_history",
    "with_blob_store",
    "with_media_eviction",
}
EXERCISED = {
    # SessionManager
    "get",
    "list",
    "count",
    "search",
    "session_names",
    "tools",
    "append",
    "append_all",
    "fork",
    "compact_and_split",
    "rename",
    "delete",
    "add_usage",
    "session",
    "delete_namespace",
    "upsert",
    # Session
    "append_message",
    "get_history",
    "get_message",
    "get_node",
    "get_latest_leaf",
    "get_branches",
    "get_path_length",
    "get_recent_history",
    "update_message",
    "delete_messages",
    "clear_messages",
    "get_context_block",
    "get_context_blocks",
    "get_context_provider",
    "replace_context_block",
    "append_context_block",
    "add_context",
    "remove_context",
    "render_system_prompt",
    "freeze_system_prompt",
    "refresh_system_prompt",
    "get_loaded_skills",
    "loaded_skills",
    "unload_skill",
    "get_compactions",
    "add_compaction",
    "expand_compaction",
    "revert_compaction",
    "compact",
    "wait_compaction",
    "count_message_tokens",
    "evict_media",
}


def test_every_public_method_is_exercised_through_namespace_a() -> None:
    public = {
        name
        for cls in (Session, SessionManager)
        for name, value in inspect.getmembers(cls)
        if not name.startswith("_") and callable(value)
    }
    missing = public - EXERCISED - SESSION_BUILDERS
    assert not missing, (
        f"new public methods {sorted(missing)}: call them through namespace A in "
        "tests/contract/test_isolation.py and add them to EXERCISED"
    )
