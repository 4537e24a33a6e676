"""CLI details found in a user trial (issue 30 item 5): a closed output pipe, an unknown
``search --session``, the ``--embedder`` spec's wording."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from mindstore.session import Session
from mindstore.store.sqlite import SQLiteStore

Invoke = Callable[..., Result]


@pytest.fixture(scope="module")
def big_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session whose history is far larger than a pipe's buffer."""
    path = tmp_path_factory.mktemp("pipe") / "big.db"

    async def fill() -> None:
        async with SQLiteStore(path) as store:
            s = Session.create(store, "big")
            for i in range(1500):
                text = f"line {i} " * 12
                await s.append_message({"role": "user", "parts": [{"type": "text", "text": text}]})

    asyncio.run(fill())
    return path


@pytest.mark.parametrize(
    "args",
    [["history", "big"], ["--json", "history", "big"], ["tree", "big"], ["search", "line"]],
)
def test_a_closed_output_pipe_exits_0_quietly(big_db: Path, args: list[str]) -> None:
    # `mindstore history big | head -1`: the reader goes away after one line.
    with subprocess.Popen(
        [sys.executable, "-m", "mindstore", "--db", str(big_db), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline()
        proc.stdout.close()
        err = proc.stderr.read()
        code = proc.wait(timeout=60)
    assert code == 0, err
    assert err == b""


def test_search_in_an_unknown_session_names_it(run: Invoke, db: Path) -> None:
    result = run("--db", db, "search", "orders", "--session", "nope")
    assert result.exit_code == 1
    assert "no session 'nope' in namespace 'default'" in result.stderr
    assert "no results" not in result.output
    both = run("--db", db, "search", "orders", "--session", "other", "--session", "ghost")
    assert both.exit_code == 1 and "'ghost'" in both.stderr
    # A known session without hits is still "no results".
    none = run("--db", db, "search", "zebra", "--session", "other")
    assert none.exit_code == 0 and "no results" in none.stderr


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("openai:local-model", "name them as openai:local-model@N"),
        ("openai:m@abc", "must be a positive whole number (openai:m@N)"),
        ("openai:m@0", "must be a positive whole number"),
        ("openai:@8", "name the model (openai:MODEL or openai:MODEL@N)"),
    ],
)
def test_embedder_spec_errors_speak_the_spec(
    run: Invoke, db: Path, monkeypatch: pytest.MonkeyPatch, spec: str, expected: str
) -> None:
    monkeypatch.delenv("MINDSTORE_EMBEDDER", raising=False)
    for command in (["embed"], ["search", "x", "--mode", "semantic"]):
        result = run("--db", db, *command, "--embedder", spec)
        assert result.exit_code == 1, result.output
        assert expected in result.stderr
        assert "dimensions=N" not in result.stderr  # the Python keyword, not the CLI's spelling
        assert len(result.stderr.strip().splitlines()) == 1
