"""What every ``mindstore`` command shares: the invocation's settings, argument checks, the
``--json`` option, where output goes, and opening the store.

Internal to :mod:`mindstore.cli`; the command modules import these names and nothing private
from each other.

Decisions kept here so that every command behaves the same:

* An expected failure is a :class:`CliError`: one line on stderr, exit code 1.
* Arguments (namespace, session ids, message ids) are checked with the library's own rules
  *before* the store is opened, so a bad argument never touches a database.
* Read commands open a SQLite file read-only (``mode=ro``) and PostgreSQL with read-only
  transactions: they never create, migrate or change a database; a missing file is "no mindstore
  database" with a hint, never an empty new file.
* Human output goes to a rich console on a terminal and to plain tab-separated text when piped;
  stored text is shown with control characters made visible (:func:`~mindstore.cli.render.visible`)
  so stored content cannot drive the terminal. ``--json`` prints the stored values exactly, as
  UTF-8 whatever the locale.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from mindstore.errors import MindstoreError, SessionNotFoundError
from mindstore.messages import validate_id
from mindstore.store import Store, check_name, open_store
from mindstore.store.base import SessionKey

from .render import to_jsonable, visible

__all__ = [
    "DEFAULT_DB",
    "CliError",
    "Env",
    "Out",
    "checked",
    "checked_id",
    "checked_name",
    "current_env",
    "json_option",
    "namespace_of",
    "opened",
    "require_session",
    "run",
    "session_key",
    "sqlite_path",
    "when",
]

T = TypeVar("T")

DEFAULT_DB = "./mindstore.db"


class CliError(click.ClickException):
    """An expected failure: printed as one line on stderr, exit code 1."""


@dataclass(kw_only=True, slots=True)
class Env:
    """The group's options, shared by every command of one invocation."""

    db: str
    namespace: str
    json: bool
    namespace_given: bool
    db_given: bool = False


def current_env() -> Env:
    """The :class:`Env` of the running invocation (set by the command group)."""
    env = click.get_current_context().find_object(Env)
    assert env is not None
    return env


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one command's async work on a fresh event loop."""
    return asyncio.run(coro)


# ---- arguments, checked before the store is opened --------------------------------------------


def checked(check: Callable[[Any, str], str], value: str, what: str) -> str:
    """An argument checked as the library would check it — but before the store is opened."""
    try:
        return check(value, what)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def checked_name(value: str, what: str) -> str:
    """A namespace, session id or label argument (the stores' own rule)."""
    return checked(check_name, value, what)


def checked_id(value: str, what: str) -> str:
    """A message id argument (the rule of :func:`mindstore.messages.validate_id`)."""
    return checked(validate_id, value, what)


def namespace_of(env: Env) -> str:
    return checked_name(env.namespace, "--namespace")


def session_key(env: Env, session: str) -> SessionKey:
    return SessionKey(namespace=namespace_of(env), session_id=checked_name(session, "SESSION"))


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        env = ctx.find_object(Env)
        if env is not None:
            env.json = True


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--json`` on a command (the same as the group's ``--json``)."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        expose_value=False,
        callback=_set_json,
        help="Print machine-readable JSON.",
    )(fn)


# ---- output ----------------------------------------------------------------------------------


class _Console(Console):
    """A rich console that leaves a closed output pipe to the command group (which exits 0
    quietly, as ``git`` does) instead of rich's own ``SystemExit(1)``."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


class Out:
    """Where human output goes: rich on a terminal, plain text when piped."""

    def __init__(self) -> None:
        self.console: Console = _Console(highlight=False)
        self.terminal = self.console.is_terminal
        if not self.terminal:
            self.console = _Console(highlight=False, soft_wrap=True, no_color=True, width=10_000)
        self.err = Console(stderr=True, highlight=False, markup=False)

    def json(self, value: Any) -> None:
        # Machine output is UTF-8 whatever the locale says (bytes go to the binary stream).
        text = json.dumps(to_jsonable(value), ensure_ascii=False, indent=2) + "\n"
        click.echo(text.encode("utf-8"), nl=False)

    def table(
        self, columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None
    ) -> None:
        rows = [[_visible_cell("" if v is None else v) for v in row] for row in rows]
        if self.terminal:
            # Text, not str: a title holding user input must not be read as rich markup.
            heading = Text(visible(title)) if title is not None else None
            table = Table(title=heading, title_justify="left", header_style="bold")
            for col in columns:
                table.add_column(col, overflow="fold")
            for row in rows:
                table.add_row(*[v if isinstance(v, Text) else Text(str(v)) for v in row])
            self.console.print(table)
        else:
            click.echo("\t".join(columns))
            for row in rows:
                click.echo("\t".join(v.plain if isinstance(v, Text) else str(v) for v in row))

    def print(self, *items: Any) -> None:
        self.console.print(*items)


def _visible_cell(value: Any) -> Any:
    if isinstance(value, Text):
        return Text(visible(value.plain), style=value.style)
    return visible(str(value))


def when(dt: datetime | None) -> str:
    """A timestamp as ``YYYY-MM-DD HH:MM:SS`` (empty for None)."""
    return dt.strftime("%Y-%m-%d %H:%M:%S") if dt is not None else ""


# ---- opening the store -----------------------------------------------------------------------


def shown_db(url: str) -> str:
    """``--db`` as shown to the user: a URL's password masked (``postgresql://u:***@host``)."""
    try:
        parts = urllib.parse.urlsplit(url)
        if parts.password is None:
            return url
        host = parts.netloc.rsplit("@", 1)[1]
        user = urllib.parse.quote(parts.username or "", safe="")
        return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
    except ValueError:
        return url


def sqlite_path(url: str) -> Path | None:
    """The file a ``--db`` value names, or None (PostgreSQL, ``:memory:``)."""
    if url.startswith(("postgresql://", "postgres://")):
        return None
    if url.startswith("sqlite://"):
        rest = url[len("sqlite://") :]
        rest = rest[1:] if rest.startswith("/") else rest
        return None if rest in ("", ":memory:") else Path(rest)
    if "://" in url or url == ":memory:":
        return None
    return Path(url)


@asynccontextmanager
async def opened(
    env: Env, *, create: bool = False, read_only: bool = False, embedder: Any = None
) -> AsyncIterator[Store]:
    """Open ``env.db``; without ``create`` a missing SQLite file is an error. ``read_only``
    (the read commands) opens SQLite with ``mode=ro`` and PostgreSQL with read-only
    transactions: nothing is created, migrated or changed."""
    path = sqlite_path(env.db)
    postgres = env.db.startswith(("postgresql://", "postgres://"))
    if env.db in (":memory:", "sqlite://:memory:") and not create:
        raise CliError(
            f"no mindstore database at {env.db} (an in-memory database starts empty on each "
            "run; pass --db PATH|URL or set MINDSTORE_DB)"
        )
    if path is not None:
        if path.is_dir():
            raise CliError(f"{path} is a directory, not a database file")
        if not create and not path.exists():
            raise CliError(
                f"no mindstore database at {path} (pass --db PATH|URL or set MINDSTORE_DB; "
                "`mindstore demo --db PATH` creates a sample one)"
            )
    try:
        if read_only and path is not None:
            from mindstore.store import SQLiteStore

            # Read commands never create, migrate or change the file.
            # Opened now (what `async with` does): an empty or foreign file fails here.
            store: Store = await SQLiteStore(path, read_only=True, embedder=embedder).__aenter__()
        elif read_only and postgres:
            store = await open_store(env.db, read_only=True, embedder=embedder)
        else:
            if not create:  # a write command needs a mindstore database, as the reads do
                await _require_database(env.db, path)
            store = await open_store(env.db, embedder=embedder)
    except MindstoreError as exc:
        hint = (
            " (pass --db PATH|URL or set MINDSTORE_DB; `mindstore demo --db PATH` creates a "
            "sample one)"
            if "no mindstore database" in str(exc)
            else ""
        )
        raise CliError(" ".join(str(exc).split()) + hint) from None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    try:
        yield store
    finally:
        await store.aclose()


async def _require_database(url: str, path: Path | None) -> None:
    """Raise "no mindstore database" when ``url`` holds no mindstore schema (an empty or
    foreign SQLite file, a PostgreSQL schema without mindstore's tables), where opening it
    for writing would create one. An older schema passes: opening it migrates it."""
    from mindstore.store import SQLiteStore

    try:
        if path is not None:
            probe: Store = await SQLiteStore(path, read_only=True).__aenter__()
        else:
            probe = await open_store(url, read_only=True)
    except MindstoreError as exc:
        if "no mindstore database" in str(exc):
            raise
        return  # (an older schema: the writable open migrates it; other errors show there)
    await probe.aclose()


async def require_session(store: Store, key: SessionKey) -> None:
    """Raise SessionNotFoundError (one line, exit 1) unless the session has a registry row,
    messages, or state of its own: a persisted prompt, skill states, session-scoped blocks (a
    session used for its context memory only was "no session" to `export`)."""
    if await store.get_session(key) is not None or await store.latest_leaf(key) is not None:
        return
    if await store.get_prompt(key) is not None or await store.get_skill_states(key):
        return
    blocks = await store.list_blocks(key.namespace, key.session_id)
    if not any(k.session_id is not None for k, _ in blocks):
        raise SessionNotFoundError(
            f"no session {key.session_id!r} in namespace {key.namespace!r} "
            "(list them with `mindstore sessions`)"
        )
