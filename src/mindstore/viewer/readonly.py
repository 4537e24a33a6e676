"""Opening a store for the viewer so that nothing it serves can change it.

Two layers:

* :class:`ReadOnlyStore` wraps any :class:`~mindstore.store.base.Store` and exposes only its
  read methods — no ``append``, ``set_block``, ``put_prompt`` or any other write is reachable
  through it (a test walks the protocol to prove it). The viewer is handed this, never the store.
* :func:`open_read_only` opens the URL without writing on the way in. For a SQLite file it
  first checks, over a separate ``mode=ro`` connection, that the file exists and is a mindstore
  database of exactly this library's schema version — an older one would be migrated (a write)
  by :class:`~mindstore.store.sqlite.SQLiteStore`, so it is refused with a message saying how to
  upgrade it; a file that does not exist is never created. The store itself is then opened in
  its own read-only mode (``read_only=True``: a ``mode=ro`` SQLite connection with
  ``query_only``; a PostgreSQL pool whose transactions are read-only), so the database refuses a
  write too.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import Any

from mindstore.changes import Change
from mindstore.cli.common import sqlite_path
from mindstore.errors import MindstoreError, SchemaVersionError, StoreError
from mindstore.search import ParsedQuery, SearchResult
from mindstore.store.base import (
    Compaction,
    Entry,
    EntryHit,
    ScopeKey,
    SessionInfo,
    SessionKey,
    SkillState,
    Store,
    StoredMessage,
)

__all__ = ["READ_METHODS", "ReadOnlyStore", "check_openable", "open_read_only", "sqlite_path"]

READ_METHODS = frozenset(
    {
        "get_message",
        "get_messages",
        "all_messages",
        "path",
        "path_length",
        "children",
        "latest_leaf",
        "search",
        "get_compactions",
        "get_block",
        "list_blocks",
        "get_prompt",
        "get_skill_states",
        "get_entry",
        "list_entries",
        "count_entries",
        "search_entries",
        "get_session",
        "list_sessions",
        "list_namespaces",
        "stats",
        "changes",
        "read_changes",
        "latest_change_seq",
    }
)
"""The Store methods the viewer may call; every other method of the protocol writes."""


class ReadOnlyStore:
    """The read half of a store. Closing it closes the wrapped store."""

    __slots__ = ("_store",)

    def __init__(self, store: Store) -> None:
        self._store = store

    def __repr__(self) -> str:
        return f"ReadOnlyStore({self._store!r})"

    async def aclose(self) -> None:
        await self._store.aclose()

    async def get_message(self, key: SessionKey, message_id: str) -> StoredMessage | None:
        return await self._store.get_message(key, message_id)

    async def get_messages(self, key: SessionKey, ids: Sequence[str]) -> list[StoredMessage]:
        return await self._store.get_messages(key, ids)

    async def all_messages(self, key: SessionKey) -> list[StoredMessage]:
        return await self._store.all_messages(key)

    async def path(self, key: SessionKey, leaf_id: str | None) -> list[StoredMessage]:
        return await self._store.path(key, leaf_id)

    async def path_length(self, key: SessionKey, leaf_id: str | None) -> int:
        return await self._store.path_length(key, leaf_id)

    async def children(self, key: SessionKey, message_id: str) -> list[StoredMessage]:
        return await self._store.children(key, message_id)

    async def latest_leaf(self, key: SessionKey) -> StoredMessage | None:
        return await self._store.latest_leaf(key)

    async def search(
        self,
        namespace: str,
        query: ParsedQuery,
        *,
        session_ids: Sequence[str] | None = None,
        limit: int = 20,
    ) -> list[SearchResult]:
        return await self._store.search(namespace, query, session_ids=session_ids, limit=limit)

    async def get_compactions(self, key: SessionKey) -> list[Compaction]:
        return await self._store.get_compactions(key)

    async def get_block(self, key: ScopeKey) -> str | None:
        return await self._store.get_block(key)

    async def list_blocks(
        self, namespace: str, session_id: str | None
    ) -> list[tuple[ScopeKey, str]]:
        return await self._store.list_blocks(namespace, session_id)

    async def get_prompt(self, key: SessionKey) -> str | None:
        return await self._store.get_prompt(key)

    async def get_skill_states(self, key: SessionKey) -> list[SkillState]:
        return await self._store.get_skill_states(key)

    async def get_entry(self, key: ScopeKey, entry_key: str) -> Entry | None:
        return await self._store.get_entry(key, entry_key)

    async def list_entries(self, key: ScopeKey, *, limit: int | None = None) -> list[Entry]:
        return await self._store.list_entries(key, limit=limit)

    async def count_entries(self, key: ScopeKey) -> int:
        return await self._store.count_entries(key)

    async def search_entries(
        self, key: ScopeKey, query: ParsedQuery, *, limit: int = 10
    ) -> list[EntryHit]:
        return await self._store.search_entries(key, query, limit=limit)

    async def get_session(self, key: SessionKey) -> SessionInfo | None:
        return await self._store.get_session(key)

    async def list_sessions(
        self, namespace: str, *, limit: int = 50, before: str | None = None
    ) -> list[SessionInfo]:
        return await self._store.list_sessions(namespace, limit=limit, before=before)

    async def list_namespaces(self) -> list[str]:
        return await self._store.list_namespaces()

    async def stats(self) -> dict[str, int]:
        return await self._store.stats()

    def changes(
        self,
        namespace: str,
        *,
        since: int = 0,
        follow: bool = True,
        poll_interval: float = 0.05,
        batch: int = 500,
    ) -> AsyncGenerator[Change, None]:
        return self._store.changes(
            namespace, since=since, follow=follow, poll_interval=poll_interval, batch=batch
        )

    async def read_changes(
        self, namespace: str, *, since: int = 0, limit: int = 500
    ) -> list[Change]:
        return await self._store.read_changes(namespace, since=since, limit=limit)

    async def latest_change_seq(self, namespace: str) -> int:
        return await self._store.latest_change_seq(namespace)


def _check_sqlite_file(path: Path) -> None:
    from mindstore.store.sqlite.migrations import LATEST_VERSION

    if not path.exists():
        raise MindstoreError(
            f"no database at {path} (the viewer never creates one; pass --db PATH|URL, or "
            "`mindstore demo --db PATH` to make a sample)"
        )
    if path.is_dir():
        raise MindstoreError(f"{path} is a directory, not a database file")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            has_sessions = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sessions'"
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read {path} as a SQLite database: {exc}") from exc
    if version == 0 or not has_sessions:
        raise MindstoreError(f"{path} is not a mindstore database")
    if version > LATEST_VERSION:
        raise SchemaVersionError(
            f"{path} has schema version {version}, but this mindstore only understands up to "
            f"{LATEST_VERSION}: upgrade mindstore to view it"
        )
    if version < LATEST_VERSION:
        raise SchemaVersionError(
            f"{path} has schema version {version}, older than this mindstore's "
            f"{LATEST_VERSION}; the viewer does not migrate (a write): open it once with a "
            "writing command (for example `mindstore --db PATH stats` after a backup) first"
        )


def check_openable(url: str) -> None:
    """Fail early, without writing, when ``url`` cannot be viewed: an unsupported URL, or a
    SQLite file that is missing, not a mindstore database or of another schema version.
    (A PostgreSQL URL is checked when it is opened.)

    Raises:
        MindstoreError: see :func:`open_read_only`.
    """
    path = sqlite_path(url)
    if path is None and not url.startswith(("postgresql://", "postgres://")):
        raise MindstoreError(
            f"cannot view {url!r}: pass a SQLite file path, sqlite:///path or postgresql://…"
        )
    if path is not None:
        _check_sqlite_file(path)


async def open_read_only(url: str, **options: Any) -> ReadOnlyStore:
    """Open ``url`` (a path, ``sqlite:///…`` or ``postgresql://…``) for reading only.

    Raises:
        MindstoreError: a SQLite file that does not exist or is not a mindstore database.
        SchemaVersionError: a SQLite file of another schema version.
        MindstoreError: an unsupported URL (``:memory:`` has nothing to view).
    """
    from mindstore.store import open_store

    check_openable(url)
    path = sqlite_path(url)
    if path is not None:
        from mindstore.store.sqlite import SQLiteStore

        return ReadOnlyStore(SQLiteStore(path, read_only=True, **options))
    return ReadOnlyStore(await open_store(url, read_only=True, **options))
