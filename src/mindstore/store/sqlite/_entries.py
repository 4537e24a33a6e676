"""Keyed entries (searchable documents and stored skills) in the SQLite store.

Every write keeps the entry's lexical index rows (:mod:`.lexical`) in the same transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from mindstore.store import _rows, _rules
from mindstore.store._checks import prefix_upper_bound
from mindstore.store._rules import NewEntry
from mindstore.store.base import Entry
from mindstore.store.sqlite import lexical
from mindstore.store.sqlite._common import now_us, to_datetime, to_us

_ENTRY_COLUMNS = "key, content, description, updated_us, data, created_us, expires_us"
_KEY_WHERE = "WHERE namespace = ? AND scope = ? AND label = ? AND key = ?"

Scope = tuple[str, str, str]


def put_entry(conn: sqlite3.Connection, k: Scope, new: NewEntry) -> None:
    old = conn.execute(
        f"SELECT id, key, content, description, created_us, updated_us FROM entries {_KEY_WHERE}",
        (*k, new.key),
    ).fetchone()
    now = now_us()
    if old is not None:
        # a rewritten entry gets a new id: ids order entries by their last write, which is how
        # equal scores are ordered (most recently written first); the creation time is carried
        # over (NULL in rows older than m007: their updated_us)
        lexical.unindex_entry(conn, *k, old[0])
        conn.execute("DELETE FROM entries WHERE id = ?", (old[0],))
        created = old[4] if old[4] is not None else old[5]
    else:
        created = now
    rowid = conn.execute(
        "INSERT INTO entries (namespace, scope, label, key, content, description, "
        "updated_us, data, created_us, expires_us) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*k, new.key, new.content, new.description, now, new.data, created, to_us(new.expires_at)),
    ).lastrowid
    assert rowid is not None
    lexical.index_entry(conn, *k, rowid, new.key, new.content, new.description)
    lexical.flush(conn)


def get_entries(conn: sqlite3.Connection, k: Scope, keys: Sequence[str]) -> list[Entry]:
    found: dict[str, Entry] = {}
    for i in range(0, len(keys), 500):  # stay under SQLite's bound-parameter limit
        chunk = keys[i : i + 500]
        rows = conn.execute(
            f"SELECT {_ENTRY_COLUMNS} FROM entries "
            "WHERE namespace = ? AND scope = ? AND label = ? "
            f"AND key IN ({', '.join('?' * len(chunk))})",
            (*k, *chunk),
        ).fetchall()
        found.update((r[0], _rows.decode_entry(r, to_datetime)) for r in rows)
    return _rules.in_request_order(keys, found)


def list_entries(conn: sqlite3.Connection, k: Scope, limit: int | None) -> list[Entry]:
    rows = conn.execute(
        f"SELECT {_ENTRY_COLUMNS} FROM entries "
        "WHERE namespace = ? AND scope = ? AND label = ? "
        "ORDER BY updated_us DESC, id DESC LIMIT ?",
        (*k, -1 if limit is None else max(0, limit)),
    ).fetchall()
    return [_rows.decode_entry(r, to_datetime) for r in rows]


def list_entry_labels(conn: sqlite3.Connection, namespace: str, prefix: str) -> list[str]:
    # A loose index scan: each step seeks the next distinct label in the (namespace, scope,
    # label, key) index, so the cost grows with the labels, not with their entries; the range
    # [prefix, bound) is exactly the labels that start with ``prefix`` (BINARY order).
    bound = prefix_upper_bound(prefix)
    below = "" if bound is None else " AND label < :hi"
    sql = (
        "WITH RECURSIVE l(label) AS ("
        " SELECT (SELECT min(label) FROM entries WHERE namespace = :ns AND scope = ''"
        f" AND label >= :lo{below})"
        " UNION ALL"
        " SELECT (SELECT min(label) FROM entries WHERE namespace = :ns AND scope = ''"
        f" AND label > l.label{below}) FROM l WHERE l.label IS NOT NULL)"
        " SELECT label FROM l WHERE label IS NOT NULL AND EXISTS ("
        "SELECT 1 FROM entries e WHERE e.namespace = :ns AND e.scope = '' "
        "AND e.label = l.label AND (e.expires_us IS NULL OR e.expires_us > :now))"
    )
    params = {"ns": namespace, "lo": prefix, "hi": bound, "now": now_us()}
    return [r[0] for r in conn.execute(sql, params).fetchall()]


def set_entry_expiry(
    conn: sqlite3.Connection, k: Scope, expiries: list[tuple[str, datetime | None]]
) -> int:
    n = 0
    for entry_key, at in expiries:
        n += conn.execute(
            f"UPDATE entries SET expires_us = ? {_KEY_WHERE}", (to_us(at), *k, entry_key)
        ).rowcount
    return n


def delete_expired_entries(
    conn: sqlite3.Connection, namespace: str | None
) -> list[tuple[str, str, str, str]]:
    """Delete the expired entries; their (namespace, scope, label, key), for the feed."""
    old = conn.execute(
        "SELECT id, namespace, scope, label, key FROM entries "
        "WHERE expires_us IS NOT NULL AND expires_us <= ? "
        "AND (? IS NULL OR namespace = ?)",
        (now_us(), namespace, namespace),
    ).fetchall()
    for row in old:
        lexical.unindex_entry(conn, row[1], row[2], row[3], row[0])
        conn.execute("DELETE FROM entries WHERE id = ?", (row[0],))
    return [(ns, scope, label, key) for _, ns, scope, label, key in old]


def count_entries(conn: sqlite3.Connection, k: Scope) -> int:
    return int(
        conn.execute(
            "SELECT count(*) FROM entries WHERE namespace = ? AND scope = ? AND label = ?", k
        ).fetchone()[0]
    )


def delete_entry(conn: sqlite3.Connection, k: Scope, entry_key: str) -> bool:
    old = conn.execute(f"SELECT id FROM entries {_KEY_WHERE}", (*k, entry_key)).fetchone()
    if old is None:
        return False
    lexical.unindex_entry(conn, *k, old[0])
    conn.execute("DELETE FROM entries WHERE id = ?", (old[0],))
    return True
