"""``mindstore demo``: the scripted tour runs end to end, offline, in a few seconds."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from click.testing import Result

Invoke = Callable[..., Result]

REQUIRES = {
    "context": ["StaticProvider", "StoreSearchProvider", "FileSkillProvider"],
    "compaction": ["create_compact_function"],
    "sessions": ["SessionManager"],
}


def _available(name: str) -> bool:
    import mindstore

    try:
        getattr(mindstore, name)
    except (AttributeError, ImportError):
        return False
    return True


def test_demo_runs_and_every_section_succeeds(run: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "demo.db"
    started = time.perf_counter()
    result = run("demo", "--db", path, "--json")
    assert result.exit_code == 0, result.output
    assert time.perf_counter() - started < 15
    summary = json.loads(result.stdout)
    assert summary["database"] == str(path)
    sections = summary["sections"]
    assert set(sections) == set(REQUIRES) | {"history", "search"}
    for name, outcome in sections.items():
        assert "error" not in outcome, (name, outcome)
        if not outcome["ok"]:
            # A section may only be skipped while the feature it shows is missing from the build.
            assert not all(_available(n) for n in REQUIRES[name]), (name, outcome)
    history = summary["sections"]["history"]
    assert history["branches"] == ["a2", "a2-regen"] and history["latest_leaf"] == "a2-regen"
    search = summary["sections"]["search"]["results"]
    assert search['"orders table"'] == ["a2", "a2-regen"] or set(search['"orders table"']) == {
        "a2",
        "a2-regen",
    }
    assert {"u1", "a1"} <= set(search["deploy*"])
    ctx = sections["context"]
    if ctx["ok"]:
        assert ctx["prompt_stable"] is True
        assert set(ctx["tools"]) >= {
            "set_context",
            "search_context",
            "load_context",
            "unload_context",
        }
        assert not [r for r in ctx["results"].values() if r.startswith("Error")], ctx["results"]
        assert "runbook-rollback" in ctx["results"]["search_context"]
        assert "Timeline in UTC" in ctx["results"]["load_context"]
        assert "Deploys of v42+" in ctx["memory"]
    comp = sections["compaction"]
    if comp["ok"]:
        assert comp["after"] < comp["before"] == comp["stored"]
        assert comp["summary"].strip()
    sess = sections["sessions"]
    if sess["ok"]:
        assert len({sid for sid, _ in sess["hits"]}) == 2  # found in both conversations
        assert "Black Friday" in sess["session_search"]
    # The database it leaves behind is explorable with the other commands.
    sessions = json.loads(run("--db", path, "sessions", "--json").stdout)
    assert "deploy-incident" in {s["id"] for s in sessions}
    assert run("--db", path, "tree", "deploy-incident").exit_code == 0


def test_demo_human_output_and_default_temp_folder(run: Invoke) -> None:
    result = run("demo")
    assert result.exit_code == 0, result.output
    out = result.stdout
    for heading in ("A conversation is a tree", "Full-text search", "Explore it yourself"):
        assert heading in out
    # The tour draws the tree with the `tree` command's drawing (render.draw_tree).
    assert "branch 2 of 2" in out and "a2-regen" in out and "◀ latest" in out
    db = next(
        line.split("database: ", 1)[1].strip(" │")
        for line in out.splitlines()
        if "database: " in line
    )
    assert Path(db).exists()


def test_demo_refuses_an_existing_file(run: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "exists.db"
    path.write_bytes(b"")
    result = run("demo", "--db", path)
    assert result.exit_code == 1
    assert "already exists" in result.stderr


def test_demo_honours_the_global_db_option(run: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "global.db"
    result = run("--db", path, "demo", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["database"] == str(path)
    assert path.exists()
    refused = run("--db", "postgresql://127.0.0.1/x", "demo")
    assert refused.exit_code == 1
    assert "fresh SQLite file" in refused.stderr
