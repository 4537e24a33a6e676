"""Meta test: the ``slow`` and ``postgres`` markers are registered and deselectable, nothing
deselects them by default, and CI's first pass runs every test (the second pass, without
PostgreSQL, may deselect ``slow``)."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def pytest_options() -> dict[str, object]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    options = data["tool"]["pytest"]["ini_options"]
    assert isinstance(options, dict)
    return options


def test_markers_are_registered_and_not_deselected_by_default() -> None:
    options = pytest_options()
    names = {str(m).split(":", 1)[0].strip() for m in options["markers"]}  # type: ignore[attr-defined]
    assert {"slow", "postgres"} <= names
    addopts = shlex.split(str(options.get("addopts", "")))
    assert "-m" not in addopts and not any(a.startswith("-m") for a in addopts)


def test_ci_runs_every_test_in_its_first_pass() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    runs = [line for line in script.splitlines() if re.search(r"\bpython -m pytest\b", line)]
    assert runs, ".ci/run does not run pytest"
    first = runs[0].split("python -m pytest", 1)[1]
    assert " -m " not in f" {first} ", f"the first pytest pass deselects tests: {runs[0]!r}"
    assert "MINDSTORE_REQUIRE_POSTGRES=1" in script  # PostgreSQL cases fail instead of skipping
