"""Compactions, context blocks, frozen prompts and skill states in the SQLite store."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from mindstore.store import _rows, _rules
from mindstore.store._checks import not_found
from mindstore.store._rules import NewCompaction
from mindstore.store.base import Compaction, ScopeKey, SessionKey, SkillState
from mindstore.store.sqlite._common import forget_estimate, now_us, session_sid, to_datetime

_COMPACTION_COLS = "id, from_id, to_id, summary, created_us, superseded_by, reverted"
_BLOCK_WHERE = "WHERE namespace = ? AND scope = ? AND label = ?"
_PROMPT_SQL = "SELECT prompt FROM prompts WHERE namespace = ? AND session_id = ?"


def _compaction(conn: sqlite3.Connection, cid: int) -> Compaction:
    row = conn.execute(f"SELECT {_COMPACTION_COLS} FROM compactions WHERE id = ?", (cid,))
    return _rows.decode_compaction(row.fetchone(), to_datetime)


# ---- compaction overlays ------------------------------------------------------------------------
def add_compaction(conn: sqlite3.Connection, key: SessionKey, new: NewCompaction) -> Compaction:
    sid = session_sid(conn, key)
    supersedes = list(new.supersedes)
    for mid in (new.from_id, new.to_id):
        if (
            sid is None
            or conn.execute(
                "SELECT 1 FROM messages WHERE sid = ? AND id = ?", (sid, mid)
            ).fetchone()
            is None
        ):
            raise not_found(key, mid)
    if supersedes:
        known = {
            r[0]
            for r in conn.execute(
                "SELECT id FROM compactions WHERE sid = ? "
                "AND id IN (SELECT value FROM json_each(?))",
                (sid, json.dumps(supersedes)),
            )
        }
        _rules.check_superseded(key, supersedes, known)
    cid = conn.execute(
        "INSERT INTO compactions (sid, from_id, to_id, summary, created_us) VALUES (?, ?, ?, ?, ?)",
        (sid, new.from_id, new.to_id, new.summary, now_us()),
    ).lastrowid
    assert cid is not None
    if supersedes:
        conn.execute(
            "UPDATE compactions SET superseded_by = ? WHERE id IN (SELECT value FROM json_each(?))",
            (cid, json.dumps(supersedes)),
        )
    forget_estimate(conn, "sid = ?", sid)
    return _compaction(conn, cid)


def get_compactions(conn: sqlite3.Connection, key: SessionKey) -> list[Compaction]:
    rows = conn.execute(
        f"SELECT {_COMPACTION_COLS} FROM compactions WHERE sid = "
        "(SELECT sid FROM sessions WHERE namespace = ? AND session_id = ?) ORDER BY id",
        (key.namespace, key.session_id),
    ).fetchall()
    return [_rows.decode_compaction(r, to_datetime) for r in rows]


def revert_compaction(conn: sqlite3.Connection, key: SessionKey, compaction_id: int) -> Compaction:
    sid = session_sid(conn, key)
    row = conn.execute(
        "SELECT id FROM compactions WHERE id = ? AND sid = ?", (compaction_id, sid)
    ).fetchone()
    if row is None:
        raise _rules.compaction_not_found(key, compaction_id)
    conn.execute("UPDATE compactions SET reverted = 1 WHERE id = ?", (compaction_id,))
    conn.execute(
        "UPDATE compactions SET superseded_by = NULL WHERE superseded_by = ?", (compaction_id,)
    )
    forget_estimate(conn, "sid = ?", sid)
    return _compaction(conn, compaction_id)


# ---- context blocks -----------------------------------------------------------------------------
def get_block(conn: sqlite3.Connection, k: tuple[str, str, str]) -> str | None:
    row = conn.execute(f"SELECT content FROM blocks {_BLOCK_WHERE}", k).fetchone()
    return None if row is None else str(row[0])


def set_block(conn: sqlite3.Connection, k: tuple[str, str, str], content: str) -> None:
    conn.execute(
        "INSERT INTO blocks (namespace, scope, label, content, updated_us) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (namespace, scope, label) "
        "DO UPDATE SET content = excluded.content, updated_us = excluded.updated_us",
        (*k, content, now_us()),
    )


def update_block(
    conn: sqlite3.Connection, k: tuple[str, str, str], fn: Callable[[str], str]
) -> str:
    """``fn`` runs while this connection holds the database write lock (BEGIN IMMEDIATE), so
    concurrent updates from any process serialise."""
    row = conn.execute(f"SELECT content FROM blocks {_BLOCK_WHERE}", k).fetchone()
    new = _rules.updated_block(fn, None if row is None else row[0])
    set_block(conn, k, new)
    return new


def delete_block(conn: sqlite3.Connection, k: tuple[str, str, str]) -> None:
    conn.execute(f"DELETE FROM blocks {_BLOCK_WHERE}", k)


def list_blocks(
    conn: sqlite3.Connection, namespace: str, session_id: str | None
) -> list[tuple[ScopeKey, str]]:
    rows = conn.execute(
        "SELECT scope, label, content FROM blocks WHERE namespace = ? AND scope IN (?, '')"
        " ORDER BY scope = '', label",
        (namespace, session_id or ""),
    ).fetchall()
    return _rows.decode_blocks(namespace, rows)


# ---- frozen system prompt -----------------------------------------------------------------------
def get_prompt(conn: sqlite3.Connection, key: SessionKey) -> str | None:
    row = conn.execute(_PROMPT_SQL, (key.namespace, key.session_id)).fetchone()
    return None if row is None else str(row[0])


def put_prompt(conn: sqlite3.Connection, key: SessionKey, prompt: str, overwrite: bool) -> str:
    on_conflict = (
        "UPDATE SET prompt = excluded.prompt, updated_us = excluded.updated_us"
        if overwrite
        else "NOTHING"
    )
    conn.execute(
        "INSERT INTO prompts (namespace, session_id, prompt, updated_us) "
        f"VALUES (?, ?, ?, ?) ON CONFLICT (namespace, session_id) DO {on_conflict}",
        (key.namespace, key.session_id, prompt, now_us()),
    )
    return str(conn.execute(_PROMPT_SQL, (key.namespace, key.session_id)).fetchone()[0])


# ---- loaded skills ------------------------------------------------------------------------------
def get_skill_states(conn: sqlite3.Connection, key: SessionKey) -> list[SkillState]:
    rows = conn.execute(
        "SELECT label, skill_key, loaded, unloaded_before_seq FROM skill_states "
        "WHERE namespace = ? AND session_id = ? ORDER BY rowid",
        (key.namespace, key.session_id),
    ).fetchall()
    return [_rows.decode_skill_state(r) for r in rows]


def set_skill_loaded(
    conn: sqlite3.Connection, key: SessionKey, label: str, skill_key: str, loaded: bool
) -> bool:
    k = (key.namespace, key.session_id, label, skill_key)
    row = conn.execute(
        "SELECT loaded FROM skill_states WHERE namespace = ? AND session_id = ? "
        "AND label = ? AND skill_key = ?",
        k,
    ).fetchone()
    if (row is None and not loaded) or (row is not None and bool(row[0]) == loaded):
        return False
    before = None
    if not loaded:
        before = conn.execute(
            "SELECT max(m.seq) FROM messages m JOIN sessions s ON s.sid = m.sid "
            "WHERE s.namespace = ? AND s.session_id = ?",
            (key.namespace, key.session_id),
        ).fetchone()[0]
    conn.execute(
        "INSERT INTO skill_states "
        "(namespace, session_id, label, skill_key, loaded, unloaded_before_seq) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (namespace, session_id, label, skill_key) "
        "DO UPDATE SET loaded = excluded.loaded, "
        # A reload keeps the last unload's mark: results stored before that unload
        # stay hidden; an unload moves the mark to the newest message.
        "unloaded_before_seq = "
        "coalesce(excluded.unloaded_before_seq, skill_states.unloaded_before_seq)",
        (*k, int(loaded), before),
    )
    if not loaded:  # the skill's earlier results now read back shorter: re-measure
        forget_estimate(
            conn,
            "sid = (SELECT sid FROM sessions WHERE namespace = ? AND session_id = ?)",
            key.namespace,
            key.session_id,
        )
    return True
