"""Contract: context blocks, writes, budgets and the frozen system prompt (DESIGN §4.1-4.5)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from backends import Reopen
from mindstore.context.providers import (
    FileSkillProvider,
    StaticProvider,
    StoreSearchProvider,
    StoreSkillProvider,
)
from mindstore.errors import BlockNotFoundError, ReadOnlyBlockError, TokenBudgetError
from mindstore.prompt import ContextBlock
from mindstore.session import Session
from mindstore.store.base import ScopeKey, Store

SEP = "═" * 46


class ScriptedTokenizer:
    """Counts one token per character, except for scripted texts."""

    def __init__(self, fixed: dict[str, int] | None = None) -> None:
        self.fixed = fixed or {}

    def count(self, text: str) -> int:
        return self.fixed.get(text, len(text))


class FailingProvider:
    """A provider that must never be called."""

    def get(self) -> str:
        raise AssertionError("provider was called")


class CountingProvider:
    def __init__(self, text: str = "hello") -> None:
        self.text = text
        self.gets = 0
        self.inits: list[str] = []

    def init(self, label: str) -> None:
        self.inits.append(label)

    async def get(self) -> str:
        self.gets += 1
        return self.text


def key(session: Session, label: str, *, shared: bool = False) -> ScopeKey:
    return ScopeKey(
        namespace=session.namespace, session_id=None if shared else session.session_id, label=label
    )


# ---- writes ------------------------------------------------------------------------------------
async def test_default_block_replace_and_append(store: Store) -> None:
    s = Session.create(store, "s1").with_context("memory", description="Facts", max_tokens=1000)
    block = await s.get_context_block("memory")
    assert block == ContextBlock(
        label="memory", description="Facts", content="", tokens=0, max_tokens=1000, kind="writable"
    )
    await s.append_context_block("memory", "first")  # empty block: no leading newline
    await s.append_context_block("memory", "second")
    await s.append_context_block("memory", "\nthird")  # starts with newline: no extra one
    assert (await s.get_context_block("memory")).content == "first\nsecond\nthird"  # type: ignore[union-attr]
    written = await s.replace_context_block("memory", "replaced")
    assert written.content == "replaced" and written.tokens > 0
    assert await store.get_block(key(s, "memory")) == "replaced"
    assert await s.get_context_block("nope") is None


async def test_over_budget_writes_change_nothing(store: Store) -> None:
    tok = ScriptedTokenizer()
    s = Session.create(store, "s1", tokenizer=tok).with_context("memory", max_tokens=10)
    await s.replace_context_block("memory", "12345")
    with pytest.raises(TokenBudgetError) as info:
        await s.replace_context_block("memory", "x" * 13)
    assert str(info.value) == 'Block "memory" exceeds maxTokens: 13 > 10'
    with pytest.raises(TokenBudgetError) as info:
        await s.append_context_block("memory", "67890")  # "12345\n67890" = 11 > 10
    assert str(info.value) == 'Block "memory" exceeds maxTokens: 11 > 10'
    assert await store.get_block(key(s, "memory")) == "12345"
    await s.append_context_block("memory", "6789")  # exactly 10 is allowed
    assert await store.get_block(key(s, "memory")) == "12345\n6789"


async def test_budget_message_matches_design(store: Store) -> None:
    text = "fact " * 10
    tok = ScriptedTokenizer({text: 1300})
    s = Session.create(store, tokenizer=tok).with_context("memory", max_tokens=1100)
    with pytest.raises(TokenBudgetError, match=r'^Block "memory" exceeds maxTokens: 1300 > 1100$'):
        await s.replace_context_block("memory", text)
    assert await store.get_block(key(s, "memory")) is None


async def test_readonly_unknown_and_keyed_blocks_refuse_text_writes(store: Store) -> None:
    s = (
        Session.create(store)
        .with_context("soul", provider=StaticProvider("You are terse."))
        .with_context("kb", provider=StoreSearchProvider(store))
        .with_context("skills", provider=StoreSkillProvider(store))
    )
    for label in ("soul", "kb", "skills"):
        with pytest.raises(ReadOnlyBlockError):
            await s.replace_context_block(label, "x")
        with pytest.raises(ReadOnlyBlockError):
            await s.append_context_block(label, "x")
    with pytest.raises(BlockNotFoundError, match="soul, kb, skills"):
        await s.replace_context_block("missing", "x")
    with pytest.raises(TypeError):
        await s.replace_context_block("soul", 5)  # type: ignore[arg-type]
    kinds = [b.kind for b in await s.get_context_blocks()]
    assert kinds == ["readonly", "searchable", "loadable"]


async def test_scopes_are_isolated_and_namespace_blocks_shared(store: Store) -> None:
    a = Session.create(store, "a", namespace="n1").with_context("notes")
    b = Session.create(store, "b", namespace="n1").with_context("notes")
    a.with_context("profile", scope="namespace")
    b.with_context("profile", scope="namespace")
    other = Session.create(store, "a", namespace="n2").with_context("profile", scope="namespace")
    await a.replace_context_block("notes", "a's notes")
    await a.replace_context_block("profile", "likes tea")
    assert (await b.get_context_block("notes")).content == ""  # type: ignore[union-attr]
    assert (await b.get_context_block("profile")).content == "likes tea"  # type: ignore[union-attr]
    assert (await other.get_context_block("profile")).content == ""  # type: ignore[union-attr]
    await b.append_context_block("profile", "dislikes coffee")
    assert await store.get_block(key(a, "profile", shared=True)) == "likes tea\ndislikes coffee"


async def test_user_providers_sync_async_init_and_writable(store: Store) -> None:
    class Notes:
        def __init__(self) -> None:
            self.text = "start"

        def get(self) -> str:
            return self.text

        async def set(self, content: str) -> None:
            self.text = content

    counting = CountingProvider("dynamic")
    notes = Notes()
    s = (
        Session.create(store)
        .with_context("dyn", provider=counting)
        .with_context("notes", provider=notes, max_tokens=100)
    )
    blocks = await s.get_context_blocks()
    assert [(b.label, b.kind, b.content) for b in blocks] == [
        ("dyn", "readonly", "dynamic"),
        ("notes", "writable", "start"),
    ]
    await s.append_context_block("notes", "more")
    assert notes.text == "start\nmore"
    await s.get_context_blocks()
    assert counting.inits == ["dyn"]  # init(label) once per session
    with pytest.raises(TypeError, match="get"):
        Session.create(store).with_context("bad", provider=object())


async def test_add_and_remove_context_at_run_time(store: Store) -> None:
    s = Session.create(store).with_context("memory")
    await s.replace_context_block("memory", "kept")
    added = await s.add_context("todos", description="Tasks", max_tokens=50)
    assert added.kind == "writable" and added.max_tokens == 50
    await s.append_context_block("todos", "ship it")
    assert [b.label for b in await s.get_context_blocks()] == ["memory", "todos"]
    await s.remove_context("memory")
    assert await s.get_context_block("memory") is None
    with pytest.raises(BlockNotFoundError):
        await s.replace_context_block("memory", "x")
    with pytest.raises(BlockNotFoundError):
        await s.remove_context("memory")
    await s.add_context("memory")  # stored content comes back
    assert (await s.get_context_block("memory")).content == "kept"  # type: ignore[union-attr]


async def test_shared_provider_instance_is_bound_per_session(store: Store) -> None:
    kb = StoreSearchProvider(store, scope="session")
    a = Session.create(store, "a").with_context("kb", provider=kb)
    b = Session.create(store, "b").with_context("kb", provider=kb)
    await (await a.get_context_provider("kb")).set("only-a", "alpha content")
    assert (await a.get_context_block("kb")).content.startswith("1 entry indexed.")  # type: ignore[union-attr]
    assert (await b.get_context_block("kb")).content == "0 entries indexed."  # type: ignore[union-attr]
    assert kb.scope_key is None  # the configured instance was never mutated
    with pytest.raises(RuntimeError, match="not bound"):
        await kb.get()


# ---- rendering and the frozen prompt -----------------------------------------------------------
async def four_block_session(store: Store, tmp_path: Path, session_id: str = "s") -> Session:
    skills = tmp_path / "skills"
    skills.mkdir(exist_ok=True)
    (skills / "api-ref.md").write_text(
        "---\nname: api-ref\ndescription: API Reference documentation\n---\nGET /status\n",
        encoding="utf-8",
    )
    kb = StoreSearchProvider(store, recent=0)
    tok = ScriptedTokenizer({"User prefers dark mode.": 495})
    s = (
        Session.create(store, session_id, tokenizer=tok)
        .with_context(
            "soul",
            description="Identity",
            provider=StaticProvider("You are a helpful coding assistant who speaks concisely."),
        )
        .with_context("empty", provider=StaticProvider(""))
        .with_context("memory", description="Important facts", max_tokens=1100)
        .with_context("knowledge", description="Searchable knowledge base", provider=kb)
        .with_context("skills", provider=FileSkillProvider(skills))
    )
    await s.replace_context_block("memory", "User prefers dark mode.")
    bound = await s.get_context_provider("knowledge")
    for i in range(12):
        await bound.set(f"entry-{i}", f"fact number {i}")
    return s


FOUR_BLOCKS = (
    f"{SEP}\nSOUL (Identity) [readonly]\n{SEP}\n"
    "You are a helpful coding assistant who speaks concisely.\n\n"
    f"{SEP}\nMEMORY (Important facts) [45% — 495/1100 tokens] [writable]\n{SEP}\n"
    "User prefers dark mode.\n\n"
    f"{SEP}\nKNOWLEDGE (Searchable knowledge base) [searchable]\n{SEP}\n"
    "12 entries indexed.\n\n"
    f"{SEP}\nSKILLS [loadable]\n{SEP}\n"
    "- api-ref: API Reference documentation"
)


async def test_four_block_prompt_exact(store: Store, tmp_path: Path) -> None:
    s = await four_block_session(store, tmp_path)
    prompt = await s.freeze_system_prompt()
    for i, (got, want) in enumerate(zip(prompt, FOUR_BLOCKS, strict=False)):
        assert got == want, f"char {i}: {got!r} != {want!r}"
    assert prompt == FOUR_BLOCKS


async def test_frozen_prompt_stable_across_writes_and_changed_by_refresh(store: Store) -> None:
    s = Session.create(store).with_context("memory", max_tokens=500)
    await s.replace_context_block("memory", "before")
    frozen = await s.freeze_system_prompt()
    assert "before" in frozen
    await s.replace_context_block("memory", "after")
    await s.append_context_block("memory", "more")
    assert await s.freeze_system_prompt() == frozen
    refreshed = await s.refresh_system_prompt()
    assert refreshed != frozen and "after\nmore" in refreshed
    assert await s.freeze_system_prompt() == refreshed


async def test_freeze_on_warm_session_calls_no_provider(store: Store) -> None:
    provider = CountingProvider()
    s = Session.create(store).with_context("dyn", provider=provider)
    first = await s.freeze_system_prompt()
    calls = provider.gets
    for _ in range(5):
        assert await s.freeze_system_prompt() == first
    assert provider.gets == calls == 1


async def test_concurrent_first_freezes_agree(store: Store) -> None:
    provider = CountingProvider()
    s = Session.create(store).with_context("dyn", provider=provider)
    results = await asyncio.gather(*(s.freeze_system_prompt() for _ in range(20)))
    assert len(set(results)) == 1 and provider.gets == 1

    # two handles on one session, each with a provider that renders differently
    class Varying:
        n = 0

        async def get(self) -> str:
            Varying.n += 1
            await asyncio.sleep(0)
            return f"render {Varying.n}"

    handles = [
        Session.create(store, "shared").with_context("v", provider=Varying()).with_cached_prompt()
        for _ in range(5)
    ]
    prompts = await asyncio.gather(*(h.freeze_system_prompt() for h in handles))
    assert len(set(prompts)) == 1


async def test_cached_prompt_survives_a_new_process(store: Store, reopen: Reopen) -> None:
    s = (
        Session.create(store, "chat", namespace="u1")
        .with_context("soul", provider=StaticProvider("I am the agent."))
        .with_context("memory")
        .with_cached_prompt()
    )
    await s.replace_context_block("memory", "remember this")
    frozen = await s.freeze_system_prompt()
    await s.replace_context_block("memory", "changed later")

    again = await reopen()
    fresh = (
        Session.create(again, "chat", namespace="u1")
        .with_context("soul", provider=FailingProvider())
        .with_context("memory", provider=FailingProvider())
        .with_cached_prompt()
    )
    assert await fresh.freeze_system_prompt() == frozen
    # a session without the cache renders anew (and would call the providers)
    uncached = Session.create(again, "chat", namespace="u1").with_context("memory")
    assert "changed later" in await uncached.freeze_system_prompt()
    # refresh persists the new prompt for the next process
    refreshed = await (
        Session.create(again, "chat", namespace="u1")
        .with_context("memory")
        .with_cached_prompt()
        .refresh_system_prompt()
    )
    assert await again.get_prompt(s.key) == refreshed != frozen


async def test_clear_messages_refreshes_prompt(store: Store) -> None:
    s = Session.create(store).with_context("memory").with_cached_prompt()
    await s.append_message({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
    frozen = await s.freeze_system_prompt()
    await s.replace_context_block("memory", "new fact")
    await s.clear_messages()
    after = await s.freeze_system_prompt()
    assert after != frozen and "new fact" in after
    assert await store.get_prompt(s.key) == after


async def test_no_blocks_no_prompt(store: Store) -> None:
    s = Session.create(store)
    assert await s.freeze_system_prompt() == ""
    assert len(await s.tools()) == 0
