"""Contract: set_context append on keyed blocks (13.3), default size caps (13.11), max_tokens
on keyed writes (14.7) and hostile skill front matter through the tool (13.9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindstore.context.frontmatter import MAX_DESCRIPTION_CHARS
from mindstore.context.providers import (
    DEFAULT_ENTRY_MAX_TOKENS,
    FileSkillProvider,
    StoreSearchProvider,
    StoreSkillProvider,
)
from mindstore.context.session_context import DEFAULT_BLOCK_MAX_TOKENS
from mindstore.errors import TokenBudgetError
from mindstore.session import Session
from mindstore.store.base import ScopeKey, Store
from mindstore.store.sqlite import SQLiteStore

FIFTY_MB = "x" * (50 * 1024 * 1024)


def session(store: Store) -> Session:
    return (
        Session.create(store, "s", namespace="ns")
        .with_context("memory")
        .with_context("shared", scope="namespace")
        .with_context("kb", provider=StoreSearchProvider(store))
        .with_context("skills", provider=StoreSkillProvider(store))
    )


async def entry(store: Store, label: str, key: str) -> tuple[str, str | None] | None:
    e = await store.get_entry(ScopeKey(namespace="ns", session_id=None, label=label), key)
    return None if e is None else (e.content, e.description)


# ---- 13.3: append on keyed blocks appends ----------------------------------------------------


@pytest.mark.parametrize("label", ["kb", "skills"])
async def test_append_to_a_keyed_entry_appends(store: Store, label: str) -> None:
    s = session(store)
    tools = await s.tools()
    meta = {"title": "Deploy notes", "description": "How we deploy"}
    first = await tools.execute(
        "set_context", {"label": label, "content": "Step one.", "metadata": meta}
    )
    assert first == f'Indexed "deploy-notes" in {label}.'
    out = await tools.execute(
        "set_context",
        {
            "label": label,
            "content": "Step two.",
            "action": "append",
            "metadata": {"title": "Deploy notes"},
        },
    )
    assert out == f'Appended to "deploy-notes" in {label}.'
    assert await entry(store, label, "deploy-notes") == ("Step one.\nStep two.", "How we deploy")
    # replace still replaces; append to a new title creates the entry
    await tools.execute(
        "set_context", {"label": label, "content": "Only.", "metadata": {"title": "Deploy notes"}}
    )
    assert (await entry(store, label, "deploy-notes"))[0] == "Only."  # type: ignore[index]
    created = await tools.execute(
        "set_context",
        {"label": label, "content": "New.", "action": "append", "metadata": {"title": "Fresh"}},
    )
    assert created == f'Appended to "fresh" in {label}.'
    assert (await entry(store, label, "fresh"))[0] == "New."  # type: ignore[index]


async def test_append_to_a_provider_that_cannot_read_is_refused(store: Store) -> None:
    written: dict[str, str] = {}

    class WriteOnlyIndex:
        def get(self) -> str:
            return f"{len(written)} entries"

        def search(self, query: str) -> str | None:
            return None

        def set(self, key: str, content: str) -> None:
            written[key] = content

    s = Session.create(store, "s", namespace="ns").with_context("ix", provider=WriteOnlyIndex())
    tools = await s.tools()
    await tools.execute("set_context", {"label": "ix", "content": "a", "metadata": {"title": "t"}})
    out = await tools.execute(
        "set_context",
        {"label": "ix", "content": "b", "action": "append", "metadata": {"title": "t"}},
    )
    assert out.startswith('Error: block "ix" cannot append to an entry')
    assert written == {"t": "a"}
    bad = await tools.execute(
        "set_context", {"label": "ix", "content": "b", "action": "merge", "metadata": {}}
    )
    assert bad.startswith("Error: ") and "action" in bad
    assert written == {"t": "a"}


async def test_append_to_a_file_skill_keeps_its_description(store: Store, tmp_path: Path) -> None:
    p = FileSkillProvider(tmp_path)
    await p.set("runbook", "Restart the pod.", description="On-call runbook")
    s = Session.create(store, "s", namespace="ns").with_context("skills", provider=p)
    tools = await s.tools()
    out = await tools.execute(
        "set_context",
        {
            "label": "skills",
            "content": "Then check logs.",
            "action": "append",
            "metadata": {"title": "runbook"},
        },
    )
    assert out == 'Appended to "runbook" in skills.'
    assert await p.read_entry("runbook") == (
        "Restart the pod.\nThen check logs.",
        "On-call runbook",
    )


# ---- 13.11: default caps for blocks and entries without max_tokens ---------------------------


async def test_fifty_megabytes_are_refused_everywhere(store: Store) -> None:
    s = session(store)
    tools = await s.tools()
    for label in ("memory", "shared"):
        out = await tools.execute("set_context", {"label": label, "content": FIFTY_MB})
        assert out.startswith(f'Error: Block "{label}" exceeds the default cap of 32000 tokens')
        assert "Nothing was written" in out
        out = await tools.execute(
            "set_context", {"label": label, "content": FIFTY_MB, "action": "append"}
        )
        assert out.startswith("Error: ")
        with pytest.raises(TokenBudgetError, match="default cap"):
            await s.replace_context_block(label, FIFTY_MB)
        block = await s.get_context_block(label)
        assert block is not None and block.content == ""
    for label in ("kb", "skills"):
        out = await tools.execute(
            "set_context", {"label": label, "content": FIFTY_MB, "metadata": {"title": "big"}}
        )
        assert out.startswith(f'Error: Entry for "{label}" exceeds the default cap of 100000')
        assert await entry(store, label, "big") is None
        provider = await s.get_context_provider(label)
        with pytest.raises(TokenBudgetError, match="max_entry_tokens"):
            await provider.set("big", FIFTY_MB)
        assert await entry(store, label, "big") is None


async def test_caps_allow_what_fits_and_max_tokens_overrides(store: Store) -> None:
    s = session(store).with_context("big", max_tokens=200_000)
    near = "word " * int(DEFAULT_BLOCK_MAX_TOKENS / 1.3 - 10)
    written = await s.replace_context_block("memory", near)
    assert written.tokens <= DEFAULT_BLOCK_MAX_TOKENS
    assert (await s.replace_context_block("big", "y" * 400_000)).tokens == 100_000
    # an append whose result crosses the cap is refused and changes nothing
    with pytest.raises(TokenBudgetError):
        await s.append_context_block("memory", "z" * 200_000)
    assert (await s.get_context_block("memory")).content == near  # type: ignore[union-attr]
    unlimited = StoreSearchProvider(store, max_entry_tokens=None).bind(
        namespace="ns", session_id=None, label="free"
    )
    await unlimited.set("k", "q" * (4 * DEFAULT_ENTRY_MAX_TOKENS + 4))
    with pytest.raises(ValueError, match="max_entry_tokens"):
        StoreSkillProvider(store, max_entry_tokens=0)


# ---- 14.7: max_tokens applies to keyed writes -----------------------------------------------


async def test_max_tokens_is_enforced_for_keyed_writes(store: Store) -> None:
    s = (
        Session.create(store, "s", namespace="ns")
        .with_context("kb", max_tokens=10, provider=StoreSearchProvider(store))
        .with_context("skills", max_tokens=10, provider=StoreSkillProvider(store))
    )
    tools = await s.tools()
    for label in ("kb", "skills"):
        ok = await tools.execute(
            "set_context", {"label": label, "content": "short fact", "metadata": {"title": "a"}}
        )
        assert ok == f'Indexed "a" in {label}.'
        long = " ".join(["word"] * 50)
        out = await tools.execute(
            "set_context", {"label": label, "content": long, "metadata": {"title": "b"}}
        )
        assert out.startswith(f'Error: Entry for block "{label}" exceeds maxTokens: 65 > 10')
        assert await entry(store, label, "b") is None
        out = await tools.execute(
            "set_context",
            {"label": label, "content": long, "action": "append", "metadata": {"title": "a"}},
        )
        assert out.startswith("Error: ") and "maxTokens" in out
        assert (await entry(store, label, "a"))[0] == "short fact"  # type: ignore[index]


# ---- 13.9: a hostile front matter written by the model ---------------------------------------


async def test_set_context_with_an_alias_bomb_stores_no_giant_description(store: Store) -> None:
    from hostile_yaml import ALIAS_BOMB

    s = session(store)
    tools = await s.tools()
    out = await tools.execute(
        "set_context", {"label": "skills", "content": ALIAS_BOMB, "metadata": {"title": "bomb"}}
    )
    assert out == 'Indexed "bomb" in skills.'
    content, description = await entry(store, "skills", "bomb")  # type: ignore[misc]
    assert description is None and content == "boom"
    long = "---\ndescription: " + "d" * 10_000 + "\n---\nbody"
    await tools.execute(
        "set_context", {"label": "skills", "content": long, "metadata": {"title": "long"}}
    )
    _, description = await entry(store, "skills", "long")  # type: ignore[misc]
    assert description is not None and len(description) == MAX_DESCRIPTION_CHARS
    prompt = await s.render_system_prompt()
    assert len(prompt) < 2 * MAX_DESCRIPTION_CHARS + 500


# ---- 14.7: a provider given as a plain dict of callables --------------------------------------


async def test_dict_providers_work(store: Store) -> None:
    box = {"text": ""}

    async def save(content: str) -> None:
        box["text"] = content

    s = (
        Session.create(store, "s", namespace="ns")
        .with_context("soul", provider={"get": lambda: "You are terse."})
        .with_context("notes", max_tokens=50, provider={"get": lambda: box["text"], "set": save})
        .with_context("docs", provider={"get": lambda: "- a", "load": lambda key: f"doc {key}"})
    )
    kinds = {b.label: b.kind for b in await s.get_context_blocks()}
    assert kinds == {"soul": "readonly", "notes": "writable", "docs": "loadable"}
    tools = await s.tools()
    assert await tools.execute("set_context", {"label": "notes", "content": "hi"}) == (
        "Written to notes. Usage: 4% (2/50 tokens)"
    )
    assert box["text"] == "hi"
    assert await tools.execute("load_context", {"label": "docs", "key": "a"}) == "doc a"
    assert "You are terse." in await s.freeze_system_prompt()


@pytest.mark.parametrize(
    ("provider", "message"),
    [
        ({"text": "hello"}, "may only have the methods get, set, search, load, init"),
        ({"get": "hello"}, "needs functions as values; get is not callable"),
        ({"set": lambda c: None}, "needs a 'get' function"),
    ],
)
def test_bad_dict_providers_say_what_to_pass(provider: dict[str, object], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        Session.create(SQLiteStore(":memory:"), "s").with_context("x", provider=provider)
