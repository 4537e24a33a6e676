"""A disk cache in front of an embedder, for benchmarks only: the LoCoMo recall runs embed the
same texts on every backend and every run, and the offline model embeds ~5-15 texts/s on a busy
two-core machine. Vectors are keyed by (model name, query/passage, text) in a SQLite file
(default ``~/.cache/mindstore/bench-embeddings.sqlite``, override ``MINDSTORE_EMBEDDING_CACHE``).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

PATH = Path(
    os.environ.get("MINDSTORE_EMBEDDING_CACHE")
    or Path.home() / ".cache" / "mindstore" / "bench-embeddings.sqlite"
)


class CachingEmbedder:
    def __init__(self, inner: Any, path: Path = PATH) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimensions = inner.dimensions
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS v (k TEXT PRIMARY KEY, vec BLOB NOT NULL)")
        self.hits = 0
        self.misses = 0

    def _key(self, kind: str, text: str) -> str:
        return hashlib.sha256(f"{self.name}\0{kind}\0{text}".encode()).hexdigest()

    def _cached(self, kind: str, texts: list[str], fn: Any) -> list[list[float]]:
        keys = [self._key(kind, t) for t in texts]
        found: dict[str, list[float]] = {}
        for k in keys:
            row = self._db.execute("SELECT vec FROM v WHERE k = ?", (k,)).fetchone()
            if row is not None:
                found[k] = np.frombuffer(row[0], dtype=np.float32).tolist()
        missing = [(k, t) for k, t in zip(keys, texts, strict=True) if k not in found]
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            vectors = fn([t for _, t in missing])
            with self._db:
                for (k, _), v in zip(missing, vectors, strict=True):
                    blob = np.asarray(v, dtype=np.float32).tobytes()
                    self._db.execute("INSERT OR REPLACE INTO v VALUES (?, ?)", (k, blob))
                    found[k] = list(v)
        return [found[k] for k in keys]

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self._cached("passage", texts, self.inner.embed)

    def embed_query(self, texts: list[str]) -> list[list[float]]:
        fn = getattr(self.inner, "embed_query", self.inner.embed)
        return self._cached("query", texts, fn)
