"""The ``mindstore`` command line (DESIGN §9): ``mindstore --help`` lists the commands."""

from __future__ import annotations

from mindstore.cli.app import cli, main

__all__ = ["cli", "main"]
