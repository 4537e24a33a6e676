"""The memory tools and the frozen prompt in the OpenAI Agents SDK, on both backends.

``examples/memory_agent.py`` (soul + memory + skills + ``session_search``) is driven through
``Runner.run`` by a scripted ``Model`` (no network): Monday's run writes a fact with
``set_context`` and loads a skill; Tuesday's run — a new conversation — finds the fact in its
system prompt and Monday's words through ``session_search``.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    FunctionTool,
    Model,
    ModelResponse,
    Runner,
    Usage,
    set_tracing_disabled,
)
from agents.strict_schema import ensure_strict_json_schema
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from mindstore import Session, SessionManager
from mindstore.integrations.openai_agents import memory_instructions, memory_tools
from mindstore.store.base import Store

set_tracing_disabled(True)

ROOT = Path(__file__).resolve().parents[2]
FACT = "User drinks green tea."


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location(
        "memory_agent", ROOT / "examples" / "memory_agent.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["memory_agent"] = module
    spec.loader.exec_module(module)
    return module


def say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{abs(hash(text)) % 10**8}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def call(name: str, args: dict[str, Any] | str, call_id: str) -> ResponseFunctionToolCall:
    arguments = args if isinstance(args, str) else json.dumps(args)
    return ResponseFunctionToolCall(
        type="function_call", call_id=call_id, name=name, arguments=arguments
    )


Step = Callable[[str | None, list[Any]], list[Any]]


class ScriptedModel(Model):
    """Each model call runs the next step: ``step(system_instructions, input) -> output``.
    Records the instructions and the tools of every call."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = list(steps)
        self.systems: list[str | None] = []
        self.tools: list[list[Any]] = []

    async def get_response(  # type: ignore[override]
        self, system_instructions: str | None, input: Any, model_settings: Any, tools: Any,
        *args: Any, **kwargs: Any,
    ) -> ModelResponse:  # fmt: skip
        self.systems.append(system_instructions)
        self.tools.append(list(tools))
        items = list(input) if isinstance(input, list) else [{"role": "user", "content": input}]
        return ModelResponse(
            output=self.steps.pop(0)(system_instructions, items), usage=Usage(), response_id=None
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def output_of(items: list[Any], call_id: str) -> str:
    (out,) = [
        i for i in items if i.get("type") == "function_call_output" and i["call_id"] == call_id
    ]
    return str(out["output"])


async def test_example_agent_writes_a_fact_and_finds_it_in_a_later_run(store: Store) -> None:
    example = load_example()
    seen: dict[str, str] = {}

    def monday_write(system: str | None, items: list[Any]) -> list[Any]:
        assert system is not None and "MEMORY (Important facts about the user)" in system
        assert "- tea-brewing: How to brew green, black and oolong tea" in system
        # strict mode: the optional action is sent as null, meaning "not given"
        return [
            call("set_context", {"label": "memory", "content": FACT, "action": None}, "c1"),
            call("load_context", {"label": "skills", "key": "tea-brewing"}, "c2"),
        ]

    def monday_reply(system: str | None, items: list[Any]) -> list[Any]:
        seen["write"] = output_of(items, "c1")
        seen["skill"] = output_of(items, "c2")
        return [say("Noted: green tea, 80 °C for 2 minutes.")]

    def tuesday_search(system: str | None, items: list[Any]) -> list[Any]:
        seen["tuesday_system"] = system or ""
        return [call("session_search", {"query": "green tea", "mode": None}, "c3")]

    def tuesday_reply(system: str | None, items: list[Any]) -> list[Any]:
        seen["search"] = output_of(items, "c3")
        return [say("You drink green tea.")]

    model = ScriptedModel([monday_write, monday_reply, tuesday_search, tuesday_reply])
    agent, monday = await example.build_agent(store, "monday", namespace="user-7", model=model)
    first = await Runner.run(agent, "Hi! I drink green tea.", session=monday)
    assert first.final_output == "Noted: green tea, 80 °C for 2 minutes."
    assert seen["write"].startswith("Written to memory. Usage: ")
    assert "Green tea: 80 °C water, 2 minutes." in seen["skill"]
    # the fact is stored, but Monday's prompt stayed frozen across the run's turns
    assert model.systems[0] == model.systems[1] and FACT not in (model.systems[1] or "")

    agent, tuesday = await example.build_agent(store, "tuesday", namespace="user-7", model=model)
    second = await Runner.run(agent, "What do I drink?", session=tuesday)
    assert second.final_output == "You drink green tea."
    assert FACT in seen["tuesday_system"]  # namespace-wide memory, in the new prompt
    assert "· user · " in seen["search"] and "] Hi! I drink green tea." in seen["search"]

    # The tools the model was offered: mindstore's names and descriptions, strict schemas.
    offered = {t.name: t for t in model.tools[0]}
    assert set(offered) == {"set_context", "load_context", "unload_context", "session_search"}
    for tool in offered.values():
        assert isinstance(tool, FunctionTool) and tool.strict_json_schema
        schema = tool.params_json_schema
        assert ensure_strict_json_schema(copy.deepcopy(schema)) == schema
    manager_tools = await SessionManager(store, namespace="user-7").tools()
    assert offered["session_search"].description == manager_tools["session_search"].description
    # Monday's history holds the whole run (user turn, two calls, two outputs, reply).
    history = await Session.create(store, "monday", namespace="user-7").get_history()
    assert history[0]["role"] == "user" and len(history) == 6


async def test_descriptions_match_and_bad_calls_come_back_as_errors(store: Store) -> None:
    session = (
        Session.create(store, "s1")
        .with_context("memory", description="Facts", max_tokens=20)
    )  # fmt: skip
    tools = await memory_tools(session)
    native = await session.tools()
    assert [(t.name, t.description) for t in tools] == [
        (t.name, t.description) for t in native.values()
    ]
    (set_context,) = tools
    props = set_context.params_json_schema["properties"]
    assert props["action"]["enum"] == ["replace", "append", None]
    assert set_context.params_json_schema["required"] == list(props)

    outputs: dict[str, str] = {}

    def calls(system: str | None, items: list[Any]) -> list[Any]:
        return [
            call("set_context", {"label": "todos", "content": "x", "action": None}, "b1"),
            call("set_context", {"label": "memory", "content": "word " * 40, "action": None}, "b2"),
            call("set_context", "not json", "b3"),
            call("set_context", {"label": "memory", "content": "ok", "action": "append"}, "b4"),
        ]

    def reply(system: str | None, items: list[Any]) -> list[Any]:
        for cid in ("b1", "b2", "b3", "b4"):
            outputs[cid] = output_of(items, cid)
        return [say("done")]

    model = ScriptedModel([calls, reply])
    agent: Agent[Any] = Agent(
        name="a", instructions=memory_instructions(session), tools=list(tools), model=model
    )
    result = await Runner.run(agent, "go")
    assert result.final_output == "done"
    assert outputs["b1"].startswith("Error: argument 'label' must be one of")
    assert outputs["b2"].startswith('Error: Block "memory" exceeds maxTokens')
    assert outputs["b3"].startswith("Error:")
    assert outputs["b4"] == "Written to memory. Usage: 10% (2/20 tokens)"
    block = await session.get_context_block("memory")
    assert block is not None and block.content == "ok"  # refused writes changed nothing


async def test_instructions_stay_frozen_until_a_refresh(store: Store) -> None:
    session = Session.create(store, "s2").with_context("memory", description="Facts")
    instructions = memory_instructions(session)
    agent: Agent[Any] = Agent(name="a")
    before = await instructions(None, agent)  # type: ignore[arg-type]
    await session.replace_context_block("memory", FACT)
    assert await instructions(None, agent) == before  # type: ignore[arg-type]
    await session.refresh_system_prompt()
    assert FACT in await instructions(None, agent)  # type: ignore[arg-type]


def test_sync_objects_work_in_a_run(tmp_path: Path) -> None:
    import asyncio

    import mindstore.sync as msync

    with msync.SQLiteStore(tmp_path / "s.db") as store:
        session = msync.Session(store, "s").with_context("memory", description="Facts")
        outputs: list[str] = []

        def write(system: str | None, items: list[Any]) -> list[Any]:
            return [call("set_context", {"label": "memory", "content": FACT, "action": None}, "s1")]

        def reply(system: str | None, items: list[Any]) -> list[Any]:
            outputs.append(output_of(items, "s1"))
            return [say("ok")]

        async def run() -> None:
            agent: Agent[Any] = Agent(
                name="a",
                instructions=memory_instructions(session),
                tools=await memory_tools(session) + await memory_tools(msync.SessionManager(store)),
                model=ScriptedModel([write, reply]),
            )
            await Runner.run(agent, "remember")

        asyncio.run(run())
        assert outputs == ["Written to memory. Usage: 6 tokens"]
        block = session.get_context_block("memory")
        assert block is not None and block.content == FACT


@pytest.mark.parametrize("bad", [None, "session", 42])
def test_anything_else_is_a_type_error(bad: Any) -> None:
    with pytest.raises(TypeError, match="Session or SessionManager"):
        memory_instructions(bad)


async def test_the_manager_has_no_prompt(store: Store) -> None:
    with pytest.raises(TypeError, match="takes a Session"):
        memory_instructions(SessionManager(store))


async def test_keyed_entries_with_null_metadata_fields_through_a_run(store: Store) -> None:
    """Strict mode sends every nested field; nulls inside ``metadata`` mean "not given"."""
    from mindstore import StoreSearchProvider

    session = Session.create(store, "kb").with_context(
        "knowledge", description="Runbooks", provider=StoreSearchProvider(store)
    )
    outputs: dict[str, str] = {}
    entry = {
        "label": "knowledge",
        "content": "Restart the ingest worker with systemctl restart ingest.",
        "action": None,
        "metadata": {"title": "Ingest runbook", "description": None},
    }

    def calls(system: str | None, items: list[Any]) -> list[Any]:
        return [call("set_context", entry, "k1")]

    def search(system: str | None, items: list[Any]) -> list[Any]:
        outputs["k1"] = output_of(items, "k1")
        return [call("search_context", {"label": "knowledge", "query": "ingest worker"}, "k2")]

    def reply(system: str | None, items: list[Any]) -> list[Any]:
        outputs["k2"] = output_of(items, "k2")
        return [say("done")]

    agent: Agent[Any] = Agent(
        name="a",
        instructions=memory_instructions(session),
        tools=await memory_tools(session),
        model=ScriptedModel([calls, search, reply]),
    )
    await Runner.run(agent, "store the runbook")
    assert outputs["k1"] == 'Indexed "ingest-runbook" in knowledge.'
    assert "systemctl restart ingest" in outputs["k2"]
