"""Every ```python block of docs/integrations.md runs, as written, in a fresh interpreter.

(Blocks fenced ```python norun would only be compiled; the page has none: every example runs
offline.) Each block runs in its own process so event loops, imports and temp files of one
example cannot help or hurt another.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
BLOCKS = re.findall(r"^```python( norun)?\n(.*?)^```$", DOC.read_text("utf-8"), re.M | re.S)


def test_the_page_has_examples() -> None:
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize(("norun", "code"), BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_block_runs(norun: str, code: str, tmp_path: Path) -> None:
    if norun:
        compile(code, str(DOC), "exec")
        return
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
