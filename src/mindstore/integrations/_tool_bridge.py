"""What every framework adapter of the memory tools shares (pure, no framework imports).

mindstore's generated tools (DESIGN §4.6) are a :class:`~mindstore.tools.ToolSet`: a name, a
description, a JSON-Schema ``parameters`` object and ``execute`` that always returns a string.
An adapter (Agents SDK ``FunctionTool``, LangChain ``StructuredTool``) needs three things from
them, written once here:

- :func:`strict_schema` — the OpenAI *strict* form of a schema (every object closed with
  ``additionalProperties: false``, every property required, the optional ones made nullable),
  which models fill far more reliably. It accepts exactly the calls the original accepts,
  plus ``null`` for an optional argument, which means "not given".
- :func:`drop_nulls` — undoes that: ``null`` optional arguments (at any depth) are removed
  before the tool runs, so the tool sees what it would have seen without strict mode.
- :class:`ToolSource` — where the tools come from: a :class:`~mindstore.Session` (the memory
  tools of its blocks), a :class:`~mindstore.SessionManager` (``session_search``), or their
  :mod:`mindstore.sync` twins (run on the twin's own loop thread). Each call regenerates the set
  (``unload_context`` depends on what is loaded; blocks may be added at run time), so a tool
  always runs against the session as it is now.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Mapping
from typing import Any

from mindstore.manager import SessionManager
from mindstore.session import Session
from mindstore.tools import Tool, ToolSet

__all__ = ["ToolSource", "drop_nulls", "strict_schema"]


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The strict form of a tool's JSON schema (a new dict; ``schema`` is not changed)."""
    out = copy.deepcopy(dict(schema))
    _close(out)
    return out


def _close(node: dict[str, Any]) -> None:
    properties = node.get("properties")
    if node.get("type") == "object" or isinstance(properties, dict):
        node["type"] = "object"
        props: dict[str, Any] = properties if isinstance(properties, dict) else {}
        node["properties"] = props
        required = set(node.get("required") or ())
        for name, spec in props.items():
            if isinstance(spec, dict):
                _close(spec)
                if name not in required:
                    _make_nullable(spec)
        node["required"] = list(props)
        node["additionalProperties"] = False
    items = node.get("items")
    if isinstance(items, dict):
        _close(items)


def _make_nullable(spec: dict[str, Any]) -> None:
    kind = spec.get("type")
    if isinstance(kind, list):
        if "null" not in kind:
            spec["type"] = [*kind, "null"]
    elif isinstance(kind, str):
        spec["type"] = [kind, "null"]
    else:
        spec["anyOf"] = [{k: spec.pop(k) for k in list(spec) if k != "description"}]
        spec["anyOf"].append({"type": "null"})
    if isinstance(spec.get("enum"), list) and None not in spec["enum"]:
        spec["enum"] = [*spec["enum"], None]


def drop_nulls(arguments: Any) -> Any:
    """``arguments`` without its ``null`` values (in objects, at any depth); other values are
    returned as they are. A required argument sent as ``null`` is dropped too, and the tool
    then reports it missing (``Error: missing required argument ...``)."""
    if isinstance(arguments, dict):
        return {k: drop_nulls(v) for k, v in arguments.items() if v is not None}
    if isinstance(arguments, list):
        return [drop_nulls(v) for v in arguments]
    return arguments


def decode_strict_arguments(text: str | Mapping[str, Any] | None) -> Any:
    """Arguments from a strict-mode call, ready for :meth:`ToolSet.execute`: a JSON object
    string becomes a dict without its ``null`` values; anything else is passed on unchanged
    (``execute`` reports it as ``Error: ...``)."""
    if isinstance(text, Mapping):
        return drop_nulls(dict(text))
    if isinstance(text, str):
        try:
            decoded = json.loads(text) if text.strip() else {}
        except ValueError:
            return text
        return drop_nulls(decoded) if isinstance(decoded, dict) else text
    return text


class ToolSource:
    """The tool set of a session or a manager (async or :mod:`mindstore.sync`), regenerated on
    every :meth:`toolset` call and executed on the right loop.

    Raises:
        TypeError: ``source`` is neither a Session nor a SessionManager.
    """

    def __init__(self, source: Any, *, what: str) -> None:
        from mindstore import sync

        self._loop: sync.Loop | None = None
        if isinstance(source, sync.Session | sync.SessionManager):
            self._loop = source._loop
            source = source.aio
        if not isinstance(source, Session | SessionManager):
            raise TypeError(
                f"{what} takes a mindstore Session or SessionManager (async or from "
                f"mindstore.sync), got {type(source).__name__}"
            )
        self.source: Session | SessionManager = source

    @property
    def loop(self) -> Any:
        """The :class:`mindstore.sync.Loop` of a sync source (``None`` for an async one)."""
        return self._loop

    async def run(self, fn: Any, *args: Any) -> Any:
        """``await fn(*args)``, on the sync twin's loop thread when the source was one."""
        if self._loop is None:
            return await fn(*args)
        return await asyncio.wrap_future(self._loop.submit(fn, *args))

    async def toolset(self) -> ToolSet:
        """The source's tools as they are now."""
        tools: ToolSet = await self.run(self.source.tools)
        return tools

    async def execute(self, name: str, arguments: Any) -> str:
        """Run tool ``name`` of the current set; always a string (``Error: ...`` on failure,
        including a tool that has disappeared since it was listed)."""
        tools = await self.toolset()
        result: str = await self.run(tools.execute, name, decode_strict_arguments(arguments))
        return result

    async def tools(self) -> list[Tool]:
        """The tools now, in the set's order."""
        return list((await self.toolset()).values())
