"""Resource updates for the MCP server: ``notifications/resources/updated`` from the change feed.

A :class:`ResourceWatcher` runs for the life of the server (its ``lifespan``): it follows the
namespace's change feed (DESIGN §14) from the moment the server starts and, for every event
that changes a resource the server serves, announces that resource's URI — to clients that
asked with ``resources/subscribe`` (2025-era protocol: ``notifications/resources/updated`` on
their session) and to ``subscriptions/listen`` streams (2026-07-28 protocol: a
``ResourceUpdated`` event through the SDK's subscription bus). The writer may be this server's
own tool call or any other process writing the store.

Which events touch which URIs is :meth:`ResourceWatcher.uris`, a pure function: a block's URI
for the block's writes (``block_written``), its entries (``entry_written/deleted``) and its
skill loads; the frozen prompt's URI for ``prompt_written``. Events of other sessions are
ignored; namespace-wide ones count for every session. Resources added later get their line
there.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import anyio

from mindstore.changes import Change
from mindstore.store.base import Store

try:
    import mcp_types as types
    from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
except ImportError as exc:  # pragma: no cover - exercised by tests/meta/test_extras.py
    from mindstore.errors import MissingDependencyError

    raise MissingDependencyError("mcp", "mcp") from exc

__all__ = ["ResourceWatcher"]

logger = logging.getLogger("mindstore")


class ResourceWatcher:
    """Follows the feed of ``namespace`` and announces the resources of ``session_id`` that
    changed (see the module docstring). ``prompt_uri`` and ``block_uri_prefix`` are the
    server's resource URIs."""

    def __init__(
        self,
        store: Store,
        *,
        namespace: str,
        session_id: str,
        prompt_uri: str,
        block_uri_prefix: str,
        poll_interval: float = 0.05,
    ) -> None:
        self.store = store
        self.namespace = namespace
        self.session_id = session_id
        self.prompt_uri = prompt_uri
        self.block_uri_prefix = block_uri_prefix
        self.poll_interval = poll_interval
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus)
        # 2025-era subscriptions, per client connection: a session to send on, its URIs
        self._subscribed: dict[Any, tuple[Any, set[str]]] = {}

    # ---- which URIs an event touches (pure) --------------------------------------------------
    def uris(self, change: Change) -> list[str]:
        if change.session_id not in (None, self.session_id):
            return []
        if change.kind == "prompt_written":
            return [self.prompt_uri]
        label = change.data.get("label")
        if change.kind in (
            "block_written",
            "entry_written",
            "entry_deleted",
            "skill_loaded",
            "skill_unloaded",
        ) and isinstance(label, str):
            return [self.block_uri_prefix + quote(label, safe="")]
        return []

    # ---- 2025-era resources/subscribe --------------------------------------------------------
    @staticmethod
    def _client(ctx: Any) -> Any:
        """The client connection behind a request (the SDK makes a session object per request
        around one connection object)."""
        return getattr(ctx.session, "_connection", ctx.session)

    async def subscribe(self, ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        _, uris = self._subscribed.get(self._client(ctx), (None, set()))
        uris.add(str(params.uri))
        self._subscribed[self._client(ctx)] = (ctx.session, uris)
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: Any, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        found = self._subscribed.get(self._client(ctx))
        if found is not None:
            found[1].discard(str(params.uri))
        return types.EmptyResult()

    # ---- the follower ------------------------------------------------------------------------
    async def announce(self, uri: str) -> None:
        await self.bus.publish(ResourceUpdated(uri=uri))
        for client, (session, uris) in list(self._subscribed.items()):
            if uri not in uris:
                continue
            try:
                await session.send_resource_updated(uri)
            except Exception:  # that client is gone: forget it
                self._subscribed.pop(client, None)

    async def run(self, since: int) -> None:
        async with contextlib.aclosing(
            self.store.changes(self.namespace, since=since, poll_interval=self.poll_interval)
        ) as feed:
            async for change in feed:
                for uri in self.uris(change):
                    await self.announce(uri)

    @contextlib.asynccontextmanager
    async def lifespan(self, _server: Any) -> AsyncIterator[dict[str, Any]]:
        """The server's lifespan: follow the feed from now while the server runs."""
        since = await self.store.latest_change_seq(self.namespace)
        async with anyio.create_task_group() as tg:

            async def follow() -> None:
                try:
                    await self.run(since)
                except Exception:
                    logger.exception("the MCP server stopped following the change feed")

            tg.start_soon(follow)
            try:
                yield {}
            finally:
                tg.cancel_scope.cancel()
