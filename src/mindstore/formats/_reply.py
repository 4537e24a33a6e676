"""Helpers shared by the ``from_*`` converters (model reply -> mindstore message). Pure."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mindstore.errors import InvalidMessageError
from mindstore.messages import Message, new_message_id, validate_message

__all__ = ["as_dict", "finish_message", "parse_arguments", "sub", "tool_call_part"]


def as_dict(obj: Any, what: str) -> dict[str, Any]:
    """Accept a dict or an SDK (pydantic) object and return a plain JSON dict.

    Raises:
        InvalidMessageError: ``obj`` is neither.
    """
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        obj = dump(mode="json", by_alias=True, warnings=False)
    if not isinstance(obj, Mapping):
        raise InvalidMessageError(
            f"{what} must be a dict or an SDK response object, got {type(obj).__name__}"
        )
    return dict(obj)


def parse_arguments(arguments: Any) -> Any:
    """Parse a JSON arguments string; a string that is not valid JSON is kept as it is."""
    if not isinstance(arguments, str):
        return arguments if arguments is not None else {}
    if not arguments.strip():
        return {}
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def tool_call_part(call_id: str, name: str, arguments: Any, *, dynamic: bool) -> dict[str, Any]:
    """A ``tool-<name>`` (or ``dynamic-tool``) part in state ``input-available``."""
    if dynamic:
        return {
            "type": "dynamic-tool",
            "toolName": name,
            "toolCallId": call_id,
            "state": "input-available",
            "input": arguments,
        }
    return {
        "type": f"tool-{name}",
        "toolCallId": call_id,
        "state": "input-available",
        "input": arguments,
    }


def finish_message(
    parts: list[dict[str, Any]],
    *,
    message_id: str | None,
    model: Any = None,
    response_id: Any = None,
    finish_reason: Any = None,
    input_tokens: Any = None,
    output_tokens: Any = None,
) -> Message:
    """Build and validate the assistant message; metadata only carries what the reply had."""
    metadata: dict[str, Any] = {}
    if isinstance(model, str):
        metadata["model"] = model
    if isinstance(response_id, str):
        metadata["responseId"] = response_id
    if isinstance(finish_reason, str):
        metadata["finishReason"] = finish_reason
    usage = {
        k: v
        for k, v in (("inputTokens", input_tokens), ("outputTokens", output_tokens))
        if isinstance(v, int)
    }
    if usage:
        metadata["usage"] = usage
    message: dict[str, Any] = {
        "id": message_id or new_message_id(),
        "role": "assistant",
        "parts": parts,
    }
    if metadata:
        message["metadata"] = metadata
    return validate_message(message)


def sub(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``obj[key]`` when it is a dict, else an empty dict."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}
