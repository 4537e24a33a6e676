"""``mindstore [--db URL] [--namespace NS] mcp [--session ID] [--config FILE] [--http [--port N]
[--token T]]``.

Serves one session of the store over the Model Context Protocol (see
:mod:`mindstore.integrations.mcp`). Over HTTP every request needs ``Authorization: Bearer
<token>``: ``--token`` (or ``MINDSTORE_MCP_TOKEN``, which keeps it out of the process list),
else a token generated at start and printed on stderr with the URL. Stdout belongs to the
protocol on stdio, so everything the command itself says goes to stderr. A bad ``--config``,
``--session`` or ``--token`` is a usage error: one line on stderr, exit code 2, before anything
is opened. A missing SQLite file is created (the server writes memory), like ``demo`` and
``import``.
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
@click.option(
    "--token",
    default=None,
    envvar="MINDSTORE_MCP_TOKEN",
    metavar="T",
    help="Bearer token every --http request must send (Authorization: Bearer T); default: "
    "generated and printed at start. Also read from MINDSTORE_MCP_TOKEN.",
)
def mcp_command(
    session_id: str | None, config_path: str | None, http: bool, port: int, token: str | None
) -> None:
    """Serve the memory over MCP: memory tools, session_search, blocks and prompt as resources.

    Stdio by default (for Claude Desktop and other MCP clients that start the server);
    --http serves http://127.0.0.1:PORT/mcp and requires a bearer token on every request
    (--token, else one is generated and printed).
    """
    from mindstore.errors import ConfigError
    from mindstore.integrations.mcp_config import DEFAULT_BLOCKS, ServerConfig, load_config

    env = current_env()
    source = click.get_current_context().get_parameter_source("port")
    if not http and source is not None and source.name != "DEFAULT":
        _usage_error("--port is for --http (over stdio there is no port): add --http")
    token_source = click.get_current_context().get_parameter_source("token")
    if not http and token is not None and token_source is not None:
        if token_source.name == "COMMANDLINE":
            _usage_error("--token is for --http (stdio needs no token): add --http")
        token = None  # MINDSTORE_MCP_TOKEN set in the environment: unused over stdio
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
    from mindstore.errors import MindstoreError
    from mindstore.integrations.mcp import (
        check_token,
        create_server,
        new_token,
        serve_http,
        serve_stdio,
    )

    generated = http and token is None
    if http:
        try:
            token = check_token(token) if token is not None else new_token()
        except MindstoreError as exc:
            _usage_error(str(exc))

    async def go() -> None:
        async with opened(env, create=True) as store:
            # The session it serves is registered, so `mindstore sessions`, `blocks` and
            # `prompt` find what its tools write (they showed "no session").
            with contextlib.suppress(ConflictError):  # (registered before)
                await store.create_session(SessionKey(namespace=env.namespace, session_id=session))
            server = create_server(store, config, namespace=env.namespace, session_id=session)
            if http:
                assert token is not None

                def announce() -> None:
                    click.echo(
                        f"mindstore MCP server: http://127.0.0.1:{port}/mcp "
                        f"(namespace {env.namespace!r}, session {session!r})",
                        err=True,
                    )
                    shown = token if generated else "<your --token>"
                    click.echo(f"every request needs: Authorization: Bearer {shown}", err=True)

                await serve_http(server, port=port, token=token, announce=announce)
            else:
                await serve_stdio(server)

    try:
        asyncio.run(go())
    except KeyboardInterrupt:  # Ctrl-C on --http: a normal way to stop
        sys.exit(0)
