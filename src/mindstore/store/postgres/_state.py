"""Compactions, context blocks, frozen prompts and skill states in the PostgreSQL store."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from mindstore.store import _rows, _rules
from mindstore.store._checks import not_found
from mindstore.store._rules import NewCompaction
from mindstore.store.base import Compaction, ScopeKey, SessionKey, SkillState
from mindstore.store.postgres._common import FORGET_ESTIMATE_SQL, lock_session

if TYPE_CHECKING:
    from mindstore.store.postgres._common import Conn

_COMPACTION_COLS = "id, from_id, to_id, summary, created_at, superseded_by, reverted"
_BLOCK_WHERE = "WHERE namespace = %s AND scope = %s AND label = %s"
_PROMPT_SQL = "SELECT prompt FROM prompts WHERE namespace = %s AND session_id = %s"


# ---- compaction overlays ------------------------------------------------------------------------
async def add_compaction(conn: Conn, key: SessionKey, new: NewCompaction) -> Compaction:
    sid = await lock_session(conn, key)
    supersedes = list(new.supersedes)
    ends = [new.from_id, new.to_id]
    found: set[str] = set()
    if sid is not None:
        cur = await conn.execute(
            "SELECT id FROM messages WHERE sid = %s AND id = ANY(%s)", (sid, ends)
        )
        found = {r[0] for r in await cur.fetchall()}
    for mid in ends:
        if mid not in found:
            raise not_found(key, mid)
    if supersedes:
        cur = await conn.execute(
            "SELECT id FROM compactions WHERE sid = %s AND id = ANY(%s)", (sid, supersedes)
        )
        _rules.check_superseded(key, supersedes, {r[0] for r in await cur.fetchall()})
    cur = await conn.execute(
        "INSERT INTO compactions (sid, from_id, to_id, summary) VALUES (%s, %s, %s, %s) "
        f"RETURNING {_COMPACTION_COLS}",
        (sid, new.from_id, new.to_id, new.summary),
    )
    row = await cur.fetchone()
    assert row is not None
    if supersedes:
        await conn.execute(
            "UPDATE compactions SET superseded_by = %s WHERE id = ANY(%s)", (row[0], supersedes)
        )
    await conn.execute(FORGET_ESTIMATE_SQL, (key.namespace, key.session_id))
    return _rows.decode_compaction(row)


async def get_compactions(conn: Conn, key: SessionKey) -> list[Compaction]:
    cur = await conn.execute(
        f"SELECT {_COMPACTION_COLS} FROM compactions WHERE sid = "
        "(SELECT sid FROM sessions WHERE namespace = %s AND session_id = %s) ORDER BY id",
        (key.namespace, key.session_id),
    )
    return [_rows.decode_compaction(r) for r in await cur.fetchall()]


async def revert_compaction(conn: Conn, key: SessionKey, compaction_id: int) -> Compaction:
    cur = await conn.execute(
        "UPDATE compactions c SET reverted = true FROM sessions s "
        "WHERE s.sid = c.sid AND s.namespace = %s AND s.session_id = %s AND c.id = %s "
        "RETURNING c.id, c.from_id, c.to_id, c.summary, c.created_at, c.superseded_by, "
        "c.reverted",
        (key.namespace, key.session_id, compaction_id),
    )
    row = await cur.fetchone()
    if row is None:
        raise _rules.compaction_not_found(key, compaction_id)
    await conn.execute(
        "UPDATE compactions SET superseded_by = NULL WHERE superseded_by = %s", (compaction_id,)
    )
    await conn.execute(FORGET_ESTIMATE_SQL, (key.namespace, key.session_id))
    return _rows.decode_compaction(row)


# ---- context blocks -----------------------------------------------------------------------------
async def get_block(conn: Conn, k: tuple[str, str, str]) -> str | None:
    cur = await conn.execute(f"SELECT content FROM blocks {_BLOCK_WHERE}", k)
    row = await cur.fetchone()
    return None if row is None else str(row[0])


async def set_block(conn: Conn, k: tuple[str, str, str], content: str) -> None:
    await conn.execute(
        "INSERT INTO blocks (namespace, scope, label, content) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT (namespace, scope, label) DO UPDATE SET "
        "content = excluded.content, updated_at = clock_timestamp()",
        (*k, content),
    )


async def update_block(conn: Conn, k: tuple[str, str, str], fn: Callable[[str], str]) -> str:
    """``fn`` runs while this transaction holds the block's row lock, so concurrent updates
    from any process serialise and none is lost."""
    cur = await conn.execute(
        "INSERT INTO blocks (namespace, scope, label, content) VALUES (%s, %s, %s, '') "
        "ON CONFLICT (namespace, scope, label) DO NOTHING RETURNING true",
        k,
    )
    created = await cur.fetchone() is not None
    cur = await conn.execute(f"SELECT content FROM blocks {_BLOCK_WHERE} FOR UPDATE", k)
    row = await cur.fetchone()
    assert row is not None
    new = _rules.updated_block(fn, None if created else row[0])
    await conn.execute(
        f"UPDATE blocks SET content = %s, updated_at = clock_timestamp() {_BLOCK_WHERE}",
        (new, *k),
    )
    return new


async def delete_block(conn: Conn, k: tuple[str, str, str]) -> None:
    await conn.execute(f"DELETE FROM blocks {_BLOCK_WHERE}", k)


async def list_blocks(
    conn: Conn, namespace: str, session_id: str | None
) -> list[tuple[ScopeKey, str]]:
    cur = await conn.execute(
        "SELECT scope, label, content FROM blocks WHERE namespace = %s AND scope IN (%s, '')"
        " ORDER BY scope = '', label",
        (namespace, session_id or ""),
    )
    return _rows.decode_blocks(namespace, await cur.fetchall())


# ---- frozen system prompt -----------------------------------------------------------------------
async def get_prompt(conn: Conn, key: SessionKey) -> str | None:
    cur = await conn.execute(_PROMPT_SQL, (key.namespace, key.session_id))
    row = await cur.fetchone()
    return None if row is None else str(row[0])


async def put_prompt(conn: Conn, key: SessionKey, prompt: str, overwrite: bool) -> str:
    on_conflict = (
        "UPDATE SET prompt = excluded.prompt, updated_at = clock_timestamp()"
        if overwrite
        else "NOTHING"
    )
    await conn.execute(
        "INSERT INTO prompts (namespace, session_id, prompt) "
        f"VALUES (%s, %s, %s) ON CONFLICT (namespace, session_id) DO {on_conflict}",
        (key.namespace, key.session_id, prompt),
    )
    # A new statement sees a concurrent first freeze that committed meanwhile.
    cur = await conn.execute(_PROMPT_SQL, (key.namespace, key.session_id))
    row = await cur.fetchone()
    assert row is not None
    return str(row[0])


# ---- loaded skills ------------------------------------------------------------------------------
async def get_skill_states(conn: Conn, key: SessionKey) -> list[SkillState]:
    cur = await conn.execute(
        "SELECT label, skill_key, loaded, unloaded_before_seq FROM skill_states "
        "WHERE namespace = %s AND session_id = %s ORDER BY created_order",
        (key.namespace, key.session_id),
    )
    return [_rows.decode_skill_state(r) for r in await cur.fetchall()]


async def set_skill_loaded(
    conn: Conn, key: SessionKey, label: str, skill_key: str, loaded: bool
) -> bool:
    k = (key.namespace, key.session_id, label, skill_key)
    if loaded:
        # Inserted, or flipped from unloaded: True. Already loaded: no row, False.
        cur = await conn.execute(
            "INSERT INTO skill_states (namespace, session_id, label, skill_key, loaded) "
            "VALUES (%s, %s, %s, %s, true) "
            "ON CONFLICT (namespace, session_id, label, skill_key) "
            "DO UPDATE SET loaded = true WHERE NOT skill_states.loaded RETURNING 1",
            k,
        )
        return await cur.fetchone() is not None
    cur = await conn.execute(
        "UPDATE skill_states SET loaded = false, unloaded_before_seq = "
        "(SELECT max(m.seq) FROM messages m JOIN sessions s ON s.sid = m.sid "
        "WHERE s.namespace = %s AND s.session_id = %s) "
        "WHERE namespace = %s AND session_id = %s AND label = %s AND skill_key = %s "
        "AND loaded RETURNING 1",
        (key.namespace, key.session_id, *k),
    )
    if await cur.fetchone() is None:
        return False
    # the skill's earlier results now read back shorter: re-measure the path
    await conn.execute(FORGET_ESTIMATE_SQL, (key.namespace, key.session_id))
    return True
