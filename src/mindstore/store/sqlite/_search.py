"""Lexical search of messages and entries in the SQLite store.

Candidates are ranked by :mod:`.lexical` from the ``search_terms`` index; their rows are then
read page by page and assembled by :class:`mindstore.lexical.hits.Hits`. Each search runs in
one snapshot (a ``SAVEPOINT``): the probe, the ranking and the rows agree.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from mindstore.lexical.collections import entry_collection, message_collection
from mindstore.search import ParsedQuery, SearchResult, index_text
from mindstore.store import _rules
from mindstore.store.base import EntryHit
from mindstore.store.sqlite import lexical
from mindstore.store.sqlite._common import to_datetime

_MESSAGE_ROWS_SQL = (
    "SELECT m.seq, s.session_id, m.id, m.role, m.content, m.created_us "
    "FROM messages m JOIN sessions s ON s.sid = m.sid "
    "WHERE m.seq IN (SELECT value FROM json_each(?))"
)
_ENTRY_ROWS_SQL = (
    "SELECT id, key, content, description FROM entries WHERE id IN (SELECT value FROM json_each(?))"
)


def _message_fields(row: Sequence[Any]) -> tuple[str, str]:
    return index_text(json.loads(row[4]))


def _message_created(row: Sequence[Any]) -> datetime:
    return to_datetime(row[5])


def search(
    conn: sqlite3.Connection,
    namespace: str,
    query: ParsedQuery,
    session_ids: list[str] | None,
    limit: int,
) -> list[SearchResult]:
    conn.execute("SAVEPOINT mindstore_read")  # one snapshot: probe, ranking, rows
    hits = _rules.message_hits(query, limit, _message_fields, _message_created)
    try:
        sids: set[int] | None = None
        if session_ids is not None:
            sids = {
                r[0]
                for r in conn.execute(
                    "SELECT sid FROM sessions WHERE namespace = ? "
                    "AND session_id IN (SELECT value FROM json_each(?))",
                    (namespace, json.dumps(session_ids)),
                )
            }
            if not sids:
                return []
        coll = message_collection(namespace)
        ranked = lexical.candidates(conn, coll, query, sids, sessions=True, limit=limit)
        for ids in hits.pages(ranked):
            hits.add({r[0]: r for r in conn.execute(_MESSAGE_ROWS_SQL, (json.dumps(ids),))})
    finally:
        conn.execute("RELEASE mindstore_read")
    return hits.results


def search_entries(
    conn: sqlite3.Connection, k: tuple[str, str, str], query: ParsedQuery, limit: int
) -> list[EntryHit]:
    conn.execute("SAVEPOINT mindstore_read")  # one snapshot: probe, ranking, rows
    hits = _rules.entry_hits(query, limit)
    try:
        coll = entry_collection(*k)
        ranked = lexical.candidates(conn, coll, query, None, sessions=False, limit=limit)
        for ids in hits.pages(ranked):
            hits.add({r[0]: r for r in conn.execute(_ENTRY_ROWS_SQL, (json.dumps(ids),))})
    finally:
        conn.execute("RELEASE mindstore_read")
    return hits.results
