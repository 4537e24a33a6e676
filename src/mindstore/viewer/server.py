"""Running the viewer with uvicorn: checks before binding, then serve until stopped.

:class:`ViewerServer` runs in a background thread on an already bound socket (the tests and the
benchmark use it on a free loopback port); :func:`serve` is the blocking form behind
``mindstore serve``.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from mindstore._ports import check_port
from mindstore.errors import MindstoreError, MissingDependencyError

try:
    import uvicorn
except ImportError as exc:  # pragma: no cover - exercised by tests/meta/test_extras.py
    raise MissingDependencyError(exc.name or "uvicorn", "viewer") from exc

from .app import create_app
from .readonly import check_openable, open_read_only, sqlite_path

__all__ = ["ViewerServer", "check_bind", "display_name", "is_loopback", "serve"]

_TOKEN = re.compile(r"[A-Za-z0-9._~-]{16,256}")


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse a non-loopback ``host`` without a token, and a weak or unsafe token.

    Raises:
        MindstoreError: with what to do instead.
    """
    if token is not None and not _TOKEN.fullmatch(token):
        raise MindstoreError(
            "--token must be 16 to 256 characters from A-Z a-z 0-9 . _ ~ - "
            '(make one with: python -c "import secrets; print(secrets.token_urlsafe())")'
        )
    if not is_loopback(host) and token is None:
        raise MindstoreError(
            f"refusing to serve on {host!r} without --token: anyone who can reach that address "
            "could read the store; bind 127.0.0.1 (the default) or pass --token"
        )


def display_name(db: str) -> str:
    """What the page header calls the store: a SQLite file's name, or a PostgreSQL URL's host
    and database — never a password or a full local path."""
    path = sqlite_path(db)
    if path is not None:
        return path.name
    parts = urlsplit(db)
    host = parts.hostname or "localhost"
    return f"postgresql://{host}{':' + str(parts.port) if parts.port else ''}{parts.path}"


def _config(db: str, host: str, token: str | None, **options: Any) -> uvicorn.Config:
    app = create_app(lambda: open_read_only(db, **options), token=token, title=display_name(db))
    return uvicorn.Config(
        app,
        host=host,
        lifespan="on",
        ws="none",  # no websockets: nothing to upgrade to
        log_level="warning",
        access_log=False,
        server_header=False,
        proxy_headers=False,
        # open live pages (server-sent events) must not hold a stopping server for long
        timeout_graceful_shutdown=2,
    )


class ViewerServer:
    """The viewer on a free port of ``host``, in a daemon thread; ``url`` once started."""

    def __init__(
        self,
        db: str,
        *,
        host: str = "127.0.0.1",
        token: str | None = None,
        store_options: dict[str, Any] | None = None,
    ) -> None:
        check_bind(host, token)
        check_openable(db)
        self._sock = socket.socket(
            socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM
        )
        self._sock.bind((host, 0))
        port = self._sock.getsockname()[1]
        self.url = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
        self._server = uvicorn.Server(_config(db, host, token, **(store_options or {})))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    def start(self, timeout: float = 30.0) -> ViewerServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive():
                raise MindstoreError("the viewer failed to start (see the log above)")
            if time.monotonic() > deadline:
                raise MindstoreError("the viewer did not start in time")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self._sock.close()

    def __enter__(self) -> ViewerServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(
    db: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    open_browser: bool = False,
    announce: Callable[[str], object] = print,
) -> None:
    """Serve the viewer until interrupted (Ctrl-C); ``announce(url)`` once it listens.

    Raises:
        MindstoreError: a non-loopback host without a token, or a store that cannot be viewed.
    """
    check_bind(host, token)
    check_openable(db)
    check_port(host, port)
    config = _config(db, host, token)
    config.port = port
    server = uvicorn.Server(config)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")

    def when_started() -> None:
        while not server.started and not server.should_exit:
            time.sleep(0.05)
        if server.started:
            announce(url)
            if open_browser:
                import webbrowser

                webbrowser.open(url)

    threading.Thread(target=when_started, daemon=True).start()
    server.run()
