"""Live views (DESIGN §14, issue 32): the viewer follows the change feed.

Over HTTP: ``/api/events`` streams a session's events as server-sent events as another
connection writes, leaves other sessions' out, resumes after ``Last-Event-ID`` and refuses bad
parameters. In headless Chromium: an open session page shows a message appended by another
process's store without reloading (a marker set in the page survives), and with no console
error or CSP violation.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from viewer_helpers import PageWatch, run_async

from mindstore import Session
from mindstore.store.base import ScopeKey
from mindstore.viewer.server import ViewerServer


def text(mid: str, body: str, role: str = "user") -> dict[str, Any]:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": body}]}


async def _append(db: Path, session_id: str, *messages: dict[str, Any]) -> None:
    from mindstore.store.sqlite import SQLiteStore

    async with SQLiteStore(db) as store:
        s = Session.create(store, session_id)
        for m in messages:
            await s.append_message(m)


@pytest.fixture
def live_db(tmp_path: Path) -> Path:
    db = tmp_path / "live.db"
    run_async(_append(db, "chat", text("m1", "first message")))
    run_async(_append(db, "other", text("o1", "elsewhere")))
    return db


class EventReader:
    """A raw ``text/event-stream`` reader over http.client (what EventSource does)."""

    def __init__(self, base: str, path: str, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(base)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        self.conn.request("GET", path, headers=headers or {})
        self.response = self.conn.getresponse()

    def next_event(self) -> dict[str, Any]:
        fields: dict[str, str] = {}
        while True:
            line = self.response.readline().decode().rstrip("\n")
            if line == "":
                if "data" in fields:
                    event: dict[str, Any] = json.loads(fields["data"])
                    event["_id"] = fields.get("id")
                    return event
                fields = {}
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            fields[name] = value

    def close(self) -> None:
        self.conn.close()


def test_events_stream_the_sessions_changes_and_resume(live_db: Path) -> None:
    with ViewerServer(str(live_db)) as server:
        reader = EventReader(server.url, "/api/events?ns=default&id=chat&since=2")
        try:
            assert reader.response.status == 200
            assert reader.response.getheader("content-type", "").startswith("text/event-stream")
            assert "default-src 'self'" in reader.response.getheader("content-security-policy", "")
            run_async(_append(live_db, "other", text("o2", "not for this page")))
            run_async(_append(live_db, "chat", text("m2", "second")))

            async def shared_block() -> None:
                from mindstore.store.sqlite import SQLiteStore

                async with SQLiteStore(live_db) as store:
                    await store.set_block(
                        ScopeKey(namespace="default", session_id=None, label="profile"), "x"
                    )

            run_async(shared_block())
            first = reader.next_event()
            assert (first["kind"], first["session_id"], first["data"]["message_id"]) == (
                "message_appended",
                "chat",
                "m2",
            )
            assert first["seq"] == 4 and first["_id"] == "4"  # seq 3 was the other session's
            block = reader.next_event()
            assert (block["kind"], block["session_id"], block["seq"]) == ("block_written", None, 5)
        finally:
            reader.close()
        # a reconnecting EventSource sends Last-Event-ID: it wins over since
        again = EventReader(
            server.url, "/api/events?ns=default&id=chat&since=0", {"Last-Event-ID": "4"}
        )
        try:
            assert again.next_event()["seq"] == 5
        finally:
            again.close()


@pytest.mark.parametrize(
    "query",
    ["id=chat&since=-1", "id=chat&since=x", "since=0", "ns=&id=chat&since=0&ns=%00"],
)
def test_events_refuse_bad_parameters(live_db: Path, query: str) -> None:
    with ViewerServer(str(live_db)) as server:
        parts = urlsplit(server.url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        conn.request("GET", "/api/events?" + query)
        response = conn.getresponse()
        assert response.status == 400
        assert "error" in json.loads(response.read())
        conn.close()


def test_a_session_page_shows_the_live_position(live_db: Path) -> None:
    with ViewerServer(str(live_db)) as server:
        parts = urlsplit(server.url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        conn.request("GET", "/session?ns=default&id=chat")
        html = conn.getresponse().read().decode()
        conn.close()
        assert 'data-live data-ns="default" data-session="chat" data-since="2"' in html


@pytest.fixture
def live_server(live_db: Path) -> Iterator[tuple[str, Path]]:
    with ViewerServer(str(live_db)) as server:
        yield server.url, live_db


def test_an_open_session_page_updates_without_a_reload(
    watched: PageWatch, live_server: tuple[str, Path]
) -> None:
    url, db = live_server
    page = watched.page
    page.goto(url + "/session?ns=default&id=chat")
    assert "first message" in page.inner_text("main")
    page.wait_for_function("document.querySelector('[data-live]').textContent === 'live'")
    page.evaluate("window.__notReloaded = true")
    run_async(_append(db, "chat", text("m2", "a reply written by another process", "assistant")))
    page.wait_for_selector("article#m-m2", timeout=10_000)
    assert "a reply written by another process" in page.inner_text("main")
    assert page.evaluate("window.__notReloaded") is True  # updated in place
    # and again: the stream stays open across updates; other sessions do not refresh it
    run_async(_append(db, "other", text("o2", "elsewhere again")))
    run_async(_append(db, "chat", text("m3", "third, still live")))
    page.wait_for_selector("article#m-m3", timeout=10_000)
    assert page.locator("article.msg").count() == 3
    assert page.evaluate("window.__notReloaded") is True
    assert page.locator(".toolbar[data-fold] button").count() == 2  # controls rebuilt once
    watched.assert_clean()


@pytest.mark.postgres
def test_events_follow_a_postgres_store() -> None:
    """The viewer on PostgreSQL (a read-only pool): its follower LISTENs in the store's schema
    and streams a commit made by another store object."""
    from backends import drop_schema, new_schema_name, postgres_url_or_skip
    from mindstore.store.postgres import PostgresStore

    url = postgres_url_or_skip()
    schema = new_schema_name()

    async def append(mid: str) -> None:
        store = await PostgresStore.open(url, schema=schema, min_size=1, max_size=1)
        try:
            await Session.create(store, "chat", namespace="pg").append_message(text(mid, mid))
        finally:
            await store.aclose()

    run_async(append("m1"))
    try:
        with ViewerServer(url, store_options={"schema": schema}) as server:
            reader = EventReader(server.url, "/api/events?ns=pg&id=chat&since=1")
            try:
                run_async(append("m2"))
                event = reader.next_event()
                assert (event["seq"], event["data"]["message_id"]) == (2, "m2")
            finally:
                reader.close()
    finally:
        run_async(drop_schema(url, schema))
