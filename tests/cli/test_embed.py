"""``mindstore embed [--rebuild]`` and ``search --mode``, with an OpenAI-compatible embedder
served by a scripted HTTP server on 127.0.0.1 (never the network)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from embedders import HashEmbedder

Invoke = Callable[..., Result]


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    batches: list[int] = []
    model = HashEmbedder(dimensions=64)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            batches.append(len(body["input"]))
            vectors = model.embed(body["input"])
            data = json.dumps(
                {"data": [{"index": i, "embedding": v} for i, v in enumerate(vectors)]}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{httpd.server_address[1]}/v1")
    monkeypatch.setenv("MINDSTORE_EMBEDDER", "openai:hash@64")
    try:
        yield batches
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_embed_then_search_by_meaning(run: Invoke, db: Path, endpoint: list[int]) -> None:
    # before `embed`: nothing to find by meaning, and the command says why
    before = run("--db", db, "search", "rolled", "--mode", "semantic")
    assert before.exit_code == 0 and "no results" in before.stderr
    assert "run `mindstore embed`" in " ".join(before.stderr.split())  # (wrapped)
    result = run("--db", db, "--json", "embed", "--batch-size", "3")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["embedder"] == "hash" and out["dropped"] == 0
    assert out["embedded"] > 0
    assert max(endpoint) <= 3
    again = json.loads(run("--db", db, "--json", "embed").output)
    assert again["embedded"] == 0
    rebuilt = json.loads(run("--db", db, "--json", "embed", "--rebuild").output)
    assert rebuilt["dropped"] == rebuilt["embedded"] == out["embedded"]
    # "rolled" (not a stem of "roll") is found semantically by the exact word
    hits = json.loads(run("--db", db, "--json", "search", "rolled", "--mode", "semantic").output)
    assert hits[0]["message_id"] == "a2"
    assert hits[0]["snippet"]
    hybrid = run("--db", db, "search", "migration step", "--mode", "hybrid")
    assert hybrid.exit_code == 0 and "a1" in hybrid.output
    human = run("--db", db, "embed")
    assert human.exit_code == 0 and "embedded 0 messages with hash" in human.output


def test_embed_errors_are_one_line(run: Invoke, db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MINDSTORE_EMBEDDER", raising=False)
    bad = run("--db", db, "embed", "--embedder", "nope")
    assert bad.exit_code == 1 and "--embedder 'nope'" in bad.output
    no_dims = run("--db", db, "embed", "--embedder", "openai:local-model")
    assert no_dims.exit_code == 1 and "dimensions" in no_dims.output
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    down = run("--db", db, "embed", "--embedder", "openai:m@8")
    assert down.exit_code == 1 and "cannot reach" in down.output
    assert "Traceback" not in down.output
    missing = run("--db", db.with_name("none.db"), "embed", "--embedder", "openai:m@8")
    assert missing.exit_code == 1 and "no mindstore database" in missing.output
