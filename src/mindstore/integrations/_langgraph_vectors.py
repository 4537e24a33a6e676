"""Semantic search for :class:`~mindstore.integrations.langgraph.MindstoreStore`: LangGraph's
``index={"dims", "embed", "fields"}`` config, matched to ``InMemoryStore``.

What is embedded is exactly what ``InMemoryStore`` embeds: for each configured path (the
store's ``fields``, or a put's ``index=[...]``), the texts LangGraph's ``get_text_at_path``
finds there (``"$"``: the whole value as sorted-key JSON); a path with several texts gives one
vector per text (``path.0``, ``path.1``…). A search scores an item by the best cosine
similarity of the query's vector with any of its vectors (max pooling), so the scores are
``InMemoryStore``'s (up to float32 rounding of the stored vectors).

The vectors live with the item, in the mindstore entry's unindexed ``data`` (the same row, so
they are written, replaced, expired and deleted with it in one transaction, on every backend):
each unit-normalised and packed as little-endian float32, base64. A search compares the query
with every candidate item of the namespace prefix (as ``InMemoryStore`` does); vectors of
another size than the query's are ignored (the item ranks as unscored).
"""

from __future__ import annotations

import base64
import math
import operator
import sys
from array import array
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import IndexConfig, get_text_at_path, tokenize_path
from langgraph.store.base.embed import ensure_embeddings

from mindstore.embeddings import Embedder, embed_batch
from mindstore.errors import ConfigError, EmbeddingError

__all__ = [
    "SemanticIndex",
    "decode_vectors",
    "encode_vectors",
    "index_fields",
    "max_similarity",
]

_np: Any
try:  # numpy (the ``embeddings`` extra) makes scoring a matrix product; optional
    import numpy as _np
except ImportError:  # pragma: no cover - numpy is installed with the dev extras
    _np = None


class SemanticIndex:
    """The embedding side of an ``index`` config: which paths, which function, which size.

    Built from LangGraph's config: ``embed`` (a LangChain ``Embeddings``, a sync or async
    function of a list of texts, or a ``"provider:model"`` string LangChain resolves) and
    ``dims``; without ``embed``, the mindstore store's own embedder (its ``dimensions``).
    """

    def __init__(
        self,
        fields: Sequence[str],
        dims: int,
        embed_documents: Callable[[list[str]], Awaitable[list[list[float]]]],
        embed_query: Callable[[str], Awaitable[list[float]]],
    ) -> None:
        self.fields = list(fields)
        self.dims = dims
        #: the LangChain ``Embeddings`` of the config's ``embed`` (None: the store's embedder)
        self.embeddings: Embeddings | None = None
        self._embed_documents = embed_documents
        self._embed_query = embed_query

    @classmethod
    def from_config(
        cls, index: IndexConfig | None, embedder: Embedder | None
    ) -> SemanticIndex | None:
        """The semantic index ``index`` asks for, or None (no config, or a config that only
        names ``fields`` on a store without an embedder: full-text search over those fields).

        Raises:
            ConfigError: ``dims`` is not a positive integer, or differs from the store
                embedder's ``dimensions``.
        """
        if not index:
            return None
        fields = index_fields(index)
        for path in fields:
            if path != "$":
                tokenize_path(path)  # a malformed path fails here, not at the first put
        dims = index.get("dims")
        if dims is not None and (isinstance(dims, bool) or not isinstance(dims, int) or dims <= 0):
            raise ConfigError(f"index dims must be a positive integer, got {dims!r}")
        embed = index.get("embed")
        if embed is not None:
            if dims is None:
                raise ConfigError('index has "embed" but no "dims" (the vectors\' size)')
            embeddings = ensure_embeddings(embed)
            made = cls(fields, dims, embeddings.aembed_documents, embeddings.aembed_query)
            made.embeddings = embeddings
            return made
        if embedder is None:
            return None
        if dims is not None and dims != embedder.dimensions:
            raise ConfigError(
                f"index dims={dims} but the store's embedder {embedder.name!r} makes "
                f"{embedder.dimensions}-dimensional vectors"
            )

        async def documents(texts: list[str]) -> list[list[float]]:
            return await embed_batch(embedder, texts)

        async def query(text: str) -> list[float]:
            [vector] = await embed_batch(embedder, [text], query=True)
            return vector

        return cls(fields, embedder.dimensions, documents, query)

    def texts(self, value: Any, index: Sequence[str] | None) -> list[tuple[str, str]]:
        """``(path, text)`` pairs to embed for ``value`` (``index``: a put's own paths)."""
        out: list[tuple[str, str]] = []
        for path in self.fields if index is None else index:
            texts = get_text_at_path(value, path)
            if len(texts) == 1:
                out.append((path, texts[0]))
            else:
                out.extend((f"{path}.{i}", text) for i, text in enumerate(texts))
        return out

    async def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One checked vector per text (each distinct text embedded once)."""
        unique = list(dict.fromkeys(texts))
        if not unique:
            return []
        vectors = await self._guard(self._embed_documents(unique))
        if not isinstance(vectors, list) or len(vectors) != len(unique):
            got = len(vectors) if isinstance(vectors, list) else type(vectors).__name__
            raise EmbeddingError(
                f"the embed function returned {got} vectors for {len(unique)} texts"
            )
        by_text = dict(zip(unique, (self._check(v) for v in vectors), strict=True))
        return [by_text[t] for t in texts]

    async def embed_query(self, text: str) -> list[float]:
        return self._check(await self._guard(self._embed_query(text)))

    @staticmethod
    async def _guard(call: Awaitable[Any]) -> Any:
        try:
            return await call
        except EmbeddingError:
            raise
        except Exception as exc:
            raise EmbeddingError(f"the embed function failed: {exc}") from exc

    def _check(self, vector: Any) -> list[float]:
        try:
            out = [float(x) for x in vector]
        except (TypeError, ValueError) as exc:
            raise EmbeddingError(f"the embed function returned a non-vector: {exc}") from exc
        if len(out) != self.dims:
            raise EmbeddingError(
                f"the embed function returned a {len(out)}-dimensional vector, "
                f"index dims={self.dims}"
            )
        if not all(math.isfinite(x) for x in out):
            raise EmbeddingError("the embed function returned a vector with NaN or infinity")
        return out


def index_fields(index: Any) -> list[str]:
    """The paths an index config names: ``fields`` (LangGraph's ``IndexConfig``) or
    ``text_fields`` (``SqliteStore``'s spelling; a string is one path); default ``["$"]``.

    Raises:
        ConfigError: they are not a list of strings.
    """
    fields = (index or {}).get("fields") or (index or {}).get("text_fields") or ["$"]
    if isinstance(fields, str):
        fields = [fields]
    if not isinstance(fields, list | tuple) or not all(isinstance(f, str) for f in fields):
        raise ConfigError(f"index fields must be a list of JSON paths, got {fields!r}")
    return list(fields)


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else [0.0] * len(vector)


def encode_vectors(
    paths: Sequence[str], vectors: Sequence[Sequence[float]], dims: int
) -> dict[str, Any]:
    """The JSON-able record of an item's vectors (unit-normalised, float32, base64)."""
    packed = array("f", [x for v in vectors for x in _unit(v)])
    if sys.byteorder != "little":  # pragma: no cover - stored little-endian everywhere
        packed.byteswap()
    return {"dims": dims, "paths": list(paths), "f32": base64.b64encode(packed.tobytes()).decode()}


def decode_vectors(record: Any, dims: int) -> bytes:
    """The packed unit vectors (little-endian float32) of a stored record of size ``dims``
    (``b""`` for none, or for vectors of another size)."""
    if not isinstance(record, dict) or record.get("dims") != dims:
        return b""
    packed = base64.b64decode(record["f32"])
    return packed if len(packed) % (4 * dims) == 0 else b""


def max_similarity(query: Sequence[float], items: Iterable[bytes], dims: int) -> list[float | None]:
    """Per item (its packed vectors, :func:`decode_vectors`), the best cosine similarity of
    ``query`` with its vectors (max pooling, as ``InMemoryStore``); None when it has none."""
    blobs = list(items)
    q = _unit(query)
    counts = [len(b) // (4 * dims) for b in blobs]
    if _np is not None:
        if not any(counts):
            return [None] * len(blobs)
        matrix = _np.frombuffer(b"".join(blobs), dtype="<f4").reshape(-1, dims)
        scores = matrix.astype(_np.float64) @ _np.asarray(q, dtype=_np.float64)
        starts = _np.cumsum([0, *counts[:-1]])
        nonempty = [i for i, c in enumerate(counts) if c]
        best = _np.maximum.reduceat(scores, starts[nonempty])
        out: list[float | None] = [None] * len(blobs)
        for i, score in zip(nonempty, best.tolist(), strict=True):
            out[i] = float(score)
        return out
    result: list[float | None] = []
    for blob, count in zip(blobs, counts, strict=True):
        if not count:
            result.append(None)
            continue
        packed = array("f")
        packed.frombytes(blob)
        if sys.byteorder != "little":  # pragma: no cover
            packed.byteswap()
        result.append(
            max(sum(map(operator.mul, q, packed[i * dims : (i + 1) * dims])) for i in range(count))
        )
    return result
