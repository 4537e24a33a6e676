"""``mindstore import --format openai-chat|openai-responses|anthropic``: conversations in a model
API's shape become one new session, validated whole before the database is touched."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from mindstore.formats import to_anthropic, to_openai_chat, to_openai_responses
from mindstore.session import Session
from mindstore.store.sqlite import SQLiteStore

Invoke = Callable[..., Result]

CHAT = [
    {"role": "developer", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "18 C, sunny"},
    {"role": "assistant", "content": "It is 18 C and sunny in Paris."},
]


def history(db: Path, session: str, namespace: str = "default") -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        async with SQLiteStore(db) as store:
            return await Session.create(store, session, namespace=namespace).get_history()

    return asyncio.run(go())


def test_openai_chat_json_array(run: Invoke, tmp_path: Path) -> None:
    db, f = tmp_path / "m.db", tmp_path / "paris.json"
    f.write_text(json.dumps(CHAT), encoding="utf-8")
    result = run("--db", db, "--json", "import", "--format", "openai-chat", f)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["session_id"] == "paris"
    msgs = history(db, "paris")
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "assistant"]
    assert to_openai_chat(msgs)[1:] == CHAT[1:]
    assert to_openai_chat(msgs)[0] == {"role": "system", "content": "Be brief."}
    search = run("--db", db, "--json", "search", "sunny")
    assert search.exit_code == 0 and "paris" in search.stdout


def test_openai_responses_json_lines_into_a_named_session(run: Invoke, tmp_path: Path) -> None:
    items = [
        {"role": "user", "content": "go"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hm"}]},
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "1"},
        {"role": "assistant", "content": "done"},
    ]
    db, f = tmp_path / "m.db", tmp_path / "log.jsonl"
    f.write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    result = run(
        "--db", db, "--namespace", "u7", "import", "--format", "openai-responses", "--session",
        "s1", f,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    msgs = history(db, "s1", "u7")
    assert [m["role"] for m in msgs] == ["user", "assistant"]
    assert to_openai_responses(msgs) == items


def test_a_byte_order_mark_is_accepted(run: Invoke, tmp_path: Path) -> None:
    db, f = tmp_path / "m.db", tmp_path / "bom.json"
    f.write_bytes(b"\xef\xbb\xbf" + json.dumps(CHAT).encode())
    result = run("--db", db, "import", "--format", "openai-chat", f)
    assert result.exit_code == 0, result.output
    assert len(history(db, "bom")) == 4


def test_anthropic_request_object_with_system(run: Invoke, tmp_path: Path) -> None:
    request = {
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
        ],
    }
    db, f = tmp_path / "m.db", tmp_path / "a.json"
    f.write_text(json.dumps(request), encoding="utf-8")
    assert run("--db", db, "import", "--format", "anthropic", f).exit_code == 0
    assert to_anthropic(history(db, "a")) == ("Be brief.", request["messages"])


@pytest.mark.parametrize(
    ("fmt", "content", "error"),
    [
        ("openai-chat", '[{"role": "user", "content": "hi"},\n', "line 1: not valid JSON"),
        (
            "openai-chat",
            '{"role": "user", "content": "hi"}\n{"role": "tool", "tool_call_id": "zz", '
            '"content": "1"}\n',
            "line 2: messages[1]",
        ),
        ("openai-chat", '{"role": "user", "content": "hi"}\n{"role": "wizard"}\n', "line 2"),
        ("openai-responses", '[{"type": "bogus"}]', "bogus"),
        ("anthropic", '[{"role": "system", "content": "x"}]', "role"),
        ("anthropic", "", "empty"),
        ("openai-chat", "42", "expected a JSON array"),
        ("openai-chat", b'[{"role": "user",\n "content": "\xff"}]', "not UTF-8"),
    ],
)
def test_bad_files_are_one_line_and_write_nothing(
    run: Invoke, tmp_path: Path, fmt: str, content: str | bytes, error: str
) -> None:
    db, f = tmp_path / "m.db", tmp_path / "bad.json"
    ok = run("--db", db, "import", "--format", "openai-chat", "--session", "ok", _good(tmp_path))
    assert ok.exit_code == 0, ok.output
    before = db.read_bytes()
    if isinstance(content, bytes):
        f.write_bytes(content)
    else:
        f.write_text(content, encoding="utf-8")
    result = run("--db", db, "import", "--format", fmt, f)
    assert result.exit_code == 1
    assert error in result.stderr and "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1
    assert db.read_bytes() == before


def _good(tmp_path: Path) -> Path:
    f = tmp_path / "good.json"
    f.write_text(json.dumps(CHAT), encoding="utf-8")
    return f


def test_existing_session_is_refused_and_stdin_needs_a_session(run: Invoke, tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    f = _good(tmp_path)
    assert run("--db", db, "import", "--format", "openai-chat", f).exit_code == 0
    again = run("--db", db, "import", "--format", "openai-chat", f)
    assert again.exit_code == 1 and "already exists" in again.stderr
    stdin = run("--db", db, "import", "--format", "openai-chat", "-", input=json.dumps(CHAT))
    assert stdin.exit_code == 1 and "--session" in stdin.stderr
    named = run(
        "--db",
        db,
        "import",
        "--format",
        "openai-chat",
        "--session",
        "x",
        "-",
        input=json.dumps(CHAT),
    )
    assert named.exit_code == 0, named.output
    assert len(history(db, "x")) == 4
