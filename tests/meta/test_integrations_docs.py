"""docs/integrations.md: the MCP configuration it shows is what the server accepts.

(Its ```python blocks are run by tests/meta/test_docs.py, like every page's.)
"""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


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
