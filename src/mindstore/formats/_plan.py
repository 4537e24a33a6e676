"""Format-neutral planning of a history into model turns. Pure: no I/O.

Every converter in :mod:`mindstore.formats` first turns a mindstore history into a list of
*turns* with this module, then renders the turns in its API's shape. Doing the hard part once
keeps the three formats consistent:

* **Calls** come only from ``assistant`` messages: the first tool part with a given
  ``toolCallId`` in an assistant message is the call. Later tool parts with the same id in any
  message (a ``tool``-role message, a user message, a later assistant message) can only be its
  *result*; a result part whose call never appeared earlier is an orphan and is dropped.
* **Results** are the first part for the call id in state ``output-available`` (the output),
  ``output-error`` (``errorText``, flagged as an error) or ``output-denied`` (flagged as an
  error). The call's own part counts (the usual ``UIMessage`` shape keeps call and output in
  one part).
* A **pending** call (``input-streaming``, ``input-available``, ``approval-*`` — anything
  without a result on the path) is dropped, or with ``pending="stub"`` sent with a stub error
  result (:data:`PENDING_STUB`). A call is never sent without a result and a result never
  without its call.
* Each assistant message is split into **steps** at ``step-start`` parts and wherever text,
  reasoning or a file follows a tool call (the AI SDK's multi-step messages); each step becomes
  one assistant turn immediately followed by one results turn carrying the results of that
  step's calls, in call order. That is the order every API requires.
* A **compaction overlay** (role assistant with ``metadata.compaction``) becomes a *user* turn
  reading ``[Summary of earlier conversation]`` and the summary: the summary is context handed
  to the model, it may stand first in the conversation (Anthropic wants a user turn there),
  and it never goes into the system prompt, which must stay frozen for prefix caching.
* ``system`` messages become system turns; user and ``tool`` messages contribute their text
  and files as a user turn (tool parts in them are results, already placed after their call).
* Unknown part types (``step-start``, ``source-url``, ``data-*``...) send nothing, nor do tool
  parts marked ``providerExecuted`` (built-in tools the provider ran itself, e.g. OpenAI's web
  search: their call and result are not the client's to send back).
"""

from __future__ import annotations

import base64
import binascii
import json
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mindstore.errors import InvalidMessageError
from mindstore.messages import is_tool_part, tool_name

__all__ = [
    "PENDING_STUB",
    "SUMMARY_PREFIX",
    "AssistantTurn",
    "Call",
    "Pending",
    "Result",
    "ResultsTurn",
    "SystemTurn",
    "Turn",
    "UserTurn",
    "check_pending",
    "file_reference",
    "input_as_dict",
    "input_as_json",
    "output_as_text",
    "parse_data_url",
    "plan_turns",
]

Pending = Literal["drop", "stub"]

PENDING_STUB = "Error: the tool call did not complete; no result was recorded."
SUMMARY_PREFIX = "[Summary of earlier conversation]\n\n"

RESULT_STATES = frozenset({"output-available", "output-error", "output-denied"})


@dataclass(slots=True)
class Call:
    """A tool call to send: id, tool name, JSON input, and the part it came from."""

    id: str
    name: str
    input: Any
    part: dict[str, Any]


@dataclass(slots=True)
class Result:
    """The result of one call, as text (non-string outputs are JSON)."""

    id: str
    name: str
    text: str
    is_error: bool


@dataclass(slots=True)
class SystemTurn:
    text: str


@dataclass(slots=True)
class UserTurn:
    """Text (``{"type": "text"}``) and ``file`` parts, in order."""

    parts: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class AssistantTurn:
    """Text, reasoning and file parts and :class:`Call` items, in order."""

    items: list[dict[str, Any] | Call] = field(default_factory=list)

    @property
    def calls(self) -> list[Call]:
        return [i for i in self.items if isinstance(i, Call)]


@dataclass(slots=True)
class ResultsTurn:
    results: list[Result] = field(default_factory=list)


Turn = SystemTurn | UserTurn | AssistantTurn | ResultsTurn


def check_pending(pending: str) -> None:
    """Raise ``ValueError`` unless ``pending`` is ``"drop"`` or ``"stub"``."""
    if pending not in ("drop", "stub"):
        raise ValueError(f'pending must be "drop" or "stub", got {pending!r}')


def output_as_text(output: Any) -> str:
    """A tool output as the string an API takes: strings as-is, anything else as JSON."""
    if isinstance(output, str):
        return output
    if output is None:
        return ""
    return json.dumps(output, ensure_ascii=False)


def input_as_json(value: Any) -> str:
    """A tool input as a JSON arguments string (``{}`` when missing)."""
    if value is None:
        return "{}"
    if isinstance(value, str):
        # A raw argument string kept from a reply whose arguments were not valid JSON.
        return value
    return json.dumps(value, ensure_ascii=False)


def input_as_dict(value: Any) -> dict[str, Any]:
    """A tool input as the JSON object Anthropic requires.

    A JSON-object string is parsed; any other non-object value is wrapped as ``{"input": v}``.
    """
    if isinstance(value, dict):
        return value
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"input": value}
        if isinstance(parsed, dict):
            return parsed
    return {"input": value}


def parse_data_url(url: str) -> tuple[str, str] | None:
    """Split a ``data:`` URL into ``(media_type, base64_data)``; ``None`` for other URLs.

    Non-base64 data URLs are percent-decoded and re-encoded as base64.
    """
    if not url.startswith("data:") or "," not in url:
        return None
    header, _, payload = url[5:].partition(",")
    params = header.split(";")
    media_type = params[0] or "text/plain"
    if "base64" in params[1:]:
        return media_type, payload
    raw = urllib.parse.unquote_to_bytes(payload)
    return media_type, base64.b64encode(raw).decode("ascii")


def decode_text_data(b64: str) -> str | None:
    """Decode base64 text data (UTF-8); ``None`` if it is not valid."""
    try:
        return base64.b64decode(b64, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def file_reference(part: Mapping[str, Any]) -> str:
    """A short text stand-in for a file an API cannot take in that position."""
    media_type = str(part.get("mediaType") or "application/octet-stream")
    name = part.get("filename")
    url = str(part.get("url") or "")
    where = name if isinstance(name, str) and name else ("" if url.startswith("data:") else url)
    return f"[file: {where} ({media_type})]" if where else f"[file ({media_type})]"


def _is_overlay(message: Mapping[str, Any]) -> bool:
    meta = message.get("metadata")
    return (
        message.get("role") == "assistant"
        and isinstance(meta, dict)
        and isinstance(meta.get("compaction"), dict)
    )


def _parts(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    parts = message.get("parts")
    if not isinstance(parts, list):
        return []
    return [p for p in parts if isinstance(p, dict) and isinstance(p.get("type"), str)]


def _text_of(parts: Iterable[Mapping[str, Any]]) -> str:
    return "\n\n".join(
        p["text"] for p in parts if p.get("type") == "text" and isinstance(p.get("text"), str)
    )


def _result_of(part: Mapping[str, Any], call_id: str, name: str) -> Result:
    state = part.get("state")
    if state == "output-available":
        return Result(call_id, name, output_as_text(part.get("output")), False)
    if state == "output-denied":
        approval = part.get("approval")
        reason = approval.get("reason") if isinstance(approval, dict) else None
        text = "Error: the tool call was denied."
        if isinstance(reason, str) and reason:
            text += f" {reason}"
        return Result(call_id, name, text, True)
    error = part.get("errorText")
    text = error if isinstance(error, str) and error else "Error: the tool call failed."
    return Result(call_id, name, text, True)


def _steps(parts: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    steps: list[list[dict[str, Any]]] = [[]]
    for part in parts:
        current = steps[-1]
        if part["type"] == "step-start":
            if current:
                steps.append([])
            continue
        if not is_tool_part(part) and any(is_tool_part(p) for p in current):
            steps.append([part])
            continue
        current.append(part)
    return [s for s in steps if s]


def plan_turns(messages: Iterable[Mapping[str, Any]], pending: str = "drop") -> list[Turn]:
    """Plan ``messages`` (a root-to-leaf history) into turns; see the module docstring.

    Raises:
        InvalidMessageError: a message is not a dict or has an unknown role.
        ValueError: ``pending`` is not ``"drop"`` or ``"stub"``.
    """
    check_pending(pending)
    history = list(messages)
    # Pass 1: where is each call, and what is its result?
    call_at: dict[str, tuple[int, int]] = {}
    results: dict[str, Result] = {}
    for mi, message in enumerate(history):
        if not isinstance(message, Mapping):
            raise InvalidMessageError(
                f"messages[{mi}] must be a dict, got {type(message).__name__}"
            )
        role = message.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            raise InvalidMessageError(
                f"messages[{mi}].role must be system, user, assistant or tool, got {role!r:.40}"
            )
        if _is_overlay(message):
            continue
        for pi, part in enumerate(_parts(message)):
            if not is_tool_part(part) or part.get("providerExecuted") is True:
                continue
            call_id = part.get("toolCallId")
            if not isinstance(call_id, str) or not call_id:
                continue
            if role == "assistant" and call_id not in call_at:
                call_at[call_id] = (mi, pi)
            if call_id in call_at and call_id not in results and part.get("state") in RESULT_STATES:
                results[call_id] = _result_of(part, call_id, tool_name(part))

    # Pass 2: emit turns in history order, each step's results right after it.
    turns: list[Turn] = []
    for mi, message in enumerate(history):
        role = message["role"]
        parts = _parts(message)
        if _is_overlay(message):
            turns.append(UserTurn([{"type": "text", "text": SUMMARY_PREFIX + _text_of(parts)}]))
            continue
        if role == "system":
            text = _text_of(parts)
            if text:
                turns.append(SystemTurn(text))
            continue
        if role in ("user", "tool"):
            content = [p for p in parts if p["type"] in ("text", "file")]
            if content:
                turns.append(UserTurn(content))
            continue
        index_of = {id(p): pi for pi, p in enumerate(parts)}
        for step in _steps(parts):
            turn = AssistantTurn()
            step_results: list[Result] = []
            for part in step:
                if part["type"] in ("text", "reasoning", "file"):
                    turn.items.append(part)
                    continue
                if not is_tool_part(part) or part.get("providerExecuted") is True:
                    continue
                call_id = part.get("toolCallId")
                if not isinstance(call_id, str) or call_at.get(call_id) != (mi, index_of[id(part)]):
                    continue  # a result or a duplicate: placed with its call
                name = tool_name(part)
                result = results.get(call_id)
                if result is None:
                    if pending == "drop":
                        continue
                    result = Result(call_id, name, PENDING_STUB, True)
                turn.items.append(Call(call_id, name, part.get("input"), part))
                step_results.append(result)
            if turn.items:
                turns.append(turn)
            if step_results:
                turns.append(ResultsTurn(step_results))
    return turns
