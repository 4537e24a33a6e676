"""ContextBlocks: a session's context memory — blocks, the frozen system prompt, memory tools.

A :class:`~mindstore.Session` holds one :class:`ContextBlocks`, built with the session's store,
key and tokenizer; the session's context methods delegate to it. Blocks are configured with
``with_context`` (a checked :class:`~mindstore.context.spec.BlockSpec`, no I/O) and resolved on
first use: each ``BlockSpec`` becomes a ``_Block`` holding the provider this session talks to.
Store-backed providers (the default writable block, ``StoreSearchProvider``,
``StoreSkillProvider``) are *bound* copies — the instance the user configured is never mutated,
so one configuration can be shared by every session a ``SessionManager`` hands out. A
provider's ``init(label)`` runs once per session, before its first use.

Invariants:

* **Frozen prompt.** ``freeze_system_prompt()`` renders once and then returns the identical
  string until ``refresh_system_prompt()`` (or ``clear_messages()`` / a compaction, which call
  it). Writes to blocks are durable immediately but never change the frozen prompt, so the
  model provider's prefix cache stays warm. With ``with_cached_prompt()`` the frozen prompt is
  stored per (namespace, session): a new process returns it without touching any provider, and
  concurrent first freezes agree (the store keeps the first one written).
  ``with_cached_prompt(provider)`` keeps it in a writable provider of the user's choosing
  instead (the reference's ``withCachedPrompt(provider)``): a freeze returns the provider's
  text when it holds one, else renders and stores it with ``set``; a refresh always stores it. A
  store-backed provider is bound to the session under the label :data:`PROMPT_LABEL`.
* **Budgets.** ``max_tokens`` is checked on the *result* of a write; an append to a store-backed
  block is one atomic read-modify-write in the store, so concurrent appends from any number of
  processes never lose a line, and an over-budget append changes nothing. A writable block
  without ``max_tokens`` is capped at :data:`DEFAULT_BLOCK_MAX_TOKENS`; an entry written through
  ``set_context`` by its block's ``max_tokens`` or :data:`DEFAULT_ENTRY_MAX_TOKENS`.
* **Keyed appends.** ``set_context`` with ``action="append"`` on a searchable or loadable block
  appends to the entry with the same title (read with the provider's ``read_entry(key)``,
  serialised within the session); a provider without ``read_entry`` is refused, unchanged.
* **Tools never raise.** Every generated tool returns ``"Error: <reason>"`` on failure.
* **Loaded skills** are persisted per session in the store (no history scan); unloading is
  non-destructive — the stored ``load_context`` result stays, and reads of history show
  ``[skill unloaded: <key>]`` in its place for results stored before the unload (that read-time
  step is :mod:`mindstore.context.unloads`).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mindstore._async import maybe_await
from mindstore.context.providers import (
    DEFAULT_ENTRY_MAX_TOKENS,
    StoreBackedProvider,
    StoreBlockProvider,
    has_set,
    provider_kind,
)
from mindstore.context.spec import BlockSpec
from mindstore.context.tooling import (
    BlockInfo,
    entry_key,
    load_context_tool_spec,
    search_context_tool_spec,
    set_context_tool_spec,
    unload_context_tool_spec,
    usage_text,
)
from mindstore.context.unloads import LOAD_TOOL
from mindstore.errors import BlockNotFoundError, ReadOnlyBlockError, TokenBudgetError
from mindstore.prompt import BlockKind, ContextBlock, render_system_prompt
from mindstore.store.base import SessionKey, Store
from mindstore.tokens import Tokenizer, estimate_string_tokens
from mindstore.tools import Tool, ToolSet

__all__ = [
    "DEFAULT_BLOCK_MAX_TOKENS",
    "DEFAULT_ENTRY_MAX_TOKENS",
    "PROMPT_LABEL",
    "ContextBlocks",
    "check_prompt_provider",
    "join_block_content",
]

PROMPT_LABEL = "_system_prompt"
"""The label under which a store-backed provider given to ``with_cached_prompt(provider)``
keeps the frozen prompt (the reference's ``_system_prompt`` key)."""

DEFAULT_BLOCK_MAX_TOKENS = 32_000
"""Cap of a writable block configured without ``max_tokens``: its content goes into every
system prompt, so an unbounded write (a model storing a 50 MB tool output) would make every
later prompt unusable. Pass ``max_tokens`` to ``with_context`` for another budget."""


@dataclass(slots=True)
class _Block:
    spec: BlockSpec
    provider: Any
    kind: BlockKind
    settable: bool
    initialized: bool = False

    @property
    def label(self) -> str:
        return self.spec.label

    def info(self) -> BlockInfo:
        return (self.spec.label, self.kind, self.spec.description, self.spec.max_tokens)


def join_block_content(existing: str, new: str) -> str:
    """The append rule: join with ``"\\n"`` unless the existing text is empty or the new text
    starts with a newline."""
    if not existing or new.startswith("\n"):
        return existing + new
    return f"{existing}\n{new}"


def _guarded(fn: Callable[[dict[str, Any]], Awaitable[str]]) -> Callable[..., Awaitable[str]]:
    """Make a tool function return ``Error: ...`` instead of raising, even when called directly
    rather than through :meth:`ToolSet.execute`."""

    async def run(args: dict[str, Any]) -> str:
        try:
            return await fn(args)
        except Exception as exc:
            return f"Error: {str(exc) or type(exc).__name__}"

    return run


def check_prompt_provider(provider: Any) -> tuple[bool, Any]:
    """``(cached, provider)`` for ``with_cached_prompt(provider)``: ``True`` keeps the prompt
    in the store, ``False`` nowhere, an object with ``get()`` and ``set(content)`` in it.

    Raises:
        TypeError: anything else (checked when the builder is called, before any I/O).
    """
    if isinstance(provider, bool):
        return provider, None
    if provider is None or not (
        callable(getattr(provider, "get", None)) and callable(getattr(provider, "set", None))
    ):
        raise TypeError(
            "with_cached_prompt takes True, False or a writable provider (an object with "
            f"get() and set(content)), got {type(provider).__name__}"
        )
    return True, provider


def _accepts_keyword(fn: Any, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


class ContextBlocks:
    """The context blocks of one session; see the module docstring."""

    def __init__(self, store: Store, key: SessionKey, *, tokenizer: Tokenizer | None) -> None:
        self._store = store
        self._key = key
        self._tokenizer = tokenizer
        self._specs: dict[str, BlockSpec] = {}  # registration order
        self._cached_prompt = False
        self._prompt_provider: Any = None  # with_cached_prompt(provider), bound on first use
        self._prompt_provider_ready = False
        self._blocks: dict[str, _Block] = {}  # bound providers, by label
        self._frozen_prompt: str | None = None
        self._prompt_lock = asyncio.Lock()
        self._append_lock = asyncio.Lock()

    # ---- configuration (no I/O) ---------------------------------------------------------------
    def configure(self, spec: BlockSpec) -> None:
        """Register (or reconfigure) ``spec.label``; bound and initialised on first use."""
        self._specs[spec.label] = spec

    def set_cached_prompt(self, provider: Any) -> None:
        """``True``: the store keeps the frozen prompt; ``False``: nobody; a writable provider:
        that provider (see :func:`check_prompt_provider`)."""
        self._cached_prompt, self._prompt_provider = check_prompt_provider(provider)
        self._prompt_provider_ready = False

    # ---- block resolution ---------------------------------------------------------------------
    def _bind(self, spec: BlockSpec) -> _Block:
        provider = spec.provider
        if provider is None:
            provider = StoreBlockProvider(self._store, scope=spec.scope)
        if isinstance(provider, StoreBackedProvider):
            provider = provider.bind(
                namespace=self._key.namespace, session_id=self._key.session_id, label=spec.label
            )
        kind = provider_kind(provider)
        return _Block(spec=spec, provider=provider, kind=kind, settable=has_set(provider))

    async def _resolved(self) -> dict[str, _Block]:
        """Blocks in registration order, bound and initialised."""
        current = self._blocks
        blocks: dict[str, _Block] = {}
        for label, spec in self._specs.items():
            block = current.get(label)
            blocks[label] = block if block is not None and block.spec is spec else self._bind(spec)
        self._blocks = blocks
        for block in blocks.values():
            if not block.initialized:
                init = getattr(block.provider, "init", None)
                if callable(init):
                    await maybe_await(init(block.label))
                block.initialized = True
        return blocks

    async def _block(self, label: str) -> _Block:
        blocks = await self._resolved()
        block = blocks.get(label)
        if block is None:
            known = ", ".join(blocks) or "none"
            raise BlockNotFoundError(
                f'no context block "{label}" in this session (configured: {known}); add it '
                "with with_context() or add_context()"
            )
        return block

    def _count(self, text: str) -> int:
        if self._tokenizer is not None:
            return int(self._tokenizer.count(text))
        return estimate_string_tokens(text)

    def _check_budget(self, block: _Block, content: str) -> int:
        limit = block.spec.max_tokens
        if limit is None:
            return self._check_default_cap(block, content, DEFAULT_BLOCK_MAX_TOKENS, "block")
        tokens = self._count(content)
        if tokens > limit:
            raise TokenBudgetError(f'Block "{block.label}" exceeds maxTokens: {tokens} > {limit}')
        return tokens

    def _check_entry_budget(self, block: _Block, content: str) -> int:
        """``max_tokens`` of a keyed block applies to each entry written to it; without it,
        :data:`DEFAULT_ENTRY_MAX_TOKENS`."""
        limit = block.spec.max_tokens
        if limit is None:
            return self._check_default_cap(block, content, DEFAULT_ENTRY_MAX_TOKENS, "entry")
        tokens = self._count(content)
        if tokens > limit:
            raise TokenBudgetError(
                f'Entry for block "{block.label}" exceeds maxTokens: {tokens} > {limit}'
            )
        return tokens

    def _check_default_cap(self, block: _Block, content: str, cap: int, what: str) -> int:
        # The estimate is at least chars/4: a huge text is refused without counting its words.
        if self._tokenizer is None and len(content) > 4 * cap:
            tokens = -(-len(content) // 4)
        else:
            tokens = self._count(content)
        if tokens > cap:
            subject = f'Block "{block.label}"' if what == "block" else f'Entry for "{block.label}"'
            raise TokenBudgetError(
                f"{subject} exceeds the default cap of {cap} tokens for blocks without "
                f"max_tokens: {tokens} > {cap} (give the block a max_tokens to set its budget)"
            )
        return tokens

    async def _content(self, block: _Block) -> str:
        value = await maybe_await(block.provider.get())
        if value is None:
            return ""
        return value if isinstance(value, str) else str(value)

    def _snapshot(self, block: _Block, content: str, tokens: int | None = None) -> ContextBlock:
        return ContextBlock(
            label=block.label,
            description=block.spec.description,
            content=content,
            tokens=self._count(content) if tokens is None else tokens,
            max_tokens=block.spec.max_tokens,
            kind=block.kind,
        )

    # ---- reading ------------------------------------------------------------------------------
    async def get_context_block(self, label: str) -> ContextBlock | None:
        """The block with its provider's current content, or ``None`` for an unknown label."""
        blocks = await self._resolved()
        block = blocks.get(label)
        if block is None:
            return None
        return self._snapshot(block, await self._content(block))

    async def get_context_blocks(self) -> list[ContextBlock]:
        """Every block in registration order, with current content."""
        blocks = list((await self._resolved()).values())
        contents = await asyncio.gather(*(self._content(b) for b in blocks))
        return [self._snapshot(b, c) for b, c in zip(blocks, contents, strict=True)]

    async def get_context_provider(self, label: str) -> Any:
        """The provider bound to this session for ``label`` (``BlockNotFoundError`` if none)."""
        return (await self._block(label)).provider

    # ---- writing ------------------------------------------------------------------------------
    async def _writable(self, label: str, content: Any) -> _Block:
        if not isinstance(content, str):
            raise TypeError(f"block content must be a string, got {type(content).__name__}")
        block = await self._block(label)
        if block.kind != "writable":
            if block.kind == "readonly":
                raise ReadOnlyBlockError(f'block "{label}" is read-only; it cannot be written')
            raise ReadOnlyBlockError(
                f'block "{label}" is {block.kind}: it holds keyed entries, not one text; write '
                "entries with its provider's set(key, content) or the set_context tool"
            )
        return block

    async def replace_context_block(self, label: str, content: str) -> ContextBlock:
        """Replace a writable block; see :meth:`mindstore.Session.replace_context_block`."""
        block = await self._writable(label, content)
        tokens = self._check_budget(block, content)
        await maybe_await(block.provider.set(content))
        return self._snapshot(block, content, tokens)

    async def append_context_block(self, label: str, content: str) -> ContextBlock:
        """Append to a writable block; see :meth:`mindstore.Session.append_context_block`."""
        block = await self._writable(label, content)
        holder: list[int] = []

        def combine(existing: str) -> str:
            new = join_block_content(existing, content)
            holder.append(self._check_budget(block, new))
            return new

        if isinstance(block.provider, StoreBlockProvider):
            result = await block.provider.update(combine)
        else:
            # A user provider has no atomic update: serialise within this session.
            async with self._append_lock:
                result = combine(await self._content(block))
                await maybe_await(block.provider.set(result))
        return self._snapshot(block, result, holder[-1])

    async def add_context(self, spec: BlockSpec) -> ContextBlock:
        """Register ``spec`` and return the block, bound and initialised."""
        self.configure(spec)
        block = await self._block(spec.label)
        return self._snapshot(block, await self._content(block))

    async def remove_context(self, label: str) -> None:
        """Stop using ``label`` in this session; stored content is kept."""
        if label not in self._specs:
            await self._block(label)  # raises with the list of configured blocks
        del self._specs[label]
        self._blocks.pop(label, None)

    # ---- the system prompt --------------------------------------------------------------------
    async def render_system_prompt(self) -> str:
        """Render the blocks as they are now (nothing frozen or stored)."""
        return render_system_prompt(await self.get_context_blocks())

    async def _bound_prompt_provider(self) -> Any:
        provider = self._prompt_provider
        if provider is None or self._prompt_provider_ready:
            return provider
        if isinstance(provider, StoreBackedProvider):
            provider = provider.bind(
                namespace=self._key.namespace, session_id=self._key.session_id, label=PROMPT_LABEL
            )
        init = getattr(provider, "init", None)
        if callable(init):
            await maybe_await(init(PROMPT_LABEL))
        self._prompt_provider = provider
        self._prompt_provider_ready = True
        return provider

    async def _stored_prompt(self) -> str | None:
        provider = await self._bound_prompt_provider()
        if provider is not None:
            value = await maybe_await(provider.get())
            # A provider with nothing stored answers None or "" (a store-backed block reads
            # "" before its first write): both mean "render it".
            return None if value is None or value == "" else str(value)
        if self._cached_prompt:
            return await self._store.get_prompt(self._key)
        return None

    async def _keep_prompt(self, prompt: str, *, overwrite: bool) -> str:
        provider = await self._bound_prompt_provider()
        if provider is not None:
            await maybe_await(provider.set(prompt))
            return prompt
        if self._cached_prompt:
            # Another process may have frozen first: the store keeps and returns its prompt
            # (overwrite=False), so every process agrees.
            return await self._store.put_prompt(self._key, prompt, overwrite=overwrite)
        return prompt

    async def freeze_system_prompt(self) -> str:
        """The frozen prompt; see the module docstring."""
        frozen = self._frozen_prompt
        if frozen is not None:
            return frozen
        async with self._prompt_lock:
            if self._frozen_prompt is not None:
                return self._frozen_prompt
            prompt = await self._stored_prompt()
            if prompt is None:
                prompt = await self._keep_prompt(await self.render_system_prompt(), overwrite=False)
            self._frozen_prompt = prompt
            return prompt

    async def refresh_system_prompt(self) -> str:
        """Re-render, store (with a cached prompt) and freeze the prompt."""
        async with self._prompt_lock:
            prompt = await self._keep_prompt(await self.render_system_prompt(), overwrite=True)
            self._frozen_prompt = prompt
            return prompt

    # ---- loaded skills ------------------------------------------------------------------------
    async def get_loaded_skills(self) -> list[tuple[str, str]]:
        """``(label, key)`` of the skills currently loaded in this session."""
        return [(s.label, s.key) for s in await self._store.get_skill_states(self._key) if s.loaded]

    async def unload_skill(self, label: str, key: str) -> bool:
        """Unload skill ``key`` of the loadable block ``label``; ``False`` when it was not
        loaded (or another worker unloaded it first). Non-destructive: the stored result stays
        and history shows ``[skill unloaded: <key>]`` in its place.

        Raises:
            TypeError: ``label`` or ``key`` is not a string.
            BlockNotFoundError: no loadable block has that label; nothing changed.
        """
        for name, value in (("label", label), ("key", key)):
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a string, got {type(value).__name__}")
        block = await self._block(label)
        if block.kind != "loadable":
            raise BlockNotFoundError(
                f'block "{label}" is {block.kind}, not loadable: only skill blocks have skills '
                "to unload"
            )
        if (label, key) not in await self.get_loaded_skills():
            return False
        return await self._store.set_skill_loaded(self._key, label, key, False)

    # ---- generated tools ----------------------------------------------------------------------
    async def tools(self) -> ToolSet:
        """The memory tools for the blocks present (each returns ``Error: ...``, never raises)."""
        blocks = list((await self._resolved()).values())
        settable = [b.info() for b in blocks if b.settable and b.kind != "readonly"]
        skills = [b.info() for b in blocks if b.kind == "loadable"]
        searchable = [b.info() for b in blocks if b.kind == "searchable"]
        out: list[Tool] = []
        if settable:
            description, schema = set_context_tool_spec(settable)
            out.append(_tool("set_context", description, schema, self._tool_set_context))
        if skills:
            labels = {b[0] for b in skills}
            loaded = [(lb, k) for lb, k in await self.get_loaded_skills() if lb in labels]
            description, schema = load_context_tool_spec(skills)
            out.append(_tool(LOAD_TOOL, description, schema, self._tool_load_context))
            description, schema = unload_context_tool_spec(skills, loaded)
            out.append(_tool("unload_context", description, schema, self._tool_unload_context))
        if searchable:
            description, schema = search_context_tool_spec(searchable)
            out.append(_tool("search_context", description, schema, self._tool_search_context))
        return ToolSet(out)

    async def _tool_block(self, args: Mapping[str, Any], kinds: tuple[str, ...]) -> _Block:
        label = args.get("label")
        if not isinstance(label, str):
            raise ValueError("label is required")
        block = await self._block(label)
        if block.kind not in kinds:
            raise ValueError(f'block "{label}" is {block.kind}, not {" or ".join(kinds)}')
        return block

    async def _tool_set_context(self, args: dict[str, Any]) -> str:
        block = await self._tool_block(args, ("writable", "searchable", "loadable"))
        content = args.get("content")
        if not isinstance(content, str):
            raise ValueError("content must be a string")
        if block.kind == "writable":
            action = args.get("action") or "replace"
            try:
                if action == "replace":
                    written = await self.replace_context_block(block.label, content)
                elif action == "append":
                    written = await self.append_context_block(block.label, content)
                else:
                    raise ValueError(f'action must be "replace" or "append", got {action!r}')
            except TokenBudgetError as exc:
                return (
                    f"Error: {exc}. Nothing was written; shorten the text, or replace the "
                    "block with a condensed version."
                )
            usage = usage_text(written.tokens, written.max_tokens)
            return f"Written to {block.label}. Usage: {usage}"
        if not block.settable:
            raise ReadOnlyBlockError(f'block "{block.label}" does not accept writes')
        action = args.get("action") or "replace"
        if action not in ("replace", "append"):
            raise ValueError(f'action must be "replace" or "append", got {action!r}')
        metadata = args.get("metadata")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise ValueError("metadata must be an object with title and description")
        metadata = metadata or {}
        title = metadata.get("title")
        description = metadata.get("description")
        if not isinstance(description, str):
            description = None
        key = entry_key(title if isinstance(title, str) else None, content)
        try:
            if action == "append":
                appended = await self._append_entry(block, key, content, description)
                if appended is None:
                    return (
                        f'Error: block "{block.label}" cannot append to an entry (its provider '
                        "has no read_entry(key)). Nothing was written; write the whole entry "
                        'with action "replace".'
                    )
                return f'Appended to "{key}" in {block.label}.'
            self._check_entry_budget(block, content)
        except TokenBudgetError as exc:
            return f"Error: {exc}. Nothing was written; shorten the text."
        await self._set_entry(block, key, content, description)
        return f'Indexed "{key}" in {block.label}.'

    async def _set_entry(
        self, block: _Block, key: str, content: str, description: str | None
    ) -> None:
        setter = block.provider.set
        if description is not None and _accepts_keyword(setter, "description"):
            await maybe_await(setter(key, content, description=description))
        else:
            await maybe_await(setter(key, content))

    async def _append_entry(
        self, block: _Block, key: str, content: str, description: str | None
    ) -> str | None:
        """Append ``content`` to the entry ``key`` (joined like block appends; a missing entry
        is created) and return the new text, or ``None`` when the provider cannot read entries.
        Serialised within this session; not atomic across processes (last writer wins)."""
        reader = getattr(block.provider, "read_entry", None)
        if not callable(reader):
            return None
        async with self._append_lock:
            current = await maybe_await(reader(key))
            old_text, old_description = current if current is not None else ("", None)
            new = join_block_content(old_text, content)
            self._check_entry_budget(block, new)
            await self._set_entry(
                block, key, new, description if description is not None else old_description
            )
            return new

    async def _tool_load_context(self, args: dict[str, Any]) -> str:
        block = await self._tool_block(args, ("loadable",))
        key = args.get("key")
        if not isinstance(key, str):
            raise ValueError("key must be a string")
        document = await maybe_await(block.provider.load(key))
        if document is None:
            return f"Not found: {key}"
        await self._store.set_skill_loaded(self._key, block.label, key, True)
        return document if isinstance(document, str) else str(document)

    async def _tool_unload_context(self, args: dict[str, Any]) -> str:
        block = await self._tool_block(args, ("loadable",))
        key = args.get("key")
        if not isinstance(key, str):
            raise ValueError("key must be a string")
        if not await self.unload_skill(block.label, key):
            return f'Skill "{key}" is not currently loaded in "{block.label}".'
        return f'Unloaded "{key}" from {block.label}. Context reclaimed.'

    async def _tool_search_context(self, args: dict[str, Any]) -> str:
        block = await self._tool_block(args, ("searchable",))
        query = args.get("query")
        if not isinstance(query, str):
            raise ValueError("query must be a string")
        result = await maybe_await(block.provider.search(query))
        if result is None or not str(result).strip():
            return "No results found."
        return result if isinstance(result, str) else str(result)


def _tool(
    name: str,
    description: str,
    schema: dict[str, Any],
    fn: Callable[[dict[str, Any]], Awaitable[str]],
) -> Tool:
    return Tool(name=name, description=description, parameters=schema, execute=_guarded(fn))
