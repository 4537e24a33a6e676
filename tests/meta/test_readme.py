"""Meta test: the README's Quickstart code block runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def quickstart_code() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quickstart", 1)
    assert len(section) == 2, "README.md has no '## Quickstart' section"
    match = re.search(r"```python\n(.*?)```", section[1], flags=re.DOTALL)
    assert match, "the Quickstart section has no ```python block"
    return match.group(1)


def test_readme_quickstart_runs_as_written(tmp_path: Path) -> None:
    code = quickstart_code()
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:2] == ["user Deploy status?", "assistant Deployment is green."], proc.stdout
    assert "'u1'" in lines[2]  # deploy* finds both messages; u1 among them
    assert list(tmp_path.glob("*.db")), "the quickstart should leave its SQLite file in the cwd"


def test_readme_keeps_the_two_setup_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert ".venv/bin/mindstore demo" in readme
    assert ".venv/bin/python -m pytest" in readme


def test_readme_lists_every_extra_of_pyproject() -> None:
    """The README's extras table names each optional dependency group, and nothing else."""
    import tomllib

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"][
        "optional-dependencies"
    ])  # fmt: skip
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (`[^|]+`) \|", readme, flags=re.M)
    listed = {name for row in rows for name in re.findall(r"`([a-z0-9-]+)`", row)}
    assert listed == extras, (sorted(extras - listed), sorted(listed - extras))
