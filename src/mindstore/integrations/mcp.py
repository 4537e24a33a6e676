"""The MCP server behind ``mindstore mcp``: a store's memory over the Model Context Protocol.

Install with ``pip install 'mindstore[mcp]'`` (the official ``mcp`` SDK). One server process
serves one session of one namespace of a store:

- **Tools**: the generated memory tools of the configured blocks (``set_context``,
  ``load_context``, ``unload_context``, ``search_context``, as present; DESIGN §4.6) plus
  ``session_search`` over every conversation of the namespace. Tools are regenerated on every
  ``tools/list`` (their descriptions name what is loaded). A tool never fails the protocol: a
  bad call (unknown label, over-budget content, a key that would escape the skills root,
  missing arguments, an unknown tool) comes back as a result with ``isError`` set and the text
  ``Error: <reason>`` (a ``load_context`` of a missing or unsafe key is also flagged:
  ``Not found: <key>``); the server keeps serving.
- **Resources**: ``mindstore://prompt`` — the frozen system prompt (rendered on first read and
  identical afterwards, DESIGN §4.5) — and ``mindstore://blocks/<label>`` per block, its current
  content (reads are live: a write shows at once, while the frozen prompt does not change).

- **Resource updates**: the server follows the store's change feed and sends
  ``notifications/resources/updated`` for these resources when they change — whoever wrote
  them (:mod:`mindstore.integrations.mcp_live`).

Transports: stdio (:func:`serve_stdio`, the default) or streamable HTTP on 127.0.0.1
(:func:`serve_http`, path ``/mcp``), with the SDK's DNS-rebinding protection for loopback.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import quote, unquote

from mindstore.context.providers import FileSkillProvider, StaticProvider, StoreSearchProvider
from mindstore.errors import MissingDependencyError
from mindstore.integrations.mcp_config import BlockConfig, ServerConfig
from mindstore.manager import SessionManager
from mindstore.session import Session
from mindstore.store.base import Store
from mindstore.tools import ToolSet

try:
    import mcp_types as types
    from mcp.server import Server
    from mcp.server.stdio import stdio_server
    from mcp.shared.exceptions import MCPError
except ImportError as exc:  # pragma: no cover - exercised by tests/meta/test_extras.py
    raise MissingDependencyError("mcp", "mcp") from exc

__all__ = ["PROMPT_URI", "MemoryServer", "build_session", "create_server", "serve_http"]

PROMPT_URI: Final = "mindstore://prompt"
BLOCK_URI_PREFIX: Final = "mindstore://blocks/"
_FAILED: Final = ("Error:", "Not found:")  # tool results that report a failed call


def build_session(
    store: Store, config: ServerConfig, *, namespace: str, session_id: str
) -> Session:
    """The :class:`Session` the server works on, with the config's blocks (no I/O)."""
    session = Session.create(store, session_id, namespace=namespace)
    for block in config.blocks:
        session.with_context(
            block.label,
            block.description,
            max_tokens=block.max_tokens,
            provider=_provider(store, block),
            scope=block.scope if block.kind == "writable" else "session",
        )
    if config.cached_prompt:
        session.with_cached_prompt()
    return session


def _provider(store: Store, block: BlockConfig) -> Any:
    if block.kind == "readonly":
        return StaticProvider(block.text or "")
    if block.kind == "searchable":
        return StoreSearchProvider(store, scope=block.scope)
    if block.kind == "skills":
        assert block.root is not None  # validated by the config
        return FileSkillProvider(
            block.root,
            prefix=block.prefix,
            keys=block.keys,
            storage_options=block.storage_options or None,
        )
    return None  # writable: the store-backed block


class MemoryServer:
    """The handlers of the MCP server (kept apart from the SDK object so they are testable)."""

    def __init__(self, store: Store, config: ServerConfig, *, namespace: str, session_id: str):
        self.session = build_session(store, config, namespace=namespace, session_id=session_id)
        self.manager = SessionManager(store, namespace=namespace)
        self.namespace = namespace
        self.session_id = session_id

    async def toolset(self) -> ToolSet:
        return await self.session.tools() | await self.manager.tools()

    async def list_tools(self, _ctx: Any, _params: Any) -> types.ListToolsResult:
        tools = await self.toolset()
        return types.ListToolsResult(
            tools=[
                types.Tool(name=t.name, description=t.description, input_schema=t.parameters)
                for t in tools.values()
            ]
        )

    async def call_tool(
        self, _ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tools = await self.toolset()
        result = await tools.execute(params.name, dict(params.arguments or {}))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=result)],
            is_error=result.startswith(_FAILED),
        )

    async def list_resources(self, _ctx: Any, _params: Any) -> types.ListResourcesResult:
        resources = [
            types.Resource(
                uri=PROMPT_URI,
                name="system-prompt",
                title="Frozen system prompt",
                description=f"The system prompt of session {self.session_id!r}, frozen on "
                "first read (context blocks rendered).",
                mime_type="text/plain",
            )
        ]
        for block in await self.session.get_context_blocks():
            resources.append(
                types.Resource(
                    uri=BLOCK_URI_PREFIX + quote(block.label, safe=""),
                    name=f"block-{block.label}",
                    title=f"{block.label} ({block.kind})",
                    description=block.description,
                    mime_type="text/plain",
                )
            )
        return types.ListResourcesResult(resources=resources)

    async def read_resource(
        self, _ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri == PROMPT_URI:
            text = await self.session.freeze_system_prompt()
        elif uri.startswith(BLOCK_URI_PREFIX):
            label = unquote(uri[len(BLOCK_URI_PREFIX) :])
            block = await self.session.get_context_block(label)
            if block is None:
                raise MCPError(code=types.INVALID_PARAMS, message=f"no context block {label!r}")
            text = block.content
        else:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"unknown resource {uri!r}: read {PROMPT_URI} or {BLOCK_URI_PREFIX}<label>",
            )
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, text=text, mime_type="text/plain")]
        )


def create_server(
    store: Store, config: ServerConfig, *, namespace: str, session_id: str
) -> Server[Any]:
    """The SDK server object for a store's session (run it with :func:`serve_stdio` or
    :func:`serve_http`, or connect the SDK's in-process ``Client`` to it)."""
    from mindstore import __version__
    from mindstore.integrations.mcp_live import ResourceWatcher

    handlers = MemoryServer(store, config, namespace=namespace, session_id=session_id)
    watcher = ResourceWatcher(
        store,
        namespace=namespace,
        session_id=session_id,
        prompt_uri=PROMPT_URI,
        block_uri_prefix=BLOCK_URI_PREFIX,
    )
    return Server(
        "mindstore",
        version=__version__,
        instructions=(
            "Persistent memory for this agent: use the tools to write and search memory; "
            f"read {PROMPT_URI} for the system prompt with every context block."
        ),
        on_list_tools=handlers.list_tools,
        on_call_tool=handlers.call_tool,
        on_list_resources=handlers.list_resources,
        on_read_resource=handlers.read_resource,
        # resource updates from the change feed (mcp_live.py)
        lifespan=watcher.lifespan,
        on_subscribe_resource=watcher.subscribe,
        on_unsubscribe_resource=watcher.unsubscribe,
        on_subscriptions_listen=watcher.listen,
    )


async def serve_stdio(server: Server[Any]) -> None:
    """Serve over standard input/output until the client closes them."""
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(
    server: Server[Any],
    *,
    port: int,
    host: str = "127.0.0.1",
    announce: Callable[[], object] | None = None,
) -> None:
    """Serve streamable HTTP at ``http://<host>:<port>/mcp`` until cancelled; ``announce()``
    once the port is known to be free.

    Raises:
        MindstoreError: the port cannot be bound (another program listens on it).
    """
    import uvicorn

    from mindstore._ports import check_port

    check_port(host, port)
    if announce is not None:
        announce()
    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    with contextlib.suppress(KeyboardInterrupt):
        await uvicorn.Server(config).serve()
