"""Tool / ToolSet: execution never raises, and adapters match the official SDK param types."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import TypeAdapter

from mindstore.tools import Tool, ToolSet

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "enum": ["memory", "todos"]},
        "content": {"type": "string"},
        "count": {"type": "integer"},
    },
    "required": ["label", "content"],
}


async def _echo(args: dict[str, Any]) -> str:
    return f"{args['label']}={args['content']}"


def _sync(args: dict[str, Any]) -> str:
    return "sync ok"


async def _boom(args: dict[str, Any]) -> str:
    raise RuntimeError("the disk is on fire")


async def _empty_boom(args: dict[str, Any]) -> str:
    raise KeyError


def make_set() -> ToolSet:
    return ToolSet(
        [
            Tool(name="echo", description="Echo.", parameters=SCHEMA, execute=_echo),
            Tool(name="sync", description="Sync.", execute=_sync),
            Tool(name="boom", description="Fails.", execute=_boom),
            Tool(name="empty_boom", description="Fails silently.", execute=_empty_boom),
        ]
    )


async def test_execute_dict_and_json_string() -> None:
    ts = make_set()
    assert await ts.execute("echo", {"label": "memory", "content": "hi"}) == "memory=hi"
    assert await ts.execute("echo", '{"label": "todos", "content": "x"}') == "todos=x"
    assert await ts.execute("sync", None) == "sync ok"
    assert await ts.execute("sync", "") == "sync ok"
    assert await ts.execute("sync", b"{}") == "sync ok"


@pytest.mark.parametrize(
    ("name", "arguments", "needle"),
    [
        ("nope", {}, "unknown tool 'nope'"),
        (None, {}, "unknown tool"),
        ("echo", "{not json", "not valid JSON"),
        ("echo", "[1, 2]", "must be a JSON object"),
        ("echo", 42, "must be a JSON object"),
        ("echo", {"label": "memory"}, "missing required argument 'content'"),
        ("echo", {"label": "memory", "content": None}, "'content' is required and cannot be null"),
        ("echo", {"label": "other", "content": "x"}, "must be one of"),
        ("echo", {"label": "memory", "content": 5}, "must be of type string"),
        ("echo", {"label": "memory", "content": "x", "count": True}, "must be of type integer"),
        ("boom", {}, "the disk is on fire"),
        ("empty_boom", {}, "KeyError"),
    ],
)
async def test_execute_never_raises(name: Any, arguments: Any, needle: str) -> None:
    result = await make_set().execute(name, arguments)
    assert result.startswith("Error: ")
    assert needle in result


async def test_cancellation_propagates() -> None:
    async def slow(args: dict[str, Any]) -> str:
        await asyncio.sleep(10)
        return "late"

    ts = ToolSet([Tool(name="slow", description="Slow.", execute=slow)])
    task = asyncio.create_task(ts.execute("slow", {}))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_mapping_and_merge() -> None:
    a = make_set()
    replacement = Tool(name="sync", description="Replaced.", execute=_sync)
    extra = Tool(name="extra", description="Extra.", execute=_sync)
    merged = a | ToolSet([replacement, extra])
    assert list(merged) == ["echo", "sync", "boom", "empty_boom", "extra"]
    assert merged["sync"].description == "Replaced."
    assert len(a) == 4 and a["sync"].description == "Sync."  # operands unchanged
    assert isinstance({"extra": extra} | a, ToolSet)
    assert "echo" in a and "missing" not in a


def test_tool_validation() -> None:
    with pytest.raises(ValueError):
        Tool(name="", description="", execute=_sync)
    with pytest.raises(ValueError):
        Tool(name="x", description="", parameters={"type": "string"}, execute=_sync)
    with pytest.raises(TypeError):
        Tool(name="x", description="", execute="not callable")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ToolSet(["not a tool"])  # type: ignore[list-item]


def test_openai_chat_adapter_validates_against_sdk() -> None:
    from openai.types.chat import ChatCompletionToolParam

    tools = make_set().to_openai()
    adapter = TypeAdapter(list[ChatCompletionToolParam])
    validated = adapter.validate_python(tools, strict=True)
    assert validated == tools  # no key was dropped as unknown
    assert tools[0] == {
        "type": "function",
        "function": {"name": "echo", "description": "Echo.", "parameters": SCHEMA},
    }


def test_openai_responses_adapter_validates_against_sdk() -> None:
    from openai.types.responses import FunctionToolParam

    tools = make_set().to_openai_responses()
    validated = TypeAdapter(list[FunctionToolParam]).validate_python(tools, strict=True)
    assert validated == tools  # no key was dropped as unknown
    assert tools[0]["type"] == "function"
    assert tools[0]["name"] == "echo"
    assert tools[0]["parameters"] == SCHEMA


def test_anthropic_adapter_validates_against_sdk() -> None:
    from anthropic.types import ToolParam

    tools = make_set().to_anthropic()
    validated = TypeAdapter(list[ToolParam]).validate_python(tools, strict=True)
    assert validated == tools  # no key was dropped as unknown
    assert tools[0] == {"name": "echo", "description": "Echo.", "input_schema": SCHEMA}


def test_adapters_return_copies() -> None:
    ts = make_set()
    ts.to_openai()[0]["function"]["parameters"]["properties"].clear()
    ts.to_anthropic()[0]["input_schema"]["required"].append("zzz")
    assert ts["echo"].parameters == SCHEMA
