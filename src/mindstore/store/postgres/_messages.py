"""The message domain of the PostgreSQL backend: appends, reads, paths, updates, deletes.

Module-level coroutines ``fn(conn, ...)`` run on the connection the store gave them
(:meth:`PostgresStore._write` / ``_read``); the arguments are already checked and the domain
rules (:mod:`mindstore.store._rules`) decide what happens — this module holds the SQL and the
row shapes. Invariants kept here:

* An append first upserts the session's ``sessions`` row (which locks it until commit), then
  reads the leaf pointer, inserts and moves the pointer under that lock: appenders to one
  session — any process, any machine — queue on one row and form one chain. One message is
  one round trip after the lock; a batch a constant number of round trips.
* The lock statement returns the transaction's id: when the connection is lost while
  committing, :func:`settle_append` asks the server (``txid_status``) whether it committed.
* Paths are recursive CTEs over ``parent_seq`` (no depth limit); ``path_window`` walks only
  the sizes of the path and reads the bodies of the window alone.
* A delete re-attaches children to the nearest surviving ancestor, drops compactions whose
  ends were deleted, and recomputes the leaf pointer and count; every path-changing write
  clears the running token estimate.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from mindstore.errors import StoreError
from mindstore.lexical.collections import message_collection
from mindstore.store import _rows, _rules, failpoints
from mindstore.store._rows import loads, make_stored
from mindstore.store._rules import PreparedMessage, PreparedUpdate
from mindstore.store.base import UNSET, PathWindow, SessionKey, StoredMessage, TokenEstimate
from mindstore.store.postgres import lexical
from mindstore.store.postgres._common import FORGET_ESTIMATE_SQL, lock_session

if TYPE_CHECKING:
    from mindstore.store.postgres._common import Conn

# ---- SQL ---------------------------------------------------------------------------------------
_MSG_COLS = "m.seq, m.id, p.id, m.content, m.created_at, m.tokens, m.nbytes"
_MSG_FROM = "messages m LEFT JOIN messages p ON p.seq = m.parent_seq "
_SESSION_SEQ = "(SELECT leaf_seq FROM sessions WHERE namespace = %s AND session_id = %s)"
_MESSAGE_SEQ = (
    "(SELECT x.seq FROM messages x JOIN sessions xs ON xs.sid = x.sid "
    "WHERE xs.namespace = %s AND xs.session_id = %s AND x.id = %s)"
)

# Walk from a message to its root; ``depth`` 0 is the leaf. Each step is a LATERAL primary-key
# lookup: with a plain join the planner, working from stale statistics on a freshly filled table,
# may pick a hash join that scans the whole table once per level (quadratic).
_STEP = (
    "FROM up CROSS JOIN LATERAL (SELECT * FROM messages x WHERE x.seq = up.parent_seq LIMIT 1) m"
)
_PATH_SQL = (
    "WITH RECURSIVE up(depth, seq, parent_seq, id, content, created_at, tokens, nbytes) AS ("
    " SELECT 0, seq, parent_seq, id, content, created_at, tokens, nbytes"
    " FROM messages WHERE seq = {leaf}"
    " UNION ALL"
    " SELECT up.depth + 1, m.seq, m.parent_seq, m.id, m.content, m.created_at, m.tokens, m.nbytes"
    f" {_STEP}"
    ") SELECT depth, seq, id, content, created_at, tokens, nbytes FROM up"
)

_PATH_COUNT_SQL = (
    "WITH RECURSIVE up(parent_seq) AS ("
    " SELECT parent_seq FROM messages WHERE seq = {leaf}"
    " UNION ALL"
    f" SELECT m.parent_seq {_STEP}"
    ") SELECT count(*) FROM up"
)

# Sizes of the whole path (no bodies), then bodies for the rows of the window only.
_WINDOW_SQL = (
    "WITH RECURSIVE up(depth, seq, parent_seq, tokens, nbytes) AS ("
    " SELECT 0, seq, parent_seq, tokens, nbytes FROM messages WHERE seq = {leaf}"
    " UNION ALL"
    " SELECT up.depth + 1, m.seq, m.parent_seq, m.tokens, m.nbytes"
    f" {_STEP}"
    "), w AS ("
    " SELECT depth, seq,"
    " sum(tokens) OVER (ORDER BY depth) AS ct, sum(nbytes) OVER (ORDER BY depth) AS cb,"
    " sum(tokens) OVER () AS tt, sum(nbytes) OVER () AS tb, count(*) OVER () AS n"
    " FROM up"
    f") SELECT w.depth, w.tt, w.tb, w.n, {_MSG_COLS} FROM w JOIN {_MSG_FROM}"
    "ON m.seq = w.seq WHERE w.depth < %s{budget}"
)

# Upsert the sessions row, which locks it until the end of the transaction.
_LOCK_SESSION_SQL = (
    "INSERT INTO sessions (namespace, session_id) VALUES (%s, %s) "
    "ON CONFLICT (namespace, session_id) DO UPDATE SET leaf_seq = sessions.leaf_seq "
    "RETURNING sid, leaf_seq, (SELECT text FROM message_search WHERE seq = sessions.leaf_seq), "
    "txid_current()"
)

# Insert one message with its search row and, if it was new, move the leaf pointer — one round
# trip. (The search row's foreign key is checked at the end of the statement, when the message
# row exists.)
_INSERT_ONE_SQL = (
    "WITH ins AS ("
    " INSERT INTO messages (sid, id, parent_seq, role, content, tokens, nbytes)"
    " VALUES (%(sid)s, %(id)s, %(parent)s, %(role)s, %(content)s,"
    " %(tokens)s, %(nbytes)s)"
    " ON CONFLICT (sid, id) DO NOTHING RETURNING seq, created_at"
    "), indexed AS ("
    " INSERT INTO message_search (seq, namespace, session_id, id, role, created_at, text,"
    " tool_text) SELECT ins.seq, %(ns)s, %(sess)s, %(id)s, %(role)s, ins.created_at,"
    " %(text)s, %(tool)s FROM ins"
    "), u AS (SELECT * FROM"
    " unnest(%(kinds)s::smallint[], %(keys)s::text[], %(tfs)s::real[], %(ctxs)s::real[])"
    " AS u(kind, key, tf, ctx)"
    "), terms AS ("
    " INSERT INTO search_terms (coll, kind, key, doc, part, tf, ctx, dl)"
    " SELECT %(coll)s, u.kind, u.key, ins.seq, %(sid)s, u.tf, u.ctx, %(dl)s FROM ins, u"
    "), docs AS ("
    " INSERT INTO search_docs (coll, doc, part, dl, keys, tfs, ctxs)"
    f" SELECT %(coll)s, ins.seq, %(sid)s, %(dl)s, {lexical.DOC_ARRAYS} FROM ins, u"
    " WHERE u.kind = 0 GROUP BY ins.seq"
    "), counted AS ("
    " INSERT INTO search_stats AS st (coll, part, docs, length)"
    " SELECT %(coll)s, %(sid)s, 1, %(dl)s FROM ins WHERE %(indexed)s"
    " ON CONFLICT (coll, part) DO UPDATE SET docs = st.docs + 1,"
    " length = st.length + excluded.length"
    ") UPDATE sessions SET leaf_seq = ins.seq, message_count = message_count + 1,"
    " updated_at = clock_timestamp(),"
    # the running token estimate (TokenEstimate): extended by a child of the measured leaf,
    # started by a new root, cleared otherwise (SET sees the row's old values)
    " est_tokens = CASE WHEN %(parent)s::bigint IS NULL THEN %(tokens)s::bigint"
    " WHEN sessions.est_seq = %(parent)s::bigint THEN sessions.est_tokens + %(tokens)s::bigint"
    " END,"
    " est_seq = CASE WHEN %(parent)s::bigint IS NULL"
    " OR sessions.est_seq = %(parent)s::bigint THEN ins.seq END"
    " FROM ins WHERE sessions.sid = %(sid)s RETURNING ins.seq"
)

_INSERT_MANY_SQL = (
    "WITH u AS MATERIALIZED (SELECT * FROM unnest("
    "%(seqs)s::bigint[], %(ids)s::text[], %(parents)s::bigint[], %(roles)s::text[],"
    " %(contents)s::text[], %(tokens)s::int[], %(nbytes)s::int[], %(texts)s::text[],"
    " %(tools)s::text[]"
    ") WITH ORDINALITY AS u(seq, id, parent, role, content, tokens, nbytes, text, tool, ord)"
    "), ins AS ("
    " INSERT INTO messages (seq, sid, id, parent_seq, role, content, tokens, nbytes)"
    " SELECT u.seq, %(sid)s, u.id, u.parent, u.role, u.content, u.tokens,"
    " u.nbytes FROM u ORDER BY u.ord RETURNING seq, created_at"
    ") INSERT INTO message_search (seq, namespace, session_id, id, role, created_at, text,"
    " tool_text) SELECT u.seq, %(ns)s, %(sess)s, u.id, u.role, ins.created_at, u.text,"
    " u.tool FROM u JOIN ins ON ins.seq = u.seq ORDER BY u.ord"
)


def _message(row: Sequence[Any]) -> StoredMessage:
    """A row of ``_MSG_COLS`` (time already a datetime) → StoredMessage."""
    return _rows.message_row(row, row[4])


async def _fetchone(conn: Conn, sql: str, params: Sequence[Any]) -> Any:
    cur = await conn.execute(sql, params)
    return await cur.fetchone()


async def _fetchall(conn: Conn, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    cur = await conn.execute(sql, params)
    return await cur.fetchall()


def _leaf_sql(key: SessionKey, leaf_id: str | None) -> tuple[str, list[Any]]:
    """The sub-select of a path's end seq (``leaf_id``'s, or the latest leaf's) and its
    parameters."""
    if leaf_id is None:
        return _SESSION_SEQ, [key.namespace, key.session_id]
    return _MESSAGE_SEQ, [key.namespace, key.session_id, leaf_id]


# ---- appends -----------------------------------------------------------------------------------
class AppendOutcome:
    """How far an append's transaction got: its id (``txid_current()``) and its result, kept
    so that a COMMIT that lost its connection can be settled (:func:`settle_append`)."""

    __slots__ = ("result", "xid")

    def __init__(self) -> None:
        self.xid: int | None = None
        self.result: list[bool] | None = None


async def append(
    conn: Conn,
    key: SessionKey,
    prepared: list[PreparedMessage],
    expected_leaf: object,
    outcome: AppendOutcome,
) -> list[bool]:
    """Insert ``prepared`` (see :meth:`mindstore.store.base.Store.append`)."""
    cur = await conn.execute(_LOCK_SESSION_SQL, (key.namespace, key.session_id))
    row = await cur.fetchone()
    assert row is not None
    sid, leaf, leaf_text, outcome.xid = row
    if expected_leaf is not UNSET:
        current = None
        if leaf is not None:
            r = await _fetchone(conn, "SELECT id FROM messages WHERE seq = %s", (leaf,))
            current = r[0] if r is not None else None
        _rules.check_expected_leaf(key, expected_leaf, current)  # type: ignore[arg-type]
    await failpoints.ahit(_rules.APPEND_BEFORE_INSERT)
    if len(prepared) == 1:
        result = [await _insert_one(conn, key, sid, leaf, leaf_text, prepared[0])]
    else:
        result = await _insert_many(conn, key, sid, leaf, leaf_text, prepared)
    await failpoints.ahit(_rules.APPEND_AFTER_INSERT)
    outcome.result = result
    return result


async def settle_append(
    read: Callable[..., Awaitable[Any]], error: StoreError, outcome: AppendOutcome, wait: float
) -> list[bool]:
    """The answer to an append whose :func:`append` failed with ``error``: when the connection
    was lost while committing (``maybe_committed``), the server is asked whether the
    transaction committed — committed → the append's result; rolled back →
    StoreError(maybe_committed=False); cannot tell within ``wait`` seconds → ``error``.
    ``read`` is the store's ``_read``. Call it while handling ``error``."""
    if not (error.maybe_committed and outcome.xid is not None and outcome.result is not None):
        raise error
    status = await _transaction_status(read, outcome.xid, wait)
    if status == "committed":
        return outcome.result
    if status == "aborted":
        raise StoreError(
            "PostgreSQL connection lost while committing; the server then reported "
            "that the transaction was rolled back: nothing was written, retry",
            message_ids=error.message_ids,
        ) from error.__cause__
    raise error


async def _txid_status(conn: Conn, xid: int) -> Any:
    return await _fetchone(conn, "SELECT txid_status(%s)", (xid,))


async def _transaction_status(
    read: Callable[..., Awaitable[Any]], xid: int, wait: float
) -> str | None:
    """``committed`` / ``aborted`` for a transaction whose COMMIT lost its connection,
    asked of the server (``txid_status``) for up to ``wait`` seconds (it may be restarting);
    None if it could not tell in that time."""
    deadline = time.monotonic() + wait
    while (left := deadline - time.monotonic()) > 0:
        try:
            row = await asyncio.wait_for(read(_txid_status, xid), left)
        except (StoreError, TimeoutError):
            await asyncio.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
            continue
        status = row[0] if row is not None else None
        if status in ("committed", "aborted"):
            return str(status)
        if status is None:  # too old to know (not for a transaction this recent)
            return None
        await asyncio.sleep(0.02)  # "in progress": its backend is still finishing
    return None


async def _insert_one(
    conn: Conn,
    key: SessionKey,
    sid: int,
    leaf: int | None,
    leaf_text: str | None,
    p: PreparedMessage,
) -> bool:
    """One message in one round trip (``_INSERT_ONE_SQL``); an explicit parent costs one more."""
    parent = p.item.parent
    parent_text = leaf_text
    found: dict[str, int] = {}
    if isinstance(parent, str):
        r = await _fetchone(
            conn,
            "SELECT m.seq, x.text FROM messages m LEFT JOIN message_search x "
            "ON x.seq = m.seq WHERE m.sid = %s AND m.id = %s",
            (sid, parent),
        )
        if r is not None:
            found[parent], parent_text = r
    elif parent is None:
        parent_text = None
    parent_seq = _rules.resolve_parent(key, parent, leaf, found.get)
    doc = lexical.message_document(p.text, p.tool, parent_text)
    cur = await conn.execute(
        _INSERT_ONE_SQL,
        {
            "sid": sid,
            "ns": key.namespace,
            "sess": key.session_id,
            "id": p.id,
            "parent": parent_seq,
            "role": p.role,
            "content": p.content,
            "tokens": p.item.tokens,
            "nbytes": p.nbytes,
            "text": p.text,
            "tool": p.tool,
            "coll": message_collection(key.namespace),
            "kinds": [r[0] for r in doc.rows],
            "keys": [r[1] for r in doc.rows],
            "tfs": [r[2] for r in doc.rows],
            "ctxs": [r[3] for r in doc.rows],
            "dl": doc.length,
            "indexed": bool(doc.rows),
        },
    )
    return await cur.fetchone() is not None


async def _insert_many(
    conn: Conn,
    key: SessionKey,
    sid: int,
    leaf: int | None,
    leaf_text: str | None,
    items: list[PreparedMessage],
) -> list[bool]:
    """A batch in a constant number of round trips: find existing ids and explicit parents,
    allocate seqs, insert every new row with one ``unnest``, move the leaf pointer."""
    ids = [p.id for p in items]
    parents = [p.item.parent for p in items if isinstance(p.item.parent, str)]
    cur = await conn.execute(
        "SELECT m.id, m.seq, x.text FROM messages m LEFT JOIN message_search x "
        "ON x.seq = m.seq WHERE m.sid = %s AND m.id = ANY(%s)",
        (sid, list({*ids, *parents})),
    )
    known: dict[str, int] = {}
    texts: dict[int | None, str | None] = {leaf: leaf_text}
    for r in await cur.fetchall():
        known[r[0]] = r[1]
        texts[r[1]] = r[2]
    # Allocate seqs for every item up front (unused ones are simply skipped: seqs only
    # need to be monotonic, not dense).
    cur = await conn.execute(
        "SELECT nextval(pg_get_serial_sequence('messages', 'seq')) FROM generate_series(1, %s)",
        (len(items),),
    )
    seqs = [r[0] for r in await cur.fetchall()]
    est = await _fetchone(conn, "SELECT est_seq, est_tokens FROM sessions WHERE sid = %s", (sid,))
    est_seq, est_tokens = est if est is not None else (None, None)
    results: list[bool] = []
    rows: list[tuple[int, PreparedMessage, int | None]] = []
    for p, seq in zip(items, seqs, strict=True):
        parent_seq = _rules.resolve_parent(key, p.item.parent, leaf, known.get)
        if p.id in known:
            results.append(False)
            continue
        known[p.id] = seq
        texts[seq] = p.text
        rows.append((seq, p, parent_seq))
        est_seq, est_tokens = _rules.extend_estimate(
            est_seq, est_tokens, parent_seq, seq, p.item.tokens
        )
        leaf = seq
        results.append(True)
    if rows:
        await conn.execute(
            _INSERT_MANY_SQL,
            {
                "sid": sid,
                "ns": key.namespace,
                "sess": key.session_id,
                "seqs": [r[0] for r in rows],
                "ids": [r[1].id for r in rows],
                "parents": [r[2] for r in rows],
                "roles": [r[1].role for r in rows],
                "contents": [r[1].content for r in rows],
                "tokens": [r[1].item.tokens for r in rows],
                "nbytes": [r[1].nbytes for r in rows],
                "texts": [r[1].text for r in rows],
                "tools": [r[1].tool for r in rows],
            },
        )
        coll = message_collection(key.namespace)
        terms = lexical.message_rows()
        for seq, p, parent_seq in rows:
            parent_text = texts.get(parent_seq) if parent_seq is not None else None
            doc = lexical.message_document(p.text, p.tool, parent_text)
            lexical.collect(terms, coll, seq, sid, doc)
        await lexical.add_rows(conn, terms)
        await conn.execute(
            "UPDATE sessions SET leaf_seq = %s, message_count = message_count + %s, "
            "updated_at = clock_timestamp(), est_seq = %s, est_tokens = %s WHERE sid = %s",
            (leaf, len(rows), est_seq, est_tokens, sid),
        )
    return results


# ---- token estimates ---------------------------------------------------------------------------
async def token_estimate(conn: Conn, key: SessionKey) -> TokenEstimate | None:
    row = await _fetchone(
        conn,
        "SELECT m.id, s.est_tokens, s.est_gen, s.compact_floor, s.compact_margin "
        "FROM sessions s LEFT JOIN messages m ON m.seq = s.est_seq "
        "WHERE s.namespace = %s AND s.session_id = %s",
        (key.namespace, key.session_id),
    )
    if row is None:
        return None
    known = row[0] is not None and row[1] is not None
    return TokenEstimate(
        leaf_id=row[0] if known else None,
        tokens=int(row[1]) if known else None,
        version=int(row[2]),
        floor=None if row[3] is None else int(row[3]),
        margin=None if row[4] is None else int(row[4]),
    )


async def set_token_estimate(conn: Conn, params: tuple[Any, ...]) -> bool:
    """``params``: :func:`mindstore.store._rules.token_estimate_params`."""
    cur = await conn.execute(
        "UPDATE sessions SET est_seq = (SELECT seq FROM messages "
        "WHERE sid = sessions.sid AND id = %s), est_tokens = %s, compact_floor = %s, "
        "compact_margin = %s WHERE namespace = %s AND session_id = %s AND est_gen = %s",
        params,
    )
    return cur.rowcount == 1


# ---- reads -------------------------------------------------------------------------------------
async def get_message(conn: Conn, key: SessionKey, message_id: str) -> StoredMessage | None:
    row = await _fetchone(
        conn,
        f"SELECT {_MSG_COLS} FROM sessions s JOIN {_MSG_FROM}ON m.sid = s.sid "
        "WHERE s.namespace = %s AND s.session_id = %s AND m.id = %s",
        (key.namespace, key.session_id, message_id),
    )
    return None if row is None else _message(row)


async def get_messages(conn: Conn, key: SessionKey, ids: list[str]) -> list[StoredMessage]:
    rows = await _fetchall(
        conn,
        f"SELECT {_MSG_COLS} FROM sessions s JOIN {_MSG_FROM}ON m.sid = s.sid "
        "WHERE s.namespace = %s AND s.session_id = %s AND m.id = ANY(%s) ORDER BY m.seq",
        (key.namespace, key.session_id, ids),
    )
    return [_message(r) for r in rows]


async def all_messages(conn: Conn, key: SessionKey) -> list[StoredMessage]:
    rows = await _fetchall(
        conn,
        f"SELECT {_MSG_COLS} FROM sessions s JOIN {_MSG_FROM}ON m.sid = s.sid "
        "WHERE s.namespace = %s AND s.session_id = %s ORDER BY m.seq",
        (key.namespace, key.session_id),
    )
    return [_message(r) for r in rows]


async def path(conn: Conn, key: SessionKey, leaf_id: str | None) -> list[StoredMessage]:
    leaf_sql, params = _leaf_sql(key, leaf_id)
    rows = await _fetchall(conn, _PATH_SQL.format(leaf=leaf_sql), params)
    if not rows:
        if leaf_id is not None:
            raise _rules.message_not_found(key, leaf_id)
        return []
    if any(r[0] != i for i, r in enumerate(rows)):  # pragma: no cover - CTE order is FIFO
        rows.sort(key=lambda r: int(r[0]))
    rows.reverse()
    out: list[StoredMessage] = []
    parent_id: str | None = None
    for r in rows:  # depth, seq, id, content, created_at, tokens, nbytes
        out.append(make_stored(r[2], parent_id, loads(r[3]), r[4], r[1], r[5], r[6]))
        parent_id = r[2]
    return out


async def path_window(
    conn: Conn, key: SessionKey, leaf_id: str | None, window: _rules.Window
) -> PathWindow:
    """``window``: :func:`mindstore.store._rules.check_window`."""
    max_tokens, max_bytes, min_messages = window
    leaf_sql, params = _leaf_sql(key, leaf_id)
    params.append(max(1, min_messages))
    budget = []
    if max_tokens is not None:
        budget.append("w.ct <= %s")
        params.append(max_tokens)
    if max_bytes is not None:
        budget.append("w.cb <= %s")
        params.append(max_bytes)
    cond = f" OR ({' AND '.join(budget)})" if budget else " OR true"
    rows = await _fetchall(conn, _WINDOW_SQL.format(leaf=leaf_sql, budget=cond), params)
    if not rows:
        if leaf_id is not None:
            raise _rules.message_not_found(key, leaf_id)
        return PathWindow(
            messages=[], truncated=False, total_tokens=0, total_bytes=0, path_length=0
        )
    rows.sort(key=lambda r: -int(r[0]))
    total_tokens, total_bytes, n = int(rows[0][1]), int(rows[0][2]), int(rows[0][3])
    return PathWindow(
        messages=[_message(r[4:]) for r in rows],
        truncated=len(rows) < n,
        total_tokens=total_tokens,
        total_bytes=total_bytes,
        path_length=n,
    )


async def path_length(conn: Conn, key: SessionKey, leaf_id: str | None) -> int:
    leaf_sql, params = _leaf_sql(key, leaf_id)
    row = await _fetchone(
        conn,
        f"SELECT {leaf_sql} IS NOT NULL, ({_PATH_COUNT_SQL.format(leaf=leaf_sql)})",
        params + params,
    )
    assert row is not None
    if not row[0]:
        if leaf_id is not None:
            raise _rules.message_not_found(key, leaf_id)
        return 0
    return int(row[1])


async def children(conn: Conn, key: SessionKey, message_id: str) -> list[StoredMessage]:
    rows = await _fetchall(
        conn,
        "SELECT c.seq, c.id, par.id, c.content, c.created_at, c.tokens, c.nbytes "
        "FROM sessions s JOIN messages par ON par.sid = s.sid "
        "LEFT JOIN messages c ON c.parent_seq = par.seq "
        "WHERE s.namespace = %s AND s.session_id = %s AND par.id = %s ORDER BY c.seq",
        (key.namespace, key.session_id, message_id),
    )
    if not rows:
        raise _rules.message_not_found(key, message_id)
    return [_message(r) for r in rows if r[0] is not None]


async def latest_leaf(conn: Conn, key: SessionKey) -> StoredMessage | None:
    row = await _fetchone(
        conn,
        f"SELECT {_MSG_COLS} FROM sessions s JOIN {_MSG_FROM}ON m.seq = s.leaf_seq "
        "WHERE s.namespace = %s AND s.session_id = %s",
        (key.namespace, key.session_id),
    )
    return None if row is None else _message(row)


# ---- changes -----------------------------------------------------------------------------------
async def update(conn: Conn, key: SessionKey, u: PreparedUpdate) -> None:
    cur = await conn.execute(
        "WITH upd AS (UPDATE messages m SET role = %(role)s, content = %(content)s, "
        "tokens = %(tokens)s, nbytes = %(nbytes)s "
        "FROM sessions s WHERE s.sid = m.sid "
        "AND s.namespace = %(ns)s AND s.session_id = %(sess)s AND m.id = %(id)s "
        "RETURNING m.seq) "
        "UPDATE message_search x SET role = %(role)s, text = %(text)s, "
        "tool_text = %(tool)s FROM upd WHERE x.seq = upd.seq RETURNING x.seq",
        {
            "role": u.role,
            "content": u.content,
            "tokens": u.tokens,
            "nbytes": u.nbytes,
            "text": u.text,
            "tool": u.tool,
            "ns": key.namespace,
            "sess": key.session_id,
            "id": u.id,
        },
    )
    row = await cur.fetchone()
    if row is None:
        raise _rules.message_not_found(key, u.id)
    await conn.execute(FORGET_ESTIMATE_SQL, (key.namespace, key.session_id))
    # the message's own rows, and its children's context (the parent's text)
    seqs = [row[0], *await lexical.children_of(conn, [row[0]])]
    await lexical.reindex_messages(conn, key.namespace, seqs)


async def delete(conn: Conn, key: SessionKey, wanted: list[str]) -> int:
    sid = await lock_session(conn, key)
    rows: list[tuple[Any, ...]] = []
    if sid is not None:
        rows = await _fetchall(
            conn,
            "SELECT seq, id, parent_seq FROM messages WHERE sid = %s AND id = ANY(%s)",
            (sid, wanted),
        )
    plan = _rules.plan_delete(key, wanted, rows)
    deleted = list(plan)
    # Re-attach children (that survive) to the nearest surviving ancestor; their context
    # (the parent's text) changes.
    moved = await lexical.children_of(conn, deleted)
    await lexical.unindex(conn, message_collection(key.namespace), deleted)
    await conn.execute(
        "UPDATE messages c SET parent_seq = v.survivor "
        "FROM unnest(%s::bigint[], %s::bigint[]) AS v(gone, survivor) "
        "WHERE c.parent_seq = v.gone AND NOT (c.seq = ANY(%s))",
        (deleted, list(plan.values()), deleted),
    )
    dropped = [
        r[0]
        for r in await _fetchall(
            conn,
            "DELETE FROM compactions WHERE sid = %s AND (from_id = ANY(%s) OR to_id = ANY(%s))"
            " RETURNING id",
            (sid, wanted, wanted),
        )
    ]
    if dropped:
        # An overlay a dropped one had superseded applies again.
        await conn.execute(
            "UPDATE compactions SET superseded_by = NULL "
            "WHERE sid = %s AND superseded_by = ANY(%s)",
            (sid, dropped),
        )
    await conn.execute("DELETE FROM messages WHERE seq = ANY(%s)", (deleted,))
    await lexical.reindex_messages(conn, key.namespace, moved)
    await conn.execute(
        "UPDATE sessions SET leaf_seq = (SELECT max(m.seq) FROM messages m "
        "WHERE m.sid = %s AND NOT EXISTS "
        "(SELECT 1 FROM messages c WHERE c.parent_seq = m.seq)), "
        "message_count = message_count - %s, updated_at = clock_timestamp() "
        "WHERE sid = %s",
        (sid, len(rows), sid),
    )
    await conn.execute(FORGET_ESTIMATE_SQL, (key.namespace, key.session_id))
    return len(rows)


async def clear_session(conn: Conn, key: SessionKey) -> int | None:
    """Delete the session's messages, compactions, search rows and skill states, keeping its
    registry row (emptied, locked until commit); returns its sid, or None when it has no
    registry row. Also the first step of deleting a session or a namespace."""
    sid = await lock_session(conn, key)
    await conn.execute(
        "DELETE FROM skill_states WHERE namespace = %s AND session_id = %s",
        (key.namespace, key.session_id),
    )
    if sid is None:
        return None
    await conn.execute("DELETE FROM compactions WHERE sid = %s", (sid,))
    await lexical.clear_session(conn, key.namespace, sid)
    # Children before parents is not needed: the self-reference is checked per statement.
    await conn.execute("DELETE FROM messages WHERE sid = %s", (sid,))
    await conn.execute(
        "UPDATE sessions SET leaf_seq = NULL, message_count = 0, "
        "updated_at = clock_timestamp() WHERE sid = %s",
        (sid,),
    )
    await conn.execute(FORGET_ESTIMATE_SQL, (key.namespace, key.session_id))
    return sid
