"""The conversation half of the MCP server: record turns, read history, name resources.

The memory tools alone gave ``session_search`` nothing to search over MCP; these tools let a
client record each turn of the conversation it serves and read it back:

- ``append_message`` — ``role`` (``user`` | ``assistant`` | ``system``), ``text``, optional
  ``id``: appends one message to the served session, as the child of its latest message.
  Re-sending an id that is already stored changes nothing (retries are safe) and says so.
- ``get_history`` — optional ``limit``: the active branch of the served session (compaction
  overlays applied), the latest ``limit`` messages, as ``[role] text`` blocks.

Resource URIs (quoted with :func:`urllib.parse.quote`, so any id or label is one path segment):

- ``mindstore://sessions/{session_id}/history`` — that session's history as JSON (a list of
  UIMessages, the active branch, overlays applied);
- ``mindstore://sessions/{session_id}`` — its ``SessionInfo`` as JSON;
- ``mindstore://blocks/{label}`` — a context block of the served session (plain text).

Sessions are those of the server's namespace only: nothing crosses namespaces (DESIGN §1.1).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import quote, unquote

from mindstore.messages import is_tool_part, new_message_id, tool_name
from mindstore.session import Session
from mindstore.store.types import SessionInfo
from mindstore.tools import Tool, ToolSet

__all__ = [
    "HISTORY_TEMPLATE",
    "SESSION_TEMPLATE",
    "conversation_tools",
    "format_history",
    "history_uri",
    "parse_session_uri",
    "session_info_json",
    "session_uri",
]

SESSION_PREFIX: Final = "mindstore://sessions/"
HISTORY_TEMPLATE: Final = SESSION_PREFIX + "{session_id}/history"
SESSION_TEMPLATE: Final = SESSION_PREFIX + "{session_id}"
_SESSION_URI = re.compile(r"^mindstore://sessions/(?P<id>[^/]+)(?P<history>/history)?$")
_APPEND_ROLES: Final = ("user", "assistant", "system")


def session_uri(session_id: str) -> str:
    """``mindstore://sessions/<quoted id>``."""
    return SESSION_PREFIX + quote(session_id, safe="")


def history_uri(session_id: str) -> str:
    """``mindstore://sessions/<quoted id>/history``."""
    return session_uri(session_id) + "/history"


def parse_session_uri(uri: str) -> tuple[str, bool] | None:
    """``(session_id, is_history)`` of a session resource URI, or ``None`` for any other."""
    match = _SESSION_URI.match(uri)
    if match is None:
        return None
    session_id = unquote(match["id"])
    return (session_id, match["history"] is not None) if session_id else None


def session_info_json(info: SessionInfo) -> str:
    """A session's ``SessionInfo`` as a JSON object (times in ISO 8601)."""
    fields = dataclasses.asdict(info)
    for name in ("created_at", "updated_at"):
        fields[name] = fields[name].isoformat()
    return json.dumps(fields, ensure_ascii=False)


def format_history(messages: Sequence[dict[str, Any]]) -> str:
    """``[role] text`` per message, joined by ``\\n---\\n``; a tool call shows as
    ``(tool <name>)``; ``No messages yet.`` for an empty history."""
    blocks = []
    for message in messages:
        pieces = []
        for part in message.get("parts", ()):
            if part.get("type") in ("text", "reasoning") and part.get("text"):
                pieces.append(str(part["text"]))
            elif is_tool_part(part):
                pieces.append(f"(tool {tool_name(part)})")
        blocks.append(f"[{message.get('role')}] " + "\n".join(pieces))
    return "\n---\n".join(blocks) if blocks else "No messages yet."


def conversation_tools(session: Session) -> ToolSet:
    """``append_message`` and ``get_history`` over ``session`` (results are strings; failures
    come back from :meth:`ToolSet.execute` as ``Error: <reason>``)."""
    sid = session.session_id

    async def append_message(args: dict[str, Any]) -> str:
        message_id = args.get("id") or new_message_id()
        message = {
            "id": message_id,
            "role": args["role"],
            "parts": [{"type": "text", "text": args["text"]}],
        }
        if await session.append_message(message):
            return f"Appended {message_id} to session {sid}."
        return f"Message {message_id} is already stored in session {sid}; nothing changed."

    async def get_history(args: dict[str, Any]) -> str:
        limit = args.get("limit")
        if limit is None:
            return format_history(await session.get_history())
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        recent = await session.get_recent_history(max_tokens=0, min_messages=limit)
        return format_history(recent.messages[-limit:])

    return ToolSet(
        [
            Tool(
                name="append_message",
                description=(
                    "Record one turn of this conversation (a user message, your reply, or a "
                    "system note) in persistent history, so later sessions can find it with "
                    "session_search. Re-sending the same id changes nothing."
                ),
                parameters={
                    "type": "object",
                    "properties": {
                        "role": {
                            "type": "string",
                            "enum": list(_APPEND_ROLES),
                            "description": "Who said it.",
                        },
                        "text": {"type": "string", "description": "What was said."},
                        "id": {
                            "type": "string",
                            "description": "Optional message id (generated when missing).",
                        },
                    },
                    "required": ["role", "text"],
                },
                execute=append_message,
            ),
            Tool(
                name="get_history",
                description=(
                    "Read this conversation's recorded history, oldest first (summaries stand "
                    "for compacted parts)."
                ),
                parameters={
                    "type": "object",
                    "properties": {
                        "limit": {
                            "type": "integer",
                            "description": "Optional: only the latest this many messages.",
                        }
                    },
                },
                execute=get_history,
            ),
        ]
    )
