"""The ``session_search`` tool: its schema, and how its results are shown to the model.

Cross-session search for the model (:meth:`mindstore.SessionManager.tools`, and the
searchable-history block). A question or keywords go in; hits come back as ``[role] text``
blocks, each cut at :data:`MAX_RESULT_CHARS` so one hit cannot flood the context. The optional
``mode`` argument is offered only when the store has an embedder: without one every search is
lexical, and offering a choice would only invite errors. A failing search is returned to the
model as an ``Error:`` line; a tool never raises into the agent loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from mindstore.search import SearchResult
from mindstore.tools import Tool

__all__ = [
    "MAX_RESULT_CHARS",
    "NO_RESULTS",
    "SEARCH_TOOL_LIMIT",
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


def format_session_search(results: Sequence[SearchResult]) -> str:
    """Render hits as ``[role] text`` blocks joined by ``\\n---\\n``.

    A message with no text (a hit on tool calls only) shows its snippet; texts longer than
    2,000 characters are cut with ``...``. No hits → ``No results found.``
    """
    if not results:
        return NO_RESULTS
    blocks = []
    for r in results:
        text = r.text if r.text.strip() else r.snippet
        if len(text) > MAX_RESULT_CHARS:
            text = text[:MAX_RESULT_CHARS] + "..."
        blocks.append(f"[{r.role}] {text}")
    return "\n---\n".join(blocks)


def session_search_tool(
    search: Callable[[str, str | None], Awaitable[Sequence[SearchResult]]], *, semantic: bool
) -> Tool:
    """The ``session_search`` tool over ``search(query, mode)``; ``semantic`` offers ``mode``."""

    async def session_search(args: dict[str, Any]) -> str:
        try:
            mode = args.get("mode") if semantic else None
            results = await search(str(args["query"]), None if mode is None else str(mode))
        except Exception as exc:  # a tool never raises into the agent loop
            return f"Error: {exc or type(exc).__name__}"
        return format_session_search(results)

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
