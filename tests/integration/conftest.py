"""Scripted model servers for the agent-loop tests.

A :class:`ScriptedServer` is a real HTTP server on 127.0.0.1 (stdlib ``http.server`` in a
thread) that speaks just enough of the OpenAI Chat Completions or Anthropic Messages API for the
official SDK clients: every POST pops the next scripted reply and records the request body, so a
test can assert on exactly what the agent sent (system prompt, messages, tool results, tools).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class ScriptedServer:
    """Serve scripted replies at ``path``; record every request body."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.replies: deque[dict[str, Any]] = deque()
        self.requests: list[dict[str, Any]] = []
        self.errors: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.split("?")[0] != server.path:
                    server.errors.append(f"unexpected path {self.path}")
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                server.requests.append(body)
                if not server.replies:
                    server.errors.append("request after the script ran out")
                    self._send(
                        400,
                        {"error": {"type": "invalid_request_error", "message": "script exhausted"}},
                    )
                    return
                self._send(200, server.replies.popleft())

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *replies: dict[str, Any]) -> None:
        self.replies.extend(replies)

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def scripted_server() -> Iterator[Callable[[str], ScriptedServer]]:
    """A factory ``scripted_server(path)``; every server it starts is closed after the test."""
    started: list[ScriptedServer] = []

    def start(path: str) -> ScriptedServer:
        server = ScriptedServer(path)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()
