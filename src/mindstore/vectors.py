"""Vector search and hybrid fusion — pure: no I/O; shared by every backend (DESIGN §5.2).

* What is embedded: a message's indexed text followed by its parent's text (the context a turn
  like "yes, last week" needs), each cut to a bound (:func:`embedding_text`).
* Stored vectors are L2-normalised and kept as float16 (half the bytes of float32; measured: the
  top-10 lists agree 0.999 with float32 on LoCoMo), compared by cosine = dot product.
* Exact k-NN over an in-memory float32 matrix per namespace (:class:`VectorIndex`), with BLAS
  limited to one thread: on a busy two-core machine two BLAS threads made a 10k search ≥ 8 ms
  instead of ~0.6 ms.
* Hybrid = min-max fusion (:func:`fuse_minmax`): each list's scores scaled to [0, 1] over the
  union of both candidate lists (a hit missing from a list scores 0 there), then
  ``(1 - w)·lexical + w·semantic`` with ``w`` = :data:`DEFAULT_SEMANTIC_WEIGHT` unless given.
  Chosen on the LoCoMo development half (756 questions, default embedder, ``bench/recall.py
  --sweep``): min-max beat reciprocal-rank fusion (k = 60) at every pool size; the semantic
  weight has a plateau at 0.3–0.45 (recall@10 0.737–0.740) and falls off above it (0.5: 0.728,
  0.6: 0.715). 0.4 beats 0.5 on each of the five conversations; leave-one-conversation-out
  choice of the weight scores 0.734.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mindstore.errors import MissingDependencyError
from mindstore.search import SearchResult, search_result

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "DEFAULT_SEMANTIC_WEIGHT",
    "MODES",
    "VectorIndex",
    "decode_vector",
    "embedding_text",
    "encode_vector",
    "fuse_minmax",
    "semantic_snippet",
]

MODES = ("lexical", "semantic", "hybrid")
DEFAULT_SEMANTIC_WEIGHT = 0.4
"""The semantic list's share of a hybrid score when a search does not give one."""
TEXT_LIMIT = 2000
CONTEXT_LIMIT = 600
SNIPPET_CHARS = 200
CANDIDATES = 30
"""Each list contributes ``max(3·limit, CANDIDATES)`` candidates to a hybrid fusion. Measured on
the LoCoMo development half at weight 0.4: pools of 20, 30, 40, 50 and 100 score 0.736, 0.738,
0.736, 0.733, 0.733; a larger pool also costs latency (the lexical search's snippets scale with
the candidates)."""

THREAD_SCAN_AT = 1_000_000
"""Matrix cells (vectors × dimensions) from which a scan runs in a worker thread: ~2,600
384-d vectors, a scan of ~0.3 ms (about three thread hops)."""


def _np() -> Any:
    try:
        import numpy
    except ImportError as exc:  # pragma: no cover - numpy comes with the embeddings extra
        raise MissingDependencyError("numpy", "embeddings") from exc
    return numpy


def embedding_text(text: str, parent_text: str | None) -> str:
    """The text embedded for a message: its own text, then its parent's (bounded)."""
    own = text[:TEXT_LIMIT]
    if parent_text:
        return own + "\n\n" + parent_text[:CONTEXT_LIMIT]
    return own


def encode_vector(vector: Sequence[float]) -> bytes:
    """L2-normalise and pack as little-endian float16."""
    np = _np()
    v = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    if norm > 0:
        v = v / norm
    return bytes(v.astype("<f2").tobytes())


def decode_vector(blob: bytes) -> npt.NDArray[np.float32]:
    np = _np()
    return np.frombuffer(blob, dtype="<f2").astype(np.float32)  # type: ignore[no-any-return]


def normalized_query(vector: Sequence[float]) -> npt.NDArray[np.float32]:
    np = _np()
    v = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v  # type: ignore[no-any-return]


_controller: Any = None


def _one_blas_thread() -> Any:
    global _controller
    try:
        if _controller is None:
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()
        return _controller.limit(limits=1, user_api="blas")
    except ImportError:
        import contextlib

        return contextlib.nullcontext()


@dataclass(slots=True)
class VectorIndex:
    """The current embedder's vectors of one namespace: row keys, a matrix, and each session's
    rows. A search over a few sessions scores only their rows (an agent's ``Session.search``
    does not pay for the whole namespace); over most of the namespace it scans the matrix."""

    keys: Any  # int64 array: the backend's message row key (SQLite seq / PostgreSQL id)
    matrix: Any  # float32 (n, dims)
    generation: int
    by_session: dict[str, Any]  # session id -> int64 array of row numbers, ascending

    @classmethod
    def build(
        cls, rows: Sequence[tuple[int, str, bytes]], dims: int, generation: int
    ) -> VectorIndex:
        np = _np()
        n = len(rows)
        matrix = np.empty((n, dims), dtype=np.float32)
        keys = np.empty(n, dtype=np.int64)
        groups: dict[str, list[int]] = {}
        if n:
            raw = np.frombuffer(b"".join(r[2] for r in rows), dtype="<f2").reshape(n, dims)
            matrix[:] = raw
            keys[:] = [r[0] for r in rows]
            for i, r in enumerate(rows):
                groups.setdefault(r[1], []).append(i)
        by_session = {sid: np.asarray(ix, dtype=np.int64) for sid, ix in groups.items()}
        return cls(keys=keys, matrix=matrix, generation=generation, by_session=by_session)

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    async def asearch(
        self, query: Sequence[float], k: int, session_ids: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        """:meth:`search` in a worker thread when the scan is big (numpy releases the GIL: a
        hybrid search's lexical half runs meanwhile), inline when it is small (the thread
        hop would cost more than the scan)."""
        if self.matrix.size < THREAD_SCAN_AT:
            return self.search(query, k, session_ids)
        return await asyncio.to_thread(self.search, query, k, session_ids)

    def search(
        self, query: Sequence[float], k: int, session_ids: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` nearest rows as ``(key, cosine)``, best first (ties: higher key first)."""
        np = _np()
        if k <= 0 or not len(self):
            return []
        q = normalized_query(query)
        keys = self.keys
        if session_ids is None:
            with _one_blas_thread():
                scores = self.matrix @ q
        else:
            parts = [self.by_session[s] for s in dict.fromkeys(session_ids) if s in self.by_session]
            if not parts:
                return []
            rows = parts[0] if len(parts) == 1 else np.concatenate(parts)
            if 2 * len(rows) <= len(self):
                # a few sessions: gather their rows (a copy of len(rows) vectors), score those
                keys = keys[rows]
                with _one_blas_thread():
                    scores = self.matrix[rows] @ q
            else:
                with _one_blas_thread():
                    scores = self.matrix @ q
                keep = np.zeros(len(self), dtype=bool)
                keep[rows] = True
                scores = np.where(keep, scores, -np.inf)
                k = min(k, len(rows))
        k = min(k, len(scores))
        if k < len(scores):
            # every row scoring at least the k-th best, so ties at the cut go by key as well
            top = np.flatnonzero(scores >= kth_best(scores, k))
        else:
            top = np.arange(len(scores))
        order = top[np.lexsort((-keys[top], -scores[top]))][:k]
        return [(int(keys[i]), float(scores[i])) for i in order.tolist()]


BLOCK = 64
"""Scores per block in :func:`kth_best`."""


def kth_best(scores: Any, k: int) -> float:
    """The ``k``-th largest of ``scores`` (1 ≤ k ≤ len), exactly. Over a big array it first
    takes each block of :data:`BLOCK` scores' maximum: the k-th best block maximum is a lower
    bound of the answer (k rows reach it), so only the scores at or above it are partitioned —
    ~0.2 ms instead of ~1.5 ms for 100,000 scores."""
    np = _np()
    n = len(scores)
    m = n // BLOCK
    if m >= 4 * k:
        maxima = scores[: m * BLOCK].reshape(m, BLOCK).max(axis=1)
        bound = np.partition(maxima, m - k)[m - k]
        scores = scores[scores >= bound]
    return float(np.partition(scores, len(scores) - k)[len(scores) - k])


def semantic_snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """A semantic-only hit has no matched words to show: the start of its text, whitespace
    collapsed, cut at a word boundary with an ellipsis."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut + "…"


def _minmax(scores: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi - lo <= 1e-12:
        return dict.fromkeys(scores, 1.0)
    return {k: (v - lo) / (hi - lo) for k, v in scores.items()}


def fuse_minmax(
    lexical: Sequence[SearchResult],
    semantic: Sequence[SearchResult],
    *,
    limit: int,
    semantic_weight: float = DEFAULT_SEMANTIC_WEIGHT,
) -> list[SearchResult]:
    """Fuse two ranked lists (see the module docstring). A hit in both lists keeps the lexical
    result's snippet (matched words); the fused score is in [0, 1]; ties by recency."""
    if not 0.0 <= semantic_weight <= 1.0 or math.isnan(semantic_weight):
        raise ValueError(f"semantic_weight must be between 0 and 1, got {semantic_weight!r}")
    lex = _minmax({(r.session_id, r.message_id): r.score for r in lexical})
    sem = _minmax({(r.session_id, r.message_id): r.score for r in semantic})
    by_key: dict[tuple[str, str], SearchResult] = {}
    for r in semantic:
        by_key[(r.session_id, r.message_id)] = r
    for r in lexical:
        by_key[(r.session_id, r.message_id)] = r
    fused = []
    for key, r in by_key.items():
        score = (1.0 - semantic_weight) * lex.get(key, 0.0) + semantic_weight * sem.get(key, 0.0)
        fused.append((score, r))
    fused.sort(key=lambda p: (-p[0], -p[1].created_at.timestamp(), p[1].message_id))
    return [
        search_result(r.session_id, r.message_id, r.role, r.text, r.snippet, score, r.created_at)
        for score, r in fused[: max(limit, 0)]
    ]
