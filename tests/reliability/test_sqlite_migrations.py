"""SQLite schema migrations applied to existing, populated files (written by older versions)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from mindstore.session import Session
from mindstore.store.sqlite import SQLiteStore
from mindstore.store.sqlite.migrations import LATEST_VERSION, MIGRATIONS


def make_db(path: Path, version: int) -> sqlite3.Connection:
    """A file at schema ``version``, migrated the way that version did it."""
    conn = sqlite3.connect(path, isolation_level=None)
    for number, _name, sql in MIGRATIONS:
        if number <= version:
            for statement in sql.split(";"):
                if statement.strip():
                    conn.execute(statement)
    conn.execute(f"PRAGMA user_version={version}")
    return conn


def add_messages(
    conn: sqlite3.Connection, sid: int, session: str, rows: list[tuple[int, str, int | None]]
) -> None:
    conn.execute(
        "INSERT INTO sessions (sid, namespace, session_id, created_us, updated_us, leaf_seq, "
        "message_count) VALUES (?, 'default', ?, 1, 1, ?, ?)",
        (sid, session, rows[-1][0], len(rows)),
    )
    for seq, mid, parent in rows:
        content = json.dumps({"id": mid, "role": "user", "parts": [{"type": "text", "text": mid}]})
        conn.execute(
            "INSERT INTO messages (seq, sid, id, parent_seq, role, content, tokens, nbytes, "
            "created_us) VALUES (?, ?, ?, ?, 'user', ?, 5, ?, 1)",
            (seq, sid, mid, parent, content, len(content)),
        )


async def test_m005_classifies_existing_sessions_and_reads_them_exactly(tmp_path: Path) -> None:
    path = tmp_path / "v4.db"
    conn = make_db(path, 4)
    # interleaved seqs across sessions, as concurrent writers leave them
    add_messages(conn, 1, "chain", [(1, "a", None), (3, "b", 1), (5, "c", 3)])
    add_messages(conn, 2, "branched", [(2, "r", None), (4, "x", 2), (6, "y", 2)])
    add_messages(conn, 3, "gap", [(7, "g1", None), (9, "g3", 7)])  # g2 (8) was deleted
    add_messages(conn, 4, "roots", [(10, "p", None), (11, "q", None)])
    conn.close()

    async with SQLiteStore(path) as store:
        assert (await store.stats())["schema_version"] == LATEST_VERSION
        raw = sqlite3.connect(path)
        try:
            flags = dict(raw.execute("SELECT session_id, linear FROM sessions").fetchall())
        finally:
            raw.close()
        assert flags == {"chain": 1, "branched": 0, "gap": 1, "roots": 0}

        def history(name: str) -> Session:
            return Session.create(store, name)

        assert [m["id"] for m in await history("chain").get_history()] == ["a", "b", "c"]
        assert [m["id"] for m in await history("chain").get_history("b")] == ["a", "b"]
        assert [m["id"] for m in await history("branched").get_history()] == ["r", "y"]
        assert [m["id"] for m in await history("branched").get_history("x")] == ["r", "x"]
        assert [m["id"] for m in await history("gap").get_history()] == ["g1", "g3"]
        assert [m["id"] for m in await history("roots").get_history()] == ["q"]
        assert [m["id"] for m in await history("roots").get_history("p")] == ["p"]
        assert await history("roots").get_path_length("p") == 1

        # appending keeps working on both kinds
        await history("chain").append_message({"id": "d", "role": "user", "parts": []})
        assert [m["id"] for m in await history("chain").get_history()] == ["a", "b", "c", "d"]
        await history("branched").append_message({"id": "z", "role": "user", "parts": []})
        assert [m["id"] for m in await history("branched").get_history()] == ["r", "y", "z"]


async def test_m006_lists_existing_sessions_newest_first(tmp_path: Path) -> None:
    path = tmp_path / "v5.db"
    conn = make_db(path, 5)
    for sid, updated in [(1, 30), (2, 10), (3, 20), (4, 20)]:
        conn.execute(
            "INSERT INTO sessions (sid, namespace, session_id, created_us, updated_us) "
            "VALUES (?, 'default', ?, 1, ?)",
            (sid, f"s{sid}", updated),
        )
    conn.execute(
        "INSERT INTO sessions (sid, namespace, session_id, created_us, updated_us) "
        "VALUES (5, 'other', 's9', 1, 99)"
    )
    conn.close()
    async with SQLiteStore(path) as store:
        page = await store.list_sessions("default", limit=3)
        assert [s.id for s in page] == ["s1", "s4", "s3"]
        rest = await store.list_sessions("default", limit=3, before="s3")
        assert [s.id for s in rest] == ["s2"]


async def test_m007_indexes_an_older_file_once_on_open(tmp_path: Path) -> None:
    """Issue 16: a file written with the FTS5 indexes is re-indexed on its first open (messages
    with their parents' text, entries); `reindex` rebuilds the same index again."""
    from mindstore.search import parse_query
    from mindstore.store.base import ScopeKey

    path = tmp_path / "v6.db"
    conn = make_db(path, 6)
    add_messages(conn, 1, "chain", [(1, "kubernetes", None), (2, "ok", 1), (3, "zebra", 2)])
    add_messages(conn, 2, "other", [(4, "kubernetes", None)])
    conn.execute(
        "INSERT INTO entries (namespace, scope, label, key, content, description, updated_us) "
        "VALUES ('default', '', 'kb', 'guide', 'how we deploy', 'ops', 1)"
    )
    conn.close()

    async with SQLiteStore(path) as store:
        assert (await store.stats())["schema_version"] == LATEST_VERSION

        async def hits(query: str, match: str = "any") -> list[tuple[str, str]]:
            found = await store.search("default", parse_query(query, match))
            return [(h.session_id, h.message_id) for h in found]

        assert await hits("kubernetes", "all") == [("other", "kubernetes"), ("chain", "kubernetes")]
        # "ok" (a reply to "kubernetes") matches through its context, after the own hits
        assert (await hits("kubernetes"))[2:] == [("chain", "ok")]
        kb = ScopeKey(namespace="default", session_id=None, label="kb")
        assert [h.key for h in await store.search_entries(kb, parse_query("deploying"))] == [
            "guide"
        ]
        before = [
            (h.message_id, h.score) for h in await store.search("default", parse_query("zebra ok"))
        ]
        seen: list[tuple[int, int]] = []
        assert await store.reindex(progress=lambda done, total: seen.append((done, total))) == 5
        assert seen[-1] == (5, 5)
        after = [
            (h.message_id, h.score) for h in await store.search("default", parse_query("zebra ok"))
        ]
        assert after == before
