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


def test_the_documented_mcp_config_is_valid(tmp_path: Path) -> None:
    """The YAML config shown on the page passes the server's validation as written."""
    from mindstore.integrations.mcp_config import load_config

    (yaml_text,) = re.findall(r"^```yaml\n(.*?)^```$", DOC.read_text("utf-8"), re.M | re.S)
    (tmp_path / "guide.md").write_text("Be brief.", encoding="utf-8")
    (tmp_path / "skills").mkdir()
    (tmp_path / "mcp.yaml").write_text(yaml_text, encoding="utf-8")
    config = load_config(tmp_path / "mcp.yaml")
    assert [b.kind for b in config.blocks] == [
        "readonly",
        "readonly",
        "writable",
        "searchable",
        "skills",
    ]
    assert config.blocks[1].text == "Be brief." and config.session == "desktop"


def test_the_documented_client_config_is_valid_json_for_the_cli() -> None:
    import json

    from mindstore.cli import cli

    (block,) = re.findall(r"^```json\n(.*?)^```$", DOC.read_text("utf-8"), re.M | re.S)
    server = json.loads(block)["mcpServers"]["mindstore"]
    args = server["args"]
    # The arguments parse as a `mindstore … mcp …` command line (nothing is run).
    at = args.index("mcp")
    group = cli.make_context("mindstore", args[:at])
    assert group.params["db"] == "/home/me/agent-memory.db"
    sub = cli.commands["mcp"].make_context("mcp", args[at + 1 :], parent=group)
    assert sub.params["session_id"] == "desktop" and sub.params["config_path"].endswith(".yaml")
