"""``mindstore.sync`` is typed: its checked-in stub is current and mypy sees real signatures.

The sync classes are generated at import time, so type checkers read
``src/mindstore/sync.pyi``, written by ``scripts/gen_sync_stub.py`` from the async classes. The
first test fails when an async signature changed and the stub was not regenerated; the others
run ``mypy --strict`` on a small user program (it passes) and on one that misuses the API (mypy
reports each misuse — it would report nothing if the classes were ``Any``).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "scripts" / "gen_sync_stub.py"


def generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_sync_stub", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_checked_in_stub_is_what_the_generator_writes() -> None:
    stub = ROOT / "src" / "mindstore" / "sync.pyi"
    assert stub.read_text(encoding="utf-8") == generator().render(), (
        "src/mindstore/sync.pyi is stale: run python scripts/gen_sync_stub.py"
    )


def test_every_twinned_method_is_in_the_stub() -> None:
    import mindstore.sync as msync

    text = (ROOT / "src" / "mindstore" / "sync.pyi").read_text(encoding="utf-8")
    for cls in (msync.SQLiteStore, msync.PostgresStore, msync.Session, msync.SessionManager):
        assert cls._twinned, cls
        section = text.split(f"\nclass {cls.__name__}(", 1)[1].split("\nclass ", 1)[0]
        for name, _ in cls._twinned:
            assert f"def {name}(" in section, (cls.__name__, name)


def run_mypy(tmp_path: Path, program: str) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` on ``program`` (saved as user_program.py), mindstore from src/."""
    (tmp_path / "user_program.py").write_text(program, encoding="utf-8")
    env = {**os.environ, "MYPYPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
         "--cache-dir", str(tmp_path / ".mypy_cache"), "user_program.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


GOOD = """\
    from typing import Any

    from mindstore.sync import SessionInfo, SessionManager, SQLiteStore, StaticProvider, ToolSet
    from mindstore.sync import Session


    def main() -> None:
        with SQLiteStore("agent.db") as store:
            session: Session = (
                Session.create(store, "chat-1", namespace="u")
                .with_context("soul", provider=StaticProvider("Be brief."))
                .with_context("memory", max_tokens=100)
            )
            fresh: bool = session.append_message(
                {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
            )
            history: list[dict[str, Any]] = session.get_history()
            prompt: str = session.freeze_system_prompt()
            tools: ToolSet = session.tools()
            result: str = tools.execute("set_context", {"label": "memory", "content": "x"})
            manager = SessionManager(store, namespace="u")
            info: SessionInfo = manager.create("second")
            names: list[str | None] = [s.name for s in manager.list(limit=5)]
            same: SQLiteStore | object = session.store
            print(fresh, history, prompt, result, info.id, names, same)
"""

BAD = """\
    from mindstore.sync import Session, SQLiteStore

    with SQLiteStore("agent.db") as store:
        session = Session.create(store, "chat-1")
        count: int = session.get_history()
        session.get_histroy()
        session.freeze_system_prompt(42)
        Session.create("not a store")
"""


def test_a_user_program_type_checks_under_mypy_strict(tmp_path: Path) -> None:
    done = run_mypy(tmp_path, textwrap.dedent(GOOD))
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_sees_the_real_signatures(tmp_path: Path) -> None:
    done = run_mypy(tmp_path, textwrap.dedent(BAD))
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert 'Incompatible types in assignment (expression has type "list[dict[str, Any]]"' in out
    assert '"Session" has no attribute "get_histroy"' in out
    assert 'Too many arguments for "freeze_system_prompt" of "Session"' in out
    assert 'Argument 1 to "create" of "Session" has incompatible type "str"' in out


def test_the_implementation_still_type_checks(tmp_path: Path) -> None:
    """With the stub present mypy reads sync.pyi for mindstore.sync, so the package run no
    longer checks sync.py itself; check a copy of it under another module name."""
    source = (ROOT / "src" / "mindstore" / "sync.py").read_text(encoding="utf-8")
    done = run_mypy(tmp_path, source)
    assert done.returncode == 0, done.stdout + done.stderr
