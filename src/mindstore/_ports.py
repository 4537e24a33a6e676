"""A port check for the servers mindstore starts (the viewer, the MCP server over HTTP)."""

from __future__ import annotations

import socket

from mindstore.errors import MindstoreError

__all__ = ["check_port"]


def check_port(host: str, port: int) -> None:
    """Refuse a port another program listens on, before the server starts (uvicorn logged its
    own error and exited with status 3).

    Raises:
        MindstoreError: the port cannot be bound, with what to do instead.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # (as uvicorn binds)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise MindstoreError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc} (pass another --port)"
            ) from None
