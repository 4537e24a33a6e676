"""OpenAI Agents SDK session backed by mindstore (the ``openai-agents`` extra).

``MindstoreSession(session_id, store, *, namespace="default", session_settings=None)``
implements the SDK's ``Session`` protocol (``get_items(limit)``, ``add_items(items)``,
``pop_item()``, ``clear_session()``), so ``Runner.run(agent, input, session=...)`` keeps its
conversation in a mindstore session::

    session = MindstoreSession("chat-42", store, namespace="user-7")
    result = await Runner.run(agent, "What's the status?", session=session)

Every item is stored as one UIMessage (see :mod:`mindstore.integrations.openai_items` and the
table in ``docs/integrations.md``): full-text searchable, visible in the CLI and the viewer,
compactable with the session's compaction (``msession.session.compact_after(...)``); the item
itself is kept in the message's metadata and read back exactly. ``add_items`` writes a batch in
one transaction, each item a child of the one before (concurrent writers form one chain).

The memory travels too: :func:`memory_tools` gives the generated memory tools (DESIGN §4.6) as
SDK ``FunctionTool`` objects and :func:`memory_instructions` the frozen system prompt as the
agent's ``instructions``::

    msession = MindstoreSession("chat-42", store, namespace="user-7")
    memory = msession.session.with_context("memory", max_tokens=500)   # same conversation
    agent = Agent(
        name="Assistant",
        instructions=memory_instructions(memory),
        tools=await memory_tools(memory) + await memory_tools(SessionManager(store, ...)),
    )
"""

from __future__ import annotations

import asyncio
from typing import Any

from mindstore.errors import MissingDependencyError
from mindstore.formats._reply import as_dict
from mindstore.integrations._tool_bridge import ToolSource, strict_schema
from mindstore.integrations.openai_items import (
    call_names_of,
    item_message,
    items_of,
    pop_plan,
    run_start,
    tool_call_names,
    unnamed_outputs,
)
from mindstore.session import Session, new_message
from mindstore.store._checks import check_store
from mindstore.store.base import AUTO, Store

try:
    from agents import Agent, FunctionTool, RunContextWrapper
    from agents.memory.session_settings import (
        SessionSettings,
        coerce_session_settings,
        resolve_session_limit,
    )
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise MissingDependencyError("openai-agents", "openai-agents") from exc

__all__ = ["MindstoreSession", "memory_instructions", "memory_tools"]

_NAME_WINDOW = 64  # newest messages searched first for the call an output answers


class MindstoreSession:
    """The Agents SDK ``Session`` protocol on a mindstore session.

    Args:
        session_id: The mindstore session id (the conversation).
        store: A mindstore store: async (``SQLiteStore``, ``await PostgresStore.open(...)``)
            or from :mod:`mindstore.sync` — then every call runs on that store's own loop
            thread, whatever loop the SDK runs on (e.g. ``Runner.run_sync`` in plain code).
        namespace: The mindstore namespace (user, tenant…).
        session_settings: The SDK's ``SessionSettings`` (or its dict); ``limit`` is the default
            for ``get_items``.
    """

    def __init__(
        self,
        session_id: str,
        store: Store,
        *,
        namespace: str = "default",
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings: SessionSettings | None = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        self._loop: Any = None
        from mindstore import sync

        if isinstance(store, sync._SyncStore):
            # A mindstore.sync store lives on its own loop thread: run every call there, so
            # its PostgreSQL pool is only ever used from the loop that opened it.
            self._loop = store._loop
            store = store.aio
        check_store(store, "MindstoreSession")
        self._session = Session.create(store, session_id, namespace=namespace)
        self._call_names: dict[str, str] = {}

    async def _run(self, fn: Any, *args: Any) -> Any:
        if self._loop is None:
            return await fn(*args)
        return await asyncio.wrap_future(self._loop.submit(fn, *args))

    async def _mutate(self, fn: Any, *args: Any) -> Any:
        """Run a write to its end even if the caller is cancelled meanwhile (as the SDK's own
        sessions do), so a cancelled ``add_items`` has either not started or fully happened;
        the cancellation is re-raised afterwards."""
        task = asyncio.ensure_future(self._run(fn, *args))
        cancelled: asyncio.CancelledError | None = None
        while not task.done():
            try:
                await asyncio.wait({task})
            except asyncio.CancelledError as exc:
                cancelled = cancelled or exc
        if cancelled is not None:
            if not task.cancelled():
                task.exception()  # retrieved: the cancellation is what the caller sees
            raise cancelled
        return task.result()

    @property
    def session(self) -> Session:
        """The mindstore :class:`~mindstore.Session` underneath (search, compaction, blocks)."""
        return self._session

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The conversation's items, oldest first; with ``limit`` the latest ``limit`` of them.

        ``None`` uses ``session_settings.limit``; as in the SDK's SQLite session ``0`` returns
        nothing and a negative limit everything. A compaction overlay reads as one user
        message with its summary.
        """
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise TypeError(f"limit must be an integer or None, got {type(limit).__name__}")
        items: list[Any] = await self._run(self._get_items, limit)
        return items

    async def _get_items(self, limit: int | None = None) -> list[Any]:
        session_limit = resolve_session_limit(limit, self.session_settings)
        if session_limit == 0:
            return []
        if session_limit is None or session_limit < 0:
            return items_of(await self._session.get_history())
        # Read only the newest messages: one item per message, except where an overlay stands
        # for several; widen the window until it holds enough items or the whole path.
        window = session_limit
        while True:
            recent = await self._session.get_recent_history(max_tokens=0, min_messages=window)
            items = items_of(recent.messages)
            if len(items) >= session_limit or not recent.truncated:
                return items[-session_limit:]
            window *= 2

    async def add_items(self, items: list[Any]) -> None:
        """Append ``items`` in one transaction, each the child of the one before."""
        await self._mutate(self._add_items, items)

    async def _add_items(self, items: list[Any]) -> None:
        if not items:
            return
        session = self._session
        objs = [as_dict(item, "item") for item in items]
        missing = unnamed_outputs(objs, self._call_names)
        if missing:
            # Outputs whose call came in an earlier batch are named after that call.
            recent = await session.get_recent_history(max_tokens=0, min_messages=_NAME_WINDOW)
            self._call_names.update(tool_call_names(recent.messages))
            if missing - self._call_names.keys():
                self._call_names.update(tool_call_names(await session.get_history()))
        self._call_names.update(call_names_of(objs))
        batch = [
            new_message(
                item_message(o, self._call_names),
                AUTO,
                max_message_bytes=session.max_message_bytes,
                tokenizer=session.tokenizer,
            )
            for o in objs
        ]
        inserted = await session.store.append(session.key, batch)
        for item, new in zip(batch, inserted, strict=True):
            if new:
                await session.compactor.after_append(item.message)

    async def pop_item(self) -> Any | None:
        """Remove and return the most recent item (``None`` when the session is empty)."""
        return await self._mutate(self._pop_item)

    async def _pop_item(self) -> Any | None:
        # One transaction holding the session's lock: the item read is the item removed, and
        # a concurrent pop_item waits and then takes the next one.
        session = self._session
        while True:
            async with session.store.transaction(lock=[session.key]):
                leaf = await session.get_latest_leaf()
                if leaf is None:
                    return None
                plan = pop_plan(await self._run_of(leaf), leaf)
                if plan.rewrite is not None:
                    await session.update_message(plan.rewrite)
                if plan.delete:
                    await session.delete_messages(plan.delete)
            if plan.item is not None:
                return plan.item

    async def _run_of(self, leaf: dict[str, Any]) -> list[dict[str, Any]]:
        """A suffix of the path as get_items reads it that holds the whole run ``leaf`` ends
        (just ``[leaf]`` when a compaction summarises the leaf itself)."""
        window = 8
        while True:
            recent = await self._session.get_recent_history(max_tokens=0, min_messages=window)
            messages = recent.messages
            if not messages or messages[-1].get("id") != leaf["id"]:
                return [leaf]
            if run_start(messages) is not None or not recent.truncated:
                return messages
            window *= 2

    async def clear_session(self) -> None:
        """Remove every item (and the session's compactions and search rows)."""
        await self._mutate(self._clear_session)

    async def _clear_session(self) -> None:
        await self._session.clear_messages()


async def memory_tools(session_or_manager: Any) -> list[FunctionTool]:
    """The generated memory tools of a session (or ``session_search`` of a manager) as Agents SDK
    ``FunctionTool`` objects.

    Names and descriptions are mindstore's (DESIGN §4.6); each schema is the strict form of
    mindstore's (closed objects, every property required, optional ones nullable — ``null``
    means "not given"), so ``strict_json_schema`` is on. A call returns the tool's string —
    the same text as ``await toolset.execute(name, arguments)`` — and never raises into the
    run: a bad call comes back as ``Error: <reason>`` for the model to read. Each call runs
    against the session as it is then (blocks added meanwhile, skills loaded meanwhile); the
    descriptions are those of the moment :func:`memory_tools` was awaited (call it again for a
    new agent to list newly loaded skills in ``unload_context``).

    Args:
        session_or_manager: a :class:`~mindstore.Session` (its blocks' ``set_context``,
            ``load_context``, ``unload_context``, ``search_context``, as present) or a
            :class:`~mindstore.SessionManager` (``session_search``), async or from
            :mod:`mindstore.sync`. Concatenate the lists for both.

    Raises:
        TypeError: the argument is neither a Session nor a SessionManager.
    """
    source = ToolSource(session_or_manager, what="memory_tools")
    return [
        _function_tool(source, tool.name, tool.description, tool.parameters)
        for tool in await source.tools()
    ]


def _function_tool(
    source: ToolSource, name: str, description: str, parameters: dict[str, Any]
) -> FunctionTool:
    async def invoke(_ctx: Any, arguments: str) -> str:
        return await source.execute(name, arguments)

    return FunctionTool(
        name=name,
        description=description,
        params_json_schema=strict_schema(parameters),
        on_invoke_tool=invoke,
        strict_json_schema=True,
    )


def memory_instructions(session: Any) -> Any:
    """An ``instructions`` callable for ``Agent(instructions=...)`` returning the session's
    frozen system prompt (DESIGN §4.5).

    The SDK calls it before every model call; it returns the identical string turn after turn
    and run after run (the provider's prefix cache stays warm), even after ``set_context``
    writes — those show from the next refresh on: :meth:`~mindstore.Session.refresh_system_prompt`,
    ``clear_messages()`` or a successful compaction, and in every new session (a
    ``scope="namespace"`` block written in one conversation is in the next one's prompt).

    Args:
        session: a :class:`~mindstore.Session`, async or from :mod:`mindstore.sync`.

    Raises:
        TypeError: ``session`` is not a Session.
    """
    source = ToolSource(session, what="memory_instructions")
    if not isinstance(source.source, Session):
        raise TypeError(
            "memory_instructions takes a Session (the manager has no system prompt), got "
            f"{type(session).__name__}"
        )
    freeze = source.source.freeze_system_prompt

    async def instructions(_ctx: RunContextWrapper[Any], _agent: Agent[Any]) -> str:
        prompt: str = await source.run(freeze)
        return prompt

    return instructions
