"""What every domain module of the PostgreSQL store shares: the connection type and session
locks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from mindstore.store.base import SessionKey

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    Conn = AsyncConnection[tuple[Any, ...]]

# Clear the running estimate and the compaction back-off after a path-changing write.
FORGET_ESTIMATE_SQL: Final = (
    "UPDATE sessions SET est_seq = NULL, est_tokens = NULL, est_gen = est_gen + 1,"
    " compact_floor = NULL, compact_margin = NULL WHERE namespace = %s AND session_id = %s"
)


async def lock_session(conn: Conn, key: SessionKey) -> int | None:
    """The session's row id, its registry row locked until the transaction ends (the lock
    every append takes); None when it has no registry row."""
    cur = await conn.execute(
        "SELECT sid FROM sessions WHERE namespace = %s AND session_id = %s FOR UPDATE",
        (key.namespace, key.session_id),
    )
    row = await cur.fetchone()
    return None if row is None else int(row[0])
