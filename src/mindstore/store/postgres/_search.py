"""Lexical search of messages and entries in the PostgreSQL store.

Candidates are ranked by :mod:`.lexical` from the ``search_terms`` index; their rows are then
read page by page and assembled by :class:`mindstore.lexical.hits.Hits`. The caller runs each
search in one repeatable-read snapshot: the probe, the ranking and the rows agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from mindstore.lexical.collections import entry_collection, message_collection
from mindstore.search import ParsedQuery, SearchResult
from mindstore.store import _rules
from mindstore.store.base import EntryHit
from mindstore.store.postgres import lexical

if TYPE_CHECKING:
    from mindstore.store.postgres._common import Conn

_MESSAGE_ROWS_SQL = (
    "SELECT seq, session_id, id, role, text, tool_text, created_at "
    "FROM message_search WHERE seq = ANY(%s)"
)
_ENTRY_ROWS_SQL = "SELECT id, key, content, description FROM entries WHERE id = ANY(%s)"


def _message_fields(row: Sequence[Any]) -> tuple[str, str]:
    return row[4], row[5]


def _message_created(row: Sequence[Any]) -> datetime:
    return row[6]  # type: ignore[no-any-return]


async def search(
    conn: Conn,
    namespace: str,
    query: ParsedQuery,
    session_ids: list[str] | None,
    limit: int,
) -> list[SearchResult]:
    hits = _rules.message_hits(query, limit, _message_fields, _message_created)
    sids: set[int] | None = None
    if session_ids is not None:
        cur = await conn.execute(
            "SELECT sid FROM sessions WHERE namespace = %s AND session_id = ANY(%s)",
            (namespace, session_ids),
        )
        sids = {r[0] for r in await cur.fetchall()}
        if not sids:
            return []
    coll = message_collection(namespace)
    ranked = await lexical.candidates(conn, coll, query, sids, sessions=True, limit=limit)
    for ids in hits.pages(ranked):
        cur = await conn.execute(_MESSAGE_ROWS_SQL, (ids,))
        hits.add({r[0]: r for r in await cur.fetchall()})
    return hits.results


async def search_entries(
    conn: Conn, k: tuple[str, str, str], query: ParsedQuery, limit: int
) -> list[EntryHit]:
    hits = _rules.entry_hits(query, limit)
    coll = entry_collection(*k)
    ranked = await lexical.candidates(conn, coll, query, None, sessions=False, limit=limit)
    for ids in hits.pages(ranked):
        cur = await conn.execute(_ENTRY_ROWS_SQL, (ids,))
        hits.add({r[0]: r for r in await cur.fetchall()})
    return hits.results
