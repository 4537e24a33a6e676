"""Terminal escapes in stored text (issue 14 item 3): human output shows control characters
visibly (ESC as ``␛``), so a stored ANSI/OSC sequence cannot recolour, retitle or clear the
user's terminal; ``--json`` prints the stored text exactly."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from mindstore.cli.render import visible
from mindstore.session import Session
from mindstore.store.base import ScopeKey, SessionKey
from mindstore.store.sqlite import SQLiteStore

Invoke = Callable[..., Result]

CLEAR = "\x1b[2J\x1b[H"
TITLE = "\x1b]0;pwned\x07"
CSI = "\x9b31m"  # the one-byte C1 form of ESC [
BIDI = "\u202e"
EVIL = f"deploy {CLEAR}{TITLE}{CSI}{BIDI}done"
SID = "s\x1b[31m"


@pytest.fixture
def evil_db(tmp_path: Path) -> Path:
    path = tmp_path / "evil.db"

    async def fill() -> None:
        async with SQLiteStore(path) as store:
            key = SessionKey(namespace="default", session_id=SID)
            await store.create_session(key, name=f"name {TITLE}", model=f"m{CLEAR}")
            s = Session.create(store, SID)
            await s.append_message(
                {"id": "u\x1b[1m", "role": "user", "parts": [{"type": "text", "text": EVIL}]}
            )
            await s.append_message(
                {
                    "id": "a1",
                    "role": "assistant",
                    "parts": [
                        {
                            "type": "tool-run",
                            "toolCallId": "c1",
                            "state": "output-available",
                            "input": {"cmd": EVIL},
                            "output": EVIL,
                        }
                    ],
                }
            )
            await store.set_block(ScopeKey(namespace="default", session_id=SID, label="m"), EVIL)
            await store.put_prompt(key, f"line one {CLEAR}\nline two\t{TITLE}", overwrite=True)

    asyncio.run(fill())
    return path


HUMAN = [
    ["history", SID],
    ["history", SID, "--raw"],
    ["tree", SID],
    ["search", "deploy"],
    ["sessions"],
    ["blocks", SID],
    ["prompt", SID],
]


@pytest.mark.parametrize("args", HUMAN, ids=lambda a: a[0] + (" --raw" if "--raw" in a else ""))
def test_human_output_shows_controls_visibly(run: Invoke, evil_db: Path, args: list[str]) -> None:
    result = run("--db", evil_db, *args)
    assert result.exit_code == 0, result.stderr
    out = result.stdout + result.stderr
    for bad in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert bad not in out, (bad, out)
    assert "␛" in out


def test_prompt_keeps_its_lines(run: Invoke, evil_db: Path) -> None:
    out = run("--db", evil_db, "prompt", SID).stdout
    assert out == "line one ␛[2J␛[H\nline two\t␛]0;pwned␇\n"


@pytest.mark.parametrize(
    "args",
    [["history", SID], ["search", "deploy"], ["blocks", SID], ["prompt", SID], ["sessions"]],
    ids=lambda a: a[0],
)
def test_json_stays_exact(run: Invoke, evil_db: Path, args: list[str]) -> None:
    result = run("--db", evil_db, "--json", *args)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert any("\x1b" in s for s in _strings(data))  # JSON escapes it; the value is exact
    if args[0] == "history":
        assert data[0]["parts"][0]["text"] == EVIL and data[0]["id"] == "u\x1b[1m"
    if args[0] == "blocks":
        assert data[0]["content"] == EVIL


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_visible_is_one_character_per_c0_control() -> None:
    assert visible("a\x1b[0m\x00\x7f") == "a␛[0m␀\u2421"
    assert visible("x\ty\nz") == "x␉y␊z"
    assert visible("x\ty\nz", keep_lines=True) == "x\ty\nz"
    assert visible("\x9b\u202e\u2066") == "\\x9b\\u202e\\u2066"
    assert visible("plain café 日本") == "plain café 日本"


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_terminal_that_cannot_encode_the_text_gets_escapes_not_a_traceback(
    db: Path, encoding: str
) -> None:
    """Stored text the locale cannot encode: human output escapes it, machine output (export,
    --json) stays UTF-8 whatever the locale."""
    import os
    import subprocess
    import sys

    def mindstore(*args: str, enc: str = encoding) -> subprocess.CompletedProcess[bytes]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MINDSTORE_")}
        env["PYTHONIOENCODING"] = enc
        return subprocess.run(
            [sys.executable, "-m", "mindstore", "--db", str(db), *args],
            capture_output=True,
            timeout=60,
            env=env,
        )

    tree = mindstore("tree", "chat")  # the tool marks (⚙, ◀) are not ASCII
    assert tree.returncode == 0 and b"Traceback" not in tree.stderr, tree.stderr
    assert b"\\u2699" in tree.stdout or b"\\xe2" in tree.stdout or b"\\u25c0" in tree.stdout
    exported = mindstore("export", "chat")
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout == mindstore("export", "chat", enc="utf-8").stdout
    as_json = mindstore("--json", "history", "chat", "--raw")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout.decode("utf-8"))[0]["id"] == "u1"


@pytest.mark.parametrize("args", HUMAN, ids=lambda a: a[0] + (" --raw" if "--raw" in a else ""))
def test_rich_terminal_output_shows_controls_visibly(
    run: Invoke, evil_db: Path, args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a terminal (rich, colours on) the stored sequences are shown, never sent: rich's own
    colour codes appear, the stored clear-screen / retitle / C1 sequences do not."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "300")
    result = run("--db", evil_db, *args)
    assert result.exit_code == 0, result.stderr
    out = result.stdout + result.stderr
    if args[0] != "prompt":  # prompt is printed verbatim (visible), not through rich
        assert "\x1b[" in out  # rich is colouring: this really is the terminal path
    for bad in ("\x1b[2J", "\x1b[H", "\x1b]0;", "\x07", "\x9b", "\u202e"):
        assert bad not in out, (bad, out)
    assert "␛" in out
