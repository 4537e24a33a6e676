"""The session registry (SessionManager's rows), whole-session and whole-namespace deletion,
store statistics and the lexical reindex, in the PostgreSQL store."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mindstore.lexical.collections import entry_collection, message_collection
from mindstore.store import _rows, _rules, failpoints
from mindstore.store._rules import NewSession
from mindstore.store.base import SessionInfo, SessionKey
from mindstore.store.postgres import lexical

if TYPE_CHECKING:
    from mindstore.store.postgres._common import Conn

_SESSION_COLS = (
    "session_id, name, parent_session_id, model, source, metadata, input_tokens, "
    "output_tokens, estimated_cost, end_reason, created_at, updated_at, message_count"
)

ClearSession = Callable[["Conn", SessionKey], Awaitable[int | None]]


async def create_session(conn: Conn, key: SessionKey, new: NewSession) -> SessionInfo:
    cur = await conn.execute(
        "INSERT INTO sessions (namespace, session_id, name, parent_session_id, model, "
        "source, metadata) VALUES (%s, %s, %s, %s, %s, %s, %s) "
        f"ON CONFLICT (namespace, session_id) DO NOTHING RETURNING {_SESSION_COLS}",
        (key.namespace, key.session_id, *new.columns),
    )
    row = await cur.fetchone()
    if row is None:
        raise _rules.session_exists(key)
    return _rows.decode_session(row)


async def get_session(conn: Conn, key: SessionKey) -> SessionInfo | None:
    cur = await conn.execute(
        f"SELECT {_SESSION_COLS} FROM sessions WHERE namespace = %s AND session_id = %s",
        (key.namespace, key.session_id),
    )
    row = await cur.fetchone()
    return None if row is None else _rows.decode_session(row)


async def list_sessions(
    conn: Conn, namespace: str, limit: int, before: str | None
) -> list[SessionInfo]:
    if before is None:
        cur = await conn.execute(
            f"SELECT {_SESSION_COLS} FROM sessions WHERE namespace = %s "
            "ORDER BY updated_at DESC, session_id DESC LIMIT %s",
            (namespace, limit),
        )
    else:
        cur = await conn.execute(
            f"SELECT {_SESSION_COLS} FROM sessions s WHERE namespace = %s "
            "AND (updated_at, session_id) < (SELECT b.updated_at, b.session_id "
            "FROM sessions b WHERE b.namespace = %s AND b.session_id = %s) "
            "ORDER BY updated_at DESC, session_id DESC LIMIT %s",
            (namespace, namespace, before, limit),
        )
    return [_rows.decode_session(r) for r in await cur.fetchall()]


async def update_session(conn: Conn, key: SessionKey, values: dict[str, Any]) -> SessionInfo:
    """``values``: registry fields checked by ``check_session_fields`` (names from its
    allow-list only, so they can stand in the SQL)."""
    sets = "".join(f"{f} = %s, " for f in values)
    cur = await conn.execute(
        f"UPDATE sessions SET {sets}updated_at = clock_timestamp() "
        f"WHERE namespace = %s AND session_id = %s RETURNING {_SESSION_COLS}",
        (*values.values(), key.namespace, key.session_id),
    )
    row = await cur.fetchone()
    if row is None:
        raise _rules.session_not_found(key)
    return _rows.decode_session(row)


async def add_usage(
    conn: Conn, key: SessionKey, input_tokens: int, output_tokens: int, cost: float
) -> SessionInfo:
    cur = await conn.execute(
        "SELECT input_tokens, output_tokens, estimated_cost FROM sessions "
        "WHERE namespace = %s AND session_id = %s FOR UPDATE",
        (key.namespace, key.session_id),
    )
    _rules.check_usage_totals(await cur.fetchone(), input_tokens, output_tokens, cost)
    cur = await conn.execute(
        "INSERT INTO sessions (namespace, session_id, input_tokens, output_tokens, "
        "estimated_cost) VALUES (%s, %s, %s, %s, %s) "
        "ON CONFLICT (namespace, session_id) DO UPDATE SET "
        "input_tokens = sessions.input_tokens + excluded.input_tokens, "
        "output_tokens = sessions.output_tokens + excluded.output_tokens, "
        "estimated_cost = sessions.estimated_cost + excluded.estimated_cost, "
        f"updated_at = clock_timestamp() RETURNING {_SESSION_COLS}",
        (key.namespace, key.session_id, input_tokens, output_tokens, cost),
    )
    row = await cur.fetchone()
    assert row is not None
    return _rows.decode_session(row)


async def reindex(conn: Conn, progress: Callable[[int, int], None] | None) -> int:
    return await lexical.rebuild(conn, progress)


async def delete_session(conn: Conn, key: SessionKey, clear: ClearSession) -> bool:
    """``clear`` empties the session (messages, compactions, search rows, skill states) under
    its row lock and returns its row id; the registry row, blocks, prompt and entries go
    here."""
    ns, sess = key.namespace, key.session_id
    sid = await clear(conn, key)
    existed = sid is not None
    for sql in (
        "DELETE FROM blocks WHERE namespace = %s AND scope = %s",
        "DELETE FROM prompts WHERE namespace = %s AND session_id = %s",
    ):
        cur = await conn.execute(sql, (ns, sess))
        existed = existed or cur.rowcount > 0
    cur = await conn.execute(
        "DELETE FROM entries WHERE namespace = %s AND scope = %s RETURNING id, label",
        (ns, sess),
    )
    gone = await cur.fetchall()
    existed = existed or bool(gone)
    for label in {r[1] for r in gone}:
        docs = [r[0] for r in gone if r[1] == label]
        await lexical.unindex(conn, entry_collection(ns, sess, label), docs)
    if sid is not None:
        await conn.execute("DELETE FROM sessions WHERE sid = %s", (sid,))
    # its events keep their numbers (no gap, never reused) but lose what they named (its
    # messages, entries, skills); the store then records session_deleted
    if existed:
        await conn.execute(
            "UPDATE changes SET data = '{}' WHERE namespace = %s AND session_id = %s"
            " AND data <> '{}'",
            (ns, sess),
        )
    return existed


async def delete_namespace(conn: Conn, namespace: str) -> dict[str, int]:
    """Every row of the namespace, its lexical index included, in the caller's transaction.

    The namespace's registry rows are locked first (``FOR UPDATE``, in ``sid`` order, the lock
    every append of a session takes), so an append in flight either commits before the
    deletion or waits and then finds its session gone (it then starts a new session).
    ``message_search`` rows are counted under ``messages``. Deleted rows stay on disk as dead
    tuples until (auto)vacuum reclaims them.
    """
    sids = "SELECT sid FROM sessions WHERE namespace = %s"
    await conn.execute(f"{sids} ORDER BY sid FOR UPDATE", (namespace,))
    counts: dict[str, int] = {}
    cur = await conn.execute(
        "SELECT DISTINCT scope, label FROM entries WHERE namespace = %s", (namespace,)
    )
    colls = [message_collection(namespace)] + [
        entry_collection(namespace, scope, label) for scope, label in await cur.fetchall()
    ]
    for table in ("search_terms", "search_docs", "search_stats"):  # the namespace's lexical index
        await conn.execute(f"DELETE FROM {table} WHERE coll = ANY(%s)", (colls,))
    # Every namespace-owned table, children first. A new table holding namespace data gets
    # one line here (tests/contract/test_delete_namespace.py checks every table of the
    # schema).
    for name, sql in (
        ("compactions", f"DELETE FROM compactions WHERE sid IN ({sids})"),
        ("", "DELETE FROM message_search WHERE namespace = %s"),
        ("messages", f"DELETE FROM messages WHERE sid IN ({sids})"),
        ("sessions", "DELETE FROM sessions WHERE namespace = %s"),
        ("blocks", "DELETE FROM blocks WHERE namespace = %s"),
        ("entries", "DELETE FROM entries WHERE namespace = %s"),
        ("prompts", "DELETE FROM prompts WHERE namespace = %s"),
        ("skill_states", "DELETE FROM skill_states WHERE namespace = %s"),
        # the change feed: its events and its counter (a follower learns of the deletion
        # from the counter going back, see changes())
        ("", "DELETE FROM changes WHERE namespace = %s"),
        ("", "DELETE FROM change_counters WHERE namespace = %s"),
    ):
        cur = await conn.execute(sql, (namespace,))
        if name:
            counts[name] = cur.rowcount
    await failpoints.ahit(_rules.DELETE_NAMESPACE_AFTER_DELETE)
    return counts


async def stats(conn: Conn) -> dict[str, int]:
    """One statement: one snapshot for every count."""
    tables = _rules.NAMESPACE_TABLES
    counts = ", ".join(f"(SELECT count(*) FROM {t})" for t in tables)
    cur = await conn.execute(
        "SELECT (SELECT count(*) FROM (SELECT namespace FROM sessions UNION "
        "SELECT namespace FROM blocks UNION SELECT namespace FROM entries) n), "
        f"{counts}, (SELECT version FROM mindstore_schema)"
    )
    row = await cur.fetchone()
    assert row is not None
    out = {"namespaces": int(row[0])}
    for i, t in enumerate(tables):
        out[t] = int(row[i + 1])
    out["schema_version"] = int(row[-1])
    return out


async def list_namespaces(conn: Conn) -> list[str]:
    # COLLATE "C": code-point order, the same as SQLite's BINARY comparison.
    cur = await conn.execute(
        "SELECT n FROM (SELECT namespace AS n FROM sessions UNION SELECT namespace "
        'FROM blocks UNION SELECT namespace FROM entries) u ORDER BY n COLLATE "C"'
    )
    return [str(r[0]) for r in await cur.fetchall()]
