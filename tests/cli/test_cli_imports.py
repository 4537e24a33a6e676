"""The command line is a client of the library: it imports public names only.

No module of ``mindstore.cli`` imports a private module of the library (a path segment starting
with ``_``, such as ``mindstore.store._checks``) or an underscore name — neither from the library
nor from another CLI module (what commands share is public in ``mindstore.cli.common``).
Dunders such as ``__version__`` are public.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CLI = Path(__file__).resolve().parents[2] / "src" / "mindstore" / "cli"
MODULES = sorted(CLI.glob("*.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_imports(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if any(_private(p) for p in module.split(".")):
                found.append(f"line {node.lineno}: from {'.' * node.level}{module}")
            found.extend(
                f"line {node.lineno}: {alias.name} from {'.' * node.level}{module}"
                for alias in node.names
                if _private(alias.name)
            )
        elif isinstance(node, ast.Import):
            found.extend(
                f"line {node.lineno}: import {alias.name}"
                for alias in node.names
                if any(_private(p) for p in alias.name.split("."))
            )
    return found


def test_the_cli_package_is_found() -> None:
    assert {"app.py", "common.py", "sessions.py"} <= {p.name for p in MODULES}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_cli_module_imports_only_public_names(path: Path) -> None:
    assert _private_imports(path) == []
