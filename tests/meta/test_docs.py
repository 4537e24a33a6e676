"""Every code block of the documentation runs (issue 14 item 9).

Each ```` ```python ```` block of ``README.md`` and ``docs/*.md`` is executed; a block fenced
```` ```python norun ```` (it needs an API key, a server or a network) is only compiled. The
blocks of one file run in order in one fresh Python process and share their names, so a later
block may use what an earlier one defined; each block starts in a fresh empty working
directory (files it writes do not leak into the next). Warnings are errors, as in the suite.

A failure names the file and the line of the block (tracebacks point at the Markdown line), so
whoever wrote that block can fix it. Write examples that run offline: scripted model
functions, temporary files, ``:memory:`` or a relative ``.db`` path.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


@dataclass(frozen=True)
class Block:
    path: str
    line: int  # 1-based line of the first code line
    code: str
    run: bool


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def python_blocks(text: str, path: str) -> list[Block]:
    """The ``python`` blocks of a Markdown text (``python norun`` ones marked not to run)."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m["fence"], m["info"].strip().split()
        start = i + 1
        j = start
        while j < len(lines) and not (
            lines[j].lstrip().startswith(fence[0] * len(fence))
            and lines[j].strip() == lines[j].strip()[0] * len(lines[j].strip())
        ):
            j += 1
        if info and info[0] in ("python", "py"):
            code = "\n".join(ln[len(m["indent"]) :] for ln in lines[start:j]) + "\n"
            blocks.append(Block(path, start + 1, code, "norun" not in info[1:]))
        i = j + 1
    return blocks


# Runs in the child: exec each block in a fresh cwd, shared globals; report file:line on error.
# A block may use top-level ``await`` (as in a notebook); such blocks share one event loop.
DRIVER = r"""
import ast, asyncio, inspect, json, os, sys, tempfile, traceback
blocks = json.load(sys.stdin)
ns = {"__name__": "__main__"}
loop = None
for b in blocks:
    code = compile("\n" * (b["line"] - 1) + b["code"], b["path"], "exec",
                   flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if not b["run"]:
        continue
    with tempfile.TemporaryDirectory() as cwd:
        os.chdir(cwd)
        try:
            result = eval(code, ns)
            if inspect.iscoroutine(result):
                loop = loop or asyncio.new_event_loop()
                loop.run_until_complete(result)
        except BaseException as exc:
            if isinstance(exc, SystemExit) and exc.code in (0, None):
                continue
            print(f"@@FAILED {b['path']}:{b['line']}", file=sys.stderr)
            traceback.print_exc()
            sys.exit(1)
        finally:
            os.chdir("/")
if loop is not None:
    loop.close()
"""


def run_blocks(blocks: list[Block], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINDSTORE_")}
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", DRIVER],
        input=json.dumps([b.__dict__ for b in blocks]),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )


def _failure(blocks: list[Block], proc: subprocess.CompletedProcess[str]) -> str:
    where = re.search(r"@@FAILED (\S+)", proc.stderr)
    block = where.group(1) if where else "(before the first block)"
    syntax = "SyntaxError" in proc.stderr and not where
    head = f"a ```python block of {blocks[0].path} does not compile" if syntax else None
    return (
        f"{head or f'the ```python block at {block} failed'} — fix the block (or fence it "
        f"```python norun if it needs a network, a server or an API key):\n{proc.stderr[-4000:]}"
    )


def docs_with_python() -> list[Path]:
    """The pages that have ``python`` blocks: a page without any is no test (it was reported
    as a skipped one)."""
    return [
        d
        for d in doc_files()
        if python_blocks(d.read_text(encoding="utf-8"), str(d.relative_to(ROOT)))
    ]


@pytest.mark.parametrize("doc", docs_with_python(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_block_runs(doc: Path) -> None:
    rel = str(doc.relative_to(ROOT))
    blocks = python_blocks(doc.read_text(encoding="utf-8"), rel)
    for b in blocks:  # compile errors are reported per block, even in norun ones
        try:
            compile(b.code, f"{b.path}:{b.line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        except SyntaxError as exc:
            pytest.fail(f"the ```python block at {b.path}:{b.line} does not compile: {exc}")
    proc = run_blocks(blocks)
    assert proc.returncode == 0, _failure(blocks, proc)


# ---- the checker itself ------------------------------------------------------------------------


SAMPLE = """# t

```python
x = 40
```

text

```python norun
import some_module_that_does_not_exist
```

```bash
echo not python
```

````python
y = x + 2
assert y == 42
open("here.txt", "w").write("1")
````

```python
import os
assert not os.path.exists("here.txt")  # a fresh directory per block
raise ValueError("boom")
```
"""

AWAIT_SAMPLE = """
```python
import asyncio
async def twice(v):
    await asyncio.sleep(0)
    return 2 * v
```

```python
z = await twice(21)
assert z == 42
```
"""


def test_blocks_may_use_top_level_await() -> None:
    proc = run_blocks(python_blocks(AWAIT_SAMPLE, "docs/await.md"), timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_blocks_are_found_with_their_lines_and_norun_is_not_run() -> None:
    blocks = python_blocks(SAMPLE, "docs/sample.md")
    assert [(b.line, b.run) for b in blocks] == [(4, True), (10, False), (18, True), (24, True)]
    proc = run_blocks(blocks, timeout=60)
    assert proc.returncode == 1
    message = _failure(blocks, proc)
    assert "docs/sample.md:24" in message
    assert 'File "docs/sample.md", line 26' in message  # the traceback points at the .md line
    assert "ValueError: boom" in message


def test_a_block_that_does_not_compile_is_named() -> None:
    blocks = python_blocks("```python norun\ndef f(:\n```\n", "docs/bad.md")
    with pytest.raises(SyntaxError):
        compile(blocks[0].code, "x", "exec")
    assert blocks[0].line == 2


# ---- the docs stand alone ----------------------------------------------------------------------

LINK = re.compile(r"\]\((?!https?://|mailto:|#)([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_cite_only_files_in_the_repository(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    assert "DESIGN.md" not in text and "DESIGN §" not in text, (
        f"{doc.relative_to(ROOT)} cites DESIGN, which is not part of the repository"
    )
    missing = [t for t in LINK.findall(text) if not (doc.parent / t).exists()]
    assert not missing, f"{doc.relative_to(ROOT)} links to missing files: {missing}"


def test_cli_docs_name_every_stats_key(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    demo = subprocess.run(
        [sys.executable, "-m", "mindstore", "demo", "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert demo.returncode == 0, demo.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "mindstore", "--db", str(db), "--json", "stats"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    section = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8").split("### `stats`", 1)[1]
    undocumented = [k for k in json.loads(proc.stdout) if f"`{k}`" not in section]
    assert not undocumented, f"docs/cli.md `stats` does not name {undocumented}"
