"""The MCP server announces changed resources (DESIGN §14, issue 32): it follows the change
feed and sends ``notifications/resources/updated`` (2025-era ``resources/subscribe``) and
``ResourceUpdated`` events (2026-07-28 ``subscriptions/listen``) for the blocks and the frozen
prompt it serves — whoever wrote them: its own tool calls or another store object on the same
file, as another process would."""

from __future__ import annotations

import asyncio
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp.client import Client

from mindstore import SQLiteStore
from mindstore.changes import Change
from mindstore.integrations.mcp import BLOCK_URI_PREFIX, PROMPT_URI, create_server
from mindstore.integrations.mcp_config import DEFAULT_BLOCKS, ServerConfig
from mindstore.integrations.mcp_live import ResourceWatcher
from mindstore.store.base import ScopeKey, SessionKey

MEMORY = BLOCK_URI_PREFIX + "memory"


async def test_listen_streams_updates_of_the_served_resources(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    async with SQLiteStore(db) as store, SQLiteStore(db) as other:
        server = create_server(
            store, ServerConfig(blocks=DEFAULT_BLOCKS), namespace="n", session_id="s"
        )
        async with (
            asyncio.timeout(30),
            Client(server) as client,
            client.listen(resource_subscriptions=[MEMORY, PROMPT_URI]) as sub,
        ):
            # another session's own block is not this server's resource: no event
            await other.set_block(ScopeKey(namespace="n", session_id="x", label="memory"), "no")
            await other.set_block(ScopeKey(namespace="n", session_id=None, label="memory"), "hi")
            first = await sub.__anext__()
            assert first.uri == MEMORY
            await other.put_prompt(SessionKey(namespace="n", session_id="s"), "p", overwrite=True)
            assert (await sub.__anext__()).uri == PROMPT_URI
            # the server's own tool call is announced too
            await client.call_tool("set_context", {"label": "memory", "content": "likes tea"})
            assert (await sub.__anext__()).uri == MEMORY


async def test_resources_subscribe_gets_resources_updated_notifications(tmp_path: Path) -> None:
    got: asyncio.Queue[Any] = asyncio.Queue()

    async def handler(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/resources/updated":
            await got.put(message.params.uri)

    async with SQLiteStore(str(tmp_path / "m.db")) as store:
        server = create_server(
            store, ServerConfig(blocks=DEFAULT_BLOCKS), namespace="n", session_id="s"
        )
        async with (
            asyncio.timeout(30),
            Client(server, mode="legacy", message_handler=handler) as client,
        ):
            with warnings.catch_warnings():  # the SDK deprecates the 2025-era calls
                warnings.simplefilter("ignore")
                await client.subscribe_resource(MEMORY)
            await client.call_tool("set_context", {"label": "memory", "content": "likes tea"})
            assert await got.get() == MEMORY
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.unsubscribe_resource(MEMORY)
                await client.subscribe_resource(PROMPT_URI)
            await client.call_tool("set_context", {"label": "memory", "content": "now coffee"})
            await store.put_prompt(SessionKey(namespace="n", session_id="s"), "p", overwrite=True)
            assert await got.get() == PROMPT_URI  # the unsubscribed block was not announced
            assert got.empty()


def test_which_events_touch_which_resources() -> None:
    watcher = ResourceWatcher(
        object(),  # type: ignore[arg-type]
        namespace="n",
        session_id="s",
        prompt_uri=PROMPT_URI,
        block_uri_prefix=BLOCK_URI_PREFIX,
    )

    def change(kind: str, session_id: str | None, **data: Any) -> Change:
        return Change(
            seq=1,
            namespace="n",
            kind=kind,  # type: ignore[arg-type]
            session_id=session_id,
            data=data,
            created_at=datetime.now(UTC),
        )

    assert watcher.uris(change("block_written", "s", label="a b", deleted=False)) == [
        BLOCK_URI_PREFIX + "a%20b"
    ]
    assert watcher.uris(change("block_written", None, label="memory", deleted=True)) == [MEMORY]
    assert watcher.uris(change("entry_deleted", None, label="memory", key="k")) == [MEMORY]
    assert watcher.uris(change("skill_loaded", "s", label="memory", key="k")) == [MEMORY]
    assert watcher.uris(change("prompt_written", "s")) == [PROMPT_URI]
    assert watcher.uris(change("block_written", "other", label="memory", deleted=False)) == []
    assert watcher.uris(change("message_appended", "s", message_id="m")) == []
    assert watcher.uris(change("block_written", "s")) == []  # emptied by a session delete


async def test_a_stdio_server_announces_another_processs_write(tmp_path: Path) -> None:
    """``mindstore mcp`` as a real subprocess over stdio: a block written by another store
    object (another process, as far as the server can tell) reaches a listening client."""
    import sys

    from mcp.client.stdio import StdioServerParameters

    db = str(tmp_path / "m.db")
    async with SQLiteStore(db) as store:
        await store.stats()  # the schema exists before the server opens the file
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mindstore", "--db", db, "--namespace", "n", "mcp", "--session", "s"],
    )
    async with (
        asyncio.timeout(120),
        Client(params) as client,
        client.listen(resource_subscriptions=[MEMORY]) as sub,
    ):
        async with SQLiteStore(db) as other:
            block = ScopeKey(namespace="n", session_id=None, label="memory")
            await other.set_block(block, "written elsewhere")
        assert (await sub.__anext__()).uri == MEMORY
        got = await client.read_resource(MEMORY)
        assert got.contents[0].text == "written elsewhere"  # type: ignore[union-attr]
