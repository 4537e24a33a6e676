"""Vectors in PostgreSQL: the ``message_vectors`` table (migration m006) and k-NN.

The rows and triggers mirror the SQLite backend (see ``sqlite/vectors.py``): one float16 vector
per message with the embedder's name and dimensions, dropped by triggers when the message or its
parent changes, and a per-namespace generation. Search is exact: the namespace's vectors of this
embedder are loaded once into a float32 matrix, kept until the namespace's generation moves, and
scanned with numpy (one BLAS thread) — the same code and so the same results as SQLite.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from mindstore.embeddings import Embedder, embed_batch
from mindstore.search import SearchResult, search_result
from mindstore.store._vectors import PendingRow, message_text, run_embed_pending
from mindstore.vectors import VectorIndex, semantic_snippet

if TYPE_CHECKING:
    from mindstore.store.postgres.store import Conn, PostgresStore

__all__ = ["PostgresVectors"]

_PENDING = (
    "FROM messages m LEFT JOIN messages p ON p.seq = m.parent_seq "
    "WHERE NOT EXISTS (SELECT 1 FROM message_vectors v "
    "WHERE v.seq = m.seq AND v.model = %(model)s AND v.dims = %(dims)s)"
)


class PostgresVectors:
    def __init__(self, store: PostgresStore, embedder: Embedder) -> None:
        self._store = store
        self.embedder = embedder
        self._cache: dict[str, VectorIndex] = {}
        self._params = {"model": embedder.name, "dims": embedder.dimensions}

    async def pending_count(self) -> int:
        row = await self._store._fetchone("SELECT count(*) " + _PENDING, self._params)
        return int(row[0])

    async def _fetch(self, n: int) -> list[PendingRow]:
        rows = await self._store._fetchall(
            "SELECT m.seq, m.content, p.content " + _PENDING + " ORDER BY m.seq LIMIT %(n)s",
            {**self._params, "n": n},
        )
        return [PendingRow(r[0], r[1], r[2]) for r in rows]

    async def _write(self, rows: list[tuple[PendingRow, bytes | None]]) -> int:
        async def run(conn: Conn) -> int:
            written = 0
            for row, blob in rows:
                cur = await conn.execute(
                    "INSERT INTO message_vectors (seq, namespace, model, dims, vector) "
                    "SELECT m.seq, s.namespace, %(model)s, %(dims)s, %(vector)s "
                    "FROM messages m JOIN sessions s ON s.sid = m.sid "
                    "LEFT JOIN messages p ON p.seq = m.parent_seq "
                    "WHERE m.seq = %(seq)s AND m.content = %(content)s "
                    "AND p.content IS NOT DISTINCT FROM %(parent)s "
                    "ON CONFLICT (seq) DO UPDATE SET namespace = excluded.namespace, "
                    "model = excluded.model, dims = excluded.dims, vector = excluded.vector",
                    {
                        **self._params,
                        "vector": blob,
                        "seq": row.key,
                        "content": row.content,
                        "parent": row.parent_content,
                    },
                )
                written += max(cur.rowcount, 0)
            return written

        return await self._store._write(run)

    async def embed_pending(
        self,
        *,
        limit: int | None = None,
        batch_size: int = 64,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        return await run_embed_pending(
            self.embedder,
            self._fetch,
            self._write,
            limit=limit,
            batch_size=batch_size,
            progress=progress,
        )

    async def drop_vectors(self) -> int:
        async def run(conn: Conn) -> int:
            cur = await conn.execute("DELETE FROM message_vectors")
            return max(cur.rowcount, 0)

        return await self._store._write(run)

    async def _index(self, namespace: str) -> VectorIndex:
        row = await self._store._fetchone(
            "SELECT generation FROM vector_generations WHERE namespace = %s", (namespace,)
        )
        generation = int(row[0]) if row else 0
        cached = self._cache.get(namespace)
        if cached is not None and cached.generation == generation:
            return cached
        rows = await self._store._fetchall(
            "SELECT v.seq, s.session_id, v.vector FROM message_vectors v "
            "JOIN messages m ON m.seq = v.seq JOIN sessions s ON s.sid = m.sid "
            "WHERE v.namespace = %(ns)s AND v.model = %(model)s AND v.dims = %(dims)s "
            "AND v.vector IS NOT NULL ORDER BY v.seq",
            {**self._params, "ns": namespace},
        )
        index = VectorIndex.build(
            [(r[0], r[1], bytes(r[2])) for r in rows], self.embedder.dimensions, generation
        )
        self._cache[namespace] = index
        return index

    async def search(
        self,
        namespace: str,
        query: str,
        *,
        session_ids: Sequence[str] | None,
        limit: int,
    ) -> list[SearchResult]:
        if limit <= 0 or not query.strip():
            return []
        [vector] = await embed_batch(self.embedder, [query], query=True)
        return await self.search_vector(namespace, vector, session_ids=session_ids, limit=limit)

    async def search_vector(
        self,
        namespace: str,
        vector: Sequence[float],
        *,
        session_ids: Sequence[str] | None,
        limit: int,
    ) -> list[SearchResult]:
        hits = (await self._index(namespace)).search(vector, limit, session_ids)
        if not hits:
            return []
        rows: dict[int, Any] = {
            r[0]: r
            for r in await self._store._fetchall(
                "SELECT m.seq, s.session_id, m.id, m.role, m.content, m.created_at "
                "FROM messages m JOIN sessions s ON s.sid = m.sid WHERE m.seq = ANY(%s)",
                ([k for k, _ in hits],),
            )
        }
        out: list[SearchResult] = []
        for key, score in hits:
            r = rows.get(key)
            if r is None:
                continue
            text = message_text(r[4])
            out.append(search_result(r[1], r[2], r[3], text, semantic_snippet(text), score, r[5]))
        return out
