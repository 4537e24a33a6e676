"""The ``mindstore`` command line: ``mindstore --help`` lists the commands.

The entry points are :func:`main` (the console script) and :data:`cli` (the click group); the
commands live in modules by topic (listed in :mod:`mindstore.cli.app`). Every module here uses
only the library's public API — no private module, no underscore name (a test checks it).
"""

from __future__ import annotations

from mindstore.cli.app import cli, main

__all__ = ["cli", "main"]
