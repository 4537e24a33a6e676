"""Contract: the generated memory tools and loaded skills on every backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from backends import Reopen
from mindstore.context.providers import (
    FileSkillProvider,
    StaticProvider,
    StoreSearchProvider,
    StoreSkillProvider,
)
from mindstore.context.tooling import entry_key, slug
from mindstore.errors import InvalidKeyError
from mindstore.session import Session
from mindstore.store.base import Store

HOSTILE = [
    "",
    "   ",
    '"',
    '"unterminated phrase',
    "*",
    "**",
    "a*b*",
    "NEAR(a b)",
    "a OR b AND NOT c",
    "-a",
    "+b",
    "(",
    ")",
    "col:value",
    "knowledge:deploy",
    "'; DROP TABLE entries; --",
    "%_%",
    "\\",
    "\x00",
    "😀 emoji",
    "日本語",
    "^start",
    "a & b | !c",
    "{near}",
    "deploy" * 200,
]


class Tok:
    def count(self, text: str) -> int:
        return {"User prefers dark mode.": 495}.get(text, len(text.split()))


def write_skill(root: Path, key: str, description: str, body: str) -> None:
    path = root / f"{key}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {key}\ndescription: {description}\n---\n{body}\n", "utf-8")


def configured(store: Store, tmp_path: Path, session_id: str = "s") -> Session:
    skills = tmp_path / "skills"
    write_skill(skills, "api-ref", "API Reference documentation", "GET /status → green")
    write_skill(skills, "deploy", "Deploying", "Run make deploy.")
    return (
        Session.create(store, session_id, tokenizer=Tok())
        .with_context("soul", provider=StaticProvider("You are terse."))
        .with_context("memory", description="Important facts", max_tokens=1100)
        .with_context("todos", description="Task list")
        .with_context(
            "knowledge", description="Knowledge base", provider=StoreSearchProvider(store)
        )
        .with_context("skills", provider=FileSkillProvider(skills))
    )


def load_part(key: str, output: str, *, dynamic: bool = False, call: str = "c") -> dict[str, Any]:
    base: dict[str, Any] = {
        "toolCallId": call,
        "state": "output-available",
        "input": {"label": "skills", "key": key},
        "output": output,
    }
    if dynamic:
        return {"type": "dynamic-tool", "toolName": "load_context", **base}
    return {"type": "tool-load_context", **base}


async def test_tools_present_by_block_kind(store: Store, tmp_path: Path) -> None:
    tools = await configured(store, tmp_path).tools()
    assert list(tools) == ["set_context", "load_context", "unload_context", "search_context"]
    set_ctx = tools["set_context"]
    props = set_ctx.parameters["properties"]
    assert props["label"]["enum"] == ["memory", "todos", "knowledge", "skills"]
    assert props["action"]["enum"] == ["replace", "append"]
    assert set(props["metadata"]["properties"]) == {"title", "description"}
    assert set_ctx.parameters["required"] == ["label", "content"]
    assert "- memory (writable, max 1100 tokens): Important facts" in set_ctx.description
    assert "- knowledge (searchable; keyed: give metadata.title)" in set_ctx.description
    assert tools["search_context"].parameters["properties"]["label"]["enum"] == ["knowledge"]
    assert tools["load_context"].parameters["properties"]["label"]["enum"] == ["skills"]
    assert "Currently loaded: none." in tools["unload_context"].description
    # only read-only blocks → no tools; only a writable block → only set_context
    assert (
        len(
            await Session.create(store, "ro")
            .with_context("x", provider=StaticProvider("a"))
            .tools()
        )
        == 0
    )
    assert list(await Session.create(store, "w").with_context("m").tools()) == ["set_context"]


async def test_generated_tools_validate_against_model_sdks(store: Store, tmp_path: Path) -> None:
    from anthropic.types import ToolParam
    from openai.types.chat import ChatCompletionToolParam
    from openai.types.responses import FunctionToolParam

    tools = await configured(store, tmp_path).tools()
    for adapter, data in [
        (TypeAdapter(list[ChatCompletionToolParam]), tools.to_openai()),
        (TypeAdapter(list[FunctionToolParam]), tools.to_openai_responses()),
        (TypeAdapter(list[ToolParam]), tools.to_anthropic()),
    ]:
        assert adapter.validate_python(data, strict=True) == data


async def test_set_context_result_strings(store: Store, tmp_path: Path) -> None:
    s = configured(store, tmp_path)
    tools = await s.tools()
    out = await tools.execute(
        "set_context", {"label": "memory", "content": "User prefers dark mode."}
    )
    assert out == "Written to memory. Usage: 45% (495/1100 tokens)"
    out = await tools.execute(
        "set_context", '{"label": "todos", "content": "ship v1", "action": "append"}'
    )
    assert out == "Written to todos. Usage: 2 tokens"
    out = await tools.execute(
        "set_context", {"label": "todos", "content": "write docs", "action": "append"}
    )
    assert out == "Written to todos. Usage: 4 tokens"
    assert (await s.get_context_block("todos")).content == "ship v1\nwrite docs"  # type: ignore[union-attr]
    # a frozen prompt is not changed by tool writes
    frozen = await s.freeze_system_prompt()
    await tools.execute("set_context", {"label": "memory", "content": "Something else."})
    assert await s.freeze_system_prompt() == frozen


async def test_set_context_over_budget_is_an_error_string(store: Store, tmp_path: Path) -> None:
    s = configured(store, tmp_path)
    tools = await s.tools()
    await s.replace_context_block("memory", "keep me")
    out = await tools.execute("set_context", {"label": "memory", "content": "word " * 1101})
    assert out.startswith('Error: Block "memory" exceeds maxTokens: 1101 > 1100.')
    assert (await s.get_context_block("memory")).content == "keep me"  # type: ignore[union-attr]


async def test_keyed_entries_get_stable_keys(store: Store, tmp_path: Path) -> None:
    s = configured(store, tmp_path)
    tools = await s.tools()
    args = {
        "label": "knowledge",
        "content": "Deploys go through CI.",
        "metadata": {"title": "Deploy Guide!"},
    }
    assert await tools.execute("set_context", args) == 'Indexed "deploy-guide" in knowledge.'
    args["content"] = "Deploys go through CI and a manual approval."
    assert await tools.execute("set_context", args) == 'Indexed "deploy-guide" in knowledge.'
    kb = await s.get_context_provider("knowledge")
    assert [e.key for e in await kb.entries()] == ["deploy-guide"]
    assert (await kb.entries())[0].content.endswith("manual approval.")
    untitled = await tools.execute("set_context", {"label": "knowledge", "content": "Loose note"})
    expected = entry_key(None, "Loose note")
    assert untitled == f'Indexed "{expected}" in knowledge.'
    assert expected.startswith("loose-note-") and len(expected) == len("loose-note-") + 8
    assert slug("  Hello,  World -- Again ") == "hello-world-again"
    assert len(slug("x" * 100)) == 60
    assert entry_key("!!!", "日本語").startswith("entry-")


async def test_search_context_ranked_and_hostile(store: Store, tmp_path: Path) -> None:
    s = configured(store, tmp_path)
    tools = await s.tools()
    kb = await s.get_context_provider("knowledge")
    await kb.set("deploy-guide", "How deploying to production works: CI then approval.")
    await kb.set("cooking", "How to make pasta.")
    out = await tools.execute("search_context", {"label": "knowledge", "query": "deployed"})
    assert out.startswith("[1] deploy-guide\n") and "pasta" not in out
    assert await tools.execute("search_context", {"label": "knowledge", "query": "deploy*"}) == out
    assert (
        await tools.execute("search_context", {"label": "knowledge", "query": "nothing-here"})
        == "No results found."
    )
    tool = tools["search_context"]
    for query in HOSTILE:
        for result in (
            await tools.execute("search_context", {"label": "knowledge", "query": query}),
            await tool.execute({"label": "knowledge", "query": query}),
        ):
            assert isinstance(result, str)
            assert result == "No results found." or result.startswith("[1] "), (query, result)


async def test_tool_errors_never_raise(store: Store, tmp_path: Path) -> None:
    tools = await configured(store, tmp_path).tools()
    cases = [
        ("set_context", {"label": "soul", "content": "x"}),
        ("set_context", {"label": "memory"}),
        ("set_context", {"label": "memory", "content": "x", "action": "delete"}),
        ("set_context", {"label": "knowledge", "content": "x", "metadata": "no"}),
        ("set_context", "{broken"),
        ("load_context", {"label": "memory", "key": "x"}),
        ("unload_context", {"label": "skills"}),
        ("search_context", {"label": "skills", "query": "x"}),
        ("no_such_tool", {}),
    ]
    for name, args in cases:
        out = await tools.execute(name, args)
        assert out.startswith("Error: "), (name, args, out)
    # direct calls of a tool's execute bypass ToolSet validation and still never raise
    assert (await tools["set_context"].execute({"label": "gone", "content": "x"})).startswith(
        "Error: no context block"
    )


async def test_load_unload_load(store: Store, tmp_path: Path) -> None:
    s = configured(store, tmp_path)
    tools = await s.tools()
    load = {"label": "skills", "key": "api-ref"}
    assert await tools.execute("load_context", load) == "GET /status → green"
    assert await s.get_loaded_skills() == [("skills", "api-ref")]
    assert "api-ref (from skills)" in (await s.tools())["unload_context"].description
    assert await tools.execute("unload_context", load) == (
        'Unloaded "api-ref" from skills. Context reclaimed.'
    )
    assert await tools.execute("unload_context", load) == (
        'Skill "api-ref" is not currently loaded in "skills".'
    )
    assert await s.get_loaded_skills() == []
    assert await tools.execute("load_context", load) == "GET /status → green"
    assert await s.get_loaded_skills() == [("skills", "api-ref")]
    assert await tools.execute("load_context", {"label": "skills", "key": "missing"}) == (
        "Not found: missing"
    )
    for key in ["../x", "/etc/passwd", "a\\b", "%2e%2e/x"]:
        out = await tools.execute("load_context", {"label": "skills", "key": key})
        assert out == f"Not found: {key}"
    assert await s.get_loaded_skills() == [("skills", "api-ref")]


async def test_unload_is_non_destructive(store: Store, tmp_path: Path) -> None:
    s = configured(store, tmp_path)
    tools = await s.tools()
    doc = await tools.execute("load_context", {"label": "skills", "key": "api-ref"})
    await s.append_message({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
    static = {"id": "a1", "role": "assistant", "parts": [load_part("api-ref", doc)]}
    await s.append_message(static)
    await tools.execute("load_context", {"label": "skills", "key": "deploy"})
    dynamic = {
        "id": "a2",
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "loading"},
            load_part("deploy", "Run make deploy.", dynamic=True, call="c2"),
        ],
    }
    await s.append_message(dynamic)
    await tools.execute("unload_context", {"label": "skills", "key": "api-ref"})

    history = await s.get_history()
    assert history[1]["parts"][0]["output"] == "[skill unloaded: api-ref]"
    assert history[2]["parts"][1]["output"] == "Run make deploy."  # still loaded
    assert await s.get_message("a1") == static  # stored result kept

    await tools.execute("unload_context", {"label": "skills", "key": "deploy"})
    history = await s.get_history()
    assert history[2]["parts"][1]["output"] == "[skill unloaded: deploy]"
    assert history[2]["parts"][0] == {"type": "text", "text": "loading"}
    assert (await s.get_message("a2")) == dynamic

    # reloading: the new result (stored after the unload) is shown
    await tools.execute("load_context", {"label": "skills", "key": "api-ref"})
    await s.append_message(
        {"id": "a3", "role": "assistant", "parts": [load_part("api-ref", doc, call="c3")]}
    )
    history = await s.get_history()
    assert history[3]["parts"][0]["output"] == doc
    # unloading again covers every result stored so far
    await tools.execute("unload_context", {"label": "skills", "key": "api-ref"})
    history = await s.get_history()
    assert [history[i]["parts"][0]["output"] for i in (1, 3)] == ["[skill unloaded: api-ref]"] * 2
    recent = await s.get_recent_history(max_tokens=10_000)
    assert recent.messages[1]["parts"][0]["output"] == "[skill unloaded: api-ref]"


async def test_loaded_skill_listed_after_restart(
    store: Store, reopen: Reopen, tmp_path: Path
) -> None:
    s = configured(store, tmp_path, "chat")
    await (await s.tools()).execute("load_context", {"label": "skills", "key": "deploy"})
    again = await reopen()
    restarted = configured(again, tmp_path, "chat")
    assert await restarted.get_loaded_skills() == [("skills", "deploy")]
    tools = await restarted.tools()
    assert "Currently loaded: deploy (from skills)." in tools["unload_context"].description
    assert await tools.execute("unload_context", {"label": "skills", "key": "deploy"}) == (
        'Unloaded "deploy" from skills. Context reclaimed.'
    )
    other = configured(again, tmp_path, "other-session")
    assert await other.get_loaded_skills() == []


async def test_clear_messages_forgets_loaded_skills(store: Store, tmp_path: Path) -> None:
    s = configured(store, tmp_path)
    await (await s.tools()).execute("load_context", {"label": "skills", "key": "deploy"})
    await s.clear_messages()
    assert await s.get_loaded_skills() == []


async def test_skill_blocks_with_set(store: Store, tmp_path: Path) -> None:
    files = FileSkillProvider(tmp_path / "writable-skills")
    s = (
        Session.create(store)
        .with_context("files", provider=files)
        .with_context("db", description="Stored skills", provider=StoreSkillProvider(store))
    )
    tools = await s.tools()
    assert tools["set_context"].parameters["properties"]["label"]["enum"] == ["files", "db"]
    # keyed blocks take an action too: append adds to the entry with the same title (13.3)
    action = tools["set_context"].parameters["properties"]["action"]
    assert action["enum"] == ["replace", "append"]
    out = await tools.execute(
        "set_context",
        {
            "label": "db",
            "content": "Step 1. Step 2.",
            "metadata": {"title": "Release Checklist", "description": "How to release"},
        },
    )
    assert out == 'Indexed "release-checklist" in db.'
    out = await tools.execute(
        "set_context",
        {
            "label": "files",
            "content": "Use ruff.",
            "metadata": {"title": "Style", "description": "House style"},
        },
    )
    assert out == 'Indexed "style" in files.'
    assert (tmp_path / "writable-skills" / "style.md").is_file()
    blocks = {b.label: b.content for b in await s.get_context_blocks()}
    assert blocks == {"files": "- style: House style", "db": "- release-checklist: How to release"}
    assert await tools.execute("load_context", {"label": "db", "key": "release-checklist"}) == (
        "Step 1. Step 2."
    )
    db = await s.get_context_provider("db")
    for key in ["../x", "/etc/passwd", "a\\b", "%2e%2e/x", ""]:
        with pytest.raises(InvalidKeyError):
            await db.set(key, "x")
        assert await db.load(key) is None
