"""The ``session_search`` tool: its schema, and how its results are shown to the model.

Cross-session search for the model (:meth:`mindstore.SessionManager.tools`, and the
searchable-history block). A question or keywords go in; hits come back as
``[2023-05-08 14:02 · role · "Session name"] text`` blocks (DESIGN §5.1: questions of time need
the date a message was said, and an agent needs to know which conversation it came from), each
cut at :data:`MAX_RESULT_CHARS` so one hit cannot flood the context. The optional
``mode`` argument is offered only when the store has an embedder: without one every search is
lexical, and offering a choice would only invite errors. A failing search is returned to the
model as an ``Error:`` line; a tool never raises into the agent loop.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from mindstore.search import SearchResult
from mindstore.tools import Tool

__all__ = [
    "MAX_RESULT_CHARS",
    "NO_RESULTS",
    "SEARCH_TOOL_LIMIT",
    "SessionHistoryProvider",
    "format_session_search",
    "session_search_tool",
]

NO_RESULTS = "No results found."
SEARCH_TOOL_LIMIT = 10
"""Results the ``session_search`` tool and the searchable-history block return."""
MAX_RESULT_CHARS = 2000
"""Longer message texts are cut in tool results so one hit cannot flood the context."""


# The session_search tool's optional ``mode``, offered only when the store has an embedder
# (without one every search is lexical, and offering a choice would only invite errors).
SEARCH_MODE_PARAMETER: dict[str, Any] = {
    "type": "string",
    "enum": ["hybrid", "lexical", "semantic"],
    "description": (
        "Optional. 'hybrid' (default) matches words and meaning; 'lexical' only the words "
        "(names, numbers, exact terms); 'semantic' only the meaning (paraphrases, other "
        "languages)."
    ),
}


def format_session_search(
    results: Sequence[SearchResult], names: Mapping[str, str | None] | None = None
) -> str:
    """Render hits as ``[YYYY-MM-DD HH:MM · role · "name"] text`` blocks joined by ``\n---\n``.

    The time is the message's (UTC); the session is shown by its name from ``names`` (session
    id → name), or by its id when it has none. A message with no text (a hit on tool calls
    only) shows its snippet; texts longer than 2,000 characters are cut with ``...``. No hits →
    ``No results found.``
    """
    if not results:
        return NO_RESULTS
    names = names or {}
    blocks = []
    for r in results:
        text = r.text if r.text.strip() else r.snippet
        if len(text) > MAX_RESULT_CHARS:
            text = text[:MAX_RESULT_CHARS] + "..."
        name = names.get(r.session_id)
        where = json.dumps(name, ensure_ascii=False) if name else r.session_id
        when = r.created_at.strftime("%Y-%m-%d %H:%M")
        blocks.append(f"[{when} · {r.role} · {where}] {text}")
    return "\n---\n".join(blocks)


SessionNames = Callable[[Sequence[str]], Awaitable[Mapping[str, str | None]]]
"""Session ids → their names (for the hit headers)."""


def session_search_tool(
    search: Callable[[str, str | None], Awaitable[Sequence[SearchResult]]],
    *,
    semantic: bool,
    names: SessionNames | None = None,
) -> Tool:
    """The ``session_search`` tool over ``search(query, mode)``; ``semantic`` offers ``mode``;
    ``names`` gives the hits' session names."""

    async def session_search(args: dict[str, Any]) -> str:
        try:
            mode = args.get("mode") if semantic else None
            results = await search(str(args["query"]), None if mode is None else str(mode))
            found = (
                await names(list(dict.fromkeys(r.session_id for r in results)))
                if names is not None and results
                else None
            )
        except Exception as exc:  # a tool never raises into the agent loop
            return f"Error: {exc or type(exc).__name__}"
        return format_session_search(results, found)

    return Tool(
        name="session_search",
        description=(
            "Search past conversations (all sessions). Pass a question or keywords: messages "
            "matching more and rarer words come first, so a natural question works; "
            'messages holding a "quoted phrase" come first and prefix* matches word beginnings.'
        ),
        parameters={
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": (
                        "A question or keywords, e.g. 'When did Caroline go to the support "
                        "group?' or 'support group'."
                    ),
                },
                **({"mode": SEARCH_MODE_PARAMETER} if semantic else {}),
            },
            "required": ["query"],
        },
        execute=session_search,
    )


class _Namespace(Protocol):
    """What :class:`SessionHistoryProvider` needs of a :class:`~mindstore.SessionManager`."""

    async def count(self) -> int: ...

    async def search(self, query: str, *, limit: int = ...) -> list[SearchResult]: ...

    async def session_names(self, session_ids: Sequence[str]) -> dict[str, str | None]: ...


class SessionHistoryProvider:
    """A read-only searchable context block over a namespace's past conversations.

    ``get()`` → ``N sessions available for search.``; ``search(query)`` answers through
    :meth:`SessionManager.search` (so it works through the ``search_context`` tool) and
    returns ``None`` when nothing matches. Created by
    :meth:`SessionManager.with_searchable_history`.
    """

    def __init__(self, manager: _Namespace) -> None:
        self._manager = manager

    async def get(self) -> str:
        return f"{await self._manager.count()} sessions available for search."

    async def search(self, query: str) -> str | None:
        results = await self._manager.search(query, limit=SEARCH_TOOL_LIMIT)
        if not results:
            return None
        names = await self._manager.session_names([r.session_id for r in results])
        return format_session_search(results, names)
