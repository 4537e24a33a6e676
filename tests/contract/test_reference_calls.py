"""Contract: the reference's remaining calls (DESIGN §14) on every backend —
``SessionManager.upsert`` (update-or-append), ``Session.unload_skill`` / ``loaded_skills`` and
``with_cached_prompt(provider)`` (the frozen prompt kept in a provider of the user's choosing).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from backends import Reopen
from mindstore import (
    BlockNotFoundError,
    InvalidMessageError,
    MessageNotFoundError,
    Session,
    StaticProvider,
)
from mindstore.context.providers import FileSkillProvider, StoreBlockProvider
from mindstore.context.session_context import PROMPT_LABEL
from mindstore.manager import SessionManager
from mindstore.store.base import ScopeKey, Store


def msg(mid: str | None, text: str, role: str = "assistant") -> dict[str, Any]:
    out: dict[str, Any] = {"role": role, "parts": [{"type": "text", "text": text}]}
    if mid is not None:
        out = {"id": mid, **out}
    return out


# ---- upsert ----------------------------------------------------------------------------------


async def test_upsert_appends_then_updates_in_place(store: Store) -> None:
    m = SessionManager(store, namespace="ns")
    s = m.session("chat")
    await m.append("chat", msg("u1", "hello", "user"))
    assert await m.upsert("chat", msg("a1", "Che")) == "a1"
    before = await s.get_node("a1")
    assert before is not None and before.parent_id == "u1"
    for text in ("Check", "Checking the deploy", "Checking the deploy… green"):
        assert await m.upsert("chat", msg("a1", text)) == "a1"
    history = await s.get_history()
    assert [h["id"] for h in history] == ["u1", "a1"]
    assert history[-1]["parts"][0]["text"] == "Checking the deploy… green"
    after = await s.get_node("a1")
    assert after is not None and (after.parent_id, after.seq) == ("u1", before.seq)
    # the search index follows the updates: the last content is found, the first is not
    assert [r.message_id for r in await s.search("green")] == ["a1"]
    assert await s.search("Che", match="all") == []


async def test_upsert_generates_an_id_and_respects_parent_id(store: Store) -> None:
    m = SessionManager(store, namespace="ns")
    await m.append("chat", msg("u1", "one", "user"))
    await m.append("chat", msg("a1", "two"))
    generated = await m.upsert("chat", msg(None, "a branch"), parent_id="u1")
    node = await m.session("chat").get_node(generated)
    assert node is not None and node.parent_id == "u1"
    # an update never moves the message, whatever parent_id says
    await m.upsert("chat", msg(generated, "edited"), parent_id=None)
    node = await m.session("chat").get_node(generated)
    assert node is not None and node.parent_id == "u1"
    assert node.message["parts"][0]["text"] == "edited"


async def test_upsert_touches_updated_at(store: Store) -> None:
    m = SessionManager(store, namespace="ns")
    await m.upsert("a", msg("x", "first"))
    await m.upsert("b", msg("y", "first"))
    assert [i.id for i in await m.list()] == ["b", "a"]
    await asyncio.sleep(0.002)
    await m.upsert("a", msg("x", "second"))  # an update, not an append
    assert [i.id for i in await m.list()] == ["a", "b"]
    info = await m.get("a")
    assert info is not None and info.message_count == 1


async def test_upsert_refuses_bad_input_and_writes_nothing(store: Store) -> None:
    m = SessionManager(store, namespace="ns")
    await m.append("chat", msg("a1", "kept"))
    with pytest.raises(InvalidMessageError):
        await m.upsert("chat", {"id": "a1", "role": "robot", "parts": []})
    with pytest.raises(InvalidMessageError):
        await m.upsert("chat", "not a message")  # type: ignore[arg-type]
    with pytest.raises(MessageNotFoundError):
        await m.upsert("chat", msg("a2", "orphan"), parent_id="missing")
    history = await m.session("chat").get_history()
    assert [(h["id"], h["parts"][0]["text"]) for h in history] == [("a1", "kept")]


async def test_concurrent_upserts_of_one_new_id_leave_one_message(store: Store) -> None:
    m = SessionManager(store, namespace="ns")
    await m.append("chat", msg("u1", "go", "user"))
    texts = [f"chunk {i}" for i in range(8)]
    await asyncio.gather(*(m.upsert("chat", msg("a1", t)) for t in texts))
    history = await m.session("chat").get_history()
    assert [h["id"] for h in history] == ["u1", "a1"]
    assert history[-1]["parts"][0]["text"] in texts
    info = await m.get("chat")
    assert info is not None and info.message_count == 2


async def test_upsert_from_two_workers(store: Store, reopen: Reopen) -> None:
    """Another process's store object sees the upserted content at once."""
    other = SessionManager(await reopen(), namespace="ns")
    m = SessionManager(store, namespace="ns")
    await m.upsert("chat", msg("a1", "from worker one"))
    await other.upsert("chat", msg("a1", "from worker two"))
    got = await m.session("chat").get_message("a1")
    assert got is not None and got["parts"][0]["text"] == "from worker two"


# ---- unload_skill / loaded_skills -------------------------------------------------------------


def skill_session(store: Store, tmp_path: Path, session_id: str = "s") -> Session:
    root = tmp_path / "skills"
    for key in ("api-ref", "runbook"):
        (root / key).mkdir(parents=True, exist_ok=True)
        (root / key / "SKILL.md").write_text(
            f"---\nname: {key}\ndescription: {key} doc\n---\nbody of {key}\n", "utf-8"
        )
    return (
        Session.create(store, session_id)
        .with_context("skills", provider=FileSkillProvider(root))
        .with_context("memory")
    )


def load_result(mid: str, key: str) -> dict[str, Any]:
    return {
        "id": mid,
        "role": "assistant",
        "parts": [
            {
                "type": "tool-load_context",
                "toolCallId": f"c-{mid}",
                "state": "output-available",
                "input": {"label": "skills", "key": key},
                "output": f"body of {key}",
            }
        ],
    }


async def test_unload_skill_reclaims_and_reports(store: Store, tmp_path: Path) -> None:
    s = skill_session(store, tmp_path)
    tools = await s.tools()
    await s.append_message(msg("u1", "read the docs", "user"))
    for i, key in enumerate(("api-ref", "runbook")):
        assert await tools.execute("load_context", {"label": "skills", "key": key}) == (
            f"body of {key}"
        )
        await s.append_message(load_result(f"r{i}", key))
    assert sorted(await s.loaded_skills()) == [("skills", "api-ref"), ("skills", "runbook")]

    assert await s.unload_skill("skills", "api-ref") is True
    assert await s.loaded_skills() == [("skills", "runbook")]
    outputs = {m["id"]: m["parts"][0].get("output") for m in await s.get_history()}
    assert outputs["r0"] == "[skill unloaded: api-ref]"
    assert outputs["r1"] == "body of runbook"
    stored = await s.get_message("r0")  # non-destructive
    assert stored is not None and stored["parts"][0]["output"] == "body of api-ref"

    assert await s.unload_skill("skills", "api-ref") is False  # not loaded any more
    assert await s.unload_skill("skills", "never-loaded") is False
    # the tool agrees with the method
    reply = await tools.execute("unload_context", {"label": "skills", "key": "api-ref"})
    assert reply == 'Skill "api-ref" is not currently loaded in "skills".'


async def test_loaded_skills_survive_a_restart(
    store: Store, reopen: Reopen, tmp_path: Path
) -> None:
    s = skill_session(store, tmp_path)
    await (await s.tools()).execute("load_context", {"label": "skills", "key": "runbook"})
    later = skill_session(await reopen(), tmp_path)
    assert await later.loaded_skills() == [("skills", "runbook")]
    assert await later.unload_skill("skills", "runbook") is True
    assert await s.loaded_skills() == []


async def test_unload_skill_bad_input_changes_nothing(store: Store, tmp_path: Path) -> None:
    s = skill_session(store, tmp_path)
    await (await s.tools()).execute("load_context", {"label": "skills", "key": "runbook"})
    with pytest.raises(BlockNotFoundError):
        await s.unload_skill("nope", "runbook")
    with pytest.raises(BlockNotFoundError):
        await s.unload_skill("memory", "runbook")  # writable, not a skill block
    with pytest.raises(TypeError):
        await s.unload_skill("skills", 3)  # type: ignore[arg-type]
    assert await s.loaded_skills() == [("skills", "runbook")]


# ---- with_cached_prompt(provider) -------------------------------------------------------------


class Box:
    """A user's prompt store: a plain writable provider that counts its calls."""

    def __init__(self, text: str | None = None) -> None:
        self.text = text
        self.gets = 0
        self.sets: list[str] = []

    async def get(self) -> str | None:
        self.gets += 1
        return self.text

    def set(self, content: str) -> None:  # sync on purpose: both kinds work
        self.sets.append(content)
        self.text = content


class Counting:
    def __init__(self, text: str) -> None:
        self.text = text
        self.calls = 0

    def get(self) -> str:
        self.calls += 1
        return self.text


async def test_prompt_provider_keeps_the_frozen_prompt(store: Store) -> None:
    box = Box()
    soul = Counting("You are terse.")
    s = Session.create(store, "p").with_context("soul", provider=soul).with_cached_prompt(box)
    prompt = await s.freeze_system_prompt()
    assert "You are terse." in prompt and box.sets == [prompt]
    assert await store.get_prompt(s.key) is None  # kept in the provider, not the store

    # a new process: the provider answers, no block provider is called
    soul2 = Counting("You are verbose now.")
    s2 = Session.create(store, "p").with_context("soul", provider=soul2).with_cached_prompt(box)
    assert await s2.freeze_system_prompt() == prompt
    assert soul2.calls == 0 and len(box.sets) == 1

    # refresh renders and writes the new prompt to the provider
    refreshed = await s2.refresh_system_prompt()
    assert "You are verbose now." in refreshed and box.sets[-1] == refreshed
    s3 = Session.create(store, "p").with_context("soul", provider=soul).with_cached_prompt(box)
    assert await s3.freeze_system_prompt() == refreshed


async def test_prompt_provider_with_text_already_wins(store: Store) -> None:
    box = Box("PRESET PROMPT")
    s = Session.create(store, "p").with_context("soul", provider=StaticProvider("x"))
    assert await s.with_cached_prompt(box).freeze_system_prompt() == "PRESET PROMPT"
    assert box.sets == []


async def test_store_backed_prompt_provider_shared_by_a_namespace(
    store: Store, reopen: Reopen
) -> None:
    """``StoreBlockProvider(scope="namespace")``: one prompt for every session of the namespace,
    kept under the label ``_system_prompt``; sessions of another namespace do not see it."""
    shared = StoreBlockProvider(store, scope="namespace")
    m = (
        SessionManager(store, namespace="team")
        .with_context("soul", provider=Counting("Team rules v1"))
        .with_cached_prompt(shared)
    )
    first = await m.session("a").freeze_system_prompt()
    assert "Team rules v1" in first
    stored = await store.get_block(ScopeKey(namespace="team", session_id=None, label=PROMPT_LABEL))
    assert stored == first

    other = await reopen()
    m2 = (
        SessionManager(other, namespace="team")
        .with_context("soul", provider=Counting("Team rules v2"))
        .with_cached_prompt(StoreBlockProvider(other, scope="namespace"))
    )
    assert await m2.session("b").freeze_system_prompt() == first
    elsewhere = (
        Session.create(other, "b", namespace="other")
        .with_context("soul", provider=Counting("Team rules v2"))
        .with_cached_prompt(StoreBlockProvider(other, scope="namespace"))
    )
    assert "Team rules v2" in await elsewhere.freeze_system_prompt()


async def test_store_backed_prompt_provider_per_session(store: Store) -> None:
    per_session = StoreBlockProvider(store)
    m = SessionManager(store).with_context("memory").with_cached_prompt(per_session)
    a, b = m.session("a"), m.session("b")
    await a.replace_context_block("memory", "A's fact")
    await b.replace_context_block("memory", "B's fact")
    pa, pb = await a.freeze_system_prompt(), await b.freeze_system_prompt()
    assert "A's fact" in pa and "B's fact" in pb
    key_a = ScopeKey(namespace="default", session_id="a", label=PROMPT_LABEL)
    assert await store.get_block(key_a) == pa


async def test_with_cached_prompt_refuses_a_non_provider(store: Store) -> None:
    s = Session.create(store, "p")
    for bad in (None, "yes", object(), StaticProvider("read-only")):
        with pytest.raises(TypeError):
            s.with_cached_prompt(bad)
    with pytest.raises(TypeError):
        SessionManager(store).with_cached_prompt(42)
    # the builder still works after a refused call; False turns persistence off
    s.with_cached_prompt(True).with_cached_prompt(False)
    await s.freeze_system_prompt()
    assert await store.get_prompt(s.key) is None


async def test_concurrent_first_freezes_with_a_provider_agree(store: Store) -> None:
    box = Box()
    s = Session.create(store, "p").with_context("memory").with_cached_prompt(box)
    prompts = await asyncio.gather(*(s.freeze_system_prompt() for _ in range(5)))
    assert len(set(prompts)) == 1 and len(box.sets) == 1
