"""What every domain module of the SQLite store shares: stored times and session lookups.

Times are stored as integer microseconds since the Unix epoch, UTC.
"""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from mindstore.store._checks import check_expiry
from mindstore.store.base import SessionKey

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def now_us() -> int:
    return time.time_ns() // 1000


def to_us(at: datetime | None) -> int | None:
    """Microseconds since the epoch of an aware datetime (naive ones are refused)."""
    at = check_expiry(at)
    return None if at is None else (at - _EPOCH) // timedelta(microseconds=1)


def to_datetime(us: int) -> datetime:
    # Exact: the double nearest us/1e6 is within 0.25 µs of it for any date before 2200, and
    # fromtimestamp rounds to the nearest microsecond. ~30% faster than epoch + timedelta.
    return datetime.fromtimestamp(us / 1_000_000, UTC)


def session_sid(conn: sqlite3.Connection, key: SessionKey) -> int | None:
    """The session's row id, None when it has no registry row."""
    row = conn.execute(
        "SELECT sid FROM sessions WHERE namespace = ? AND session_id = ?",
        (key.namespace, key.session_id),
    ).fetchone()
    return None if row is None else int(row[0])


def forget_estimate(conn: sqlite3.Connection, where: str, *args: Any) -> None:
    """Clear the running estimate and the compaction back-off after a path-changing write."""
    conn.execute(
        "UPDATE sessions SET est_seq = NULL, est_tokens = NULL, est_gen = est_gen + 1, "
        f"compact_floor = NULL, compact_margin = NULL WHERE {where}",
        args,
    )
