"""The commands that read one namespace's conversations: ``sessions``, ``history``, ``tree``,
``prompt`` and ``blocks``.

All of them are read commands (the store is opened read-only) and go through the public API:
the store's read methods and, for ``history`` with overlays, :meth:`mindstore.Session.get_history`.
A session is "found" when it has a registry row or messages; otherwise the command fails with
``no session … (list them with `mindstore sessions`)``.
"""

from __future__ import annotations

from typing import Any

import click
from rich.text import Text

from mindstore.session import Session
from mindstore.tokens import estimate_string_tokens

from .common import (
    CliError,
    Out,
    checked_id,
    current_env,
    json_option,
    namespace_of,
    opened,
    require_session,
    run,
    session_key,
    when,
)
from .render import (
    TreeNode,
    build_tree,
    draw_tree,
    flatten_tree,
    message_preview,
    plural,
    role_text,
    shorten,
    visible,
)

__all__ = ["blocks", "history", "prompt", "sessions", "tree"]


# ---- sessions --------------------------------------------------------------------------------


@click.command()
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=0), help="0 = all.")
@json_option
def sessions(limit: int) -> None:
    """List the sessions of the namespace, most recently updated first."""
    env = current_env()
    namespace = namespace_of(env)

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

    infos, more = run(go())
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
                when(i.updated_at),
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


@click.command()
@click.argument("session")
@click.option("--leaf", default=None, metavar="ID", help="Read the path ending at this message.")
@click.option("--raw", is_flag=True, help="Stored messages only: no compaction or unload overlays.")
@json_option
def history(session: str, leaf: str | None, raw: bool) -> None:
    """Print the root→leaf path of SESSION (the latest branch unless --leaf)."""
    env = current_env()
    key = session_key(env, session)
    if leaf is not None:
        checked_id(leaf, "--leaf")

    async def go() -> list[dict[str, Any]]:
        async with opened(env, read_only=True) as store:
            await require_session(store, key)
            if raw:
                return [r.message for r in await store.path(key, leaf)]
            return await Session.create(store, session, namespace=env.namespace).get_history(leaf)

    messages = run(go())
    out = Out()
    if env.json:
        out.json(messages)
        return
    for m in messages:
        comp = (m.get("metadata") or {}).get("compaction")
        head = Text.assemble(role_text(str(m.get("role"))), " ", (visible(str(m.get("id"))), "dim"))
        if comp:
            head.append(f"  [summary of {comp.get('from')}..{comp.get('to')}]", style="magenta")
        out.print(head)
        body = message_preview(m) if not out.terminal else message_preview(m, 2000)
        out.print(Text("  " + visible(body)))
    if not messages:
        out.err.print("(empty session)")


# ---- tree ------------------------------------------------------------------------------------


@click.command()
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
    env = current_env()
    key = session_key(env, session)

    async def go() -> tuple[list[TreeNode], list[Any]]:
        async with opened(env, read_only=True) as store:
            await require_session(store, key)
            rows = await store.all_messages(key)
            comps = await store.get_compactions(key)
            leaf = await store.latest_leaf(key)
            return build_tree(rows, comps, leaf.id if leaf else None), comps

    roots, comps = run(go())
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
    out.print(draw_tree(roots, f"session {session}", width=width))
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


# ---- prompt and blocks -----------------------------------------------------------------------


@click.command()
@click.argument("session")
@json_option
def prompt(session: str) -> None:
    """Print the frozen system prompt persisted for SESSION."""
    env = current_env()
    key = session_key(env, session)

    async def go() -> str:
        async with opened(env, read_only=True) as store:
            text = await store.get_prompt(key)
            if text is None:
                await require_session(store, key)
                raise CliError(
                    f"session {session!r} has no persisted system prompt "
                    "(sessions built with .with_cached_prompt() store one when it is frozen)"
                )
            return text

    text = run(go())
    if current_env().json:
        Out().json({"session_id": session, "prompt": text})
    else:
        click.echo(visible(text, keep_lines=True))


@click.command()
@click.argument("session")
@json_option
def blocks(session: str) -> None:
    """List the stored context blocks SESSION sees (its own and namespace-wide ones)."""
    env = current_env()
    key = session_key(env, session)

    async def go() -> list[dict[str, Any]]:
        async with opened(env, read_only=True) as store:
            found = await store.list_blocks(key.namespace, session)
            own = [b for b in found if b[0].session_id is not None]
            if not own:
                await require_session(store, key)
            return [
                {
                    "label": k.label,
                    "scope": "session" if k.session_id is not None else "namespace",
                    "tokens": estimate_string_tokens(content),
                    "content": content,
                }
                for k, content in found
            ]

    rows = run(go())
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
