"""The session registry (SessionManager's rows), whole-session and whole-namespace deletion,
store statistics and the lexical reindex, in the SQLite store."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from mindstore.lexical.collections import entry_collection, message_collection
from mindstore.store import _rows, _rules, failpoints
from mindstore.store._rules import NewSession
from mindstore.store.base import SessionInfo, SessionKey
from mindstore.store.sqlite import lexical
from mindstore.store.sqlite._common import now_us, session_sid, to_datetime

_SESSION_COLS = (
    "session_id, name, parent_session_id, model, source, metadata, input_tokens, "
    "output_tokens, estimated_cost, end_reason, created_us, updated_us, message_count"
)

ClearSession = Callable[[sqlite3.Connection, SessionKey], int | None]


_EMPTY_EVENTS_SQL = (
    "UPDATE changes SET data = '{}' WHERE namespace = ? AND session_id = ? AND data != '{}'"
)


def get_session(conn: sqlite3.Connection, key: SessionKey) -> SessionInfo | None:
    row = conn.execute(
        f"SELECT {_SESSION_COLS} FROM sessions WHERE namespace = ? AND session_id = ?",
        (key.namespace, key.session_id),
    ).fetchone()
    return None if row is None else _rows.decode_session(row, to_datetime)


def _existing(conn: sqlite3.Connection, key: SessionKey) -> SessionInfo:
    info = get_session(conn, key)
    assert info is not None
    return info


def create_session(conn: sqlite3.Connection, key: SessionKey, new: NewSession) -> SessionInfo:
    if session_sid(conn, key) is not None:
        raise _rules.session_exists(key)
    now = now_us()
    conn.execute(
        "INSERT INTO sessions (namespace, session_id, name, parent_session_id, model, "
        "source, metadata, created_us, updated_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (key.namespace, key.session_id, *new.columns, now, now),
    )
    return _existing(conn, key)


def list_sessions(
    conn: sqlite3.Connection, namespace: str, limit: int, before: str | None
) -> list[SessionInfo]:
    if before is None:
        rows = conn.execute(
            f"SELECT {_SESSION_COLS} FROM sessions WHERE namespace = ? "
            "ORDER BY updated_us DESC, session_id DESC LIMIT ?",
            (namespace, limit),
        ).fetchall()
    else:
        cursor = conn.execute(
            "SELECT updated_us, session_id FROM sessions WHERE namespace = ? AND session_id = ?",
            (namespace, before),
        ).fetchone()
        if cursor is None:
            return []
        rows = conn.execute(
            f"SELECT {_SESSION_COLS} FROM sessions WHERE namespace = ? "
            "AND (updated_us, session_id) < (?, ?) "
            "ORDER BY updated_us DESC, session_id DESC LIMIT ?",
            (namespace, cursor[0], cursor[1], limit),
        ).fetchall()
    return [_rows.decode_session(r, to_datetime) for r in rows]


def update_session(
    conn: sqlite3.Connection, key: SessionKey, values: dict[str, object]
) -> SessionInfo:
    """``values``: registry fields checked by ``check_session_fields`` (names from its
    allow-list only, so they can stand in the SQL)."""
    sid = session_sid(conn, key)
    if sid is None:
        raise _rules.session_not_found(key)
    sets = "".join(f"{f} = ?, " for f in values)
    conn.execute(
        f"UPDATE sessions SET {sets}updated_us = ? WHERE sid = ?",
        (*values.values(), now_us(), sid),
    )
    return _existing(conn, key)


def add_usage(
    conn: sqlite3.Connection, key: SessionKey, input_tokens: int, output_tokens: int, cost: float
) -> SessionInfo:
    before = conn.execute(
        "SELECT input_tokens, output_tokens, estimated_cost FROM sessions "
        "WHERE namespace = ? AND session_id = ?",
        (key.namespace, key.session_id),
    ).fetchone()
    _rules.check_usage_totals(before, input_tokens, output_tokens, cost)
    now = now_us()
    conn.execute(
        "INSERT INTO sessions (namespace, session_id, input_tokens, output_tokens, "
        "estimated_cost, created_us, updated_us) VALUES (?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (namespace, session_id) DO UPDATE SET "
        "input_tokens = input_tokens + excluded.input_tokens, "
        "output_tokens = output_tokens + excluded.output_tokens, "
        "estimated_cost = estimated_cost + excluded.estimated_cost, "
        "updated_us = excluded.updated_us",
        (key.namespace, key.session_id, input_tokens, output_tokens, cost, now, now),
    )
    return _existing(conn, key)


def reindex(conn: sqlite3.Connection, progress: Callable[[int, int], None] | None) -> int:
    return lexical.rebuild(conn, progress)


def delete_session(conn: sqlite3.Connection, key: SessionKey, clear: ClearSession) -> bool:
    """``clear`` empties the session (messages, compactions, search rows, skill states) and
    returns its row id; the registry row, blocks, prompt and entries go here."""
    changes_before = conn.total_changes
    sid = clear(conn, key)
    ns, sess = key.namespace, key.session_id
    conn.execute("DELETE FROM blocks WHERE namespace = ? AND scope = ?", (ns, sess))
    conn.execute("DELETE FROM prompts WHERE namespace = ? AND session_id = ?", (ns, sess))
    entries = conn.execute(
        "SELECT id, label FROM entries WHERE namespace = ? AND scope = ?", (ns, sess)
    ).fetchall()
    for doc, label in entries:
        lexical.unindex_entry(conn, ns, sess, label, doc)
    conn.execute("DELETE FROM entries WHERE namespace = ? AND scope = ?", (ns, sess))
    existed = conn.total_changes != changes_before
    if sid is not None:
        conn.execute("DELETE FROM sessions WHERE sid = ?", (sid,))
        existed = True
    # its events keep their numbers (no gap, never reused) but lose what they named (its
    # messages, entries, skills); the store then records session_deleted
    if existed:
        conn.execute(_EMPTY_EVENTS_SQL, (ns, sess))
    return existed


def delete_namespace(conn: sqlite3.Connection, ns: str) -> dict[str, int]:
    """Every row of the namespace, its lexical index included, in the caller's transaction.

    Deleted rows stay in the file's free pages until ``VACUUM``."""
    sids = "SELECT sid FROM sessions WHERE namespace = ?"
    counts: dict[str, int] = {}
    counts["messages"] = conn.execute(
        f"SELECT count(*) FROM messages WHERE sid IN ({sids})", (ns,)
    ).fetchone()[0]
    colls = [message_collection(ns)] + [
        entry_collection(ns, scope, label)
        for scope, label in conn.execute(
            "SELECT DISTINCT scope, label FROM entries WHERE namespace = ?", (ns,)
        ).fetchall()
    ]
    for coll in colls:  # the namespace's lexical index (messages and entry blocks)
        for table in ("search_terms", "search_pending", "search_stats"):
            conn.execute(f"DELETE FROM {table} WHERE coll = ?", (coll,))
    # Every namespace-owned table, children first. A new table holding namespace data
    # gets one line here (tests/contract/test_delete_namespace.py checks every table).
    for name, sql in (
        ("compactions", f"DELETE FROM compactions WHERE sid IN ({sids})"),
        ("", f"DELETE FROM messages WHERE sid IN ({sids})"),
        ("sessions", "DELETE FROM sessions WHERE namespace = ?"),
        ("blocks", "DELETE FROM blocks WHERE namespace = ?"),
        ("entries", "DELETE FROM entries WHERE namespace = ?"),
        ("prompts", "DELETE FROM prompts WHERE namespace = ?"),
        ("skill_states", "DELETE FROM skill_states WHERE namespace = ?"),
        # the change feed (a follower learns of the deletion from the numbers going back,
        # see changes())
        ("", "DELETE FROM changes WHERE namespace = ?"),
    ):
        changed = conn.execute(sql, (ns,)).rowcount
        if name:
            counts[name] = changed
    failpoints.hit(_rules.DELETE_NAMESPACE_AFTER_DELETE)
    return counts


def stats(conn: sqlite3.Connection) -> dict[str, int]:
    conn.execute("SAVEPOINT mindstore_read")  # one snapshot for every count
    try:
        out = {
            "namespaces": conn.execute(
                "SELECT count(*) FROM (SELECT namespace FROM sessions UNION "
                "SELECT namespace FROM blocks UNION SELECT namespace FROM entries)"
            ).fetchone()[0],
        }
        for table in _rules.NAMESPACE_TABLES:
            out[table] = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        out["schema_version"] = conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.execute("RELEASE mindstore_read")
    return {k: int(v) for k, v in out.items()}


def list_namespaces(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT namespace FROM sessions UNION SELECT namespace FROM blocks "
        "UNION SELECT namespace FROM entries ORDER BY 1"
    ).fetchall()
    return [str(r[0]) for r in rows]
