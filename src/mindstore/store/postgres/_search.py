"""Lexical search of messages and entries in the PostgreSQL store.

Candidates are ranked by :mod:`.lexical` from the ``search_terms`` index; their rows are then
read page by page and assembled by :class:`mindstore.lexical.hits.Hits`. The probe, the
ranking and the rows must agree, as if read in one snapshot:

* :func:`search_entries` and :func:`search` run in one repeatable-read transaction;
* :func:`search_checked` (a message search outside a caller's transaction) runs the same
  statements without one and proves instead that nothing of the namespace's index was written
  between its first and last statement: each of those returns the :data:`.lexical.STAMP` of
  the namespace's statistics rows (every index write changes one of them: a new row version,
  or a row gone). The last one computes its stamp only when its snapshot differs from the
  first one's (:data:`.lexical.CHECK_STAMP`: equal snapshots saw the same commits, so the same
  rows). If the stamps differ it returns None and the caller runs :func:`search` in
  a transaction. BEGIN and COMMIT were two of a search's four round trips: a rare word's
  search 2.7 → 2.1 ms (docs/benchmarks.md). A *wide* namespace (more than
  :data:`.lexical.STAMP_PARTS` sessions) is searched in a snapshot instead, reading its
  statistics summed (the stamp and the narrow statistics read a row per session).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from mindstore.lexical.collections import entry_collection, message_collection
from mindstore.search import ParsedQuery, SearchResult
from mindstore.store import _rules
from mindstore.store.base import EntryHit
from mindstore.store.postgres import lexical

if TYPE_CHECKING:
    from mindstore.store.postgres._common import Conn

# the page's rows, and the stamp of the collection's statistics in the same snapshot (one row
# with NULL message columns when none of the page's messages is left)
_MESSAGE_ROWS_SQL = (
    "SELECT s.stamp, m.seq, m.session_id, m.id, m.role, m.text, m.tool_text, m.created_at "
    f"FROM (SELECT {lexical.CHECK_STAMP} AS stamp) s "
    "LEFT JOIN message_search m ON m.seq = ANY(%(ids)s)"
)
_STAMP_SQL = f"SELECT {lexical.CHECK_STAMP}"
_PAGE_SQL = (  # the same rows in a snapshot (no stamp)
    "SELECT m.seq, m.session_id, m.id, m.role, m.text, m.tool_text, m.created_at "
    "FROM message_search m WHERE m.seq = ANY(%(ids)s)"
)
_ENTRY_ROWS_SQL = "SELECT id, key, content, description FROM entries WHERE id = ANY(%s)"


def _message_fields(row: Sequence[Any]) -> tuple[str, str]:
    return row[4], row[5]


def _message_created(row: Sequence[Any]) -> datetime:
    return row[6]  # type: ignore[no-any-return]


class Found(NamedTuple):
    """A message search's results (None: a checked search found the namespace's index
    written while it ran) and whether the namespace is wide (:data:`.lexical.STAMP_PARTS`):
    the store remembers which are, to search them in a snapshot from the start."""

    results: list[SearchResult] | None
    wide: bool


async def search(
    conn: Conn,
    namespace: str,
    query: ParsedQuery,
    session_ids: list[str] | None,
    limit: int,
    wide: bool = False,
) -> Found:
    """A message search; the caller runs it in one snapshot. ``wide``: the namespace was
    found wide (read its statistics summed)."""
    return await _search(conn, namespace, query, session_ids, limit, checked=False, wide=wide)


async def search_checked(
    conn: Conn,
    namespace: str,
    query: ParsedQuery,
    session_ids: list[str] | None,
    limit: int,
) -> Found:
    """A message search of a namespace not known to be wide, run without a transaction: its
    results, or None when the namespace's index was written while it ran (then run
    :func:`search` in one snapshot)."""
    return await _search(conn, namespace, query, session_ids, limit, checked=True, wide=False)


async def _search(
    conn: Conn,
    namespace: str,
    query: ParsedQuery,
    session_ids: list[str] | None,
    limit: int,
    *,
    checked: bool,
    wide: bool,
) -> Found:
    hits = _rules.message_hits(query, limit, _message_fields, _message_created)
    sids: set[int] | None = None
    if session_ids is not None:
        # (Outside a snapshot this may miss a session created since; its messages came
        # later still, and a session's messages are only written with its statistics.)
        cur = await conn.execute(
            "SELECT sid FROM sessions WHERE namespace = %s AND session_id = ANY(%s)",
            (namespace, session_ids),
        )
        sids = {r[0] for r in await cur.fetchall()}
        if not sids:
            return Found([], wide)
    coll = message_collection(namespace)
    ranked, stamp, is_wide = await lexical.candidates(
        conn, coll, query, sids, sessions=True, limit=limit, checked=checked, wide=wide
    )
    if not checked:
        for ids in hits.pages(ranked):
            cur = await conn.execute(_PAGE_SQL, {"ids": ids})
            hits.add({r[0]: r for r in await cur.fetchall()})
        return Found(hits.results, is_wide)
    assert stamp is not None
    check = {"coll": coll, **stamp._asdict()}
    if not ranked:  # nothing to read, but the plan may have taken several statements
        cur = await conn.execute(_STAMP_SQL, check)
        row = await cur.fetchone()
        return Found([] if row is not None and row[0] == stamp.digest else None, is_wide)
    for ids in hits.pages(ranked):
        cur = await conn.execute(_MESSAGE_ROWS_SQL, {**check, "ids": ids})
        page = await cur.fetchall()
        if page[0][0] != stamp.digest:
            return Found(None, is_wide)
        hits.add({r[1]: r[1:] for r in page if r[1] is not None})
    return Found(hits.results, is_wide)


async def search_entries(
    conn: Conn, k: tuple[str, str, str], query: ParsedQuery, limit: int
) -> list[EntryHit]:
    hits = _rules.entry_hits(query, limit)
    coll = entry_collection(*k)
    ranked = (await lexical.candidates(conn, coll, query, None, sessions=False, limit=limit)).ranked
    for ids in hits.pages(ranked):
        cur = await conn.execute(_ENTRY_ROWS_SQL, (ids,))
        hits.add({r[0]: r for r in await cur.fetchall()})
    return hits.results
