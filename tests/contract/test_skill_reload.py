"""Contract: load → unload → load of one skill. The first load's result stays hidden after the
reload (the unload mark is kept); the second load's result shows; a later unload hides both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mindstore.context.providers import FileSkillProvider
from mindstore.session import Session
from mindstore.store.base import SessionKey, Store

DOC = "GET /status → green"


def skill_session(store: Store, tmp_path: Path) -> Session:
    skills = tmp_path / "skills"
    (skills / "api-ref").mkdir(parents=True, exist_ok=True)
    (skills / "api-ref" / "SKILL.md").write_text(
        f"---\nname: api-ref\ndescription: API reference\n---\n{DOC}\n", "utf-8"
    )
    return Session.create(store, "reload").with_context(
        "skills", provider=FileSkillProvider(skills)
    )


def result(mid: str, call: str, output: str) -> dict[str, Any]:
    return {
        "id": mid,
        "role": "assistant",
        "parts": [
            {
                "type": "tool-load_context",
                "toolCallId": call,
                "state": "output-available",
                "input": {"label": "skills", "key": "api-ref"},
                "output": output,
            }
        ],
    }


def outputs(history: list[dict[str, Any]]) -> dict[str, Any]:
    return {m["id"]: m["parts"][0].get("output") for m in history if m["id"].startswith("r")}


async def test_load_unload_load_shows_only_the_second_result(store: Store, tmp_path: Path) -> None:
    s = skill_session(store, tmp_path)
    tools = await s.tools()
    args = {"label": "skills", "key": "api-ref"}
    hidden = "[skill unloaded: api-ref]"

    await s.append_message({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "?"}]})
    assert await tools.execute("load_context", args) == DOC
    await s.append_message(result("r1", "c1", DOC))
    await tools.execute("unload_context", args)
    assert outputs(await s.get_history()) == {"r1": hidden}

    assert await tools.execute("load_context", args) == DOC
    await s.append_message(result("r2", "c2", DOC))
    assert await s.get_loaded_skills() == [("skills", "api-ref")]
    assert outputs(await s.get_history()) == {"r1": hidden, "r2": DOC}
    # the same through a fresh Session object (another process sees the stored state)
    again = skill_session(store, tmp_path)
    assert outputs(await again.get_history()) == {"r1": hidden, "r2": DOC}
    recent = await again.get_recent_history(max_tokens=100_000)
    assert outputs(recent.messages) == {"r1": hidden, "r2": DOC}
    assert await s.get_message("r1") == result("r1", "c1", DOC)  # stored result untouched

    # a second unload covers both results
    await tools.execute("unload_context", args)
    assert outputs(await s.get_history()) == {"r1": hidden, "r2": hidden}


async def test_store_keeps_the_mark_on_reload(store: Store) -> None:
    key = SessionKey(namespace="default", session_id="marks")
    s = Session.create(store, "marks")
    await s.append_message({"id": "m1", "role": "user", "parts": []})
    assert await store.set_skill_loaded(key, "skills", "k", True) is True
    await s.append_message({"id": "m2", "role": "user", "parts": []})
    assert await store.set_skill_loaded(key, "skills", "k", False) is True
    [state] = await store.get_skill_states(key)
    first_mark = state.unloaded_before_seq
    assert state.loaded is False and first_mark == (await s.get_node("m2")).seq  # type: ignore[union-attr]

    assert await store.set_skill_loaded(key, "skills", "k", True) is True
    assert await store.set_skill_loaded(key, "skills", "k", True) is False  # already loaded
    [state] = await store.get_skill_states(key)
    assert state.loaded is True and state.unloaded_before_seq == first_mark

    await s.append_message({"id": "m3", "role": "user", "parts": []})
    assert await store.set_skill_loaded(key, "skills", "k", False) is True
    [state] = await store.get_skill_states(key)
    assert state.loaded is False
    assert state.unloaded_before_seq == (await s.get_node("m3")).seq  # type: ignore[union-attr]
