"""The ``mindstore`` command: inspect and operate a store from the terminal.

Thin over the public API: every command opens the store named by ``--db`` (a path or a URL,
``MINDSTORE_DB``, default ``./mindstore.db``), calls the library and prints the result — rich
tables and colour on a terminal, plain text when piped, JSON with ``--json``.

Exit codes: 0 success; 1 error (one line on stderr, no traceback); 2 usage error.
Arguments (namespace, session ids, message ids) are checked before the store is opened.
Read commands open a SQLite file read-only: they never create, migrate or change a file, and a
missing or empty file is "no mindstore database". Human output shows control characters in
stored text visibly (``␛`` for ESC …) so stored content cannot drive the terminal; ``--json``
prints the stored text exactly. Anything unexpected still becomes one line on stderr (exit 1)
that asks for a bug report — never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any, TypeVar

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from mindstore import __version__
from mindstore.errors import MindstoreError, SessionNotFoundError
from mindstore.search import parse_query
from mindstore.store._checks import check_id, check_name
from mindstore.store.base import SessionKey, Store
from mindstore.tokens import estimate_string_tokens

from .render import (
    TreeNode,
    build_tree,
    flatten_tree,
    message_preview,
    plural,
    shorten,
    to_jsonable,
    visible,
)
from .transfer import (
    decode_lines,
    export_lines,
    import_data,
    parse_export,
    read_export,
    scope_import,
)

__all__ = ["cli", "main"]

T = TypeVar("T")

DEFAULT_DB = "./mindstore.db"
ROLE_STYLES = {
    "user": "bold cyan",
    "assistant": "bold green",
    "system": "bold magenta",
    "tool": "yellow",
}


class CliError(click.ClickException):
    """An expected failure: printed as one line on stderr, exit code 1."""


@dataclass(kw_only=True, slots=True)
class Env:
    db: str
    namespace: str
    json: bool
    namespace_given: bool
    db_given: bool = False


# ---- the edge: errors become one line, never a traceback -----------------------------------


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except BrokenPipeError:
            # Output piped into `head` and the like: stop quietly.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise click.exceptions.Exit(1) from None
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


def _run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def _env() -> Env:
    env = click.get_current_context().find_object(Env)
    assert env is not None
    return env


def _checked(check: Callable[[Any, str], str], value: str, what: str) -> str:
    """An argument checked as the store would check it — but before the store is opened."""
    try:
        return check(value, what)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _namespace(env: Env) -> str:
    return _checked(check_name, env.namespace, "--namespace")


def _key(env: Env, session: str) -> SessionKey:
    return SessionKey(
        namespace=_namespace(env), session_id=_checked(check_name, session, "SESSION")
    )


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        env = ctx.find_object(Env)
        if env is not None:
            env.json = True


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        expose_value=False,
        callback=_set_json,
        help="Print machine-readable JSON.",
    )(fn)


# ---- output ----------------------------------------------------------------------------------


class Out:
    """Where human output goes: rich on a terminal, plain text when piped."""

    def __init__(self) -> None:
        self.console = Console(highlight=False)
        self.terminal = self.console.is_terminal
        if not self.terminal:
            self.console = Console(highlight=False, soft_wrap=True, no_color=True, width=10_000)
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


def _when(dt: datetime | None) -> str:
    return dt.strftime("%Y-%m-%d %H:%M:%S") if dt is not None else ""


def _role(role: str) -> Text:
    return Text(role, style=ROLE_STYLES.get(role, ""))


# ---- opening the store -----------------------------------------------------------------------


def _sqlite_path(url: str) -> Path | None:
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
    from mindstore.store import open_store

    path = _sqlite_path(env.db)
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
            from mindstore.store.sqlite import SQLiteStore

            # Read commands never create, migrate or change the file.
            # Opened now (what `async with` does): an empty or foreign file fails here.
            store: Store = await SQLiteStore(path, read_only=True, embedder=embedder).__aenter__()
        elif read_only and env.db.startswith(("postgresql://", "postgres://")):
            store = await open_store(env.db, read_only=True, embedder=embedder)
        else:
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


async def _require_session(store: Store, key: SessionKey) -> None:
    if await store.get_session(key) is None and await store.latest_leaf(key) is None:
        raise SessionNotFoundError(
            f"no session {key.session_id!r} in namespace {key.namespace!r} "
            "(list them with `mindstore sessions`)"
        )


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


# ---- demo ------------------------------------------------------------------------------------


@cli.command()
@click.option(
    "--db",
    "demo_db",
    metavar="PATH",
    default=None,
    help="SQLite file to write the tour into (default: a fresh file in a temporary folder).",
)
@json_option
def demo(demo_db: str | None) -> None:
    """A scripted end-to-end tour on a fresh SQLite file (no network, no API key)."""
    from .demo import run_demo

    env = _env()
    if demo_db is None and env.db_given:
        demo_db = env.db
    if demo_db is not None:
        if demo_db.startswith(("postgresql://", "postgres://")):
            raise CliError(
                "demo runs on a fresh SQLite file; pass --db PATH (not a PostgreSQL URL)"
            )
        if demo_db.startswith("sqlite://"):
            rest = demo_db[len("sqlite://") :]
            demo_db = rest[1:] if rest.startswith("/") else rest
    out = Out()
    console = out.console if out.terminal else Console(highlight=False, no_color=True, width=100)
    summary = _run(run_demo(demo_db, console=None if env.json else console))
    if env.json:
        out.json(summary)
    failed = [name for name, s in summary["sections"].items() if "error" in s]
    if failed:
        raise CliError(f"demo: section(s) failed: {', '.join(failed)}")


# ---- sessions --------------------------------------------------------------------------------


@cli.command()
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=0), help="0 = all.")
@json_option
def sessions(limit: int) -> None:
    """List the sessions of the namespace, most recently updated first."""
    env = _env()
    namespace = _namespace(env)

    async def go() -> tuple[list[Any], bool]:
        async with opened(env, read_only=True) as store:
            out: list[Any] = []
            before: str | None = None
            while True:
                # One more than asked for, to tell whether more pages exist.
                page_size = 200 if limit == 0 else min(200, limit + 1 - len(out))
                page = await store.list_sessions(namespace, limit=page_size, before=before)
                out.extend(page)
                if len(page) < page_size or (limit and len(out) > limit):
                    more = bool(limit) and len(out) > limit
                    return (out[:limit] if limit else out), more
                before = page[-1].id

    infos, more = _run(go())
    out = Out()
    note = (
        f"showing the {plural(limit, 'most recent session')}; more exist "
        "(--limit N for more, --limit 0 for all)"
    )
    if env.json:
        out.json(infos)
        if more:
            out.err.print(note)
        return
    if not infos:
        out.err.print(f"no sessions in namespace {env.namespace!r}")
        return
    out.table(
        ["session", "name", "messages", "updated (UTC)", "model", "parent", "ended"],
        [
            [
                i.id,
                i.name,
                i.message_count,
                _when(i.updated_at),
                i.model,
                i.parent_session_id,
                i.end_reason,
            ]
            for i in infos
        ],
        title=f"sessions in {env.namespace!r}",
    )
    if more:
        out.err.print(note)


# ---- history ---------------------------------------------------------------------------------


@cli.command()
@click.argument("session")
@click.option("--leaf", default=None, metavar="ID", help="Read the path ending at this message.")
@click.option("--raw", is_flag=True, help="Stored messages only: no compaction or unload overlays.")
@json_option
def history(session: str, leaf: str | None, raw: bool) -> None:
    """Print the root→leaf path of SESSION (the latest branch unless --leaf)."""
    env = _env()
    key = _key(env, session)
    if leaf is not None:
        _checked(check_id, leaf, "--leaf")

    async def go() -> list[dict[str, Any]]:
        from mindstore.session import Session

        async with opened(env, read_only=True) as store:
            await _require_session(store, key)
            if raw:
                return [r.message for r in await store.path(key, leaf)]
            return await Session.create(store, session, namespace=env.namespace).get_history(leaf)

    messages = _run(go())
    out = Out()
    if env.json:
        out.json(messages)
        return
    for m in messages:
        comp = (m.get("metadata") or {}).get("compaction")
        head = Text.assemble(_role(str(m.get("role"))), " ", (visible(str(m.get("id"))), "dim"))
        if comp:
            head.append(f"  [summary of {comp.get('from')}..{comp.get('to')}]", style="magenta")
        out.print(head)
        body = message_preview(m) if not out.terminal else message_preview(m, 2000)
        out.print(Text("  " + visible(body)))
    if not messages:
        out.err.print("(empty session)")


# ---- tree ------------------------------------------------------------------------------------


def _tree_label(node: TreeNode, width: int) -> Text:
    label = Text.assemble(_role(visible(node.role)), " ", (visible(node.id), "dim"), " ")
    label.append(visible(shorten(node.preview, width)), style="dim" if node.compactions else "")
    for cid in node.starts:
        label.append(f"  ⟦ compaction #{cid} from here", style="magenta")
    for cid in node.ends:
        label.append(f"  ⟧ to here (compaction #{cid})", style="magenta")
    if node.compactions and not node.starts and not node.ends:
        label.append("  ⟦compacted⟧", style="magenta dim")
    if node.latest_leaf:
        label.append("  ◀ latest", style="bold yellow")
    return label


@cli.command()
@click.argument("session")
@click.option(
    "--width",
    default=80,
    show_default=True,
    type=click.IntRange(min=1),
    help="Characters of text per message.",
)
@json_option
def tree(session: str, width: int) -> None:
    """Draw every branch of SESSION, with compaction overlays marked."""
    env = _env()
    key = _key(env, session)

    async def go() -> tuple[list[TreeNode], list[Any]]:
        async with opened(env, read_only=True) as store:
            await _require_session(store, key)
            rows = await store.all_messages(key)
            comps = await store.get_compactions(key)
            leaf = await store.latest_leaf(key)
            return build_tree(rows, comps, leaf.id if leaf else None), comps

    roots, comps = _run(go())
    out = Out()
    if env.json:
        out.json(
            {
                "session_id": session,
                "roots": [r.id for r in roots],
                "nodes": flatten_tree(roots),
                "compactions": comps,
            }
        )
        return
    top = Tree(Text(f"session {visible(session)}", style="bold"))
    # Iterative walk (conversations can be deeper than Python's recursion limit). A chain is
    # drawn flat; at a branch point each child's chain gets its own numbered sub-tree.
    stack: list[tuple[Tree, TreeNode]] = [(top, r) for r in reversed(roots)]
    while stack:
        parent, node = stack.pop()
        item = parent.add(_tree_label(node, width))
        if len(node.children) == 1:
            stack.append((parent, node.children[0]))
        elif node.children:
            subs = [
                item.add(Text(f"branch {i} of {len(node.children)}", style="bold blue"))
                for i in range(1, len(node.children) + 1)
            ]
            stack.extend(reversed(list(zip(subs, node.children, strict=True))))
    out.print(top)
    if comps:
        rows = []
        for c in comps:
            status = (
                "reverted"
                if c.reverted
                else f"superseded by #{c.superseded_by}"
                if c.superseded_by is not None
                else "active"
            )
            rows.append(
                [
                    f"#{c.id}",
                    f"{c.from_message_id}..{c.to_message_id}",
                    status,
                    shorten(c.summary, width),
                ]
            )
        out.table(["overlay", "range", "status", "summary"], rows, title="compactions")


# ---- search ----------------------------------------------------------------------------------


def _embedder_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    from .embed import embedder_option

    return embedder_option(fn)


async def _semantic_search(
    env: Env,
    namespace: str,
    query: str,
    mode: str,
    spec: str,
    session_ids: list[str] | None,
    limit: int,
    match: str = "any",
) -> list[Any]:
    from mindstore.manager import SessionManager

    from .embed import cli_embedder

    async with opened(env, read_only=True, embedder=cli_embedder(spec)) as store:
        manager = SessionManager(store, namespace=namespace)
        return await manager.search(
            query, limit=limit, session_ids=session_ids, match=match, mode=mode
        )


@cli.command()
@click.argument("query")
@click.option(
    "--session", "session_ids", multiple=True, metavar="ID", help="Only this session (repeatable)."
)
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1, max=10_000))
@click.option(
    "--all",
    "match_all",
    is_flag=True,
    help="Every word must match (default: any word, best matches first).",
)
@click.option(
    "--mode",
    type=click.Choice(["lexical", "semantic", "hybrid"]),
    default="lexical",
    show_default=True,
    help="semantic/hybrid use the vectors of `mindstore embed` (same --embedder).",
)
@_embedder_option
@json_option
def search(
    query: str,
    session_ids: tuple[str, ...],
    limit: int,
    match_all: bool,
    mode: str,
    embedder_spec: str,
) -> None:
    """Search the namespace with a question or keywords: words, "quoted phrases", prefix*."""
    env = _env()
    namespace = _namespace(env)
    for sid in session_ids:
        _checked(check_name, sid, "--session")

    async def go() -> list[Any]:
        if mode != "lexical":
            return await _semantic_search(
                env,
                namespace,
                query,
                mode,
                embedder_spec,
                list(session_ids) or None,
                limit,
                "all" if match_all else "any",
            )
        async with opened(env, read_only=True) as store:
            parsed = parse_query(query, "all" if match_all else "any")
            if parsed.empty:
                return []
            return await store.search(
                namespace, parsed, session_ids=list(session_ids) or None, limit=limit
            )

    hits = _run(go())
    out = Out()
    if env.json:
        out.json(hits)
        return
    if not hits:
        out.err.print("no results")
        return
    out.table(
        ["score", "session", "message", "role", "snippet"],
        [
            [f"{h.score:.3f}", h.session_id, h.message_id, _role(h.role), shorten(h.snippet, 160)]
            for h in hits
        ],
        title=f"{len(hits)} result(s) for {query!r}",
    )


# ---- prompt and blocks -----------------------------------------------------------------------


@cli.command()
@click.argument("session")
@json_option
def prompt(session: str) -> None:
    """Print the frozen system prompt persisted for SESSION."""
    env = _env()
    key = _key(env, session)

    async def go() -> str:
        async with opened(env, read_only=True) as store:
            text = await store.get_prompt(key)
            if text is None:
                await _require_session(store, key)
                raise CliError(
                    f"session {session!r} has no persisted system prompt "
                    "(sessions built with .with_cached_prompt() store one when it is frozen)"
                )
            return text

    text = _run(go())
    if _env().json:
        Out().json({"session_id": session, "prompt": text})
    else:
        click.echo(visible(text, keep_lines=True))


@cli.command()
@click.argument("session")
@json_option
def blocks(session: str) -> None:
    """List the stored context blocks SESSION sees (its own and namespace-wide ones)."""
    env = _env()
    key = _key(env, session)

    async def go() -> list[dict[str, Any]]:
        async with opened(env, read_only=True) as store:
            found = await store.list_blocks(key.namespace, session)
            own = [b for b in found if b[0].session_id is not None]
            if not own:
                await _require_session(store, key)
            return [
                {
                    "label": k.label,
                    "scope": "session" if k.session_id is not None else "namespace",
                    "tokens": estimate_string_tokens(content),
                    "content": content,
                }
                for k, content in found
            ]

    rows = _run(go())
    out = Out()
    if env.json:
        out.json(rows)
        return
    if not rows:
        out.err.print(f"no stored blocks for session {session!r}")
        return
    out.table(
        ["label", "scope", "tokens", "content"],
        [[r["label"], r["scope"], r["tokens"], shorten(r["content"], 100)] for r in rows],
        title=f"stored context blocks of {session!r}",
    )


# ---- export / import -------------------------------------------------------------------------


@cli.command()
@click.argument("session")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, allow_dash=True),
    default="-",
    help="File to write (default: standard output).",
)
@json_option
def export(session: str, output: str) -> None:
    """Write SESSION as JSON Lines: messages with parents, overlays, blocks, skills, prompt."""
    env = _env()
    key = _key(env, session)

    async def go() -> list[dict[str, Any]]:
        async with opened(env, read_only=True) as store:
            await _require_session(store, key)
            return await read_export(store, key)

    records = _run(go())
    if output == "-":
        # The format is UTF-8 JSON Lines whatever the terminal's locale.
        sys.stdout.flush()
        binary = getattr(sys.stdout, "buffer", None)
        for line in export_lines(records):
            if binary is not None:
                binary.write(line.encode("utf-8"))
            else:  # pragma: no cover - a text-only stdout replaced by the embedding program
                sys.stdout.write(line)
        (binary or sys.stdout).flush()
        return
    target = Path(output)
    tmp = target.with_name(target.name + ".part")
    try:
        with tmp.open("w", encoding="utf-8", newline="\n") as fh:
            _write_with_progress(fh, records)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    summary = {
        "session_id": session,
        "namespace": env.namespace,
        "file": str(target),
        "messages": records[0]["messages"],
        "compactions": records[0]["compactions"],
        "blocks": records[0]["blocks"],
    }
    out = Out()
    if env.json:
        out.json(summary)
    else:
        out.err.print(f"exported {session!r}: {_counts(summary)} → {target}", markup=False)


def _counts(summary: dict[str, Any]) -> str:
    return ", ".join(plural(summary[k], k[:-1]) for k in ("messages", "compactions", "blocks"))


PROGRESS_MIN_BYTES = 1_000_000
PROGRESS_MIN_RECORDS = 20_000


def _progress_enabled(size: int, threshold: int) -> bool:
    return size >= threshold and Console(stderr=True).is_terminal


def _write_with_progress(fh: IO[str], records: list[dict[str, Any]]) -> None:
    if not _progress_enabled(len(records), PROGRESS_MIN_RECORDS):
        fh.writelines(export_lines(records))
        return
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("exporting", total=len(records))
        for i, line in enumerate(export_lines(records), start=1):
            fh.write(line)
            if i % 1000 == 0:
                bar.update(task, completed=i)


@cli.command(name="import")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--session", "session_id", default=None, metavar="ID", help="Import under this session id."
)
@click.option(
    "--namespace-blocks/--skip-namespace-blocks",
    "namespace_blocks",
    default=None,
    help="Import the file's namespace-wide blocks (shared by every session of the namespace), "
    "or leave them out. A file that has some is refused without one of the two.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["mindstore", "openai-chat", "openai-responses", "anthropic"]),
    default="mindstore",
    show_default=True,
    help="mindstore: a `mindstore export` file; otherwise a JSON array (or JSON Lines) of that "
    "API's messages/items, imported as one new session (default id: the file name).",
)
@json_option
def import_(
    file: str, session_id: str | None, namespace_blocks: bool | None, fmt: str = "mindstore"
) -> None:
    """Import a session exported with `mindstore export` (FILE, or - for standard input).

    The whole file is validated first: a malformed line is reported as `line N: …` and
    nothing is imported. The session must not exist yet. The file does not choose where it
    lands: a namespace other than the default needs --namespace, and namespace-wide blocks
    need --namespace-blocks (or --skip-namespace-blocks). With `--format openai-chat`,
    `openai-responses` or `anthropic` FILE holds a conversation in that API's shape.
    """
    env = _env()
    out = Out()
    # Checked before the file is read and before the store is opened: nothing is touched.
    if fmt != "mindstore":
        from .foreign import foreign_session_id

        session_id = foreign_session_id(file, session_id)
    if session_id is not None:
        _checked(check_name, session_id, "--session")
    namespace = _namespace(env) if env.namespace_given else None
    # Read as bytes and decoded line by line (decode_lines), so a byte that is not UTF-8 is
    # reported with its line number, and a byte-order mark at the start is accepted.
    if file == "-":
        stream: IO[bytes] = sys.stdin.buffer
        size = 0
    else:
        stream = open(file, "rb")  # noqa: SIM115 - closed below
        size = os.fstat(stream.fileno()).st_size
    try:
        if fmt != "mindstore":
            from .foreign import parse_foreign

            assert session_id is not None
            data = parse_foreign(
                decode_lines(stream), fmt, namespace=_namespace(env), session_id=session_id
            )
        elif _progress_enabled(size, PROGRESS_MIN_BYTES):
            from rich.progress import Progress

            with Progress(console=Console(stderr=True), transient=True) as bar:
                task = bar.add_task("validating", total=size)
                data = parse_export(decode_lines(stream, progress=lambda n: bar.advance(task, n)))
        else:
            data = parse_export(decode_lines(stream))
    finally:
        if file != "-":
            stream.close()

    data = scope_import(data, namespace=namespace, namespace_blocks=namespace_blocks)

    async def go() -> SessionKey:
        async with opened(env, create=True) as store:
            if _progress_enabled(len(data.messages), PROGRESS_MIN_RECORDS // 4):
                from rich.progress import Progress

                with Progress(console=Console(stderr=True), transient=True) as bar:
                    task = bar.add_task("importing", total=len(data.messages))
                    return await import_data(
                        store,
                        data,
                        namespace=namespace,
                        session_id=session_id,
                        progress=lambda n: bar.advance(task, n),
                    )
            return await import_data(store, data, namespace=namespace, session_id=session_id)

    key = _run(go())
    summary = {
        "namespace": key.namespace,
        "session_id": key.session_id,
        "messages": len(data.messages),
        "compactions": len(data.compactions),
        "blocks": len(data.blocks),
    }
    if env.json:
        out.json(summary)
    else:
        out.err.print(
            f"imported {key.session_id!r} into namespace {key.namespace!r}: {_counts(summary)}",
            markup=False,
        )


# ---- reindex ---------------------------------------------------------------------------------


@cli.command()
@json_option
def reindex() -> None:
    """Rebuild the search index of the whole store (every namespace) from the stored messages
    and entries. Opening a store written by an older mindstore does this once by itself."""
    env = _env()

    async def go() -> int:
        async with opened(env) as store:
            if not Console(stderr=True).is_terminal or env.json:
                return await store.reindex()
            from rich.progress import Progress

            with Progress(console=Console(stderr=True), transient=True) as bar:
                task = bar.add_task("reindexing", total=None)
                return await store.reindex(
                    progress=lambda done, total: bar.update(task, completed=done, total=total)
                )

    count = _run(go())
    out = Out()
    if env.json:
        out.json({"documents": count})
        return
    out.print(f"reindexed {count} documents")


# ---- stats -----------------------------------------------------------------------------------


@cli.command()
@json_option
def stats() -> None:
    """Row counts of the whole store (every namespace)."""
    env = _env()

    async def go() -> dict[str, int]:
        async with opened(env, read_only=True) as store:
            return await store.stats()

    counts = _run(go())
    out = Out()
    if env.json:
        out.json(counts)
        return
    out.table(["what", "count"], [[k, v] for k, v in counts.items()], title=f"store {env.db}")


# ---- mcp (its own module: src/mindstore/cli/mcp_command.py) ----------------------------------
from .mcp_command import mcp_command  # noqa: E402 - registered after the group exists

cli.add_command(mcp_command)

# ---- commands in their own modules (registered on import) -----------------------------------
from . import embed as _embed  # noqa: E402, F401  (registers `mindstore embed`)
from . import namespaces as _namespaces  # noqa: E402,F401

# ---- serve (the web viewer; its code lives in mindstore.viewer) ------------------------------
from .serve import serve as _serve  # noqa: E402

cli.add_command(_serve)

# ---- embed (its own module) ------------------------------------------------------------------
