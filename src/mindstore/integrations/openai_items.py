"""OpenAI Responses input items ⇄ UIMessages, one item per message, lossless. Pure: no I/O.

This is the mapping behind :class:`mindstore.integrations.openai_agents.MindstoreSession`; it
does not need the ``openai-agents`` package. Each item becomes one message whose ``parts``
describe it the way the rest of mindstore understands (text for search and the CLI, tool parts
that pair calls with results for compaction and the converters) and whose
``metadata.openaiItem`` keeps the item exactly as given, so :func:`item_of` reads back the very
same item. The table of what maps to which part is in ``docs/integrations.md``.

Messages written outside the adapter (``Session.append_message``, ``mindstore import``) are read
as items by converting each run of them together (a result pairs with the call of an earlier
message). ``pop_item`` removes exactly one item of such a run: it rewrites the run's last
message without the popped part and pins the run's remaining items on it
(``metadata.openaiItems = {"items": [...], "over": [ids of the run's earlier messages]}``), so
the run then reads as exactly those items — see :func:`pop_plan`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mindstore.errors import InvalidMessageError
from mindstore.formats._plan import SUMMARY_PREFIX
from mindstore.formats._reply import as_dict, parse_arguments
from mindstore.formats.history import (
    PROVIDER_EXECUTED_ITEMS,
    function_output_value,
    provider_executed_part,
    reasoning_part,
    responses_content_part,
)
from mindstore.formats.openai_responses import to_openai_responses
from mindstore.media.markers import evicted_item_blocks
from mindstore.messages import new_message_id

__all__ = [
    "ITEM_KEY",
    "PIN_KEY",
    "PopPlan",
    "call_names_of",
    "item_message",
    "items_of",
    "pop_plan",
    "run_start",
    "tool_call_names",
    "unnamed_outputs",
]

ITEM_KEY = "openaiItem"
"""The ``metadata`` key holding the original item."""

PIN_KEY = "openaiItems"
"""The ``metadata`` key pinning the remaining items of a run that ``pop_item`` shortened."""

# Client-side calls: item type → tool name of the part; their outputs pair by ``call_id``.
_CLIENT_CALLS = {
    "function_call": None,  # the function's own name
    "custom_tool_call": None,
    "computer_call": "computer",
    "local_shell_call": "local_shell",
    "shell_call": "shell",
    "apply_patch_call": "apply_patch",
    "tool_search_call": "tool_search",
    "program": "program",
}
_CLIENT_OUTPUTS = {
    "function_call_output": "function_call",
    "custom_tool_call_output": "custom_tool_call",
    "computer_call_output": "computer_call",
    "local_shell_call_output": "local_shell_call",
    "shell_call_output": "shell_call",
    "apply_patch_call_output": "apply_patch_call",
    "tool_search_output": "tool_search_call",
    "program_output": "program",
}
_SYSTEM_ITEMS = frozenset({"additional_tools", "configuration_update"})
_LARGE = 4096  # longer string fields of built-in results stay only in the kept item


def _content_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    parts: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind in ("input_text", "output_text", "text", "summary_text"):
            parts.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "refusal":
            parts.append({"type": "text", "text": str(block.get("refusal", ""))})
        elif kind in ("input_image", "input_file", "input_audio"):
            parts.append(responses_content_part(block, "content"))
        else:
            parts.append({"type": f"data-openai-{kind}", "data": dict(block)})
    return parts


def _call_name(item: Mapping[str, Any]) -> str:
    kind = str(item.get("type"))
    fixed = _CLIENT_CALLS.get(kind)
    if fixed is not None:
        return fixed
    name = item.get("name")
    return name if isinstance(name, str) and name else "function"


def _call_id(item: Mapping[str, Any]) -> str:
    for key in ("call_id", "id"):
        value = item.get(key)
        if isinstance(value, str) and value:
            return value
    return new_message_id()


def _call_input(item: Mapping[str, Any]) -> Any:
    kind = item.get("type")
    if kind == "function_call" or kind == "tool_search_call":
        return parse_arguments(item.get("arguments"))
    if kind == "custom_tool_call":
        return item.get("input")
    if kind == "program":
        return {"code": item.get("code")}
    if kind == "apply_patch_call":
        return item.get("operation")
    return item.get("action") if item.get("action") is not None else item.get("actions")


def _trim(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _LARGE:
        return f"[{len(value)} characters, kept in metadata.{ITEM_KEY}]"
    if isinstance(value, dict):
        return {k: _trim(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_trim(v) for v in value]
    return value


def item_message(item: Any, call_names: Mapping[str, str]) -> dict[str, Any]:
    """The UIMessage for one input item (``call_names``: call id → tool name seen so far).

    Raises:
        InvalidMessageError: ``item`` is not a dict (or SDK object) with a ``type`` or ``role``.
    """
    obj = as_dict(item, "item")
    kind = obj.get("type")
    role = "assistant"
    parts: list[dict[str, Any]]
    if kind == "message" or (kind is None and "role" in obj):
        given = obj.get("role")
        if given not in ("user", "assistant", "system", "developer"):
            raise InvalidMessageError(f"a message item needs a role, got {given!r:.40}")
        role = "system" if given == "developer" else str(given)
        parts = _content_parts(obj.get("content"))
    elif kind in _CLIENT_CALLS:
        parts = [
            {
                "type": f"tool-{_call_name(obj)}",
                "toolCallId": _call_id(obj),
                "state": "input-available",
                "input": _trim(_call_input(obj)),
            }
        ]
    elif kind in _CLIENT_OUTPUTS:
        role = "tool"
        call_id = _call_id(obj)
        name = (
            call_names.get(call_id) or _CLIENT_CALLS.get(_CLIENT_OUTPUTS[str(kind)]) or "function"
        )
        output = obj.get("output") if kind != "tool_search_output" else obj.get("tools")
        if kind == "program_output":
            output = obj.get("result")
        parts = [
            {
                "type": f"tool-{name}",
                "toolCallId": call_id,
                "state": "output-available",
                "input": None,
                "output": _trim(function_output_value(output)),
            }
        ]
    elif kind == "reasoning":
        parts = [reasoning_part(obj)]
    elif kind in PROVIDER_EXECUTED_ITEMS:
        parts = [_trim(provider_executed_part(obj))]
    elif kind == "mcp_approval_request":
        parts = [
            {
                "type": "tool-mcp",
                "toolCallId": _call_id(obj),
                "state": "approval-requested",
                "input": {
                    "server": obj.get("server_label"),
                    "name": obj.get("name"),
                    "arguments": parse_arguments(obj.get("arguments")),
                },
                "approval": {"id": obj.get("id")},
                "providerExecuted": True,
            }
        ]
    elif isinstance(kind, str) and kind:
        role = "system" if kind in _SYSTEM_ITEMS or kind == "mcp_approval_response" else role
        if kind == "mcp_approval_response":
            role = "user"
        parts = [{"type": f"data-openai-{kind}", "data": _trim(obj)}]
    else:
        raise InvalidMessageError("an input item needs a 'type' (or a 'role' for a message)")
    return {
        "id": new_message_id(),
        "role": role,
        "parts": parts,
        "metadata": {ITEM_KEY: obj},
    }


def _with_markers_as_text(item: dict[str, Any], blocks: list[tuple[str, int]]) -> dict[str, Any]:
    """``item`` with each image/file block whose data was evicted to the blob store
    (:mod:`mindstore.media`) sent as an ``input_text`` block holding the marker, so the model
    reads ``[evicted image/png, N bytes]`` instead of an invalid URL."""
    if not blocks:
        return item
    out = {k: (list(v) if isinstance(v, list) else v) for k, v in item.items()}
    for key, j in blocks:
        seq = out.get(key)
        if isinstance(seq, list) and 0 <= j < len(seq) and isinstance(seq[j], dict):
            block = seq[j]
            marker = block.get("image_url") or block.get("file_data")
            seq[j] = {"type": "input_text", "text": str(marker)}
    return out


def call_names_of(items: list[dict[str, Any]]) -> dict[str, str]:
    """Call id → tool name of the client-side calls among ``items``."""
    return {_call_id(i): _call_name(i) for i in items if i.get("type") in _CLIENT_CALLS}


def unnamed_outputs(items: list[dict[str, Any]], known: Mapping[str, str]) -> set[str]:
    """Call ids of outputs among ``items`` that take their call's name but whose call is
    neither among ``items`` nor in ``known`` (it came in an earlier batch)."""
    calls = call_names_of(items)
    return {
        _call_id(i)
        for i in items
        if i.get("type") in _CLIENT_OUTPUTS
        and _CLIENT_CALLS.get(_CLIENT_OUTPUTS[str(i.get("type"))]) is None
        and _call_id(i) not in calls
        and _call_id(i) not in known
    }


def tool_call_names(messages: list[dict[str, Any]]) -> dict[str, str]:
    """Call id → tool name of the client-side calls among ``messages`` (for naming outputs)."""
    names: dict[str, str] = {}
    for message in messages:
        item = (message.get("metadata") or {}).get(ITEM_KEY)
        if isinstance(item, dict) and item.get("type") in _CLIENT_CALLS:
            names[_call_id(item)] = _call_name(item)
    return names


def _pin(message: Mapping[str, Any]) -> tuple[list[Any], list[str]] | None:
    meta = message.get("metadata")
    pin = meta.get(PIN_KEY) if isinstance(meta, dict) else None
    if not isinstance(pin, dict):
        return None
    items, over = pin.get("items"), pin.get("over")
    if not isinstance(items, list) or not isinstance(over, list):
        return None
    return items, [str(i) for i in over]


def _stands_alone(message: Mapping[str, Any]) -> bool:
    """True for a message that ends a run of converted messages: a kept item, a compaction
    overlay or a pinned run."""
    meta = message.get("metadata")
    if not isinstance(meta, dict):
        return False
    return (
        isinstance(meta.get(ITEM_KEY), dict)
        or isinstance(meta.get("compaction"), dict)
        or _pin(message) is not None
    )


def items_of(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The input items of a history: the kept item of each message; a compaction overlay as a
    user message carrying its summary; runs of other messages (appended outside the adapter)
    converted with :func:`~mindstore.formats.to_openai_responses`; a run that ``pop_item``
    shortened as the items pinned on its last message."""
    out: list[dict[str, Any]] = []
    foreign: list[dict[str, Any]] = []
    run_start = 0  # index in ``history`` where the current run began

    def flush() -> None:
        if foreign:
            out.extend(to_openai_responses(foreign))
            foreign.clear()

    for index, message in enumerate(history):
        if not foreign:
            run_start = index
        meta = message.get("metadata") or {}
        item = meta.get(ITEM_KEY) if isinstance(meta, dict) else None
        pin = _pin(message)
        if isinstance(item, dict):
            flush()
            out.append(_with_markers_as_text(item, evicted_item_blocks(message)))
        elif isinstance(meta, dict) and isinstance(meta.get("compaction"), dict):
            flush()
            text = "\n\n".join(
                p["text"] for p in message.get("parts", []) if p.get("type") == "text"
            )
            out.append({"role": "user", "content": SUMMARY_PREFIX + text})
        elif pin is not None:
            items, over = pin
            ids = [str(m.get("id")) for m in foreign]
            # The pin stands for the run it was made on: all of it, or (when a window of the
            # history starts inside the run) the end of it. Anything else — a compaction or a
            # delete changed the run since — reads the message's own parts instead.
            whole = ids == over
            cut = run_start == 0 and ids == over[len(over) - len(ids) :]
            if whole or cut:
                foreign.clear()
                out.extend(items)
            else:
                foreign.append(message)
                flush()
        else:
            foreign.append(message)
    flush()
    return out


@dataclass(frozen=True, kw_only=True, slots=True)
class PopPlan:
    """How ``pop_item`` removes the most recent item: return ``item``, delete the messages
    ``delete`` and (unless ``None``) replace the last message with ``rewrite``."""

    item: dict[str, Any] | None
    delete: list[str]
    rewrite: dict[str, Any] | None


def run_start(history: list[dict[str, Any]]) -> int | None:
    """Where the run of converted messages that ends ``history`` begins (its index), or
    ``None`` when it may begin before ``history`` (read a longer suffix)."""
    for index in range(len(history) - 2, -1, -1):
        if _stands_alone(history[index]):
            return index + 1
    return None


def _without(parts: list[dict[str, Any]], item: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``parts`` without the part ``item`` came from (best effort: the pin is what reads)."""
    kind = str(item.get("type") or "message")
    call_id = item.get("call_id")
    out = [dict(p) for p in parts]
    for index in range(len(out) - 1, -1, -1):
        part = out[index]
        ptype = str(part.get("type", ""))
        is_tool = ptype.startswith("tool-") or ptype == "dynamic-tool"
        if kind.endswith("_output") and is_tool and part.get("toolCallId") == call_id:
            if part.get("input") is None:
                del out[index]  # a result-only part (a tool message)
            else:
                for key in ("output", "errorText"):
                    part.pop(key, None)
                part["state"] = "input-available"
            return out
        if kind.endswith("_call") and is_tool and part.get("toolCallId") == call_id:
            del out[index]
            return out
        if kind == "message" and ptype in ("text", "file"):
            del out[index]
            return out
        if kind == "reasoning" and ptype == "reasoning":
            del out[index]
            return out
    return out


def pop_plan(history: list[dict[str, Any]], leaf: dict[str, Any]) -> PopPlan:
    """The plan that removes exactly the last item of ``history`` (a suffix of the path read
    with overlays, ending at the latest leaf, that holds the whole run the leaf ends — see
    :func:`run_start`): afterwards :func:`items_of` reads the same items minus the last one.
    ``leaf`` is the stored latest leaf (no overlays applied: what a rewrite starts from).

    A kept-item message is deleted. A converted run loses one item: its last message is
    rewritten without that part, with the run's remaining items pinned on it; when no item is
    left the whole run is deleted. A run that reads as no item at all (e.g. only a call still
    waiting for its result) is deleted message by message: ``item`` is ``None`` and the caller
    pops again.
    """
    meta = leaf.get("metadata") or {}
    if isinstance(meta, dict) and isinstance(meta.get(ITEM_KEY), dict):
        return PopPlan(item=meta[ITEM_KEY], delete=[str(leaf["id"])], rewrite=None)
    start = run_start(history) or 0
    run = history[start:]
    items = items_of(run)
    if not items:
        return PopPlan(item=None, delete=[str(leaf["id"])], rewrite=None)
    popped, rest = items[-1], items[:-1]
    if not rest:
        return PopPlan(item=popped, delete=[str(m["id"]) for m in run], rewrite=None)
    new_meta = dict(meta) if isinstance(meta, dict) else {}
    new_meta[PIN_KEY] = {"items": rest, "over": [str(m["id"]) for m in run[:-1]]}
    rewrite = {
        **leaf,
        "parts": _without(list(leaf.get("parts") or []), popped),
        "metadata": new_meta,
    }
    return PopPlan(item=popped, delete=[], rewrite=rewrite)
