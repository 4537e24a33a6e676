"""``mindstore mcp`` tested as an MCP client uses it: the official SDK's client talks to a real
``python -m mindstore … mcp`` subprocess over stdio (and over streamable HTTP), on a real SQLite
file; afterwards the file is opened directly to check what the server wrote."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.exceptions import MCPError

from mindstore import Session, SQLiteStore
from mindstore.store.base import ScopeKey, SessionKey

CONFIG = """\
session: desk
blocks:
  - label: soul
    kind: readonly
    text: You are a terse assistant.
  - label: guide
    kind: readonly
    file: guide.md
  - label: memory
    kind: writable
    description: Important facts
    max_tokens: 40
    scope: namespace
  - label: knowledge
    kind: searchable
    description: Searchable knowledge base
    scope: namespace
  - label: skills
    kind: skills
    root: skills
"""


@pytest.fixture
def setup(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "guide.md").write_text("Always answer in English.", encoding="utf-8")
    (tmp_path / "skills").mkdir()
    (tmp_path / "skills" / "deploy.md").write_text("# Deploy\n\nRun make ship.", "utf-8")
    (tmp_path / "secret.md").write_text("TOPSECRET outside the root", encoding="utf-8")
    (tmp_path / "mcp.yaml").write_text(CONFIG, encoding="utf-8")
    db = tmp_path / "memory.db"

    async def seed() -> None:  # an earlier conversation for session_search to find
        async with SQLiteStore(str(db)) as store:
            s = Session.create(store, "yesterday", namespace="team")
            await s.append_message(
                {
                    "id": "u1",
                    "role": "user",
                    "parts": [{"type": "text", "text": "The VPN password rotates every Monday"}],
                }
            )

    asyncio.run(seed())
    return {"db": db, "config": tmp_path / "mcp.yaml", "dir": tmp_path}


def server_args(setup: dict[str, Any], *extra: str) -> list[str]:
    return [
        "-m",
        "mindstore",
        "--db",
        str(setup["db"]),
        "--namespace",
        "team",
        "mcp",
        "--config",
        str(setup["config"]),
        *extra,
    ]


def text(result: Any) -> str:
    return "".join(c.text for c in result.content)


async def exercise(client: Client) -> None:
    """What every transport must do: tools, a write, a search, resources, bad input."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {
        "set_context",
        "load_context",
        "unload_context",
        "search_context",
        "session_search",
        "append_message",
        "get_history",
    }
    assert tools["set_context"].input_schema["required"] == ["label", "content"]

    # The prompt resource renders every block and is frozen from its first read.
    prompt = (await client.read_resource("mindstore://prompt")).contents[0].text
    assert "You are a terse assistant." in prompt and "Always answer in English." in prompt
    assert "MEMORY (Important facts) [0% — 0/40 tokens] [writable]" in prompt
    assert "- deploy" in prompt

    ok = await client.call_tool("set_context", {"label": "memory", "content": "User likes tea"})
    assert not ok.is_error and text(ok).startswith("Written to memory. Usage:")
    indexed = await client.call_tool(
        "set_context",
        {
            "label": "knowledge",
            "content": "Restart the ingest worker with systemctl restart ingest.",
            "metadata": {"title": "Ingest runbook"},
        },
    )
    assert text(indexed) == 'Indexed "ingest-runbook" in knowledge.'
    found = await client.call_tool("search_context", {"label": "knowledge", "query": "ingest"})
    assert not found.is_error and "systemctl restart ingest" in text(found)
    past = await client.call_tool("session_search", {"query": "VPN password"})
    assert "rotates every Monday" in text(past)
    loaded = await client.call_tool("load_context", {"label": "skills", "key": "deploy"})
    assert "Run make ship." in text(loaded)

    block = (await client.read_resource("mindstore://blocks/memory")).contents[0].text
    assert block == "User likes tea"
    again = (await client.read_resource("mindstore://prompt")).contents[0].text
    assert again == prompt  # writes never change the frozen prompt
    uris = {str(r.uri) for r in (await client.list_resources()).resources}
    assert {"mindstore://prompt", "mindstore://blocks/memory", "mindstore://blocks/skills"} <= uris

    # Bad input: tool errors, never a crash.
    bad = [
        ("set_context", {"label": "nope", "content": "x"}, "must be one of"),
        ("set_context", {"label": "memory", "content": "word " * 200}, "exceeds maxTokens"),
        ("set_context", {"label": "soul", "content": "x"}, "must be one of"),
        ("set_context", {"label": "memory"}, "content"),
        ("load_context", {"label": "skills", "key": "../secret"}, "Not found"),
        ("load_context", {"label": "skills", "key": "/etc/passwd"}, "Not found"),
        ("load_context", {"label": "skills", "key": "..%2Fsecret"}, "Not found"),
        ("search_context", {"label": "memory", "query": "x"}, "must be one of"),
        ("no_such_tool", {}, "unknown tool"),
    ]
    for name, args, expected in bad:
        result = await client.call_tool(name, args)
        assert result.is_error, (name, args, text(result))
        assert expected in text(result), text(result)
        assert "TOPSECRET" not in text(result)
    with pytest.raises(MCPError, match="no context block"):
        await client.read_resource("mindstore://blocks/unknown")
    with pytest.raises(MCPError, match="unknown resource"):
        await client.read_resource("file:///etc/passwd")
    # Still serving, and the failed writes changed nothing.
    assert (await client.read_resource("mindstore://blocks/memory")).contents[0].text == (
        "User likes tea"
    )
    await exercise_conversation(client, prompt)


async def exercise_conversation(client: Client, prompt: str) -> None:
    """The conversation half: record turns, read them back as tools, resources and prompt."""
    said = await client.call_tool("append_message", {"role": "user", "text": "We ship on Fridays"})
    assert not said.is_error and text(said).startswith("Appended msg_") and "desk" in text(said)
    reply = {"role": "assistant", "text": "Noted: Friday releases.", "id": "a1"}
    assert text(await client.call_tool("append_message", reply)) == "Appended a1 to session desk."
    again = await client.call_tool("append_message", reply)  # a retry changes nothing
    assert not again.is_error and "already stored" in text(again)
    history = text(await client.call_tool("get_history", {}))
    assert history == "[user] We ship on Fridays\n---\n[assistant] Noted: Friday releases."
    last = text(await client.call_tool("get_history", {"limit": 1}))
    assert last == "[assistant] Noted: Friday releases."
    found = await client.call_tool("session_search", {"query": "ship Fridays"})
    assert "· user · desk] We ship on Fridays" in text(found)  # session_search's header
    for name, args, expected in [
        ("append_message", {"role": "tool", "text": "x"}, "must be one of"),
        ("append_message", {"role": "user"}, "missing required argument 'text'"),
        ("append_message", {"role": "user", "text": "x", "id": "compaction_1"}, "compaction_"),
        ("get_history", {"limit": 0}, "at least 1"),
        ("get_history", {"limit": "all"}, "must be of type integer"),
    ]:
        bad = await client.call_tool(name, args)
        assert bad.is_error and expected in text(bad), (name, text(bad))

    templates = (await client.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == [
        "mindstore://sessions/{session_id}/history",
        "mindstore://sessions/{session_id}",
        "mindstore://blocks/{label}",
    ]
    uris = {str(r.uri) for r in (await client.list_resources()).resources}
    assert {"mindstore://sessions/desk/history", "mindstore://sessions/desk"} <= uris
    read = (await client.read_resource("mindstore://sessions/desk/history")).contents[0]
    messages = json.loads(read.text)
    assert read.mime_type == "application/json"
    assert [(m["role"], m["parts"][0]["text"]) for m in messages] == [
        ("user", "We ship on Fridays"),
        ("assistant", "Noted: Friday releases."),
    ]
    info = json.loads((await client.read_resource("mindstore://sessions/desk")).contents[0].text)
    assert info["id"] == "desk" and info["message_count"] == 2
    # another session of the namespace reads too; nothing outside it does
    other = (await client.read_resource("mindstore://sessions/yesterday/history")).contents[0]
    assert "rotates every Monday" in json.loads(other.text)[0]["parts"][0]["text"]
    with pytest.raises(MCPError, match="no session 'nobody' in namespace 'team'"):
        await client.read_resource("mindstore://sessions/nobody/history")

    prompts = (await client.list_prompts()).prompts
    assert [p.name for p in prompts] == ["system_prompt"]
    got = await client.get_prompt("system_prompt")
    assert [(m.role, m.content.text) for m in got.messages] == [("user", prompt)]  # type: ignore[union-attr]
    with pytest.raises(MCPError, match="unknown prompt"):
        await client.get_prompt("nope")


async def check_stored(db: Path, session_id: str) -> None:
    async with SQLiteStore(str(db)) as store:
        memory = await store.get_block(ScopeKey(namespace="team", session_id=None, label="memory"))
        assert memory == "User likes tea"
        entry = await store.get_entry(
            ScopeKey(namespace="team", session_id=None, label="knowledge"), "ingest-runbook"
        )
        assert entry is not None
        states = await store.get_skill_states(SessionKey(namespace="team", session_id=session_id))
        assert [(s.label, s.key, s.loaded) for s in states] == [("skills", "deploy", True)]
        # the session it served is registered: `mindstore sessions`/`blocks` find it
        assert await store.get_session(SessionKey(namespace="team", session_id=session_id))


async def test_stdio_server_as_a_client_uses_it(setup: dict[str, Any]) -> None:
    params = StdioServerParameters(command=sys.executable, args=server_args(setup))
    async with asyncio.timeout(120), Client(params) as client:
        await exercise(client)
    await check_stored(setup["db"], "desk")  # the config's session


async def test_session_option_overrides_the_config(setup: dict[str, Any]) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=server_args(setup, "--session", "other")
    )
    async with asyncio.timeout(120), Client(params) as client:
        await client.call_tool("load_context", {"label": "skills", "key": "deploy"})
        desc = (await client.list_resources()).resources[0].description or ""
        assert "'other'" in desc
    async with SQLiteStore(str(setup["db"])) as store:
        states = await store.get_skill_states(SessionKey(namespace="team", session_id="other"))
        assert [s.key for s in states] == ["deploy"]


def non_loopback_address() -> str | None:
    """An IPv4 address of this machine other than loopback, if it has one (no packet is sent:
    connecting a UDP socket only picks the outgoing interface)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
        except OSError:
            return None
        address = str(s.getsockname()[0])
    return None if address.startswith("127.") else address


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def start_http(
    setup: dict[str, Any], *args: str, env: dict[str, str] | None = None
) -> tuple[asyncio.subprocess.Process, int, list[str]]:
    """Start ``mindstore mcp --http`` on a free port; return it, the port and its first stderr
    lines (the URL and the token line), read once it listens."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *server_args(setup, "--http", "--port", str(port), *args),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    assert proc.stderr is not None
    lines = [
        (await asyncio.wait_for(proc.stderr.readline(), 60)).decode().strip() for _ in range(2)
    ]
    deadline = time.monotonic() + 60
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            await writer.wait_closed()
            return proc, port, lines
        except OSError:
            assert proc.returncode is None, f"the HTTP server exited: {lines}"
            assert time.monotonic() < deadline, "the HTTP server did not start"
            await asyncio.sleep(0.1)


async def stop(proc: asyncio.subprocess.Process) -> bytes:
    proc.terminate()
    _, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    return err


def post_status(port: int, headers: dict[str, str]) -> int:
    """The status of a bare MCP initialize POST with ``headers``."""
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        if e.code == 401:
            assert e.headers.get("WWW-Authenticate", "").startswith("Bearer")
        return int(e.code)


@contextlib.asynccontextmanager
async def client_with(port: int, token: str) -> AsyncIterator[Client]:
    """The SDK client sending ``Authorization: Bearer <token>`` (its HTTP client is ours to
    close)."""
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


async def test_http_server_binds_loopback_and_requires_its_token(setup: dict[str, Any]) -> None:
    proc, port, lines = await start_http(setup)
    try:
        assert lines[0].startswith("mindstore MCP server: http://127.0.0.1:")
        assert lines[1].startswith("every request needs: Authorization: Bearer ")
        token = lines[1].rsplit(" ", 1)[1]
        assert len(token) >= 40  # generated: 256 random bits
        external = non_loopback_address()
        if external is not None:  # bound to 127.0.0.1 only: another interface refuses
            with pytest.raises(OSError):
                await asyncio.open_connection(external, port)
        # Any local process that does not know the token is refused before MCP sees it.
        for headers in (
            {},
            {"Authorization": "Bearer wrong-token-of-enough-length"},
            {"Authorization": f"Basic {token}"},
            {"Authorization": f"Bearer {token}x"},
            {"Authorization": f"bearer  {token}"},
        ):
            assert await asyncio.to_thread(post_status, port, headers) == 401, headers
        async with asyncio.timeout(120), client_with(port, token) as client:
            await exercise(client)
    finally:
        await stop(proc)
    await check_stored(setup["db"], "desk")


@pytest.mark.parametrize("via", ["option", "environment"])
async def test_http_server_with_a_given_token(setup: dict[str, Any], via: str) -> None:
    token = "a-given-token_0123456789"
    args = ("--token", token) if via == "option" else ()
    env = {"MINDSTORE_MCP_TOKEN": token} if via == "environment" else {}
    proc, port, lines = await start_http(setup, *args, env=env)
    try:
        assert token not in "\n".join(lines)  # a given token is not echoed
        assert await asyncio.to_thread(post_status, port, {}) == 401
        async with asyncio.timeout(120), client_with(port, token) as client:
            assert (await client.read_resource("mindstore://blocks/soul")).contents
    finally:
        err = await stop(proc)
    assert token.encode() not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--token", "short"], "16 to 256 characters"),
        (["--token", "has spaces in it but long enough"], "16 to 256 characters"),
        (["--token", "a-given-token_0123456789"], "--token is for --http"),
    ],
)
def test_bad_token_is_a_usage_error(tmp_path: Path, args: list[str], message: str) -> None:
    db = tmp_path / "never.db"
    http = [] if "--token is for --http" in message else ["--http"]
    done = subprocess.run(
        [sys.executable, "-m", "mindstore", "--db", str(db), "mcp", *http, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], lines
    assert not db.exists()


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("c.yaml", "blocks: [{label: m, kind: nope}]", "'kind' must be one of"),
        ("c.yaml", "blocks: [{label: m, kind: writable, maxtokens: 3}]", "unknown key 'maxtokens'"),
        ("c.yaml", "blocks: [{label: m, kind: writable, max_tokens: -1}]", "positive integer"),
        ("c.yaml", "blocks: [{label: m, kind: readonly}]", "exactly one of 'text' or 'file'"),
        ("c.yaml", "blocks: [{label: m, kind: readonly, file: missing.md}]", "cannot read file"),
        ("c.yaml", "blocks: [{label: s, kind: skills, root: nowhere}]", "is not a folder"),
        ("c.yaml", "blocks: [{label: m, kind: skills}]", "needs 'root'"),
        ("c.yaml", "blocks: [{label: a, kind: writable}, {label: a, kind: writable}]", "duplicate"),
        ("c.yaml", "blocks: {label: a}", "'blocks' must be a list"),
        ("c.yaml", "blocks: [\n  - label: [unclosed", "not valid YAML"),
        ("c.toml", "[[blocks]]\nlabel = 'm'\nkind = 'writable'\nscope = 'everywhere'\n", "scope"),
        ("c.toml", "blocks = [", "not valid TOML"),
        ("c.json", "{}", "use a .yaml, .yml or .toml file"),
        ("absent.yaml", None, "cannot read config"),
    ],
)
def test_bad_config_is_one_line_exit_2(
    tmp_path: Path, name: str, content: str | None, message: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content, encoding="utf-8")
    db = tmp_path / "never.db"
    done = subprocess.run(
        [sys.executable, "-m", "mindstore", "--db", str(db), "mcp", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    assert message in lines[0]
    assert not db.exists()  # nothing opened or created


def test_valid_toml_config(tmp_path: Path) -> None:
    from mindstore.integrations.mcp_config import load_config

    (tmp_path / "skills").mkdir()
    path = tmp_path / "c.toml"
    path.write_text(
        'session = "s"\ncached_prompt = true\n'
        '[[blocks]]\nlabel = "memory"\nkind = "writable"\nmax_tokens = 100\n'
        '[[blocks]]\nlabel = "skills"\nkind = "skills"\nroot = "skills"\nkeys = ["a"]\n'
        '[[blocks]]\nlabel = "remote"\nkind = "skills"\nroot = "s3://bucket/skills"\n'
        '[blocks.storage_options]\nendpoint_url = "http://127.0.0.1:9000"\n',
        encoding="utf-8",
    )
    config = load_config(path)
    assert config.session == "s" and config.cached_prompt
    assert [(b.label, b.kind) for b in config.blocks] == [
        ("memory", "writable"),
        ("skills", "skills"),
        ("remote", "skills"),
    ]
    assert config.blocks[1].root == str(tmp_path / "skills") and config.blocks[1].keys == ("a",)
    assert config.blocks[2].storage_options == {"endpoint_url": "http://127.0.0.1:9000"}


def test_bad_session_or_namespace_is_a_usage_error(tmp_path: Path) -> None:
    db = tmp_path / "never.db"
    for args in (["mcp", "--session", ""], ["--namespace", "", "mcp"], ["mcp", "--port", "9"]):
        done = subprocess.run(
            [sys.executable, "-m", "mindstore", "--db", str(db), *args],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 2 and done.stderr.startswith("Error: "), done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    assert not db.exists()


async def test_default_blocks_and_cached_prompt_in_process(tmp_path: Path) -> None:
    """The SDK's in-process client against create_server: without a config the server offers
    a namespace-wide memory and knowledge base; cached_prompt persists the frozen prompt so a
    restarted server (a new Server object) serves the same prompt after memory changed."""
    from mindstore.integrations.mcp import create_server
    from mindstore.integrations.mcp_config import DEFAULT_BLOCKS, ServerConfig

    async with SQLiteStore(str(tmp_path / "m.db")) as store:
        plain = create_server(
            store, ServerConfig(blocks=DEFAULT_BLOCKS), namespace="n", session_id="s"
        )
        async with Client(plain) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == {
                "set_context",
                "search_context",
                "session_search",
                "append_message",
                "get_history",
            }
            await client.call_tool("set_context", {"label": "memory", "content": "likes tea"})
            await client.call_tool("append_message", {"role": "user", "text": "hi"})
            got = await client.read_resource("mindstore://sessions/s/history")
            assert json.loads(got.contents[0].text)[0]["parts"] == [{"type": "text", "text": "hi"}]
            info = await client.read_resource("mindstore://sessions/s")
            assert json.loads(info.contents[0].text)["message_count"] == 1
        # memory is namespace-wide: another session of the namespace sees it
        other = create_server(
            store, ServerConfig(blocks=DEFAULT_BLOCKS), namespace="n", session_id="t"
        )
        async with Client(other) as client:
            got = await client.read_resource("mindstore://blocks/memory")
            assert got.contents[0].text == "likes tea"
            # a served session with no session record yet (no CLI registered it, nothing
            # appended): its history is empty, its SessionInfo is refused with a reason
            empty = await client.read_resource("mindstore://sessions/t/history")
            assert json.loads(empty.contents[0].text) == []
            with pytest.raises(MCPError, match="not registered"):
                await client.read_resource("mindstore://sessions/t")

        cached = ServerConfig(blocks=DEFAULT_BLOCKS, cached_prompt=True)
        first = create_server(store, cached, namespace="n", session_id="c")
        async with Client(first) as client:
            prompt = (await client.read_resource("mindstore://prompt")).contents[0].text
            assert "likes tea" in prompt
            await client.call_tool("set_context", {"label": "memory", "content": "now coffee"})
        restarted = create_server(store, cached, namespace="n", session_id="c")
        async with Client(restarted) as client:
            again = (await client.read_resource("mindstore://prompt")).contents[0].text
        assert again == prompt
        uncached = create_server(
            store, ServerConfig(blocks=DEFAULT_BLOCKS), namespace="n", session_id="c2"
        )
        async with Client(uncached) as client:
            fresh = (await client.read_resource("mindstore://prompt")).contents[0].text
        assert "now coffee" in fresh
