"""A catalogue of malformed input for the ``mindstore`` command (issue 14 item 1).

Every case must end with exit code 1 (2 for a usage error), exactly one ``Error: …`` line on
stderr naming the problem (``Error: line N: …`` for an import file), no traceback, no "internal
error" from the last-resort handler (each case is handled where it happens), and the database
files byte-for-byte unchanged. Before the fix 19 of the import files and every bad argument
below printed a Python traceback (RecursionError, OverflowError, TypeError, ValueError,
UnicodeEncodeError).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from mindstore.cli import cli

Records = list[dict[str, Any]]
LONG = "x" * 300


def _export(db: Path) -> Records:
    result = CliRunner().invoke(cli, ["--db", str(db), "export", "chat"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def _lines(records: Records) -> str:
    # ensure_ascii: lone surrogates and NUL travel as JSON escapes, as a hostile file has them.
    return "".join(json.dumps(r, allow_nan=True) + "\n" for r in records)


def first(records: Records, kind: str) -> dict[str, Any]:
    return next(r for r in records if r["kind"] == kind)


def nth(records: Records, kind: str, n: int) -> dict[str, Any]:
    return [r for r in records if r["kind"] == kind][n]


def edit(fn: Callable[[Records], Any]) -> Callable[[Records], str]:
    def make(records: Records) -> str:
        records = copy.deepcopy(records)
        fn(records)
        return _lines(records)

    return make


def raw(text: str | bytes) -> Callable[[Records], str | bytes]:
    return lambda _records: text


def header(**fields: Any) -> Callable[[Records], str]:
    return edit(lambda r: r[0].update(fields))


def session(**fields: Any) -> Callable[[Records], str]:
    return edit(lambda r: r[0]["session"].update(fields))


def message(n: int = 1, **fields: Any) -> Callable[[Records], str]:
    return edit(lambda r: nth(r, "message", n).update(fields))


def body(n: int = 1, **fields: Any) -> Callable[[Records], str]:
    return edit(lambda r: nth(r, "message", n)["message"].update(fields))


def kind(k: str, **fields: Any) -> Callable[[Records], str]:
    return edit(lambda r: first(r, k).update(fields))


def _nan_text(records: Records) -> str:
    records = copy.deepcopy(records)
    nth(records, "message", 0)["message"]["parts"][0]["text"] = float("nan")
    return _lines(records)


def _huge_digits(records: Records) -> str:
    lines = _lines(records).splitlines(keepends=True)
    lines[1] = lines[1].replace('"tokens": ', '"tokens": ' + "9" * 5000, 1)
    return "".join(lines)


def _drop(kind_: str, from_end: bool = True) -> Callable[[Records], str]:
    def fn(r: Records) -> None:
        idx = [i for i, rec in enumerate(r) if rec["kind"] == kind_]
        del r[idx[-1] if from_end else idx[0]]

    return edit(fn)


def _swap_block_before_messages(r: Records) -> None:
    block = first(r, "block")
    r.remove(block)
    r.insert(1, block)


def _deep(n: int) -> Any:
    v: Any = "x"
    for _ in range(n):
        v = {"d": v}
    return v


IMPORT_CASES: dict[str, Callable[[Records], str | bytes]] = {
    "empty file": raw(""),
    "only blank lines": raw("\n\n   \n"),
    "not JSON": raw("hello there\n"),
    "header cut mid-line": lambda r: _lines(r).splitlines()[0][:-7] + "\n",
    "a JSON array": raw("[1, 2]\n"),
    "a JSON number": raw("42\n"),
    "a JSON string": raw('"mindstore-export"\n'),
    "JSON nested 100 000 deep": raw("[" * 100_000 + "]" * 100_000 + "\n"),
    "not UTF-8": raw(b'{"kind": "mindstore-export", "namespace": "\xff\xfe"}\n'),
    "not UTF-8 on a later line": lambda r: _lines(r).encode() + b'{"kind": "block\xc3("}\n',
    "UTF-16 file": lambda r: _lines(r).encode("utf-16"),
    "wrong kind": header(kind="something-else"),
    "version 2": header(version=2),
    "version as a string": header(version="1"),
    "session is a list": header(session=[1]),
    "unknown session field": session(colour="red"),
    "negative header count": header(messages=-1),
    "header count 10**30": header(messages=10**30),
    "prompt flag not a bool": header(prompt="yes"),
    "empty namespace": header(namespace=""),
    "namespace not a string": header(namespace=5),
    "namespace of 300 characters": header(namespace=LONG),
    "session id with a lone surrogate": header(session_id="chat\ud800"),
    "session id with NUL": header(session_id="ch\x00at"),
    "input_tokens 10**30": session(input_tokens=10**30),
    "negative output_tokens": session(output_tokens=-5),
    "input_tokens as a string": session(input_tokens="100"),
    "estimated_cost NaN": session(estimated_cost=float("nan")),
    "estimated_cost Infinity": session(estimated_cost=float("inf")),
    "estimated_cost a string": session(estimated_cost="cheap"),
    "session name a number": session(name=123),
    "session name with a lone surrogate": session(name="Deploy \udcff"),
    "session end_reason with NUL": session(end_reason="do\x00ne"),
    "session metadata a list": session(metadata=[1]),
    "parent_session_id of 300 characters": session(parent_session_id=LONG),
    "integer of 5000 digits": _huge_digits,
    "message not an object": message(message="hello"),
    "message with a bad role": body(role="robot"),
    "message text NaN": _nan_text,
    "message id with a lone surrogate": body(id="a\udcff"),
    "message nested 200 deep": body(metadata=_deep(200)),
    "duplicate message id": body(2, id="u1"),
    "unknown parent_id": message(parent_id="nope"),
    "parent_id not a string": message(parent_id=7),
    "no parent_id": edit(lambda r: nth(r, "message", 1).pop("parent_id")),
    "negative tokens": message(tokens=-1),
    "tokens 10**30": message(tokens=10**30),
    "tokens a float": message(tokens=1.5),
    "tokens a bool": message(tokens=True),
    "compaction ref out of sequence": kind("compaction", ref=9),
    "compaction range unknown message": kind("compaction", **{"from": "zzz"}),
    "compaction superseded_by itself": kind("compaction", superseded_by=1),
    "compaction summary with NUL": kind("compaction", summary="a\x00b"),
    "compaction summary blank": kind("compaction", summary="  \n "),
    "block with a bad scope": kind("block", scope="global"),
    "block label of 300 characters": kind("block", label=LONG),
    "block label with a lone surrogate": kind("block", label="mem\udfff"),
    "block content with NUL": kind("block", content="a\x00b"),
    "skill key of 600 characters": kind("skill", key="k" * 600),
    "skill unloaded_after unknown": kind("skill", unloaded_after="nope"),
    "prompt with a lone surrogate": kind("prompt", prompt="\ud800"),
    "two prompts": edit(lambda r: r.append(dict(first(r, "prompt")))),
    "unknown record kind": edit(lambda r: r.append({"kind": "vector"})),
    "records out of order": edit(_swap_block_before_messages),
    "truncated: last block missing": _drop("block"),
    "truncated: prompt missing": _drop("prompt"),
}


def _snapshot(db: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(db.parent.glob(db.name + "*"))}


def _invoke(args: list[Any], stdin: bytes | None = None) -> Result:
    env = {"MINDSTORE_DB": None, "MINDSTORE_NAMESPACE": None}
    return CliRunner().invoke(cli, [str(a) for a in args], input=stdin, env=env)


def _assert_one_clean_error(result: Result, *, exit_codes: tuple[int, ...] = (1,)) -> str:
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in exit_codes, (result.exit_code, result.stderr)
    assert "Traceback" not in result.output + result.stderr
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    if result.exit_code == 1:  # usage errors (2) come with click's usage lines around them
        assert len(result.stderr.splitlines()) == 1, result.stderr
    assert "internal error" not in errors[0], errors[0]
    assert result.stdout == ""
    return errors[0]


def test_the_catalogue_is_large_enough() -> None:
    assert len(IMPORT_CASES) >= 36


@pytest.mark.parametrize("case", list(IMPORT_CASES))
def test_malformed_import_file(case: str, db: Path, tmp_path: Path) -> None:
    content = IMPORT_CASES[case](_export(db))
    src = tmp_path / "in" / "bad.jsonl"
    src.parent.mkdir()
    if isinstance(content, str):
        src.write_text(content, encoding="utf-8", errors="surrogatepass")
    else:
        src.write_bytes(content)
    before = _snapshot(db)
    # Into a fresh session id, so only the file's content can be the problem.
    result = _invoke(["--db", db, "import", src, "--session", "fresh"])
    line = _assert_one_clean_error(result)
    assert line.startswith("Error: line "), line
    assert _snapshot(db) == before
    # Nothing was written: the same file through standard input fails the same way.
    assert _invoke(["--db", db, "import", "-"], stdin=src.read_bytes()).exit_code == 1


ARG_CASES: dict[str, tuple[list[str], int]] = {
    "sessions --namespace ''": (["--namespace", "", "sessions"], 1),
    "sessions --namespace <lone surrogate>": (["--namespace", "\udcff", "sessions"], 1),
    "search --namespace ''": (["--namespace", "", "search", "deploy"], 1),
    "search --namespace <lone surrogate>": (["--namespace", "\udcff", "search", "deploy"], 1),
    "history --namespace ''": (["--namespace", "", "history", "chat"], 1),
    "history --namespace <lone surrogate>": (["--namespace", "\udcff", "history", "chat"], 1),
    "history of a 300-character id": (["history", LONG], 1),
    "history --leaf of 300 characters": (["history", "chat", "--leaf", LONG], 1),
    "tree of a 300-character id": (["tree", LONG], 1),
    "export of a 300-character id": (["export", LONG], 1),
    "prompt of a 300-character id": (["prompt", LONG], 1),
    "blocks of a 300-character id": (["blocks", LONG], 1),
    "blocks of a lone-surrogate id": (["blocks", "c\udcff"], 1),
    "search --session of 300 characters": (["search", "deploy", "--session", LONG], 1),
    "tree --width 0": (["tree", "chat", "--width", "0"], 2),
    "sessions --limit -1": (["sessions", "--limit", "-1"], 2),
    "search --limit 10**20": (["search", "deploy", "--limit", str(10**20)], 2),
}


@pytest.mark.parametrize("case", list(ARG_CASES))
def test_bad_argument(case: str, db: Path) -> None:
    args, code = ARG_CASES[case]
    before = _snapshot(db)
    result = _invoke(["--db", db, *args])
    _assert_one_clean_error(result, exit_codes=(code,))
    assert _snapshot(db) == before


@pytest.mark.parametrize(
    ("session", "why"), [("", "empty"), (LONG, "300 characters"), ("a\udcffb", "surrogate")]
)
def test_import_refuses_a_bad_session_option(
    session: str, why: str, db: Path, tmp_path: Path
) -> None:
    src = tmp_path / "good.jsonl"
    src.write_text(_lines(_export(db)), encoding="utf-8")
    before = _snapshot(db)
    result = _invoke(["--db", db, "import", src, "--session", session])
    line = _assert_one_clean_error(result)
    assert "--session" in line, line
    assert _snapshot(db) == before


def test_import_accepts_a_byte_order_mark(db: Path, tmp_path: Path) -> None:
    src = tmp_path / "bom.jsonl"
    src.write_bytes(b"\xef\xbb\xbf" + _lines(_export(db)).encode())
    result = _invoke(["--db", db, "import", src, "--session", "from-bom", "--namespace-blocks"])
    assert result.exit_code == 0, result.stderr
    stdin = _invoke(
        ["--db", db, "import", "-", "--session", "bom2", "--namespace-blocks"],
        stdin=src.read_bytes(),
    )
    assert stdin.exit_code == 0, stdin.stderr


def test_summaries_use_singular_for_one(db: Path, tmp_path: Path) -> None:
    records = _export(db)
    records[0]["compactions"] = 1
    comps = [r for r in records if r["kind"] == "compaction"]
    for extra in comps[1:]:
        records.remove(extra)
    comps[0]["superseded_by"] = None
    src = tmp_path / "one.jsonl"
    src.write_text(_lines(records), encoding="utf-8")
    result = _invoke(["--db", db, "import", src, "--session", "single", "--namespace-blocks"])
    assert result.exit_code == 0, result.stderr
    assert "1 compaction," in result.stderr and "1 compactions" not in result.stderr
    out = tmp_path / "out.jsonl"
    result = _invoke(["--db", db, "export", "single", "-o", out])
    assert "1 compaction," in result.stderr, result.stderr


def test_sessions_says_when_more_pages_exist(db: Path) -> None:
    result = _invoke(["--db", db, "sessions", "--limit", "1"])
    assert result.exit_code == 0
    assert "more exist" in result.stderr
    assert len(result.stdout.splitlines()) == 2  # header + one session
    complete = _invoke(["--db", db, "sessions", "--limit", "2"])
    assert "more exist" not in complete.stderr
    as_json = _invoke(["--db", db, "sessions", "--limit", "1", "--json"])
    assert len(json.loads(as_json.stdout)) == 1 and "more exist" in as_json.stderr


def test_last_resort_handler_turns_a_bug_into_one_line(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mindstore.cli.sessions as sessions

    def boom(*_args: Any) -> Any:
        raise ZeroDivisionError("division by zero\nsecond line")

    monkeypatch.setattr(sessions, "build_tree", boom)
    result = _invoke(["--db", db, "tree", "chat"])
    assert result.exit_code == 1
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("Error: unexpected internal error (ZeroDivisionError")
    assert "report" in line


def test_undecodable_argv_bytes_in_a_real_process(db: Path) -> None:
    """`--namespace $'\\xff'` from a shell: Python turns the byte into a lone surrogate."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINDSTORE_")}
    env["PYTHONUTF8"] = "1"
    for args in ([b"--namespace", b"\xff", b"sessions"], [b"history", b"ch\xffat"]):
        before = _snapshot(db)
        proc = subprocess.run(
            [sys.executable.encode(), b"-m", b"mindstore", b"--db", str(db).encode(), *args],
            capture_output=True,
            timeout=60,
            env=env,
        )
        assert proc.returncode == 1, proc.stderr
        lines = proc.stderr.decode("utf-8", "replace").splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), lines
        assert "not valid Unicode" in lines[0]
        assert _snapshot(db) == before


def test_last_resort_in_the_entry_point(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Even a failure outside any command (start-up, parsing) is one line, exit 1."""
    import mindstore.cli.app as app

    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("start-up\nfailed")

    monkeypatch.setattr(app.cli, "main", broken)
    with pytest.raises(SystemExit) as exit_info:
        app.main(["sessions"])
    assert exit_info.value.code == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("Error: unexpected internal error (RuntimeError: start-up failed)")
