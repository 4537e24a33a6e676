"""The MCP server behind ``mindstore mcp``: a store's memory over the Model Context Protocol.

Install with ``pip install 'mindstore[mcp]'`` (the official ``mcp`` SDK). One server process
serves one session of one namespace of a store:

- **Tools**: the generated memory tools of the configured blocks (``set_context``,
  ``load_context``, ``unload_context``, ``search_context``, as present; DESIGN §4.6) plus
  ``session_search`` over every conversation of the namespace, and the conversation tools
  ``append_message`` / ``get_history`` (:mod:`mindstore.integrations.mcp_history`) that record
  and read the turns of the served session. Tools are regenerated on every
  ``tools/list`` (their descriptions name what is loaded). A tool never fails the protocol: a
  bad call (unknown label, over-budget content, a key that would escape the skills root,
  missing arguments, an unknown tool) comes back as a result with ``isError`` set and the text
  ``Error: <reason>`` (a ``load_context`` of a missing or unsafe key is also flagged:
  ``Not found: <key>``); the server keeps serving.
- **Resources**: ``mindstore://prompt`` — the frozen system prompt (rendered on first read and
  identical afterwards, DESIGN §4.5) — and ``mindstore://blocks/<label>`` per block, its current
  content (reads are live: a write shows at once, while the frozen prompt does not change);
  ``mindstore://sessions/{session_id}/history`` (JSON messages) and
  ``mindstore://sessions/{session_id}`` (JSON ``SessionInfo``) for any session of the
  namespace. ``resources/templates/list`` names the three templates; ``resources/list`` the
  prompt, the blocks and the served session's two resources.
- **Prompts**: ``system_prompt`` — the frozen system prompt as one user-role message (MCP
  prompts have no system role), identical to the ``mindstore://prompt`` resource.

- **Resource updates**: the server follows the store's change feed and sends
  ``notifications/resources/updated`` for these resources when they change — whoever wrote
  them (:mod:`mindstore.integrations.mcp_live`).

Transports: stdio (:func:`serve_stdio`, the default) or streamable HTTP on 127.0.0.1
(:func:`serve_http`, path ``/mcp``), with the SDK's DNS-rebinding protection for loopback and a
required bearer token: on a machine shared with other users any local process can reach a
loopback port, and the tools write memory. Every HTTP request must carry ``Authorization:
Bearer <token>`` (compared in constant time); anything else is answered ``401`` before it
reaches the MCP app.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import re
import secrets
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import quote, unquote

from mindstore.context.providers import FileSkillProvider, StaticProvider, StoreSearchProvider
from mindstore.errors import MindstoreError, MissingDependencyError
from mindstore.integrations.mcp_config import BlockConfig, ServerConfig
from mindstore.integrations.mcp_history import (
    HISTORY_TEMPLATE,
    SESSION_TEMPLATE,
    conversation_tools,
    history_uri,
    parse_session_uri,
    session_info_json,
    session_uri,
)
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

__all__ = [
    "PROMPT_NAME",
    "PROMPT_URI",
    "BearerTokenGuard",
    "MemoryServer",
    "build_session",
    "check_token",
    "create_server",
    "new_token",
    "serve_http",
]

PROMPT_URI: Final = "mindstore://prompt"
BLOCK_URI_PREFIX: Final = "mindstore://blocks/"
PROMPT_NAME: Final = "system_prompt"
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
        return (
            await self.session.tools()
            | await self.manager.tools()
            | conversation_tools(self.session)
        )

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
        resources += [
            types.Resource(
                uri=history_uri(self.session_id),
                name="session-history",
                title=f"History of {self.session_id}",
                description=f"The messages of session {self.session_id!r} (JSON, active "
                "branch, compaction summaries applied).",
                mime_type="application/json",
            ),
            types.Resource(
                uri=session_uri(self.session_id),
                name="session",
                title=f"Session {self.session_id}",
                description=f"Name, usage and message count of session {self.session_id!r}.",
                mime_type="application/json",
            ),
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

    async def list_resource_templates(
        self, _ctx: Any, _params: Any
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=HISTORY_TEMPLATE,
                    name="session-history",
                    title="Session history",
                    description=f"The messages of a session of namespace {self.namespace!r} "
                    "(JSON, active branch, compaction summaries applied).",
                    mime_type="application/json",
                ),
                types.ResourceTemplate(
                    uri_template=SESSION_TEMPLATE,
                    name="session",
                    title="Session",
                    description=f"A session of namespace {self.namespace!r}: name, usage, "
                    "message count (JSON).",
                    mime_type="application/json",
                ),
                types.ResourceTemplate(
                    uri_template=BLOCK_URI_PREFIX + "{label}",
                    name="block",
                    title="Context block",
                    description=f"The current content of a context block of session "
                    f"{self.session_id!r}.",
                    mime_type="text/plain",
                ),
            ]
        )

    async def list_prompts(self, _ctx: Any, _params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name=PROMPT_NAME,
                    title="Frozen system prompt",
                    description=f"The system prompt of session {self.session_id!r}: every "
                    "context block rendered, frozen on first use.",
                )
            ]
        )

    async def get_prompt(
        self, _ctx: Any, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        if params.name != PROMPT_NAME:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"unknown prompt {params.name!r}: the server offers {PROMPT_NAME!r}",
            )
        text = await self.session.freeze_system_prompt()
        return types.GetPromptResult(
            description=f"The frozen system prompt of session {self.session_id!r}.",
            messages=[
                types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
            ],
        )

    async def _read_session(self, session_id: str, history: bool) -> tuple[str, str]:
        """(text, mime type) of a session resource of this namespace."""
        info = await self.manager.get(session_id)
        if info is None and session_id != self.session_id:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"no session {session_id!r} in namespace {self.namespace!r}",
            )
        if history:
            session = self.session if session_id == self.session_id else (
                self.manager.session(session_id)
            )  # fmt: skip
            return json.dumps(await session.get_history(), ensure_ascii=False), "application/json"
        if info is None:  # the served session, not registered (an in-process server)
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"session {session_id!r} is not registered in namespace "
                f"{self.namespace!r} (it has no stored session record yet)",
            )
        return session_info_json(info), "application/json"

    async def read_resource(
        self, _ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        mime_type = "text/plain"
        if (target := parse_session_uri(uri)) is not None:
            text, mime_type = await self._read_session(*target)
        elif uri == PROMPT_URI:
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
                message=f"unknown resource {uri!r}: read {PROMPT_URI}, "
                f"{BLOCK_URI_PREFIX}<label> or {HISTORY_TEMPLATE}",
            )
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, text=text, mime_type=mime_type)]
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
            "Persistent memory for this agent: use the tools to write and search memory and "
            "to record each turn of the conversation (append_message); read "
            f"{PROMPT_URI} (or get the {PROMPT_NAME} prompt) for the system prompt with every "
            "context block."
        ),
        on_list_tools=handlers.list_tools,
        on_call_tool=handlers.call_tool,
        on_list_resources=handlers.list_resources,
        on_read_resource=handlers.read_resource,
        on_list_resource_templates=handlers.list_resource_templates,
        on_list_prompts=handlers.list_prompts,
        on_get_prompt=handlers.get_prompt,
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


_TOKEN_RULE: Final = re.compile(r"[A-Za-z0-9._~-]{16,256}")  # as `mindstore serve --token`


def new_token() -> str:
    """A fresh random bearer token (43 URL-safe characters, 256 bits)."""
    return secrets.token_urlsafe(32)


def check_token(token: str) -> str:
    """Return ``token`` if it is usable as a bearer token, else raise saying how to make one.

    Raises:
        MindstoreError: shorter than 16 or longer than 256 characters, or a character outside
            ``A-Z a-z 0-9 . _ ~ -``.
    """
    if not isinstance(token, str) or not _TOKEN_RULE.fullmatch(token):
        raise MindstoreError(
            "--token must be 16 to 256 characters from A-Z a-z 0-9 . _ ~ - "
            '(make one with: python -c "import secrets; print(secrets.token_urlsafe())"), '
            "or leave it out and one is generated"
        )
    return token


class BearerTokenGuard:
    """ASGI middleware: an HTTP request without ``Authorization: Bearer <token>`` gets ``401``
    (with ``WWW-Authenticate: Bearer``) and never reaches the wrapped app; lifespan events pass
    through."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {check_token(token)}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") in ("http", "websocket"):
            given = b""
            for name, value in scope.get("headers") or ():
                if name.lower() == b"authorization":
                    given = bytes(value)
                    break
            if not hmac.compare_digest(given, self._expected):
                await _unauthorized(scope, send)
                return
        await self.app(scope, receive, send)


async def _unauthorized(scope: Any, send: Any) -> None:
    body = b"this MCP server needs its token: send 'Authorization: Bearer <token>'\n"
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer realm="mindstore"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def serve_http(
    server: Server[Any],
    *,
    port: int,
    token: str,
    host: str = "127.0.0.1",
    announce: Callable[[], object] | None = None,
) -> None:
    """Serve streamable HTTP at ``http://<host>:<port>/mcp`` until cancelled, answering only
    requests that carry ``Authorization: Bearer <token>``; ``announce()`` once the port is
    known to be free.

    Raises:
        MindstoreError: the port cannot be bound (another program listens on it), or the
            token is not usable (see :func:`check_token`).
    """
    import uvicorn

    from mindstore._ports import check_port

    check_token(token)
    check_port(host, port)
    if announce is not None:
        announce()
    app = BearerTokenGuard(server.streamable_http_app(host=host), token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    with contextlib.suppress(KeyboardInterrupt):
        await uvicorn.Server(config).serve()
