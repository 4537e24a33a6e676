"""Vectors in the SQLite file: the ``message_vectors`` table (migration m007) and exact k-NN.

Each message has at most one vector row (keyed by ``messages.seq``) holding the embedder's name,
dimensions and an L2-normalised float16 BLOB (NULL when the message has no text to embed).
Triggers keep rows in step with the messages: an edit of a message's content drops its row and
its children's (their embedded text includes the parent's), a re-parented message (a delete
re-attaches children) drops its row, a deleted message takes its row along. Every change to a
namespace's vector rows bumps ``vector_generations`` (also by trigger), so a search notices
another process's writes with one primary-key read and reloads the namespace's matrix only then.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from mindstore.embeddings import Embedder
from mindstore.search import SearchResult, search_result
from mindstore.store._vectors import EmbedsPending, PendingRow, message_text
from mindstore.vectors import VectorIndex, semantic_snippet

if TYPE_CHECKING:
    from mindstore.store.sqlite._connection import SQLiteConnection

__all__ = ["SQLiteVectors"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class SQLiteVectors(EmbedsPending):
    """Embedding and k-NN for one SQLite store, on its connection (which owns the lock)."""

    def __init__(self, db: SQLiteConnection, embedder: Embedder) -> None:
        self._db = db
        self.embedder = embedder
        self._cache: dict[str, VectorIndex] = {}

    def _pending_sql(self, select: str) -> str:
        return (
            f"SELECT {select} FROM messages m "
            "LEFT JOIN messages p ON p.seq = m.parent_seq "
            "WHERE NOT EXISTS (SELECT 1 FROM message_vectors v "
            "WHERE v.seq = m.seq AND v.model = ? AND v.dims = ?)"
        )

    async def pending_count(self) -> int:
        with self._db.tx(write=False) as conn:
            row = conn.execute(
                self._pending_sql("count(*)"), (self.embedder.name, self.embedder.dimensions)
            ).fetchone()
        return int(row[0])

    def _fetch(self, n: int) -> list[PendingRow]:
        with self._db.tx(write=False) as conn:
            rows = conn.execute(
                self._pending_sql("m.seq, m.content, p.content") + " ORDER BY m.seq LIMIT ?",
                (self.embedder.name, self.embedder.dimensions, n),
            ).fetchall()
        return [PendingRow(r[0], r[1], r[2]) for r in rows]

    def _write(self, rows: list[tuple[PendingRow, bytes | None]]) -> int:
        written = 0
        with self._db.tx(write=True) as conn:
            for row, blob in rows:
                cur = conn.execute(
                    "SELECT s.namespace, m.content, p.content FROM messages m "
                    "JOIN sessions s ON s.sid = m.sid "
                    "LEFT JOIN messages p ON p.seq = m.parent_seq WHERE m.seq = ?",
                    (row.key,),
                ).fetchone()
                if cur is None or cur[1] != row.content or cur[2] != row.parent_content:
                    continue  # deleted or changed since it was read: still pending (or gone)
                conn.execute(
                    "INSERT OR REPLACE INTO message_vectors (seq, namespace, model, dims, vector) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (row.key, cur[0], self.embedder.name, self.embedder.dimensions, blob),
                )
                written += 1
        return written

    async def drop_vectors(self) -> int:
        """Delete every vector row (``mindstore embed --rebuild``); returns how many."""
        with self._db.tx(write=True) as conn:
            return int(conn.execute("DELETE FROM message_vectors").rowcount)

    def _index(self, namespace: str) -> VectorIndex:
        with self._db.tx(write=False) as conn:
            row = conn.execute(
                "SELECT generation FROM vector_generations WHERE namespace = ?", (namespace,)
            ).fetchone()
            generation = int(row[0]) if row else 0
            cached = self._cache.get(namespace)
            if cached is not None and cached.generation == generation:
                return cached
            rows = conn.execute(
                "SELECT v.seq, s.session_id, v.vector FROM message_vectors v "
                "JOIN messages m ON m.seq = v.seq JOIN sessions s ON s.sid = m.sid "
                "WHERE v.namespace = ? AND v.model = ? AND v.dims = ? AND v.vector IS NOT NULL "
                "ORDER BY v.seq",
                (namespace, self.embedder.name, self.embedder.dimensions),
            ).fetchall()
        index = VectorIndex.build(rows, self.embedder.dimensions, generation)
        self._cache[namespace] = index
        return index

    async def search_vector(
        self,
        namespace: str,
        vector: Sequence[float],
        *,
        session_ids: Sequence[str] | None,
        limit: int,
    ) -> list[SearchResult]:
        hits = await self._index(namespace).asearch(vector, limit, session_ids)
        if not hits:
            return []
        with self._db.tx(write=False) as conn:
            rows = {
                r[0]: r
                for r in conn.execute(
                    "SELECT m.seq, s.session_id, m.id, m.role, m.content, m.created_us "
                    "FROM messages m JOIN sessions s ON s.sid = m.sid "
                    "WHERE m.seq IN (SELECT value FROM json_each(?))",
                    (json.dumps([k for k, _ in hits]),),
                )
            }
        out: list[SearchResult] = []
        for key, score in hits:
            r = rows.get(key)
            if r is None:
                continue  # deleted between the matrix load and now
            text = message_text(r[4])
            created = _EPOCH + timedelta(microseconds=r[5])
            out.append(
                search_result(r[1], r[2], r[3], text, semantic_snippet(text), score, created)
            )
        return out


def vector_stats(conn: Any) -> int:
    return int(conn.execute("SELECT count(*) FROM message_vectors").fetchone()[0])
