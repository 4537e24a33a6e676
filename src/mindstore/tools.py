"""Tools an agent can call, and their shapes for the model APIs.

A :class:`Tool` is a name, a description, a JSON-Schema ``parameters`` object and an ``execute``
callable taking the decoded arguments (a dict) and returning a string. A :class:`ToolSet` is an
immutable mapping of name → tool with one entry point for the agent loop:

    result = await tools.execute(name, arguments)   # arguments: dict or JSON string

Invariant: ``ToolSet.execute`` never raises into the agent loop (cancellation aside). Unknown
tools, arguments that are not JSON or not an object, missing required arguments, values outside
an ``enum``, wrong basic types and exceptions inside a tool all come back as ``"Error: <reason>"``
so the model can read the reason and try again.

Adapters render the set for each model API: :meth:`ToolSet.to_openai` (Chat Completions),
:meth:`ToolSet.to_openai_responses` (Responses API) and :meth:`ToolSet.to_anthropic` (Messages).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from mindstore._async import maybe_await

__all__ = ["Tool", "ToolSet"]

ToolFunction = Callable[[dict[str, Any]], "Awaitable[str] | str"]

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Tool:
    """One callable tool.

    Attributes:
        name: the name the model calls it by (``^[a-zA-Z0-9_-]{1,64}$`` for every model API).
        description: what it does, for the model.
        parameters: a JSON-Schema object (``{"type": "object", "properties": ..., ...}``).
        execute: ``execute(arguments) -> str``, async or sync. Call it through
            :meth:`ToolSet.execute`, which validates arguments and turns exceptions into
            ``"Error: ..."`` strings.
    """

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    execute: ToolFunction

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("Tool name must be a non-empty string")
        if not callable(self.execute):
            raise TypeError(f"Tool {self.name!r}: execute must be callable")
        if not isinstance(self.parameters, dict) or self.parameters.get("type") != "object":
            raise ValueError(
                f'Tool {self.name!r}: parameters must be a {{"type": "object"}} schema'
            )


class ToolSet(Mapping[str, Tool]):
    """An immutable mapping of tool name → :class:`Tool`.

    ``a | b`` returns a new set with the tools of both; on a name clash ``b`` wins (like
    ``dict | dict``).
    """

    __slots__ = ("_tools",)

    def __init__(self, tools: Iterable[Tool] | Mapping[str, Tool] = ()) -> None:
        items = tools.values() if isinstance(tools, Mapping) else tools
        self._tools: dict[str, Tool] = {}
        for tool in items:
            if not isinstance(tool, Tool):
                raise TypeError(f"ToolSet takes Tool objects, got {type(tool).__name__}")
            self._tools[tool.name] = tool

    # ---- Mapping ---------------------------------------------------------------------------
    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolSet({list(self._tools)!r})"

    def __or__(self, other: object) -> ToolSet:
        if not isinstance(other, Mapping):
            return NotImplemented
        merged = dict(self._tools)
        for tool in other.values():
            if not isinstance(tool, Tool):
                return NotImplemented
            merged[tool.name] = tool
        return ToolSet(merged.values())

    def __ror__(self, other: object) -> ToolSet:
        if not isinstance(other, Mapping):
            return NotImplemented
        return ToolSet(other) | self

    # ---- execution -------------------------------------------------------------------------
    async def execute(self, name: str, arguments: Mapping[str, Any] | str | None = None) -> str:
        """Run tool ``name`` with ``arguments`` (a dict, a JSON object string, or None).

        Returns:
            The tool's result, or ``"Error: <reason>"``. Never raises (except cancellation).
        """
        try:
            tool = self._tools.get(name) if isinstance(name, str) else None
            if tool is None:
                available = ", ".join(self._tools) or "none"
                return f"Error: unknown tool {name!r}. Available tools: {available}"
            args = _decode_arguments(arguments)
            if isinstance(args, str):
                return args
            problem = _check_arguments(tool.parameters, args)
            if problem is not None:
                return f"Error: {problem}"
            result = await maybe_await(tool.execute(args))
            if isinstance(result, str):
                return result
            if result is None:
                return ""
            return json.dumps(result, ensure_ascii=False, default=str)
        except Exception as exc:  # a tool never raises into the agent loop
            reason = str(exc) or type(exc).__name__
            return f"Error: {reason}"

    # ---- model-API adapters ----------------------------------------------------------------
    def to_openai(self) -> list[dict[str, Any]]:
        """Chat Completions ``tools``: ``[{"type": "function", "function": {...}}]``."""
        return [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": _copy_schema(t.parameters),
                },
            }
            for t in self._tools.values()
        ]

    def to_openai_responses(self) -> list[dict[str, Any]]:
        """Responses API ``tools``: ``[{"type": "function", "name": ..., ...}]``."""
        return [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": _copy_schema(t.parameters),
                "strict": False,
            }
            for t in self._tools.values()
        ]

    def to_anthropic(self) -> list[dict[str, Any]]:
        """Anthropic Messages ``tools``: ``[{"name", "description", "input_schema"}]``."""
        return [
            {
                "name": t.name,
                "description": t.description,
                "input_schema": _copy_schema(t.parameters),
            }
            for t in self._tools.values()
        ]


def _copy_schema(schema: dict[str, Any]) -> dict[str, Any]:
    # Callers may mutate what they send to a model API; never hand out our own dicts.
    copied: dict[str, Any] = json.loads(json.dumps(schema))
    return copied


def _decode_arguments(arguments: Any) -> dict[str, Any] | str:
    """The arguments as a dict, or an ``"Error: ..."`` string."""
    if arguments is None:
        return {}
    if isinstance(arguments, (str, bytes, bytearray)):
        text = arguments.decode() if isinstance(arguments, (bytes, bytearray)) else arguments
        if not text.strip():
            return {}
        try:
            arguments = json.loads(text)
        except ValueError as exc:
            return f"Error: arguments are not valid JSON ({exc}); send a JSON object"
    if not isinstance(arguments, Mapping):
        return f"Error: arguments must be a JSON object, got {type(arguments).__name__}"
    return dict(arguments)


def _type_ok(value: Any, expected: Any) -> bool:
    names = expected if isinstance(expected, list) else [expected]
    for name in names:
        kinds = _JSON_TYPES.get(name)
        if kinds is None:
            return True  # a type we do not check
        if isinstance(value, bool) and name in ("integer", "number"):
            continue
        if isinstance(value, kinds):
            return True
    return False


def _check_arguments(schema: Mapping[str, Any], args: Mapping[str, Any]) -> str | None:
    """A shallow JSON-Schema check (required, basic types, enums) of top-level arguments."""
    properties = schema.get("properties") or {}
    for name in schema.get("required") or ():
        if name not in args:
            return f"missing required argument {name!r}"
        if args[name] is None:
            return f"argument {name!r} is required and cannot be null"
    for name, value in args.items():
        spec = properties.get(name)
        if not isinstance(spec, Mapping) or value is None:
            continue
        if "type" in spec and not _type_ok(value, spec["type"]):
            return f"argument {name!r} must be of type {spec['type']}, got {type(value).__name__}"
        if "enum" in spec and value not in spec["enum"]:
            allowed = ", ".join(json.dumps(v) for v in spec["enum"])
            return f"argument {name!r} must be one of {allowed}, got {json.dumps(value)}"
    return None
