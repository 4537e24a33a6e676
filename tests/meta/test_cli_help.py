"""Meta test: every ``mindstore`` command has a working ``--help`` with a description."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from mindstore.cli import cli

COMMANDS = sorted(cli.commands)


def test_the_command_set_is_the_designed_one() -> None:
    assert set(COMMANDS) == {
        "demo",
        "sessions",
        "history",
        "tree",
        "search",
        "prompt",
        "blocks",
        "export",
        "import",
        "stats",
        "embed",
        "delete-namespace",
    }


@pytest.mark.parametrize("name", COMMANDS)
def test_command_help(name: str) -> None:
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Usage: cli {name}") or f"{name}" in result.output
    command = cli.commands[name]
    assert command.help and command.help.strip(), f"{name} has no help text"
    # Every command accepts --json (scripts can rely on it).
    assert any(isinstance(p, click.Option) and "--json" in p.opts for p in command.params), (
        f"{name} has no --json"
    )


def test_group_help_and_version() -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.output
    version = runner.invoke(cli, ["--version"])
    assert version.exit_code == 0 and "mindstore" in version.output
