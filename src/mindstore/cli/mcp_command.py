"""``mindstore [--db URL] [--namespace NS] mcp [--session ID] [--config FILE] [--http]``.

Serves one session of the store over the Model Context Protocol (see
:mod:`mindstore.integrations.mcp`). Stdout belongs to the protocol on stdio, so everything the
command itself says goes to stderr. A bad ``--config`` or ``--session`` is a usage error: one
line on stderr, exit code 2, before anything is opened. A missing SQLite file is created (the
server writes memory), like ``demo`` and ``import``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

import click

from mindstore.errors import ConflictError
from mindstore.store import check_name
from mindstore.store.base import SessionKey

from .common import current_env, opened

__all__ = ["mcp_command"]

DEFAULT_PORT = 8808


def _usage_error(message: str) -> None:
    click.echo(f"Error: {' '.join(message.split())}", err=True)
    raise click.exceptions.Exit(2)


@click.command(name="mcp")
@click.option(
    "--session",
    "session_id",
    default=None,
    help="Session to serve (default: the config's 'session', else 'default').",
)
@click.option(
    "--config",
    "config_path",
    default=None,
    metavar="FILE",
    help="YAML or TOML file declaring the context blocks (see docs/integrations.md).",
)
@click.option("--http", is_flag=True, help="Serve streamable HTTP on 127.0.0.1 instead of stdio.")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="Port for --http (the server binds 127.0.0.1 only).",
)
def mcp_command(session_id: str | None, config_path: str | None, http: bool, port: int) -> None:
    """Serve the memory over MCP: memory tools, session_search, blocks and prompt as resources.

    Stdio by default (for Claude Desktop and other MCP clients that start the server);
    --http serves http://127.0.0.1:PORT/mcp.
    """
    from mindstore.errors import ConfigError
    from mindstore.integrations.mcp_config import DEFAULT_BLOCKS, ServerConfig, load_config

    env = current_env()
    source = click.get_current_context().get_parameter_source("port")
    if not http and source is not None and source.name != "DEFAULT":
        _usage_error("--port is for --http (over stdio there is no port): add --http")
    try:
        config = load_config(config_path) if config_path else ServerConfig(blocks=DEFAULT_BLOCKS)
    except ConfigError as exc:
        _usage_error(str(exc))
    session = session_id if session_id is not None else (config.session or "default")
    try:
        check_name(session, "--session")
        check_name(env.namespace, "--namespace")
    except ValueError as exc:
        _usage_error(str(exc))
    # Imported after validation so a config error is reported even without the extra.
    from mindstore.integrations.mcp import create_server, serve_http, serve_stdio

    async def go() -> None:
        async with opened(env, create=True) as store:
            # The session it serves is registered, so `mindstore sessions`, `blocks` and
            # `prompt` find what its tools write (they showed "no session").
            with contextlib.suppress(ConflictError):  # (registered before)
                await store.create_session(SessionKey(namespace=env.namespace, session_id=session))
            server = create_server(store, config, namespace=env.namespace, session_id=session)
            if http:

                def announce() -> None:
                    click.echo(
                        f"mindstore MCP server: http://127.0.0.1:{port}/mcp "
                        f"(namespace {env.namespace!r}, session {session!r})",
                        err=True,
                    )

                await serve_http(server, port=port, announce=announce)
            else:
                await serve_stdio(server)

    try:
        asyncio.run(go())
    except KeyboardInterrupt:  # Ctrl-C on --http: a normal way to stop
        sys.exit(0)
