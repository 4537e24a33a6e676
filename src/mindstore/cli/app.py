"""The ``mindstore`` command: inspect and operate a store from the terminal.

This module is the command group — its options (``--db``, ``--namespace``, ``--json``), the
edge where every failure becomes one line, and the entry point; the commands live in modules
by topic and are registered here:

* :mod:`.sessions` — ``sessions``, ``history``, ``tree``, ``prompt``, ``blocks``;
* :mod:`.search` — ``search``; :mod:`.embed` — ``embed``;
* :mod:`.transfer` — ``export``, ``import``;
* :mod:`.maintenance` — ``stats``, ``reindex``; :mod:`.namespaces` — ``delete-namespace``;
* :mod:`.demo` — ``demo``; :mod:`.mcp_command` — ``mcp``; :mod:`.serve` — ``serve``.

What they share (settings, argument checks, output, opening the store) is :mod:`.common`.

Thin over the public API: every command opens the store named by ``--db`` (a path or a URL,
``MINDSTORE_DB``, default ``./mindstore.db``), calls the library and prints the result — rich
tables and colour on a terminal, plain text when piped, JSON with ``--json``.

Exit codes: 0 success (also when the output pipe closes early: `| head` stops quietly, as with
``git``); 1 error (one line on stderr, no traceback); 2 usage error.
Arguments (namespace, session ids, message ids) are checked before the store is opened.
Read commands open a SQLite file read-only: they never create, migrate or change a file, and a
missing or empty file is "no mindstore database". Human output shows control characters in
stored text visibly (``␛`` for ESC …) so stored content cannot drive the terminal; ``--json``
prints the stored text exactly. Anything unexpected still becomes one line on stderr (exit 1)
that asks for a bug report — never a traceback.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Sequence
from typing import Any

import click

from mindstore import __version__
from mindstore.errors import MindstoreError

from .common import DEFAULT_DB, CliError, Env
from .demo import demo
from .embed import embed
from .maintenance import reindex, stats
from .mcp_command import mcp_command
from .namespaces import delete_namespace
from .search import search
from .serve import serve
from .sessions import blocks, history, prompt, sessions, tree
from .transfer import export, import_

__all__ = ["cli", "main"]


# ---- the edge: errors become one line, never a traceback -----------------------------------


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except BrokenPipeError:
            # Output piped into `head` and the like: stop quietly, as git does (exit 0).
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise click.exceptions.Exit(0) from None
        except MindstoreError as exc:
            # Driver messages can span lines; the contract is one line on stderr.
            raise CliError(" ".join(str(exc).split())) from None
        except sqlite3.Error as exc:
            raise CliError(f"database error: {exc}") from None
        except OSError as exc:
            where = f": {exc.filename}" if exc.filename else ""
            raise CliError(f"{exc.strerror or exc}{where}") from None
        except Exception as exc:
            # Last resort: every known failure is handled above or where it happens; anything
            # else is a bug, but the user still gets one line, not a traceback.
            raise CliError(_internal_error(exc)) from None


# ---- the command group -----------------------------------------------------------------------


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    envvar="MINDSTORE_DB",
    default=DEFAULT_DB,
    show_default=True,
    metavar="PATH|URL",
    help="SQLite file, sqlite:///path or postgresql://… (env MINDSTORE_DB).",
)
@click.option(
    "--namespace",
    envvar="MINDSTORE_NAMESPACE",
    default="default",
    show_default=True,
    help="Namespace inside the store (env MINDSTORE_NAMESPACE).",
)
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@click.version_option(__version__, prog_name="mindstore")
@click.pass_context
def cli(ctx: click.Context, db: str, namespace: str, as_json: bool) -> None:
    """mindstore — the memory layer for LLM agents.

    Inspect and operate a store: conversations (branching trees), search, context blocks,
    frozen prompts, export/import. Start with `mindstore demo`.
    """
    # A terminal whose locale cannot encode some stored text (ASCII, Latin-1) gets escapes
    # instead of a UnicodeEncodeError half-way through the output.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    source = ctx.get_parameter_source("namespace")
    ctx.obj = Env(
        db=db,
        namespace=namespace,
        json=as_json,
        namespace_given=source is not None and source != click.core.ParameterSource.DEFAULT,
        # Only a --db typed on the command line counts for `demo`: a MINDSTORE_DB exported for
        # an application must not make the tour refuse to run (it never writes an existing file).
        db_given=ctx.get_parameter_source("db") == click.core.ParameterSource.COMMANDLINE,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="mindstore")
    except Exception as exc:
        # Outside a command (argument parsing, start-up): the same promise, one line, exit 1.
        click.echo(f"Error: {_internal_error(exc)}", err=True)
        sys.exit(1)


def _internal_error(exc: BaseException) -> str:
    detail = " ".join(str(exc).split())[:200]
    return (
        f"unexpected internal error ({type(exc).__name__}: {detail}); this is a bug in "
        "mindstore — please report it with the command you ran"
    )


# ---- the commands ----------------------------------------------------------------------------

for _command in (
    demo,
    sessions,
    history,
    tree,
    search,
    prompt,
    blocks,
    export,
    import_,
    reindex,
    stats,
    mcp_command,
    embed,
    delete_namespace,
    serve,
):
    cli.add_command(_command)
