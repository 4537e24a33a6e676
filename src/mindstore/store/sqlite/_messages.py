"""The message domain of the SQLite backend: appends, reads, paths, updates, deletes.

Module-level functions ``fn(conn, ...)`` run inside the transaction the store opened
(:meth:`SQLiteStore._write` / ``_read``); the arguments are already checked and the domain rules
(:mod:`mindstore.store._rules`) decide what happens — this module holds the SQL and the row
shapes. Invariants kept here:

* An append reads the session's leaf pointer and inserts under the write lock the store's
  ``BEGIN IMMEDIATE`` took, so concurrent appenders form one chain; the sessions row keeps the
  leaf pointer, the count, ``linear`` (every message so far extended the newest one) and the
  running token estimate up to date in the same transaction.
* Paths: a ``linear`` session is read as a range of the ``messages_path`` index; a branched one
  with a recursive CTE over ``parent_seq``. Reads of several statements run in one snapshot
  (``SAVEPOINT``, a deferred transaction on its own).
* A delete re-attaches children to the nearest surviving ancestor, drops compactions whose
  ends were deleted, and recomputes the leaf pointer and count; every path-changing write
  clears the running token estimate.
"""

from __future__ import annotations

import json
import sqlite3
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from mindstore.store import _rows, _rules, failpoints
from mindstore.store._rows import loads, make_stored, message_row
from mindstore.store._rules import PreparedMessage, PreparedUpdate
from mindstore.store.base import UNSET, PathWindow, SessionKey, StoredMessage, TokenEstimate
from mindstore.store.sqlite import lexical
from mindstore.store.sqlite._common import forget_estimate, now_us, session_sid, to_datetime


def _path_builder() -> Callable[[list[Any], str | None], list[StoredMessage]]:
    """The loop that turns path rows into :class:`StoredMessage` objects, root-most first.

    A path read builds thousands of them: this is :func:`~mindstore.store._rows.make_stored`'s
    slot setting and :func:`~mindstore.store._rows.loads`' decoding inlined into one loop (no
    per-row function call), ~10% of a 5,000-message read.
    """
    setters = [StoredMessage.__dict__.get(n) for n in _rows.STORED_FIELDS]
    if not all(isinstance(d, types.MemberDescriptorType) for d in setters):

        def slow(rows: list[Any], parent_id: str | None) -> list[StoredMessage]:
            out = []
            for mid, content, created_us, mseq, tokens, nbytes in reversed(rows):
                out.append(
                    make_stored(
                        mid,
                        parent_id,
                        loads(content),
                        to_datetime(created_us),
                        mseq,
                        tokens,
                        nbytes,
                    )
                )
                parent_id = mid
            return out

        return slow
    s_id, s_parent, s_msg, s_created, s_seq, s_tokens, s_nbytes = (
        d.__set__  # type: ignore[union-attr]
        for d in setters
    )
    new = object.__new__
    cls = StoredMessage
    scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
    json_loads = json.loads
    fromts = datetime.fromtimestamp
    utc = UTC

    def build(rows: list[Any], parent_id: str | None) -> list[StoredMessage]:
        """``rows`` = ``(id, content, created_us, seq, tokens, nbytes)`` leaf first."""
        out: list[StoredMessage] = []
        append = out.append
        for mid, content, created_us, mseq, tokens, nbytes in reversed(rows):
            try:
                message, end = scan(content, 0)
            except StopIteration:
                message, end = json_loads(content), len(content)
            if end != len(content):
                message = json_loads(content)
            obj = new(cls)
            s_id(obj, mid)
            s_parent(obj, parent_id)
            s_msg(obj, message)
            s_created(obj, fromts(created_us / 1_000_000, utc))
            s_seq(obj, mseq)
            s_tokens(obj, tokens)
            s_nbytes(obj, nbytes)
            append(obj)
            parent_id = mid
        return out

    return build


_build_path = _path_builder()


def _message(row: Sequence[Any]) -> StoredMessage:
    """A row of ``_MSG_SELECT`` (time in integer microseconds) → StoredMessage."""
    return message_row(row, to_datetime(row[4]))


# seq, id, parent id, content, created_us, tokens, nbytes
_MSG_SELECT = (
    "SELECT m.seq, m.id, p.id, m.content, m.created_us, m.tokens, m.nbytes "
    "FROM messages m LEFT JOIN messages p ON p.seq = m.parent_seq "
)

# Path reads take named parameters :sid and :seq (the session and the message the path ends
# at) and return rows leaf-first. ``{limit}`` is "" or " LIMIT n".
#
# A linear session (``sessions.linear``, see migration m005) is one chain in seq order, so its
# path is a range of ``messages_path``, read like a plain select.
_LINEAR_PATH_SQL = (
    "SELECT id, content, created_us, seq, tokens, nbytes FROM messages INDEXED BY messages_path"
    " WHERE sid = :sid AND seq <= :seq ORDER BY seq DESC{limit}"
)
_LINEAR_COUNT_SQL = (
    "SELECT count(*) FROM messages INDEXED BY messages_path WHERE sid = :sid AND seq <= :seq"
)
# Whole-path totals of a linear session in one index-only aggregate (messages_path carries
# tokens and nbytes), instead of returning every row's sizes to Python.
_LINEAR_TOTALS_SQL = (
    "SELECT count(*), sum(tokens), sum(nbytes) FROM messages INDEXED BY messages_path"
    " WHERE sid = :sid AND seq <= :seq"
)

# A branched session is walked from the message to its root (the CTE queue is FIFO, so rows
# come out leaf-first). The walk carries only seq/parent_seq; bodies are joined afterwards
# (copying content through the CTE queue cost ~30% more). A LIMIT inside a recursive CTE stops
# the walk itself after n rows.
_PATH_SQL = (
    "WITH RECURSIVE up(seq, parent_seq) AS ("
    " SELECT seq, parent_seq FROM messages WHERE seq = :seq"
    " UNION ALL"
    " SELECT m.seq, m.parent_seq FROM up JOIN messages m INDEXED BY messages_path"
    " ON m.sid = :sid AND m.seq = up.parent_seq{limit}"
    ") SELECT m.id, m.content, m.created_us, m.seq, m.tokens, m.nbytes"
    " FROM up CROSS JOIN messages m ON m.seq = up.seq"
)

_PATH_SIZES_SQL = (
    "WITH RECURSIVE up(seq, parent_seq, tokens, nbytes) AS ("
    " SELECT seq, parent_seq, tokens, nbytes FROM messages WHERE seq = :seq"
    " UNION ALL"
    " SELECT m.seq, m.parent_seq, m.tokens, m.nbytes FROM up"
    " JOIN messages m INDEXED BY messages_path ON m.sid = :sid AND m.seq = up.parent_seq"
    ") SELECT tokens, nbytes FROM up"
)

_PATH_COUNT_SQL = (
    "WITH RECURSIVE up(parent_seq) AS ("
    " SELECT parent_seq FROM messages WHERE seq = :seq"
    " UNION ALL"
    " SELECT m.parent_seq FROM up JOIN messages m INDEXED BY messages_path"
    " ON m.sid = :sid AND m.seq = up.parent_seq"
    ") SELECT count(*) FROM up"
)


# ---- helpers shared with the other domains (inside a transaction) -----------------------------
def seq(conn: sqlite3.Connection, session: int | None, message_id: str) -> int | None:
    """The seq of ``message_id`` in session ``session`` (a sid), or None."""
    if session is None:
        return None
    row = conn.execute(
        "SELECT seq FROM messages WHERE sid = ? AND id = ?", (session, message_id)
    ).fetchone()
    return None if row is None else int(row[0])


def require_seq(conn: sqlite3.Connection, key: SessionKey, message_id: str) -> int:
    """The seq of ``message_id``; MessageNotFoundError when the session does not have it."""
    found = seq(conn, session_sid(conn, key), message_id)
    if found is None:
        raise _rules.message_not_found(key, message_id)
    return found


@contextmanager
def _snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """Several reads in one snapshot (a deferred transaction on its own, nested in a block)."""
    conn.execute("SAVEPOINT mindstore_read")
    try:
        yield
    finally:
        conn.execute("RELEASE mindstore_read")


def _path_target(
    conn: sqlite3.Connection, key: SessionKey, leaf_id: str | None
) -> dict[str, int] | None:
    """Where a path ends: ``{"sid", "seq"}`` of ``leaf_id`` or of the latest leaf (None
    when the session is empty), plus ``linear`` (see migration m005)."""
    if leaf_id is None:
        row = conn.execute(
            "SELECT sid, leaf_seq, linear FROM sessions WHERE namespace = ? AND session_id = ?",
            (key.namespace, key.session_id),
        ).fetchone()
        if row is None or row[1] is None:
            return None
    else:
        row = conn.execute(
            "SELECT s.sid, m.seq, s.linear FROM sessions s "
            "JOIN messages m ON m.sid = s.sid AND m.id = ? "
            "WHERE s.namespace = ? AND s.session_id = ?",
            (leaf_id, key.namespace, key.session_id),
        ).fetchone()
        if row is None:
            raise _rules.message_not_found(key, leaf_id)
    return {"sid": row[0], "seq": row[1], "linear": row[2]}


def _path_rows(
    conn: sqlite3.Connection, target: dict[str, int], limit: int | None
) -> list[StoredMessage]:
    """Rows from ``target`` up to the root (or ``limit`` rows), returned root-most first."""
    sql = _LINEAR_PATH_SQL if target["linear"] else _PATH_SQL
    sql = sql.format(limit="" if limit is None else f" LIMIT {int(limit)}")
    rows = conn.execute(sql, target).fetchall()  # leaf first
    if not rows:
        return []
    # Without a limit the walk ends at the root; with one, the top row may have a parent.
    parent_id: str | None = None
    if limit is not None:
        top = conn.execute(
            "SELECT p.id FROM messages c JOIN messages p ON p.seq = c.parent_seq WHERE c.seq = ?",
            (rows[-1][3],),
        ).fetchone()
        parent_id = None if top is None else top[0]
    return _build_path(rows, parent_id)


# ---- appends -----------------------------------------------------------------------------------
def append(
    conn: sqlite3.Connection,
    key: SessionKey,
    prepared: list[PreparedMessage],
    expected_leaf: object,
) -> list[bool]:
    """Insert ``prepared`` (see :meth:`mindstore.store.base.Store.append`)."""
    now = now_us()
    row = conn.execute(
        "SELECT sid, leaf_seq, message_count, linear, est_seq, est_tokens FROM sessions "
        "WHERE namespace = ? AND session_id = ?",
        (key.namespace, key.session_id),
    ).fetchone()
    est_seq: int | None = None
    est_tokens: int | None = None
    if row is None:
        session = conn.execute(
            "INSERT INTO sessions (namespace, session_id, created_us, updated_us) "
            "VALUES (?, ?, ?, ?)",
            (key.namespace, key.session_id, now, now),
        ).lastrowid
        assert session is not None
        leaf: int | None = None
        count = 0
        linear = 1
    else:
        session, leaf, count, linear, est_seq, est_tokens = row
    if expected_leaf is not UNSET:
        current = None
        if leaf is not None:
            current = conn.execute("SELECT id FROM messages WHERE seq = ?", (leaf,)).fetchone()[0]
        _rules.check_expected_leaf(key, expected_leaf, current)  # type: ignore[arg-type]
    failpoints.hit(_rules.APPEND_BEFORE_INSERT)
    results: list[bool] = []
    inserted = 0
    own_text: str | None = None  # the text of `leaf` when this call indexed it
    for p in prepared:
        item = p.item
        parent_seq = _rules.resolve_parent(
            key, item.parent, leaf, lambda parent: seq(conn, session, parent)
        )
        cur = conn.execute(
            "INSERT OR IGNORE INTO messages "
            "(sid, id, parent_seq, role, content, tokens, nbytes, created_us) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (session, p.id, parent_seq, p.role, p.content, item.tokens, p.nbytes, now),
        )
        if cur.rowcount != 1:
            results.append(False)
            continue
        new_seq = cur.lastrowid
        assert new_seq is not None
        own_text = lexical.index_message(
            conn,
            key.namespace,
            session,
            new_seq,
            item.message,
            parent_seq,
            own_text if parent_seq == leaf and leaf is not None else None,
        )
        if parent_seq != leaf:
            linear = 0  # not extending the chain's end (leaf = newest message in a chain)
        est_seq, est_tokens = _rules.extend_estimate(
            est_seq, est_tokens, parent_seq, new_seq, item.tokens
        )
        leaf = new_seq
        inserted += 1
        results.append(True)
    if inserted:
        lexical.flush(conn)
        conn.execute(
            "UPDATE sessions SET leaf_seq = ?, message_count = ?, updated_us = ?, "
            "linear = ?, est_seq = ?, est_tokens = ? WHERE sid = ?",
            (leaf, count + inserted, now, linear, est_seq, est_tokens, session),
        )
    failpoints.hit(_rules.APPEND_AFTER_INSERT)
    return results


# ---- token estimates ---------------------------------------------------------------------------
def token_estimate(conn: sqlite3.Connection, key: SessionKey) -> TokenEstimate | None:
    row = conn.execute(
        "SELECT m.id, s.est_tokens, s.est_gen, s.compact_floor, s.compact_margin "
        "FROM sessions s LEFT JOIN messages m ON m.seq = s.est_seq "
        "WHERE s.namespace = ? AND s.session_id = ?",
        (key.namespace, key.session_id),
    ).fetchone()
    if row is None:
        return None
    known = row[0] is not None and row[1] is not None
    return TokenEstimate(
        leaf_id=row[0] if known else None,
        tokens=row[1] if known else None,
        version=row[2],
        floor=row[3],
        margin=row[4],
    )


def set_token_estimate(conn: sqlite3.Connection, params: tuple[Any, ...]) -> bool:
    """``params``: :func:`mindstore.store._rules.token_estimate_params`."""
    cur = conn.execute(
        "UPDATE sessions SET est_seq = (SELECT seq FROM messages "
        "WHERE sid = sessions.sid AND id = ?), est_tokens = ?, compact_floor = ?, "
        "compact_margin = ? WHERE namespace = ? AND session_id = ? AND est_gen = ?",
        params,
    )
    return cur.rowcount == 1


# ---- reads -------------------------------------------------------------------------------------
def get_message(conn: sqlite3.Connection, key: SessionKey, message_id: str) -> StoredMessage | None:
    row = conn.execute(
        _MSG_SELECT + "JOIN sessions s ON s.sid = m.sid "
        "WHERE s.namespace = ? AND s.session_id = ? AND m.id = ?",
        (key.namespace, key.session_id, message_id),
    ).fetchone()
    return None if row is None else _message(row)


def get_messages(conn: sqlite3.Connection, key: SessionKey, ids: list[str]) -> list[StoredMessage]:
    rows = conn.execute(
        _MSG_SELECT + "JOIN sessions s ON s.sid = m.sid "
        "WHERE s.namespace = ? AND s.session_id = ? "
        "AND m.id IN (SELECT value FROM json_each(?)) ORDER BY m.seq",
        (key.namespace, key.session_id, json.dumps(ids)),
    ).fetchall()
    return [_message(r) for r in rows]


def all_messages(conn: sqlite3.Connection, key: SessionKey) -> list[StoredMessage]:
    rows = conn.execute(
        _MSG_SELECT + "JOIN sessions s ON s.sid = m.sid "
        "WHERE s.namespace = ? AND s.session_id = ? ORDER BY m.seq",
        (key.namespace, key.session_id),
    ).fetchall()
    return [_message(r) for r in rows]


def path(conn: sqlite3.Connection, key: SessionKey, leaf_id: str | None) -> list[StoredMessage]:
    with _snapshot(conn):  # one snapshot for the lookup and the walk
        target = _path_target(conn, key, leaf_id)
        return [] if target is None else _path_rows(conn, target, None)


def path_window(
    conn: sqlite3.Connection, key: SessionKey, leaf_id: str | None, window: _rules.Window
) -> PathWindow:
    """``window``: :func:`mindstore.store._rules.check_window`."""
    max_tokens, max_bytes, min_messages = window
    with _snapshot(conn):
        target = _path_target(conn, key, leaf_id)
        if target is None:
            return PathWindow(
                messages=[], truncated=False, total_tokens=0, total_bytes=0, path_length=0
            )
        if target["linear"]:
            return _linear_window(conn, target, max_tokens, max_bytes, min_messages)
        sizes = conn.execute(_PATH_SIZES_SQL, target).fetchall()  # leaf first
        total_tokens = sum(t for t, _ in sizes)
        total_bytes = sum(b for _, b in sizes)
        n = 0
        used_tokens = used_bytes = 0
        for tokens, nbytes in sizes:
            fits = (max_tokens is None or used_tokens + tokens <= max_tokens) and (
                max_bytes is None or used_bytes + nbytes <= max_bytes
            )
            if not fits and n >= max(1, min_messages):
                break
            used_tokens += tokens
            used_bytes += nbytes
            n += 1
        rows = _path_rows(conn, target, None if n == len(sizes) else n)
    return PathWindow(
        messages=rows,
        truncated=n < len(sizes),
        total_tokens=total_tokens,
        total_bytes=total_bytes,
        path_length=len(sizes),
    )


def _linear_window(
    conn: sqlite3.Connection,
    target: dict[str, int],
    max_tokens: int | None,
    max_bytes: int | None,
    min_messages: int,
) -> PathWindow:
    """:func:`path_window` of a linear session (see migration m005).

    The path is the session's messages with ``seq <= target``, so the totals are one
    index-only aggregate, and the window is read newest first from one cursor that stops at
    the first row past the budget — only the window's bodies (and that one row) are read.
    That row is the window's parent (in a chain, a message's parent is the one before it).
    Reading every row's sizes into Python to sum them cost ~2 ms at 5,000 messages.
    """
    length, total_tokens, total_bytes = conn.execute(_LINEAR_TOTALS_SQL, target).fetchone()
    need = max(1, min_messages)
    rows: list[Any] = []
    parent_id: str | None = None
    used_tokens = used_bytes = 0
    cursor = conn.execute(_LINEAR_PATH_SQL.format(limit=""), target)
    try:
        for row in cursor:  # id, content, created_us, seq, tokens, nbytes; leaf first
            tokens, nbytes = row[4], row[5]
            used_tokens += tokens
            used_bytes += nbytes
            if len(rows) >= need and (
                (max_tokens is not None and used_tokens > max_tokens)
                or (max_bytes is not None and used_bytes > max_bytes)
            ):
                parent_id = row[0]
                break
            rows.append(row)
    finally:
        cursor.close()
    return PathWindow(
        messages=_build_path(rows, parent_id) if rows else [],
        truncated=len(rows) < length,
        total_tokens=int(total_tokens),
        total_bytes=int(total_bytes),
        path_length=length,
    )


def path_length(conn: sqlite3.Connection, key: SessionKey, leaf_id: str | None) -> int:
    with _snapshot(conn):
        target = _path_target(conn, key, leaf_id)
        if target is None:
            return 0
        sql = _LINEAR_COUNT_SQL if target["linear"] else _PATH_COUNT_SQL
        return int(conn.execute(sql, target).fetchone()[0])


def children(conn: sqlite3.Connection, key: SessionKey, message_id: str) -> list[StoredMessage]:
    with _snapshot(conn):
        parent = require_seq(conn, key, message_id)
        rows = conn.execute(
            _MSG_SELECT + "WHERE m.parent_seq = ? ORDER BY m.seq", (parent,)
        ).fetchall()
    return [_message(r) for r in rows]


def latest_leaf(conn: sqlite3.Connection, key: SessionKey) -> StoredMessage | None:
    row = conn.execute(
        _MSG_SELECT + "JOIN sessions s ON m.seq = s.leaf_seq "
        "WHERE s.namespace = ? AND s.session_id = ?",
        (key.namespace, key.session_id),
    ).fetchone()
    return None if row is None else _message(row)


# ---- changes -----------------------------------------------------------------------------------
def update(conn: sqlite3.Connection, key: SessionKey, u: PreparedUpdate) -> None:
    target = require_seq(conn, key, u.id)
    conn.execute(
        "UPDATE messages SET role = ?, content = ?, tokens = ?, nbytes = ? WHERE seq = ?",
        (u.role, u.content, u.tokens, u.nbytes, target),
    )
    # the message's own rows, and its children's context (the parent's text)
    lexical.reindex_messages(conn, key.namespace, [target, *lexical.children_of(conn, [target])])
    forget_estimate(conn, "sid = (SELECT sid FROM messages WHERE seq = ?)", target)


def delete(conn: sqlite3.Connection, key: SessionKey, wanted: list[str]) -> int:
    session = session_sid(conn, key)
    rows = (
        conn.execute(
            "SELECT seq, id, parent_seq FROM messages "
            "WHERE sid = ? AND id IN (SELECT value FROM json_each(?))",
            (session, json.dumps(wanted)),
        ).fetchall()
        if session is not None
        else []
    )
    plan = _rules.plan_delete(key, wanted, rows)
    assert session is not None
    # children re-attached to another parent: their context (the parent's text) changes
    moved = [c for c in lexical.children_of(conn, list(plan)) if c not in plan]
    for gone, survivor in plan.items():
        conn.execute("UPDATE messages SET parent_seq = ? WHERE parent_seq = ?", (survivor, gone))

    seqs = json.dumps(list(plan))
    lexical.unindex_messages(conn, key.namespace, list(plan))
    ids_json = json.dumps(wanted)
    dropped = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM compactions WHERE sid = ? AND ("
            "from_id IN (SELECT value FROM json_each(?)) OR "
            "to_id IN (SELECT value FROM json_each(?)))",
            (session, ids_json, ids_json),
        )
    ]
    if dropped:
        dropped_json = json.dumps(dropped)
        conn.execute(
            "DELETE FROM compactions WHERE id IN (SELECT value FROM json_each(?))",
            (dropped_json,),
        )
        # An overlay a dropped one had superseded applies again.
        conn.execute(
            "UPDATE compactions SET superseded_by = NULL "
            "WHERE sid = ? AND superseded_by IN (SELECT value FROM json_each(?))",
            (session, dropped_json),
        )
    conn.execute("DELETE FROM messages WHERE seq IN (SELECT value FROM json_each(?))", (seqs,))
    lexical.reindex_messages(conn, key.namespace, moved)
    leaf = conn.execute(
        "SELECT max(seq) FROM messages m WHERE sid = ? AND NOT EXISTS "
        "(SELECT 1 FROM messages c WHERE c.parent_seq = m.seq)",
        (session,),
    ).fetchone()[0]
    conn.execute(
        "UPDATE sessions SET leaf_seq = ?, message_count = message_count - ?, "
        "updated_us = ? WHERE sid = ?",
        (leaf, len(rows), now_us(), session),
    )
    forget_estimate(conn, "sid = ?", session)
    return len(rows)


def clear_session(conn: sqlite3.Connection, key: SessionKey) -> int | None:
    """Delete the session's messages, compactions, search rows and skill states, keeping its
    registry row (emptied); returns its sid, or None when it has no registry row. Also the
    first step of deleting a session or a namespace."""
    conn.execute(
        "DELETE FROM skill_states WHERE namespace = ? AND session_id = ?",
        (key.namespace, key.session_id),
    )
    session = session_sid(conn, key)
    if session is None:
        return None
    lexical.clear_session(conn, key.namespace, session)
    conn.execute("DELETE FROM compactions WHERE sid = ?", (session,))
    conn.execute("DELETE FROM messages WHERE sid = ?", (session,))
    conn.execute(
        "UPDATE sessions SET leaf_seq = NULL, message_count = 0, linear = 1, updated_us = ? "
        "WHERE sid = ?",
        (now_us(), session),
    )
    forget_estimate(conn, "sid = ?", session)
    return session
