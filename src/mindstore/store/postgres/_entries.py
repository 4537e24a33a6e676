"""Keyed entries (searchable documents and stored skills) in the PostgreSQL store.

Every write keeps the entry's lexical index rows (:mod:`.lexical`) in the same transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from mindstore.lexical.collections import entry_collection
from mindstore.store import _rows, _rules
from mindstore.store._checks import prefix_upper_bound
from mindstore.store._rules import NewEntry
from mindstore.store.base import Entry
from mindstore.store.postgres import lexical

if TYPE_CHECKING:
    from mindstore.store.postgres._common import Conn

_ENTRY_COLUMNS = "key, content, description, updated_at, data, created_at, expires_at"
_KEY_WHERE = "WHERE namespace = %s AND scope = %s AND label = %s AND key = %s"

Scope = tuple[str, str, str]


_INSERT_SQL = (
    # One clock reading for both times: a new entry's created_at equals its updated_at exactly
    # (two clock_timestamp() calls differ by microseconds).
    "INSERT INTO entries (namespace, scope, label, key, content, description, "
    "data, created_at, updated_at, expires_at) "
    "SELECT %s, %s, %s, %s, %s, %s, %s, coalesce(%s, t.now), t.now, %s "
    "FROM (SELECT clock_timestamp() AS now) t"
)


async def put_entry(conn: Conn, k: Scope, new: NewEntry) -> None:
    """Insert or replace one entry; concurrent writers of one key end with the last one's.

    A new key is inserted with ``ON CONFLICT DO NOTHING`` (a concurrent inserter of the same
    key makes it wait for that one's commit, then do nothing instead of failing on the primary
    key). An existing key is locked (``FOR UPDATE``) and rewritten under the lock. A row that a
    concurrent writer deleted between the two statements sends it round again.
    """
    args = (*k, new.key, new.content, new.description, new.data)
    while True:
        cur = await conn.execute(
            f"{_INSERT_SQL} ON CONFLICT (namespace, scope, label, key) DO NOTHING RETURNING id",
            (*args, None, new.expires_at),
        )
        row = await cur.fetchone()
        if row is not None:
            break
        cur = await conn.execute(
            f"SELECT id, coalesce(created_at, updated_at) FROM entries {_KEY_WHERE} FOR UPDATE",
            (*k, new.key),
        )
        old = await cur.fetchone()
        if old is None:
            continue  # deleted (and committed) since the insert saw it: try the insert again
        # a rewritten entry gets a new id: ids order entries by their last write, which is how
        # equal scores are ordered (most recently written first); its creation time is carried
        # over (NULL in rows older than m006: their updated_at)
        await conn.execute("DELETE FROM entries WHERE id = %s", (old[0],))
        await lexical.unindex(conn, entry_collection(*k), [old[0]])
        cur = await conn.execute(f"{_INSERT_SQL} RETURNING id", (*args, old[1], new.expires_at))
        row = await cur.fetchone()
        assert row is not None
        break
    await lexical.index_entry(conn, k, row[0], new.key, new.content, new.description)


async def get_entries(conn: Conn, k: Scope, keys: Sequence[str]) -> list[Entry]:
    cur = await conn.execute(
        f"SELECT {_ENTRY_COLUMNS} FROM entries "
        "WHERE namespace = %s AND scope = %s AND label = %s AND key = ANY(%s)",
        (*k, list(keys)),
    )
    found = {r[0]: _rows.decode_entry(r) for r in await cur.fetchall()}
    return _rules.in_request_order(keys, found)


async def list_entries(conn: Conn, k: Scope, limit: int | None) -> list[Entry]:
    cur = await conn.execute(
        f"SELECT {_ENTRY_COLUMNS} FROM entries "
        "WHERE namespace = %s AND scope = %s AND label = %s "
        "ORDER BY updated_at DESC, key DESC LIMIT %s",
        (*k, None if limit is None else max(0, limit)),
    )
    return [_rows.decode_entry(r) for r in await cur.fetchall()]


async def list_entry_labels(conn: Conn, namespace: str, prefix: str) -> list[str]:
    # A loose index scan over the (namespace, scope, label COLLATE "C") index of m006: each
    # step seeks the next distinct label, so the cost grows with the labels, not with their
    # entries. Comparing in "C" (code-point) order makes [prefix, bound) exactly the labels
    # that start with ``prefix`` whatever the database's collation.
    bound = prefix_upper_bound(prefix)
    below = "" if bound is None else ' AND label COLLATE "C" < %(hi)s'
    cur = await conn.execute(
        "WITH RECURSIVE l(label) AS ("
        ' SELECT (SELECT min(label COLLATE "C") FROM entries'
        " WHERE namespace = %(ns)s AND scope = ''"
        f' AND label COLLATE "C" >= %(lo)s{below})'
        " UNION ALL"
        ' SELECT (SELECT min(label COLLATE "C") FROM entries'
        " WHERE namespace = %(ns)s AND scope = ''"
        f' AND label COLLATE "C" > l.label{below}) FROM l WHERE l.label IS NOT NULL)'
        " SELECT label FROM l WHERE label IS NOT NULL AND EXISTS ("
        "SELECT 1 FROM entries e WHERE e.namespace = %(ns)s AND e.scope = '' "
        "AND e.label = l.label AND (e.expires_at IS NULL OR e.expires_at > clock_timestamp()))",
        {"ns": namespace, "lo": prefix, "hi": bound},
    )
    return [r[0] for r in await cur.fetchall()]


async def set_entry_expiry(
    conn: Conn, k: Scope, expiries: list[tuple[str, datetime | None]]
) -> int:
    n = 0
    for entry_key, at in expiries:
        cur = await conn.execute(
            f"UPDATE entries SET expires_at = %s {_KEY_WHERE}", (at, *k, entry_key)
        )
        n += cur.rowcount
    return n


async def delete_expired_entries(
    conn: Conn, namespace: str | None
) -> list[tuple[str, str, str, str]]:
    """Delete the expired entries; their (namespace, scope, label, key), for the feed."""
    cur = await conn.execute(
        "DELETE FROM entries WHERE expires_at IS NOT NULL "
        "AND expires_at <= clock_timestamp() "
        "AND (%(ns)s::text IS NULL OR namespace = %(ns)s::text) "
        "RETURNING id, namespace, scope, label, key",
        {"ns": namespace},
    )
    gone = await cur.fetchall()
    for doc, ns, scope, label, _ in gone:
        await lexical.unindex(conn, entry_collection(ns, scope, label), [doc])
    return [(ns, scope, label, key) for _, ns, scope, label, key in gone]


async def count_entries(conn: Conn, k: Scope) -> int:
    cur = await conn.execute(
        "SELECT count(*) FROM entries WHERE namespace = %s AND scope = %s AND label = %s", k
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def delete_entry(conn: Conn, k: Scope, entry_key: str) -> bool:
    cur = await conn.execute(f"DELETE FROM entries {_KEY_WHERE} RETURNING id", (*k, entry_key))
    row = await cur.fetchone()
    if row is None:
        return False
    await lexical.unindex(conn, entry_collection(*k), [row[0]])
    return True
