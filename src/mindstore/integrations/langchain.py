"""mindstore's memory tools as LangChain tools (the ``langchain`` extra).

``await memory_tools(session_or_manager)`` returns the generated memory tools (DESIGN §4.6) of a
:class:`~mindstore.Session` — ``set_context``, ``load_context``, ``unload_context``,
``search_context``, as its blocks call for — or ``session_search`` of a
:class:`~mindstore.SessionManager`, as LangChain ``StructuredTool`` objects. Bind them to a chat
model, hand them to LangGraph's ``create_react_agent`` or a ``ToolNode``::

    tools = await memory_tools(session) + await memory_tools(manager)
    agent = create_react_agent(model, tools, prompt=await session.freeze_system_prompt())

Each tool has mindstore's name, description and JSON schema (``args_schema`` is that schema);
its result is mindstore's string, and it never raises into the graph: a bad call comes back as
``Error: <reason>`` for the model to read. ``null`` for an optional argument means "not given"
(what strict-mode models send). Each call runs against the session as it is then.

Async sources give async tools (``ainvoke``; a graph run with ``ainvoke``/``astream``); tools of
a :mod:`mindstore.sync` session or manager also run synchronously (``invoke``, a graph run with
``invoke``), on that store's loop thread — also inside Jupyter, where a loop already runs.
"""

from __future__ import annotations

from typing import Any

from mindstore.errors import MissingDependencyError
from mindstore.integrations._tool_bridge import ToolSource

try:
    from langchain_core.tools import StructuredTool
except ImportError as exc:  # pragma: no cover - exercised by tests/meta/test_extras.py
    raise MissingDependencyError("langchain-core", "langchain") from exc

__all__ = ["memory_tools"]


async def memory_tools(session_or_manager: Any) -> list[StructuredTool]:
    """The memory tools of a session (or ``session_search`` of a manager) as LangChain
    ``StructuredTool`` objects, in mindstore's order.

    Descriptions are those of the moment this is awaited (call it again to list newly loaded
    skills in ``unload_context``'s description); execution always uses the current tools.

    Args:
        session_or_manager: a :class:`~mindstore.Session` or :class:`~mindstore.SessionManager`,
            async or from :mod:`mindstore.sync`. Concatenate the lists for both.

    Raises:
        TypeError: the argument is neither a Session nor a SessionManager.
    """
    source = ToolSource(session_or_manager, what="memory_tools")
    return [
        _structured_tool(source, tool.name, tool.description, tool.parameters)
        for tool in await source.tools()
    ]


def _structured_tool(
    source: ToolSource, name: str, description: str, parameters: dict[str, Any]
) -> StructuredTool:
    async def run(**arguments: Any) -> str:
        return await source.execute(name, arguments)

    func = None
    loop = source.loop
    if loop is not None:

        def func(**arguments: Any) -> str:
            result: str = loop.call(source.execute, name, arguments)
            return result

    return StructuredTool(
        name=name,
        description=description,
        args_schema=dict(parameters),
        coroutine=run,
        func=func,
    )
