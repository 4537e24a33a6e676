"""ContextMixin: the context-memory half of :class:`mindstore.Session` (DESIGN §4).

Blocks are configured with ``with_context`` (no I/O) and resolved on first use: each
``BlockSpec`` becomes a ``_Block`` holding the provider this session talks to. Store-backed
providers (the default writable block, ``StoreSearchProvider``, ``StoreSkillProvider``) are
*bound* copies — the instance the user configured is never mutated, so one configuration can be
shared by every session a ``SessionManager`` hands out. A provider's ``init(label)`` runs once
per session, before its first use.

Invariants:

* **Frozen prompt.** ``freeze_system_prompt()`` renders once and then returns the identical
  string until ``refresh_system_prompt()`` (or ``clear_messages()`` / a compaction, which call
  it). Writes to blocks are durable immediately but never change the frozen prompt, so the
  model provider's prefix cache stays warm. With ``with_cached_prompt()`` the frozen prompt is
  stored per (namespace, session): a new process returns it without touching any provider, and
  concurrent first freezes agree (the store keeps the first one written).
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
  ``[skill unloaded: <key>]`` in its place for results stored before the unload.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mindstore.context.providers import (
    DEFAULT_ENTRY_MAX_TOKENS,
    StoreBackedProvider,
    StoreBlockProvider,
    has_set,
    maybe_await,
    provider_kind,
)
from mindstore.context.spec import BlockSpec, Scope
from mindstore.context.tooling import (
    BlockInfo,
    entry_key,
    load_context_tool_spec,
    search_context_tool_spec,
    set_context_tool_spec,
    unload_context_tool_spec,
    usage_text,
)
from mindstore.errors import BlockNotFoundError, ReadOnlyBlockError, TokenBudgetError
from mindstore.prompt import BlockKind, ContextBlock, render_system_prompt
from mindstore.store.base import SessionKey, SkillState, Store, StoredMessage
from mindstore.tokens import Tokenizer, estimate_string_tokens
from mindstore.tools import Tool, ToolSet

if TYPE_CHECKING:
    from mindstore.session import Session

__all__ = [
    "DEFAULT_BLOCK_MAX_TOKENS",
    "DEFAULT_ENTRY_MAX_TOKENS",
    "ContextMixin",
    "join_block_content",
]

LOAD_TOOL = "load_context"

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


def _accepts_keyword(fn: Any, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


class ContextMixin:
    """Context blocks, the frozen system prompt and the generated memory tools."""

    # set by Session.__init__
    _store: Store
    _key: SessionKey
    _tokenizer: Tokenizer | None
    _block_specs: dict[str, BlockSpec]
    _cached_prompt: bool

    if TYPE_CHECKING:

        def with_context(
            self,
            label: str,
            description: str | None = None,
            max_tokens: int | None = None,
            provider: Any = None,
            scope: Scope = "session",
        ) -> Session: ...

    # ---- hooks called by Session and CompactionMixin ------------------------------------------
    def _init_context_state(self) -> None:
        self._ctx_blocks: dict[str, _Block] = {}
        self._frozen_prompt: str | None = None
        self._prompt_lock = asyncio.Lock()
        self._append_lock = asyncio.Lock()

    def _on_blocks_changed(self) -> None:
        # Validate eagerly (a provider without get() is a configuration error); resolution and
        # init(label) wait for the first async call.
        for spec in self._block_specs.values():
            provider_kind(spec.provider)

    async def _after_clear(self) -> None:
        await self.refresh_system_prompt()

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
        current = self._ctx_blocks
        blocks: dict[str, _Block] = {}
        for label, spec in self._block_specs.items():
            block = current.get(label)
            blocks[label] = block if block is not None and block.spec is spec else self._bind(spec)
        self._ctx_blocks = blocks
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
        """The block as it is now (its provider's current content), or ``None`` if no block
        has that label."""
        blocks = await self._resolved()
        block = blocks.get(label)
        if block is None:
            return None
        return self._snapshot(block, await self._content(block))

    async def get_context_blocks(self) -> list[ContextBlock]:
        """Every configured block, in registration order, with current content."""
        blocks = list((await self._resolved()).values())
        contents = await asyncio.gather(*(self._content(b) for b in blocks))
        return [self._snapshot(b, c) for b, c in zip(blocks, contents, strict=True)]

    async def get_context_provider(self, label: str) -> Any:
        """The provider this session uses for ``label`` — for store-backed providers the copy
        bound to this session, e.g. to fill a knowledge base:
        ``await (await s.get_context_provider("knowledge")).set("key", "text")``.

        Raises:
            BlockNotFoundError: no block has that label.
        """
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
        """Replace the content of a writable block.

        Returns:
            The block after the write. The frozen system prompt is unchanged.

        Raises:
            BlockNotFoundError: no block has that label.
            ReadOnlyBlockError: the block is not writable.
            TokenBudgetError: the content exceeds the block's ``max_tokens``; nothing changed.
        """
        block = await self._writable(label, content)
        tokens = self._check_budget(block, content)
        await maybe_await(block.provider.set(content))
        return self._snapshot(block, content, tokens)

    async def append_context_block(self, label: str, content: str) -> ContextBlock:
        """Append to a writable block (joined with ``"\\n"`` unless the block is empty or
        ``content`` starts with a newline). The budget applies to the result. For store-backed
        blocks this is one atomic read-modify-write, safe across processes.

        Raises:
            BlockNotFoundError: no block has that label.
            ReadOnlyBlockError: the block is not writable.
            TokenBudgetError: the result would exceed ``max_tokens``; nothing changed.
        """
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

    async def add_context(
        self,
        label: str,
        description: str | None = None,
        max_tokens: int | None = None,
        provider: Any = None,
        scope: Scope = "session",
    ) -> ContextBlock:
        """Add (or reconfigure) a block at run time; same arguments as ``with_context``.

        The block is usable at once (reads, writes, tools); it appears in the frozen system
        prompt from the next :meth:`refresh_system_prompt`.
        """
        self.with_context(label, description, max_tokens, provider, scope)
        block = await self._block(label)
        return self._snapshot(block, await self._content(block))

    async def remove_context(self, label: str) -> None:
        """Stop using a block in this session. Stored content is kept (adding the label back
        brings it back); the frozen prompt changes at the next refresh.

        Raises:
            BlockNotFoundError: no block has that label.
        """
        if label not in self._block_specs:
            await self._block(label)  # raises with the list of configured blocks
        del self._block_specs[label]
        self._ctx_blocks.pop(label, None)

    # ---- the system prompt --------------------------------------------------------------------
    async def render_system_prompt(self) -> str:
        """Render the blocks as they are now, without freezing or storing anything."""
        return render_system_prompt(await self.get_context_blocks())

    async def freeze_system_prompt(self) -> str:
        """The frozen system prompt: rendered on the first call, then identical until
        :meth:`refresh_system_prompt`, even after blocks are written. With
        ``with_cached_prompt()`` it is stored per (namespace, session), and a new process
        returns the stored prompt without calling any provider."""
        frozen = self._frozen_prompt
        if frozen is not None:
            return frozen
        async with self._prompt_lock:
            if self._frozen_prompt is not None:
                return self._frozen_prompt
            prompt: str | None = None
            if self._cached_prompt:
                prompt = await self._store.get_prompt(self._key)
            if prompt is None:
                prompt = await self.render_system_prompt()
                if self._cached_prompt:
                    # Another process may have frozen first: the store keeps and returns its
                    # prompt, so every process agrees.
                    prompt = await self._store.put_prompt(self._key, prompt, overwrite=False)
            self._frozen_prompt = prompt
            return prompt

    async def refresh_system_prompt(self) -> str:
        """Reload every provider, re-render, store (with ``with_cached_prompt()``) and return
        the new frozen prompt."""
        async with self._prompt_lock:
            prompt = await self.render_system_prompt()
            if self._cached_prompt:
                prompt = await self._store.put_prompt(self._key, prompt, overwrite=True)
            self._frozen_prompt = prompt
            return prompt

    # ---- loaded skills ------------------------------------------------------------------------
    async def get_loaded_skills(self) -> list[tuple[str, str]]:
        """``(label, key)`` of the skills currently loaded in this session."""
        return [(s.label, s.key) for s in await self._store.get_skill_states(self._key) if s.loaded]

    async def _apply_skill_unloads(
        self, rows: list[StoredMessage], messages: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Replace outputs of ``load_context`` results stored before an unload of that skill
        by ``[skill unloaded: <key>]`` (copies; stored rows are never touched)."""
        if not rows:
            return messages
        # One small indexed query instead of scanning every part of every message: with no
        # unload mark (the common case) a read touches no message at all. The states are read
        # on every call (not cached) so unloads by other processes show at once.
        states = [
            s
            for s in await self._store.get_skill_states(self._key)
            if s.unloaded_before_seq is not None
        ]
        if not states:
            return messages
        newest_mark = max(s.unloaded_before_seq or 0 for s in states)
        seq_by_id = {r.id: r.seq for r in rows}
        out = []
        for message in messages:
            seq = seq_by_id.get(message.get("id"))  # type: ignore[arg-type]
            parts = _parts(message)
            new_parts = None
            if seq is not None and seq <= newest_mark:
                for i, part in enumerate(parts):
                    call = _load_call(part)
                    if call is None or "output" not in part:
                        continue
                    label, key = call
                    if _unloaded(states, label, key, seq):
                        if new_parts is None:
                            new_parts = list(parts)
                        new_parts[i] = {**part, "output": f"[skill unloaded: {key}]"}
            out.append(message if new_parts is None else {**message, "parts": new_parts})
        return out

    # ---- generated tools ----------------------------------------------------------------------
    async def tools(self) -> ToolSet:
        """The memory tools for the blocks present (DESIGN §4.6): ``set_context``,
        ``load_context``, ``unload_context``, ``search_context``. Every tool returns
        ``"Error: <reason>"`` instead of raising."""
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
        not_loaded = f'Skill "{key}" is not currently loaded in "{block.label}".'
        if (block.label, key) not in await self.get_loaded_skills():
            return not_loaded
        if not await self._store.set_skill_loaded(self._key, block.label, key, False):
            return not_loaded  # another worker unloaded it first
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


def _parts(message: Mapping[str, Any]) -> list[Any]:
    parts = message.get("parts")
    return parts if isinstance(parts, list) else []


def _load_call(part: Any) -> tuple[str | None, str] | None:
    """``(label, key)`` when ``part`` is a stored ``load_context`` tool call."""
    if not isinstance(part, Mapping):
        return None
    t = part.get("type")
    if t != f"tool-{LOAD_TOOL}" and not (t == "dynamic-tool" and part.get("toolName") == LOAD_TOOL):
        return None
    args = part.get("input")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    if not isinstance(args, Mapping) or not isinstance(args.get("key"), str):
        return None
    label = args.get("label")
    return (label if isinstance(label, str) else None), args["key"]


def _unloaded(states: list[SkillState], label: str | None, key: str, seq: int) -> bool:
    for s in states:
        if s.key != key or (label is not None and s.label != label):
            continue
        if s.unloaded_before_seq is not None and seq <= s.unloaded_before_seq:
            return True
    return False
