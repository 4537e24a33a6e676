"""Live pages: the viewer follows the store's change feed and streams it as server-sent events.

``GET /api/events?ns=NS&id=SESSION&since=SEQ`` is a ``text/event-stream`` of the namespace's
feed (DESIGN §14) after ``SEQ``, narrowed to what a page of that session shows: the session's
own events, namespace-wide blocks and entries, and ``namespace_deleted``. Each event is ``id:
<seq>`` / ``event: change`` / ``data: <JSON of seq, kind, session_id, data>``; the browser's
``EventSource`` reconnects by itself with ``Last-Event-ID``, which takes precedence over
``since``, so a dropped connection loses nothing. A comment every :data:`KEEPALIVE` seconds
keeps proxies from closing an idle stream, and a stream ends after :data:`STREAM_SECONDS` (the
browser reconnects at once) so a stopping server is never held up for long by open pages.

The session pages carry ``data-live`` with the feed position read *before* the page's data,
and ``viewer.js`` opens the stream and, on each event, fetches the page again and swaps its
``main`` in place — no reload, scripts and CSP unchanged. Everything stays read-only: the
follower only reads the feed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from mindstore.changes import Change
from mindstore.errors import MindstoreError
from mindstore.store._checks import check_name

from .readonly import ReadOnlyStore

__all__ = ["KEEPALIVE", "STREAM_SECONDS", "event_stream", "relevant", "sse", "stream_response"]

KEEPALIVE: Final = 15.0
STREAM_SECONDS: Final = 60.0


def relevant(change: Change, session_id: str) -> bool:
    """Whether a page of ``session_id`` shows what ``change`` changed."""
    return change.session_id == session_id or change.session_id is None


def sse(change: Change) -> str:
    """One server-sent event (JSON has no raw newline, so one ``data:`` line)."""
    payload = {
        "seq": change.seq,
        "kind": change.kind,
        "session_id": change.session_id,
        "data": dict(change.data),
    }
    return f"id: {change.seq}\nevent: change\ndata: {json.dumps(payload)}\n\n"


async def event_stream(
    store: ReadOnlyStore,
    namespace: str,
    session_id: str,
    since: int,
    *,
    keepalive: float = KEEPALIVE,
    lifetime: float = STREAM_SECONDS,
) -> AsyncIterator[str]:
    """The stream's text: the feed read by a task into a queue (so a keep-alive timeout never
    cancels the follower mid-read), relevant events out as they come."""
    queue: asyncio.Queue[Change | BaseException] = asyncio.Queue(maxsize=1000)

    async def follow() -> None:
        try:
            async with contextlib.aclosing(store.changes(namespace, since=since)) as feed:
                async for change in feed:
                    await queue.put(change)
        except Exception as exc:  # the store closed or failed: end the stream
            await queue.put(exc)

    task = asyncio.create_task(follow())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + lifetime
    try:
        yield "retry: 1000\n\n"
        while True:
            left = deadline - loop.time()
            if left <= 0:
                return
            try:
                item = await asyncio.wait_for(queue.get(), timeout=min(keepalive, left))
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            if isinstance(item, BaseException):
                return
            if relevant(item, session_id):
                yield sse(item)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


def start_position(request: Request) -> int:
    """``Last-Event-ID`` (a reconnecting EventSource) else ``since``; ValueError if bad."""
    raw = request.headers.get("last-event-id") or request.query_params.get("since") or "0"
    try:
        since = int(raw)
    except ValueError:
        raise ValueError(f"since must be an integer, got {raw!r:.40}") from None
    if since < 0:
        raise ValueError("since must not be negative")
    return since


def stream_response(store: ReadOnlyStore, request: Request) -> Response:
    """The ``/api/events`` response (400 for bad parameters, before anything is streamed)."""
    namespace = request.query_params.get("ns") or "default"
    session_id = request.query_params.get("id") or ""
    try:
        if not session_id:
            raise ValueError("missing query parameter 'id'")
        since = start_position(request)
        check_name(namespace, "namespace")
        check_name(session_id, "session_id")
    except (MindstoreError, ValueError) as exc:
        return Response(
            json.dumps({"error": str(exc)}), status_code=400, media_type="application/json"
        )
    headers: dict[str, Any] = {"X-Accel-Buffering": "no"}
    return StreamingResponse(
        event_stream(store, namespace, session_id, since),
        media_type="text/event-stream",
        headers=headers,
    )
