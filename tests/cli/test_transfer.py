"""``mindstore export`` / ``mindstore import``: lossless round trip, validation before writing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from mindstore.formats.export import parse_export
from mindstore.store.base import NewMessage, SessionKey
from mindstore.store.sqlite import SQLiteStore

Invoke = Callable[..., Result]


def export_text(run: Invoke, db: Path, session: str = "chat", *extra: str) -> str:
    result = run("--db", db, *extra, "export", session)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_export_contains_everything(run: Invoke, db: Path) -> None:
    records = [json.loads(line) for line in export_text(run, db).splitlines()]
    header = records[0]
    assert header["kind"] == "mindstore-export" and header["version"] == 1
    assert header["session"]["name"] == "Deploy chat"
    assert header["session"]["input_tokens"] == 100 and header["session"]["estimated_cost"] == 0.5
    kinds = [r["kind"] for r in records[1:]]
    assert kinds.count("message") == 5 == header["messages"]
    messages = [r for r in records if r["kind"] == "message"]
    assert [(m["message"]["id"], m["parent_id"]) for m in messages] == [
        ("u1", None),
        ("a1", "u1"),
        ("u2", "a1"),
        ("a2", "u2"),
        ("a2b", "u2"),
    ]
    comps = [r for r in records if r["kind"] == "compaction"]
    assert [(c["ref"], c["superseded_by"], c["reverted"]) for c in comps] == [
        (1, 2, False),
        (2, None, False),
        (3, None, True),
    ]
    blocks = {(r["scope"], r["label"]): r["content"] for r in records if r["kind"] == "block"}
    assert blocks == {("session", "memory"): "Likes tea", ("namespace", "profile"): "Name: Ada"}
    skills = {r["key"]: r for r in records if r["kind"] == "skill"}
    assert skills["runbook"]["loaded"] is False and skills["runbook"]["unloaded_after"] == "a2b"
    assert skills["api"]["loaded"] is True
    assert records[-1] == {"kind": "prompt", "prompt": "SYSTEM PROMPT\nline two"}


def test_round_trip_into_an_empty_store_is_identical(run: Invoke, db: Path, tmp_path: Path) -> None:
    first = tmp_path / "first.jsonl"
    assert run("--db", db, "export", "chat", "-o", first).exit_code == 0
    fresh = tmp_path / "fresh.db"
    imported = run("--db", fresh, "import", first, "--namespace-blocks")
    assert imported.exit_code == 0, imported.output
    assert "imported 'chat'" in imported.stderr
    second = tmp_path / "second.jsonl"
    assert run("--db", fresh, "export", "chat", "-o", second).exit_code == 0
    assert first.read_bytes() == second.read_bytes()
    # And the imported store behaves the same, not just exports the same.
    for args in (["history", "chat", "--json"], ["tree", "chat", "--json"], ["prompt", "chat"]):
        a, b = run("--db", db, *args).stdout, run("--db", fresh, *args).stdout
        if args[0] == "tree":
            strip = lambda s: [  # noqa: E731 - overlay ids are store-wide, not portable
                {k: v for k, v in n.items() if k != "compacted_by"} for n in json.loads(s)["nodes"]
            ]
            assert strip(a) == strip(b)
        elif args[0] == "history":
            assert [m["parts"] for m in json.loads(a)] == [m["parts"] for m in json.loads(b)]
        else:
            assert a == b
    hits = json.loads(run("--db", fresh, "search", "orders", "--json").stdout)
    assert [h["message_id"] for h in hits] == ["a2b"]


def test_import_from_stdin_under_another_id_and_namespace(run: Invoke, db: Path) -> None:
    text = export_text(run, db)
    result = run(
        "--db",
        db,
        "--namespace",
        "copy",
        "import",
        "-",
        "--session",
        "chat2",
        "--namespace-blocks",
        "--json",
        input=text,
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "namespace": "copy",
        "session_id": "chat2",
        "messages": 5,
        "compactions": 3,
        "blocks": 2,
    }
    ids = [
        m["id"]
        for m in json.loads(
            run("--db", db, "--namespace", "copy", "history", "chat2", "--raw", "--json").stdout
        )
    ]
    assert ids == ["u1", "a1", "u2", "a2b"]


def test_import_into_an_existing_session_is_refused(run: Invoke, db: Path) -> None:
    text = export_text(run, db)
    result = run("--db", db, "import", "-", "--namespace-blocks", input=text)
    assert result.exit_code == 1
    assert "already exists" in result.stderr and "--session" in result.stderr


def test_conflicting_namespace_block_is_refused_and_nothing_written(run: Invoke, db: Path) -> None:
    text = export_text(run, db).replace("Name: Ada", "Name: Grace")
    result = run("--db", db, "import", "-", "--session", "fresh", "--namespace-blocks", input=text)
    assert result.exit_code == 1 and "profile" in result.stderr
    assert run("--db", db, "history", "fresh").exit_code == 1


def _lines(run: Invoke, db: Path) -> list[str]:
    return export_text(run, db).splitlines()


def _with(lines: list[str], index: int, record: object) -> str:
    copy = list(lines)
    copy[index] = record if isinstance(record, str) else json.dumps(record)
    return "\n".join(copy) + "\n"


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda ls: _with(ls, 3, '{"kind": "message", broken'), "line 4: not valid JSON"),
        (
            lambda ls: _with(
                ls,
                2,
                {
                    "kind": "message",
                    "parent_id": "zzz",
                    "tokens": 1,
                    "message": {"id": "x", "role": "user", "parts": []},
                },
            ),
            "line 3: parent_id 'zzz' is not an earlier message",
        ),
        (
            lambda ls: _with(
                ls,
                4,
                {
                    "kind": "message",
                    "parent_id": None,
                    "tokens": 1,
                    "message": {"id": "u1", "role": "user", "parts": []},
                },
            ),
            "line 5: duplicate message id 'u1'",
        ),
        (
            lambda ls: _with(
                ls,
                2,
                {
                    "kind": "message",
                    "parent_id": None,
                    "tokens": 1,
                    "message": {"id": "q", "role": "robot", "parts": []},
                },
            ),
            "line 3: message.role",
        ),
        (lambda ls: _with(ls, 2, '["a", "list"]'), "line 3: expected a JSON object"),
        (lambda ls: _with(ls, 0, {"kind": "something"}), "line 1: not a mindstore export"),
        (lambda ls: "\n".join(ls[:4]) + "\n", "header declares 5 messages but the file has 3"),
        (lambda ls: _with(ls, 6, {"kind": "mystery"}), "line 7: unknown record kind 'mystery'"),
        (lambda ls: "", "line 1: empty file"),
    ],
)
def test_malformed_line_reports_its_number_and_imports_nothing(
    run: Invoke, db: Path, tmp_path: Path, mutate: Callable[[list[str]], str], expected: str
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(mutate(_lines(run, db)), encoding="utf-8")
    target = tmp_path / "target.db"
    result = run("--db", target, "import", bad)
    assert result.exit_code == 1
    assert expected in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    assert not target.exists()  # validated before the database was even opened


def test_failure_while_writing_leaves_nothing(
    run: Invoke, db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store failure after validation (here: on the 2nd batch) is rolled back."""
    data = parse_export(_lines(run, db))
    target = tmp_path / "t.db"

    async def go() -> None:
        from mindstore.cli.transfer import import_data
        from mindstore.errors import StoreError

        async with SQLiteStore(target) as store:
            original = store.add_compaction
            calls = 0

            async def flaky(*a: object, **k: object) -> object:
                nonlocal calls
                calls += 1
                if calls == 2:
                    raise StoreError("disk on fire")
                return await original(*a, **k)  # type: ignore[arg-type]

            monkeypatch.setattr(store, "add_compaction", flaky)
            with pytest.raises(StoreError):
                await import_data(store, data, chunk=2)
            key = SessionKey(namespace="default", session_id="chat")
            assert await store.all_messages(key) == []
            assert await store.get_session(key) is None
            assert await store.list_blocks("default", None) == []

    asyncio.run(go())


def test_missing_import_file(run: Invoke, tmp_path: Path) -> None:
    result = run("--db", tmp_path / "x.db", "import", tmp_path / "nope.jsonl")
    assert result.exit_code == 1
    assert "nope.jsonl" in result.stderr


def test_export_json_summary_and_unknown_session(run: Invoke, db: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    result = run("--db", db, "--json", "export", "chat", "-o", out)
    assert json.loads(result.stdout)["messages"] == 5
    assert out.exists() and not (tmp_path / "o.jsonl.part").exists()
    missing = run("--db", db, "export", "nope")
    assert missing.exit_code == 1 and "no session 'nope'" in missing.stderr


def test_large_round_trip(run: Invoke, tmp_path: Path) -> None:
    """A few thousand messages with branches survive export → import → export unchanged."""
    src = tmp_path / "big.db"

    async def build() -> None:
        async with SQLiteStore(src) as store:
            items = []
            for i in range(1500):
                msg = {
                    "id": f"m{i}",
                    "role": "user" if i % 2 else "assistant",
                    "parts": [{"type": "text", "text": f"message number {i} ünïcødé 🚀"}],
                }
                # every 50th message branches off two back; the rest chain on
                parent = f"m{i - 2}" if i % 50 == 0 and i > 1 else (f"m{i - 1}" if i else None)
                items.append(NewMessage(message=msg, parent=parent, tokens=i % 7))
            await store.append(SessionKey(namespace="default", session_id="big"), items)

    asyncio.run(build())
    a = export_text(run, src, "big")
    dst = tmp_path / "copy.db"
    assert run("--db", dst, "import", "-", input=a).exit_code == 0
    assert export_text(run, dst, "big") == a


def test_parse_export_accepts_a_leading_byte_order_mark(run: Invoke, db: Path) -> None:
    text = "\ufeff" + export_text(run, db)
    assert parse_export(text.splitlines(keepends=True)).session_id == "chat"


def test_a_session_with_context_memory_only_exports_and_imports(
    run: Invoke, tmp_path: Path
) -> None:
    """A session used only for its context memory (a block, no messages, no registry row)
    is a session to ``export`` (it was "no session"), and comes back whole."""
    from mindstore.store.base import ScopeKey

    source, target = tmp_path / "ctx.db", tmp_path / "copy.db"

    async def build() -> None:
        async with SQLiteStore(source) as store:
            await store.set_block(ScopeKey(namespace="ns", session_id="c1", label="memory"), "tea")

    asyncio.run(build())
    out = tmp_path / "c1.jsonl"
    result = run("--db", source, "--namespace", "ns", "export", "c1", "-o", out)
    assert result.exit_code == 0, result.output
    assert run("--db", source, "--namespace", "ns", "export", "nope").exit_code == 1
    assert run("--db", target, "--namespace", "ns", "import", out).exit_code == 0
    shown = run("--db", target, "--namespace", "ns", "--json", "blocks", "c1")
    assert [b["content"] for b in json.loads(shown.stdout)] == ["tea"]
