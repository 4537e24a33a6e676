"""The viewer over HTTP (a real uvicorn server on a loopback port): the JSON API on the demo
store, errors, security headers, the Host and token checks, static files, read-only opening,
the ``serve`` command, and the same API over PostgreSQL."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from viewer_helpers import run_async

from mindstore.errors import MindstoreError, SchemaVersionError, StoreError
from mindstore.store.base import NewMessage, ScopeKey, SessionKey, Store
from mindstore.viewer.app import CSP
from mindstore.viewer.readonly import READ_METHODS, ReadOnlyStore, open_read_only
from mindstore.viewer.server import ViewerServer, check_bind, display_name, is_loopback

TOKEN = "test-token-0123456789abcdef"


def request(
    base: str, path: str, *, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        conn.request(method, path, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def api(base: str, path: str) -> Any:
    status, headers, body = request(base, path)
    assert status == 200, body
    assert headers["content-type"] == "application/json"
    return json.loads(body)


def digest(db: Path) -> dict[str, str]:
    """Bytes of the database and of its WAL (what a write would change). An empty WAL file is
    no change: any reader of a WAL database may create one (and the -shm index) to take part in
    SQLite's locking protocol."""
    out = {}
    for suffix in ("", "-wal"):
        p = Path(str(db) + suffix)
        if p.exists() and p.stat().st_size:
            out[suffix] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


# ---- the API on the demo store ---------------------------------------------------------------


def test_api_serves_the_demo(demo_server: str, demo_db: Path) -> None:
    ns = api(demo_server, "/api/namespaces")
    assert ns["namespaces"] == ["default"] and ns["stats"]["sessions"] == 2
    sessions = api(demo_server, "/api/sessions?ns=default")["sessions"]
    assert sorted(s["name"] for s in sessions) == ["Capacity planning", "Deploy incident"]
    first = api(demo_server, "/api/sessions?ns=default&limit=1")
    assert len(first["sessions"]) == 1 and first["next_before"] == first["sessions"][0]["id"]
    second = api(demo_server, f"/api/sessions?ns=default&limit=1&before={first['next_before']}")
    assert len(second["sessions"]) == 1 and second["next_before"] is None
    assert {first["sessions"][0]["id"], second["sessions"][0]["id"]} == {s["id"] for s in sessions}
    found = api(demo_server, "/api/sessions?ns=default&filter=CAPACITY")["sessions"]
    assert [s["name"] for s in found] == ["Capacity planning"]
    assert api(demo_server, "/api/sessions?ns=default&filter=incident")["sessions"][0]["id"] == (
        "deploy-incident"
    )
    assert api(demo_server, "/api/sessions?ns=elsewhere")["sessions"] == []
    view = api(demo_server, "/api/session?ns=default&id=deploy-incident")
    shown = [i.get("id") or f"summary {i['compaction']['id']}" for i in view["items"]]
    assert shown == ["u1", "summary 1", "u5", "a5"]
    summary = view["items"][1]
    assert summary["covered_count"] == 7
    assert [m["id"] for m in summary["covered"]][:4] == ["a1", "u2", "a2-regen", "u3"]
    regen = summary["covered"][2]
    assert [(b["id"], b["current"]) for b in regen["branches"]] == [
        ("a2", False),
        ("a2-regen", True),
    ]
    other = api(demo_server, "/api/session?ns=default&id=deploy-incident&leaf=a2")
    assert [i["id"] for i in other["items"]] == ["u1", "a1", "u2", "a2"]
    assert not other["is_latest"]
    blocks = {b["label"]: b for b in api(demo_server, "/api/blocks?id=deploy-incident")["blocks"]}
    assert list(blocks) == ["soul", "memory", "knowledge", "skills"]
    memory = blocks["memory"]
    assert (memory["kind"], memory["max_tokens"], memory["stored"]) == ("writable", 200, True)
    assert memory["usage"] == round(memory["tokens"] / 200, 4) and memory["tokens"] > 0
    assert blocks["soul"]["kind"] == "readonly" and not blocks["soul"]["stored"]

    async def stored_prompt() -> str | None:
        ro = await open_read_only(str(demo_db))
        try:
            key = SessionKey(namespace="default", session_id="deploy-incident")
            return await ro.get_prompt(key)
        finally:
            await ro.aclose()

    prompt = api(demo_server, "/api/prompt?id=deploy-incident")["prompt"]
    assert prompt == run_async(stored_prompt()) and prompt.startswith("═" * 46 + "\nSOUL")
    hits = api(demo_server, "/api/search?ns=default&q=orders")["results"]
    # four messages say "orders"; replies to them match through their context field (the
    # parent's text) and rank below every own-word hit
    own = [h for h in hits if {"text": "orders", "hit": True} in h["segments"]]
    assert len(own) == 4 and hits[:4] == own
    only = api(demo_server, "/api/search?ns=default&q=orders&session=deploy-incident")["results"]
    assert {h["session_id"] for h in only} == {"deploy-incident"}


@pytest.mark.parametrize(
    ("path", "status", "text"),
    [
        ("/api/session?id=nope", 404, "no session 'nope'"),
        ("/api/session?id=deploy-incident&leaf=zz", 404, "no message 'zz'"),
        ("/api/session?id=deploy-incident&offset=x", 400, "must be an integer"),
        ("/api/session?id=deploy-incident&offset=-1", 400, "must not be negative"),
        ("/api/session", 400, "missing query parameter 'id'"),
        ("/api/blocks?id=nope", 404, "no session"),
        ("/api/sessions?ns=" + "n" * 300, 400, "at most 256 characters"),
        ("/api/session?id=a%00b", 400, "at most 256 characters"),
        ("/api/search?q=x&ns=" + "n" * 300, 400, "at most 256 characters"),
    ],
)
def test_api_errors_say_what_is_wrong(demo_server: str, path: str, status: int, text: str) -> None:
    got, _, body = request(demo_server, path)
    assert got == status
    assert text in json.loads(body)["error"]
    page_status, _, page = request(demo_server, path.removeprefix("/api"))
    assert page_status == status and text.replace("'", "&#39;") in page.decode()


def test_a_long_session_is_windowed(tmp_path: Path) -> None:
    """10,000 messages: the page renders one window (100 items), never the whole path."""
    from mindstore.store.sqlite import SQLiteStore

    db = tmp_path / "long.db"
    key = SessionKey(namespace="default", session_id="long")

    async def build() -> None:
        async with SQLiteStore(db) as store:
            text = [{"type": "text", "text": "hi"}]
            items = [
                NewMessage(
                    message={"id": f"m{i}", "role": "user", "parts": text},
                    parent=f"m{i - 1}" if i else None,
                    tokens=5,
                )
                for i in range(10_000)
            ]
            await store.append(key, items)
            await store.add_compaction(key, summary="middle", from_id="m100", to_id="m8999")

    run_async(build())
    with ViewerServer(str(db)) as server:
        t = time.monotonic()
        status, _, body = request(server.url, "/session?id=long")
        assert status == 200 and time.monotonic() - t < 30  # a bound against hangs only
        html = body.decode()
        assert html.count('<article class="msg') == 100  # the latest window
        assert "m9999" in html and "items 1002–1101 of 1101" in html
        status, _, body = request(server.url, "/session?id=long&offset=99")
        html = body.decode()  # m99, the summary (50 of its 8,900 messages listed), m9000…
        assert html.count('<article class="msg') == 100 - 1 + 50 and "8900 messages" in html
        view = api(server.url, "/api/session?id=long&offset=0&limit=5")
        assert [i.get("id", "summary") for i in view["items"]] == ["m0", "m1", "m2", "m3", "m4"]


def test_superseded_and_reverted_overlays_are_marked(tmp_path: Path) -> None:
    from mindstore.store.sqlite import SQLiteStore

    db = tmp_path / "overlays.db"
    key = SessionKey(namespace="default", session_id="s")

    async def build() -> None:
        async with SQLiteStore(db) as store:
            text = [{"type": "text", "text": "hello"}]
            await store.append(
                key,
                [
                    NewMessage(
                        message={"id": f"m{i}", "role": "user", "parts": text},
                        parent=f"m{i - 1}" if i else None,
                    )
                    for i in range(8)
                ],
            )
            c1 = await store.add_compaction(key, summary="first", from_id="m1", to_id="m2")
            await store.add_compaction(
                key, summary="second", from_id="m1", to_id="m4", supersedes=[c1.id]
            )
            c3 = await store.add_compaction(key, summary="third", from_id="m5", to_id="m6")
            await store.revert_compaction(key, c3.id)

    run_async(build())
    with ViewerServer(str(db)) as server:
        view = api(server.url, "/api/session?id=s")
        status = {c["id"]: (c["status"], c["applied"]) for c in view["compactions"]}
        assert status == {1: ("superseded", False), 2: ("active", True), 3: ("reverted", False)}
        assert [i.get("id", "summary") for i in view["items"]] == [
            "m0", "summary", "m5", "m6", "m7"
        ]  # fmt: skip
        html = request(server.url, "/session?id=s&raw=1")[2].decode()
        assert html.count('class="mark status-superseded"') == 2  # ⟦ at m1, ⟧ at m2
        assert html.count('class="mark status-reverted"') == 2  # ⟦ at m5, ⟧ at m6
        assert "superseded by #2" in html and "summarised by #2" in html


def test_a_block_without_max_tokens_shows_its_default_cap(tmp_path: Path) -> None:
    """Regression: a writable block configured without max_tokens showed "no budget", yet
    writes past DEFAULT_BLOCK_MAX_TOKENS are refused."""
    from mindstore.context.session_context import DEFAULT_BLOCK_MAX_TOKENS
    from mindstore.session import Session
    from mindstore.store.sqlite import SQLiteStore

    db = tmp_path / "cap.db"

    async def build() -> None:
        async with SQLiteStore(db) as store:
            s = (
                Session.create(store, "s")
                .with_context("notes")
                .with_context("tight", max_tokens=50)
                .with_cached_prompt()
            )
            await s.append_message({"role": "user", "parts": [{"type": "text", "text": "hi"}]})
            await s.replace_context_block("notes", "a few notes")
            await s.replace_context_block("tight", "short")
            await s.freeze_system_prompt()

    run_async(build())
    with ViewerServer(str(db)) as server:
        blocks = {b["label"]: b for b in api(server.url, "/api/blocks?id=s")["blocks"]}
        notes, tight = blocks["notes"], blocks["tight"]
        assert (notes["max_tokens"], notes["default_cap"]) == (DEFAULT_BLOCK_MAX_TOKENS, True)
        assert notes["usage"] == round(notes["tokens"] / DEFAULT_BLOCK_MAX_TOKENS, 4)
        assert (tight["max_tokens"], tight["default_cap"]) == (50, False)
        html = request(server.url, "/blocks?id=s")[2].decode()
    assert "no budget" not in html
    assert f"/ {DEFAULT_BLOCK_MAX_TOKENS} tokens" in html and html.count("default cap") == 1


# ---- security --------------------------------------------------------------------------------


def assert_security_headers(headers: dict[str, str]) -> None:
    assert headers["content-security-policy"] == CSP
    assert "default-src 'self'" in CSP and "frame-ancestors 'none'" in CSP
    assert "unsafe-inline" not in CSP and "unsafe-eval" not in CSP
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "no-referrer"
    assert headers["cache-control"] == "no-store"
    assert "server" not in headers


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/", 200),
        ("GET", "/session?id=deploy-incident", 200),
        ("GET", "/api/namespaces", 200),
        ("GET", "/static/viewer.js", 200),
        ("GET", "/nowhere", 404),
        ("POST", "/api/session?id=deploy-incident", 405),
        ("PUT", "/session?id=deploy-incident", 405),
        ("DELETE", "/api/sessions", 405),
    ],
)
def test_every_response_carries_the_security_headers(
    demo_server: str, method: str, path: str, status: int
) -> None:
    got, headers, _ = request(demo_server, path, method=method)
    assert got == status
    assert_security_headers(headers)


@pytest.mark.parametrize(
    "path",
    [
        "/static/../app.py",
        "/static/..%2fapp.py",
        "/static/%2e%2e%2f%2e%2e%2fpyproject.toml",
        "/static/templates",
        "/static/" + quote("/etc/passwd", safe=""),
        "/static/..\\readonly.py",
        "/static/",
    ],
)
def test_no_path_outside_the_fixed_static_files(demo_server: str, path: str) -> None:
    status, _, body = request(demo_server, path)
    assert status == 404, body[:200]
    assert b"import" not in body and b"root:" not in body


def test_static_files_are_served_with_their_types(demo_server: str) -> None:
    status, headers, body = request(demo_server, "/static/viewer.css")
    assert status == 200 and headers["content-type"].startswith("text/css")
    status, headers, body = request(demo_server, "/static/viewer.js")
    assert headers["content-type"].startswith("text/javascript") and b"use strict" in body


def test_without_a_token_only_loopback_host_headers_are_answered(demo_server: str) -> None:
    port = urlsplit(demo_server).port
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
        assert request(demo_server, "/", headers={"Host": host})[0] == 200
    for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.evil.example:{port}"):
        status, headers, _ = request(demo_server, "/api/namespaces", headers={"Host": host})
        assert status == 421  # a DNS-rebinding page cannot read the store
        assert_security_headers(headers)


@pytest.fixture(scope="module")
def token_server(demo_db: Path) -> Iterator[str]:
    with ViewerServer(str(demo_db), token=TOKEN) as server:
        yield server.url


def test_with_a_token_every_request_needs_it(token_server: str) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Cookie": "x=1"}):
        status, got, body = request(token_server, "/api/namespaces", headers=headers)
        assert status == 401 and b"namespaces" not in body
        assert_security_headers(got)
    assert request(token_server, "/static/viewer.css")[0] == 401
    ok_headers = [
        {"Authorization": f"Bearer {TOKEN}"},
        {"X-Mindstore-Token": TOKEN},
        {"Cookie": f"mindstore_token={TOKEN}"},
    ]
    for headers in ok_headers:
        status, _, body = request(token_server, "/api/namespaces", headers=headers)
        assert status == 200 and json.loads(body)["namespaces"] == ["default"]
    # any Host is accepted with a token (it is the credential, not the address)
    host = {"Host": "viewer.example", **ok_headers[0]}
    assert request(token_server, "/api/namespaces", headers=host)[0] == 200


def test_token_in_the_url_sets_a_strict_cookie_once(token_server: str) -> None:
    status, headers, _ = request(token_server, f"/session?id=deploy-incident&token={TOKEN}&raw=1")
    assert status == 303
    assert headers["location"] == "/session?id=deploy-incident&raw=1"
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"mindstore_token={TOKEN};")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert request(token_server, "/?token=wrong-token-0123456789")[0] == 401


def test_the_header_never_shows_a_password_or_a_full_path() -> None:
    assert display_name("/home/me/secret/agent.db") == "agent.db"
    assert display_name("sqlite:////srv/x/agent.db") == "agent.db"
    shown = display_name("postgresql://app:hunter2@db.internal:5433/memory?sslmode=require")
    assert shown == "postgresql://db.internal:5433/memory"


def test_bind_rules() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert is_loopback("127.8.9.10") and not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1")
    check_bind("127.0.0.1", None)
    check_bind("0.0.0.0", TOKEN)
    with pytest.raises(MindstoreError, match="without --token"):
        check_bind("0.0.0.0", None)
    with pytest.raises(MindstoreError, match="16 to 256"):
        check_bind("127.0.0.1", "short")
    with pytest.raises(MindstoreError, match="16 to 256"):
        check_bind("127.0.0.1", "has a space in it, sixteen+")


# ---- read-only -------------------------------------------------------------------------------


def test_the_facade_has_no_write_method() -> None:
    protocol = {n for n in dir(Store) if not n.startswith("_") and callable(getattr(Store, n))}
    assert protocol >= READ_METHODS
    writes = protocol - READ_METHODS - {"aclose"}
    assert {"append", "set_block", "put_prompt", "delete_session", "add_compaction"} <= writes
    for name in writes:
        assert not hasattr(ReadOnlyStore, name), name
    for name in READ_METHODS:
        assert callable(getattr(ReadOnlyStore, name))


def test_sqlite_refuses_writes_even_below_the_facade(tmp_path: Path) -> None:
    from mindstore.store.sqlite import SQLiteStore

    db = tmp_path / "s.db"

    async def go() -> None:
        async with SQLiteStore(db) as store:
            await store.append(
                SessionKey(namespace="n", session_id="s"),
                [NewMessage(message={"id": "m", "role": "user", "parts": []})],
            )
        before = digest(db)
        ro = await open_read_only(str(db))
        try:
            inner: Any = ro._store  # the wrapped store: the engine itself must refuse
            with pytest.raises(StoreError, match=r"readonly|read_only"):
                await inner.set_block(ScopeKey(namespace="n", session_id=None, label="x"), "y")
            assert await ro.list_namespaces() == ["n"]
        finally:
            await ro.aclose()
        assert digest(db) == before

    run_async(go())


def test_viewing_never_writes_the_store(demo_db: Path) -> None:
    before = digest(demo_db)
    with ViewerServer(str(demo_db)) as server:
        for path in (
            "/",
            "/sessions?ns=default",
            "/session?id=deploy-incident",
            "/session?id=deploy-incident&raw=1&leaf=a2",
            "/blocks?id=deploy-incident",
            "/prompt?id=deploy-incident",
            "/search?q=deploy*",
        ):
            assert request(server.url, path)[0] == 200
            assert request(server.url, path, method="POST")[0] == 405
    assert digest(demo_db) == before


def test_opening_refuses_what_it_cannot_view_without_writing(tmp_path: Path) -> None:
    from mindstore.store.sqlite import SQLiteStore
    from mindstore.store.sqlite.migrations import LATEST_VERSION

    missing = tmp_path / "missing.db"
    with pytest.raises(MindstoreError, match="no database at"):
        run_async(open_read_only(str(missing)))
    assert not missing.exists()
    with pytest.raises(MindstoreError, match="directory"):
        run_async(open_read_only(str(tmp_path)))
    with pytest.raises(MindstoreError, match="cannot view"):
        run_async(open_read_only(":memory:"))
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    before = digest(other)
    with pytest.raises(MindstoreError, match="not a mindstore database"):
        run_async(open_read_only(f"sqlite:///{other}"))
    assert digest(other) == before
    for version, error in ((LATEST_VERSION - 1, "older"), (LATEST_VERSION + 1, "upgrade")):
        db = tmp_path / f"v{version}.db"

        async def make(db: Path = db) -> None:
            async with SQLiteStore(db):
                pass

        run_async(make())
        with sqlite3.connect(db) as conn:
            conn.execute(f"PRAGMA user_version = {version}")
        conn.close()
        before = digest(db)
        with pytest.raises(SchemaVersionError, match=error):
            run_async(open_read_only(str(db)))
        assert digest(db) == before


# ---- the serve command -----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _mindstore(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mindstore", *args],
        capture_output=True,
        text=True,
        timeout=60,
        **kw,
    )


def test_serve_refuses_a_public_host_without_a_token(demo_db: Path) -> None:
    r = _mindstore("--db", str(demo_db), "serve", "--host", "0.0.0.0")
    assert r.returncode == 1 and "without --token" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_serve_never_creates_a_missing_database(tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    r = _mindstore("--db", str(missing), "serve", "--port", str(_free_port()))
    assert r.returncode == 1 and "no database at" in r.stderr and "Traceback" not in r.stderr
    assert not missing.exists()


@pytest.mark.parametrize("as_json", [False, True])
def test_serve_runs_the_viewer_until_stopped(demo_db: Path, as_json: bool) -> None:
    port = _free_port()
    flags = ["--json"] if as_json else []
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mindstore",
            "--db",
            str(demo_db),
            "serve",
            "--port",
            f"{port}",
            *flags,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                status, _, body = request(base, "/api/namespaces")
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "serve did not start"
                time.sleep(0.1)
        assert status == 200 and json.loads(body)["namespaces"] == ["default"]
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    if as_json:
        assert json.loads(out) == {"url": f"http://127.0.0.1:{port}/", "database": str(demo_db)}
    else:
        assert f"http://127.0.0.1:{port}/" in err and "read-only" in err


def test_demo_then_serve_shows_the_demo(tmp_path: Path) -> None:
    """`mindstore demo && mindstore serve`: with no database named and no ./mindstore.db,
    serve opens the database the demo just wrote to its temporary folder."""
    work, tmp = tmp_path / "work", tmp_path / "tmp"
    work.mkdir()
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    env.pop("MINDSTORE_DB", None)
    assert _mindstore("demo", cwd=work, env=env).returncode == 0
    (written,) = tmp.glob("mindstore-demo-*/demo.db")
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mindstore", "serve", "--port", f"{port}", "--json"],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                view = api(base, "/api/session?id=deploy-incident")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        assert [i["kind"] for i in view["items"]] == ["message", "compaction", "message", "message"]
        assert api(base, "/api/blocks?id=deploy-incident")["blocks"]
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    assert json.loads(out)["database"] == str(written)
    assert "showing the latest `mindstore demo` database" in err
    assert not (work / "mindstore.db").exists()


# ---- PostgreSQL ------------------------------------------------------------------------------


@pytest.mark.postgres
def test_the_api_over_postgresql() -> None:
    from backends import drop_schema, new_schema_name, postgres_url_or_skip
    from mindstore.session import Session
    from mindstore.store.postgres import PostgresStore

    url = postgres_url_or_skip()
    schema = new_schema_name()

    async def populate() -> None:
        store = await PostgresStore.open(url, schema=schema, min_size=1, max_size=2)
        try:
            s = Session.create(store, "chat", namespace="pg-ns")
            for mid, parent in (("u1", None), ("a1", "u1"), ("a1b", "u1")):
                msg = {"id": mid, "role": "user", "parts": [{"type": "text", "text": f"hi {mid}"}]}
                await s.append_message(msg, parent_id=parent)
            await store.add_compaction(s.key, summary="greeting", from_id="u1", to_id="a1b")
        finally:
            await store.aclose()

    async def refuses_writes() -> None:
        ro = await open_read_only(url, schema=schema, min_size=1, max_size=1)
        try:
            inner: Any = ro._store  # below the facade, the server refuses
            block = ScopeKey(namespace="pg-ns", session_id=None, label="x")
            with pytest.raises(StoreError):
                await inner.set_block(block, "y")
            assert await ro.get_block(block) is None
        finally:
            await ro.aclose()

    run_async(populate())
    try:
        run_async(refuses_writes())
        with ViewerServer(url, store_options={"schema": schema}) as server:
            assert api(server.url, "/api/namespaces")["namespaces"] == ["pg-ns"]
            view = api(server.url, "/api/session?ns=pg-ns&id=chat")
            assert [i["kind"] for i in view["items"]] == ["compaction"]
            assert [m["id"] for m in view["items"][0]["covered"]] == ["u1", "a1b"]
            other = api(server.url, "/api/session?ns=pg-ns&id=chat&leaf=a1")
            assert [i["id"] for i in other["items"]] == ["u1", "a1"]
            hits = api(server.url, "/api/search?ns=pg-ns&q=hi")["results"]
            assert {h["message_id"] for h in hits} == {"u1", "a1", "a1b"}
            assert request(server.url, "/session?ns=pg-ns&id=chat")[0] == 200
    finally:
        run_async(drop_schema(url, schema))
