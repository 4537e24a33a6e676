"""mindstore's memory tools as LangChain tools, in LangGraph's prebuilt agent and ToolNode.

A scripted chat model (a ``BaseChatModel`` whose replies are test functions; no network) drives
``create_react_agent``; ``ToolNode`` runs the tools of a :mod:`mindstore.sync` session under a
synchronous ``invoke`` inside a running event loop (the Jupyter case).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from mindstore import Session, SessionManager
from mindstore.integrations.langchain import memory_tools
from mindstore.store.base import Store

FACT = "User drinks green tea."

Step = Callable[[list[BaseMessage]], AIMessage]


class ScriptedChatModel(BaseChatModel):
    """Each call answers with the next step's message; records the tools bound to it."""

    steps: list[Step]
    bound: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        self.bound = [convert_to_openai_tool(t) for t in tools]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        reply = self.steps.pop(0)(messages)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def tool_call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


def react_agent(model: BaseChatModel, tools: list[StructuredTool], prompt: str) -> Any:
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():  # moved to langchain.agents in LangGraph 1.x; still works
        warnings.simplefilter("ignore", DeprecationWarning)
        return create_react_agent(model, tools, prompt=prompt)


async def test_react_agent_writes_memory_and_searches_history(store: Store) -> None:
    session = Session.create(store, "s1", namespace="u").with_context(
        "memory", description="Facts", max_tokens=50
    )
    manager = SessionManager(store, namespace="u")
    await manager.append("old", {"id": "m1", "role": "user", "parts": [
        {"type": "text", "text": "My cat is called Miso."}]})  # fmt: skip
    tools = await memory_tools(session) + await memory_tools(manager)
    seen: dict[str, str] = {}

    def write(messages: list[BaseMessage]) -> AIMessage:
        assert "MEMORY (Facts)" in str(messages[0].content)  # the frozen prompt
        return AIMessage(
            content="",
            tool_calls=[
                {"name": "set_context", "args": {"label": "memory", "content": FACT}, "id": "a"},
                {"name": "set_context", "args": {"label": "nope", "content": "x"}, "id": "b"},
                {"name": "session_search", "args": {"query": "cat", "mode": None}, "id": "c"},
            ],
        )

    def reply(messages: list[BaseMessage]) -> AIMessage:
        for m in messages:
            if isinstance(m, ToolMessage):
                seen[str(m.tool_call_id)] = str(m.content)
        return AIMessage(content="Done.")

    model = ScriptedChatModel(steps=[write, reply])
    agent = react_agent(model, tools, await session.freeze_system_prompt())
    result = await agent.ainvoke({"messages": [("user", "Remember that I drink green tea.")]})
    assert result["messages"][-1].content == "Done."
    assert seen["a"] == "Written to memory. Usage: 12% (6/50 tokens)"
    assert seen["b"].startswith("Error: argument 'label' must be one of")
    assert "· user · " in seen["c"] and "] My cat is called Miso." in seen["c"]
    block = await session.get_context_block("memory")
    assert block is not None and block.content == FACT

    # The model was offered mindstore's tools exactly: names, descriptions, schemas.
    native = await session.tools() | await manager.tools()
    assert [t["function"]["name"] for t in model.bound] == list(native)
    for bound in model.bound:
        tool = native[bound["function"]["name"]]
        assert bound["function"]["description"] == tool.description
        assert bound["function"]["parameters"] == tool.parameters


async def test_async_tools_refuse_sync_invoke_clearly(store: Store) -> None:
    (tool,) = await memory_tools(Session.create(store, "s").with_context("memory"))
    assert await tool.ainvoke({"label": "memory", "content": "x"}) == (
        "Written to memory. Usage: 2 tokens"
    )
    with pytest.raises(NotImplementedError, match="sync"):
        tool.invoke({"label": "memory", "content": "x"})


async def test_sync_session_tools_run_in_a_tool_node_inside_a_running_loop(tmp_path: Path) -> None:
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    import mindstore.sync as msync

    with msync.SQLiteStore(tmp_path / "s.db") as store:
        session = msync.Session(store, "s").with_context("memory", description="Facts")
        graph = StateGraph(MessagesState)
        graph.add_node("tools", ToolNode(await memory_tools(session)))
        graph.add_edge(START, "tools")
        graph.add_edge("tools", END)
        # a plain, synchronous invoke from inside this test's running loop (as in Jupyter)
        out = graph.compile().invoke(
            {"messages": [tool_call("set_context", {"label": "memory", "content": FACT}, "t1")]}
        )
        message = out["messages"][-1]
        assert isinstance(message, ToolMessage)
        assert message.content == "Written to memory. Usage: 6 tokens"
        block = session.get_context_block("memory")
        assert block is not None and block.content == FACT


@pytest.mark.parametrize("bad", [None, "session", object()])
async def test_anything_else_is_a_type_error(bad: Any) -> None:
    with pytest.raises(TypeError, match="Session or SessionManager"):
        await memory_tools(bad)
