"""Messages: validation, id generation and part helpers. Pure: no I/O.

A message is a JSON object shaped like the Vercel AI SDK ``UIMessage``::

    {"id": "a1", "role": "assistant", "metadata": {...},
     "parts": [{"type": "text", "text": "..."}, {"type": "tool-x", "toolCallId": "c1", ...}]}

Invariants enforced by :func:`validate_message`:

* ``role`` is one of ``system``, ``user``, ``assistant``, ``tool``;
* ``parts`` is a list of objects each with a string ``type``; ``text``/``reasoning`` parts carry a
  string ``text``; tool parts (``tool-<name>`` or ``dynamic-tool``) carry ``toolCallId``;
  ``dynamic-tool`` parts carry ``toolName``; unknown part types are kept untouched;
* ``id`` is a non-empty string of at most 256 characters (generated when missing) that does
  not start with ``compaction_`` (reserved for the virtual summary messages of overlays);
* the whole message is JSON-serialisable without NaN/Infinity, without lone surrogates and
  without NUL characters in keys, and nested no deeper than :data:`MAX_DEPTH`.

A validated message is a *copy*; the caller's dict is never mutated.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from mindstore.errors import InvalidMessageError, UnserialisableValueError

__all__ = [
    "MAX_DEPTH",
    "MAX_ID_LENGTH",
    "RESERVED_ID_PREFIX",
    "ROLES",
    "Message",
    "dumps",
    "is_tool_part",
    "new_message_id",
    "tool_name",
    "tool_parts",
    "validate_id",
    "validate_message",
]

Message = dict[str, Any]

ROLES = frozenset({"system", "user", "assistant", "tool"})
MAX_ID_LENGTH = 256
RESERVED_ID_PREFIX = "compaction_"
"""Ids of the virtual summary messages ``get_history`` shows in place of a compacted range."""
MAX_DEPTH = 64

_lock = threading.Lock()
_last_ms = 0
_counter = 0
_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def new_message_id() -> str:
    """Return a new time-ordered, unique id (``msg_`` + 11 chars of ms time + counter + random).

    Ids generated in one process sort in generation order; ids from different processes sort by
    millisecond and are unique thanks to 8 random characters.
    """
    global _last_ms, _counter
    with _lock:
        ms = int(time.time() * 1000)
        if ms <= _last_ms:
            ms = _last_ms
            _counter += 1
        else:
            _last_ms = ms
            _counter = 0
        counter = _counter
    rand = int.from_bytes(os.urandom(5), "big")
    return f"msg_{_base36(ms, 9)}{_base36(counter, 4)}{_base36(rand, 8)}"


def new_session_id() -> str:
    """A new time-ordered, unique session id (``ses_`` + the rest of a :func:`new_message_id`)."""
    return "ses_" + new_message_id().removeprefix("msg_")


def _base36(n: int, width: int) -> str:
    out = []
    for _ in range(width):
        n, r = divmod(n, 36)
        out.append(_ALPHABET[r])
    return "".join(reversed(out))


def validate_id(value: Any, field: str = "id") -> str:
    """Check that ``value`` is a usable message id and return it.

    Raises:
        InvalidMessageError: not a non-empty string of at most 256 characters without NUL.
    """
    if not isinstance(value, str) or not value:
        raise InvalidMessageError(f"{field} must be a non-empty string, got {value!r:.80}")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidMessageError(
            f"{field} is {len(value)} characters long; ids are at most {MAX_ID_LENGTH}"
        )
    if "\x00" in value:
        raise InvalidMessageError(f"{field} must not contain NUL characters")
    _check_string(value, field)
    return value


def is_tool_part(part: Mapping[str, Any]) -> bool:
    """True for ``tool-<name>`` and ``dynamic-tool`` parts."""
    t = part.get("type")
    return isinstance(t, str) and (t.startswith("tool-") or t == "dynamic-tool")


def tool_name(part: Mapping[str, Any]) -> str:
    """The tool name of a tool part: ``type[5:]`` for static parts, ``toolName`` for dynamic."""
    if part.get("type") == "dynamic-tool":
        return str(part.get("toolName", ""))
    return str(part.get("type", ""))[5:]


def tool_parts(message: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Yield the tool parts of a message."""
    for part in message.get("parts") or ():
        if isinstance(part, dict) and is_tool_part(part):
            yield part


def validate_message(message: Any, *, generate_id: bool = True) -> Message:
    """Validate ``message`` and return a deep copy, with an ``id`` generated if missing.

    Raises:
        InvalidMessageError: naming the offending field.
    """
    if not isinstance(message, Mapping):
        raise InvalidMessageError(
            f"a message must be a dict with 'role' and 'parts', got {type(message).__name__}"
        )
    copy = _check_json(message, "message", 0)
    assert isinstance(copy, dict)
    if "id" not in copy or copy["id"] is None:
        if not generate_id:
            raise InvalidMessageError("message.id is required")
        # Replaces an explicit ``"id": None`` too.
        copy = {"id": new_message_id(), **{k: v for k, v in copy.items() if k != "id"}}
    validate_id(copy["id"], "message.id")
    if copy["id"].startswith(RESERVED_ID_PREFIX):
        raise InvalidMessageError(
            f"message.id {copy['id']!r:.80} starts with {RESERVED_ID_PREFIX!r}, which is reserved "
            "for the virtual summary messages of compaction overlays; choose another id"
        )
    role = copy.get("role")
    if role not in ROLES:
        raise InvalidMessageError(f"message.role must be one of {sorted(ROLES)}, got {role!r:.80}")
    parts = copy.get("parts")
    if not isinstance(parts, list):
        raise InvalidMessageError(
            f"message.parts must be a list of parts, got {type(parts).__name__}"
        )
    for i, part in enumerate(parts):
        _check_part(part, f"message.parts[{i}]")
    if (
        "metadata" in copy
        and copy["metadata"] is not None
        and not isinstance(copy["metadata"], dict)
    ):
        raise InvalidMessageError("message.metadata must be an object (dict) when present")
    return copy


def _check_part(part: Any, where: str) -> None:
    if not isinstance(part, dict):
        raise InvalidMessageError(f"{where} must be an object, got {type(part).__name__}")
    t = part.get("type")
    if not isinstance(t, str) or not t:
        raise InvalidMessageError(f"{where}.type must be a non-empty string")
    if t in ("text", "reasoning"):
        if not isinstance(part.get("text"), str):
            raise InvalidMessageError(f"{where}.text must be a string for a {t!r} part")
    elif t.startswith("tool-") or t == "dynamic-tool":
        call_id = part.get("toolCallId")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessageError(f"{where}.toolCallId must be a non-empty string")
        if t == "dynamic-tool" and not (isinstance(part.get("toolName"), str) and part["toolName"]):
            raise InvalidMessageError(f"{where}.toolName must be a non-empty string")
        if t != "dynamic-tool" and len(t) <= 5:
            raise InvalidMessageError(f"{where}.type 'tool-' needs a tool name after the dash")


def _check_string(value: str, where: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidMessageError(
            f"{where} contains a lone surrogate; strings must be valid Unicode"
        ) from None


def _check_json(value: Any, where: str, depth: int) -> Any:
    """Return a JSON-safe deep copy of ``value`` or raise naming ``where``."""
    if depth > MAX_DEPTH:
        raise InvalidMessageError(f"{where} is nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        _check_string(value, where)
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidMessageError(f"{where} is {value}; NaN and Infinity are not valid JSON")
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise UnserialisableValueError(f"{where} has a non-string key {k!r:.40}")
            _check_string(k, f"{where} key")
            out[k] = _check_json(v, f"{where}.{k}", depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [_check_json(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    raise UnserialisableValueError(
        f"{where} is of type {type(value).__name__}, which is not JSON-serialisable"
    )


def dumps(message: Mapping[str, Any]) -> str:
    """Serialise a validated message compactly (the stored form; its UTF-8 size is its bytes)."""
    return json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
