"""The ``mindstore`` command line: ``mindstore --help`` lists the commands.

Only :func:`main` (the console script) and :data:`cli` (the click group) are public; the modules
of this package are its implementation and go through the library's public API.
"""

from __future__ import annotations

from mindstore.cli.app import cli, main

__all__ = ["cli", "main"]
