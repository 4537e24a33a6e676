"""``mindstore search QUERY``: search one namespace.

``--mode lexical`` (the default) parses the query with :func:`mindstore.search.parse_query` and
asks the store (:meth:`~mindstore.store.base.Store.search`); ``semantic`` and ``hybrid`` go
through :meth:`mindstore.SessionManager.search` with the embedder named by ``--embedder``
(the vectors written by ``mindstore embed``). Nothing crosses the namespace. A ``--session``
that does not exist in the namespace is an error naming it (exit 1), not "no results".
"""

from __future__ import annotations

from typing import Any

import click

from mindstore.manager import SessionManager
from mindstore.search import parse_query
from mindstore.store.base import SessionKey, Store

from .common import (
    Env,
    Out,
    checked_name,
    current_env,
    json_option,
    namespace_of,
    opened,
    require_session,
    run,
)
from .embed import cli_embedder, embedder_option
from .render import role_text, shorten

__all__ = ["search"]


async def _require_sessions(store: Store, namespace: str, session_ids: list[str]) -> None:
    """An unknown ``--session`` is an error naming it, not "no results"."""
    for sid in session_ids:
        await require_session(store, SessionKey(namespace=namespace, session_id=sid))


async def _semantic_search(
    env: Env,
    namespace: str,
    query: str,
    mode: str,
    spec: str,
    session_ids: list[str] | None,
    limit: int,
    match: str = "any",
) -> tuple[list[Any], int]:
    """The results, and when there are none, how many messages have no vector yet."""
    async with opened(env, read_only=True, embedder=cli_embedder(spec)) as store:
        await _require_sessions(store, namespace, session_ids or [])
        manager = SessionManager(store, namespace=namespace)
        found = await manager.search(
            query, limit=limit, session_ids=session_ids, match=match, mode=mode
        )
        pending = 0 if found else await store.pending_embeddings()  # type: ignore[attr-defined]
        return found, pending


@click.command()
@click.argument("query")
@click.option(
    "--session", "session_ids", multiple=True, metavar="ID", help="Only this session (repeatable)."
)
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1, max=10_000))
@click.option(
    "--all",
    "match_all",
    is_flag=True,
    help="Every word must match (default: any word, best matches first).",
)
@click.option(
    "--mode",
    type=click.Choice(["lexical", "semantic", "hybrid"]),
    default="lexical",
    show_default=True,
    help="semantic/hybrid use the vectors of `mindstore embed` (same --embedder).",
)
@embedder_option
@json_option
def search(
    query: str,
    session_ids: tuple[str, ...],
    limit: int,
    match_all: bool,
    mode: str,
    embedder_spec: str,
) -> None:
    """Search the namespace with a question or keywords: words, "quoted phrases", prefix*."""
    env = current_env()
    namespace = namespace_of(env)
    for sid in session_ids:
        checked_name(sid, "--session")

    async def go() -> tuple[list[Any], int]:
        if mode != "lexical":
            return await _semantic_search(
                env,
                namespace,
                query,
                mode,
                embedder_spec,
                list(session_ids) or None,
                limit,
                "all" if match_all else "any",
            )
        async with opened(env, read_only=True) as store:
            await _require_sessions(store, namespace, list(session_ids))
            parsed = parse_query(query, "all" if match_all else "any")
            if parsed.empty:
                return [], 0
            found = await store.search(
                namespace, parsed, session_ids=list(session_ids) or None, limit=limit
            )
            return found, 0

    hits, pending = run(go())
    out = Out()
    if env.json:
        out.json(hits)
        return
    if not hits:
        hint = (
            f" ({pending} messages have no vector of this embedder yet: run `mindstore embed`"
            " with the same --embedder)"
            if pending
            else ""
        )
        out.err.print("no results" + hint)
        return
    out.table(
        ["score", "session", "message", "role", "snippet"],
        [
            [
                f"{h.score:.3f}",
                h.session_id,
                h.message_id,
                role_text(h.role),
                shorten(h.snippet, 160),
            ]
            for h in hits
        ],
        title=f"{len(hits)} result(s) for {query!r}",
    )
