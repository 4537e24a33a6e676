"""``mindstore demo``: a scripted end-to-end tour on a fresh SQLite file.

No network, no API key, a few seconds. It never writes into an existing file: ``--db PATH``
must name a new one (a ``--db`` given to the group counts, a ``MINDSTORE_DB`` in the
environment does not). A section that fails is reported and the tour goes on; the command then
exits 1 naming the failed sections. The "model" is this script: it appends the messages an
agent would produce and calls the generated tools the way a model would. Each section uses only
the public API, so the tour doubles as a readable example. A section whose feature is not
available in this build is reported as skipped instead of failing the tour.
"""

from __future__ import annotations

import importlib
import inspect
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.padding import Padding
from rich.panel import Panel
from rich.rule import Rule
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from mindstore.errors import MindstoreError
from mindstore.store.base import SessionKey, Store

from .common import CliError, Out, current_env, json_option, run
from .render import build_tree, draw_tree, message_preview, shorten

__all__ = ["demo", "run_demo"]

SKILL_MD = """\
---
name: incident-report
description: How to write a post-incident report
---
# Incident report

1. Timeline in UTC, from first alert to all-clear.
2. Root cause in one paragraph, with the evidence.
3. What we change so it cannot happen again, each item with an owner.
"""

KNOWLEDGE = {
    "runbook-rollback": "Rollback runbook: run `deployctl rollback --to previous`, then verify "
    "the health checks and post in #incidents.",
    "runbook-migrations": "Long database migrations must run in the maintenance window with "
    "lock_timeout set; never lock the orders table at peak traffic.",
    "oncall": "The on-call engineer this week is Priya; escalate to the database team after "
    "15 minutes.",
}


def _text(role: str, text: str, mid: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": role, "parts": [{"type": "text", "text": text}]}
    if mid is not None:
        msg["id"] = mid
    return msg


# Where each feature is defined, for builds whose top-level re-exports lag behind.
_HOMES = {
    "StaticProvider": "mindstore.context.providers",
    "StoreSearchProvider": "mindstore.context.providers",
    "FileSkillProvider": "mindstore.context.providers",
    "create_compact_function": "mindstore.compaction.compact_function",
    "SessionManager": "mindstore.manager",
}


def _feature(name: str) -> Any:
    """A public name of mindstore, or None when this build does not have it yet."""
    import mindstore

    try:
        return getattr(mindstore, name)
    except (AttributeError, ImportError):
        pass
    try:
        return getattr(importlib.import_module(_HOMES[name]), name)
    except (KeyError, AttributeError, ImportError):
        return None


class Tour:
    """Prints the tour (when a console is given) and records what each section did."""

    def __init__(self, console: Console | None) -> None:
        self.console = console
        self.summary: dict[str, Any] = {"sections": {}}

    def section(self, title: str) -> None:
        if self.console is not None:
            self.console.print()
            self.console.print(Rule(Text(title, style="bold"), align="left"))

    def say(self, *items: Any) -> None:
        if self.console is not None:
            self.console.print(*items)

    def note(self, text: str) -> None:
        self.say(Text(text, style="dim"))

    def history(self, title: str, messages: list[dict[str, Any]]) -> None:
        if self.console is None:
            return
        table = Table(
            title=title, title_justify="left", show_header=False, box=None, pad_edge=False
        )
        table.add_column(style="dim", no_wrap=True)
        table.add_column(no_wrap=True)
        table.add_column()
        for m in messages:
            role = str(m.get("role"))
            style = {"user": "cyan", "assistant": "green", "tool": "yellow"}.get(role, "magenta")
            is_summary = bool((m.get("metadata") or {}).get("compaction"))
            table.add_row(
                str(m.get("id")),
                Text(role + (" (summary)" if is_summary else ""), style=style),
                Text(shorten(message_preview(m), 110)),
            )
        self.console.print(table)

    def hits(self, hits: list[Any], *, sessions: bool = False) -> None:
        if self.console is None:
            return
        if not hits:
            self.say(Text("    (no results)", style="dim"))
            return
        table = Table(show_header=False, box=None, padding=(0, 1))
        if sessions:
            table.add_column(style="blue", no_wrap=True)
        table.add_column(style="dim", no_wrap=True)
        table.add_column(no_wrap=True)
        table.add_column(min_width=40)
        for h in hits:
            row = [h.message_id, h.role, shorten(h.snippet, 90)]
            table.add_row(*[Text(v) for v in ([h.session_id, *row] if sessions else row)])
        self.console.print(Padding(table, (0, 0, 0, 4)))

    def done(self, name: str, **facts: Any) -> None:
        self.summary["sections"][name] = {"ok": True, **facts}

    def failed(self, name: str, exc: BaseException) -> None:
        self.summary["sections"][name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        self.say(Text(f"(section failed: {type(exc).__name__}: {exc})", style="bold red"))

    def skipped(self, name: str, why: str) -> None:
        self.summary["sections"][name] = {"ok": False, "skipped": why}
        self.say(Text(f"(skipped: {why})", style="yellow"))


async def _tree(store: Store, key: SessionKey) -> Tree:
    rows = await store.all_messages(key)
    comps = await store.get_compactions(key)
    leaf = await store.latest_leaf(key)
    return draw_tree(
        build_tree(rows, comps, leaf.id if leaf else None), "conversation tree", width=60
    )


@click.command()
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
    env = current_env()
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
    summary = run(run_demo(demo_db, console=None if env.json else console))
    if env.json:
        out.json(summary)
    failed = [name for name, s in summary["sections"].items() if "error" in s]
    if failed:
        raise CliError(f"demo: section(s) failed: {', '.join(failed)}")


async def run_demo(db: str | None, *, console: Console | None) -> dict[str, Any]:
    """Run the tour into ``db`` (default: a fresh file in a new temporary folder).

    Returns a summary of what each section did (printed as JSON by ``mindstore demo --json``).

    Raises:
        MindstoreError: the target file already exists (the demo writes a fresh database).
    """
    from mindstore.store.sqlite import SQLiteStore

    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="mindstore-demo-"))
    path = Path(db) if db is not None else workdir / "demo.db"
    if path.exists():
        raise MindstoreError(
            f"{path} already exists; the demo writes a fresh database (pick a new path)"
        )
    tour = Tour(console)
    tour.summary["database"] = str(path)
    tour.say(
        Panel.fit(
            Text.assemble(
                ("mindstore demo", "bold"),
                " — a scripted tour of the memory layer\n",
                ("database: ", "dim"),
                str(path),
            )
        )
    )
    async with SQLiteStore(path) as store:
        sections: list[tuple[str, Callable[[Tour, Store, Path], Awaitable[None]]]] = [
            ("history", _history),
            ("search", _search),
            ("context", _context),
            ("compaction", _compaction),
            ("sessions", _sessions),
        ]
        for name, fn in sections:
            try:
                await fn(tour, store, workdir)
            except Exception as exc:  # a broken section is reported, the tour goes on
                tour.failed(name, exc)
    elapsed = time.perf_counter() - started
    tour.summary["seconds"] = round(elapsed, 3)
    tour.section("Explore it yourself")
    tour.say(
        Text(
            textwrap.dedent(
                f"""\
                mindstore --db {path} sessions
                mindstore --db {path} tree deploy-incident
                mindstore --db {path} history deploy-incident --raw
                mindstore --db {path} search 'deploy*'
                mindstore --db {path} prompt deploy-incident
                mindstore --db {path} export deploy-incident -o incident.jsonl
                mindstore --db {path} serve    # the web viewer (viewer extra)"""
            ),
            style="cyan",
        )
    )
    tour.note(f"done in {elapsed:.2f} s")
    return tour.summary


# ---- 1. history and branches ------------------------------------------------------------------

SESSION = "deploy-incident"


async def _history(tour: Tour, store: Store, _workdir: Path) -> None:
    from mindstore.session import Session

    tour.section("1. A conversation is a tree")
    s = Session.create(store, SESSION)
    await s.append_message(
        _text("user", "Our deployment to production failed last night. What happened?", "u1")
    )
    await s.append_message(
        {
            "id": "a1",
            "role": "assistant",
            "parts": [
                {
                    "type": "tool-get_deploy_status",
                    "toolCallId": "call-1",
                    "state": "output-available",
                    "input": {"env": "prod"},
                    "output": {"status": "failed", "step": "database migration", "version": "v42"},
                },
                {
                    "type": "text",
                    "text": "Deployment v42 failed during the database migration step.",
                },
            ],
        }
    )
    await s.append_message(_text("user", "Roll back and tell me the root cause.", "u2"))
    await s.append_message(
        _text(
            "assistant",
            "Rolled back to v41. Root cause: migration m17 locked the orders table for 9 minutes.",
            "a2",
        )
    )
    tour.say("Appended 4 messages: u1 → a1 (with a tool call) → u2 → a2.")
    # Regenerate the last reply: a sibling of a2 under the same parent u2.
    await s.append_message(
        _text(
            "assistant",
            "Rollback to v41 complete. The failing migration m17 held a lock on the orders table; "
            "deploying it at peak traffic timed out the checkout service.",
            "a2-regen",
        ),
        parent_id="u2",
    )
    tour.say("Regenerated the reply to u2: [bold]a2-regen[/] is a sibling of a2 (parent_id='u2').")
    branches = await s.get_branches("u2")
    tour.say(Text(f"get_branches('u2') → {[m['id'] for m in branches]}"))
    tour.history("get_history(leaf_id='a2') — the first branch", await s.get_history("a2"))
    tour.history("get_history() — the latest branch", await s.get_history())
    tour.say(await _tree(store, s.key))
    leaf = await s.get_latest_leaf()
    tour.done(
        "history", messages=5, branches=[m["id"] for m in branches], latest_leaf=leaf and leaf["id"]
    )


# ---- 2. search -------------------------------------------------------------------------------


async def _search(tour: Tour, store: Store, _workdir: Path) -> None:
    from mindstore.session import Session

    tour.section("2. Full-text search (words, phrases, prefixes)")
    s = Session.create(store, SESSION)
    found: dict[str, list[str]] = {}
    for query, what in (
        ("migration locked", "words, ANDed and stemmed"),
        ('"orders table"', "an exact phrase"),
        ("deploy*", "a prefix: deployment, deploying, ..."),
        ('NEAR( "unbalanced -:*', "hostile input is just text"),
    ):
        hits = await s.search(query, limit=5)
        found[query] = [h.message_id for h in hits]
        tour.say(Text.assemble(("search ", "dim"), (query, "bold cyan"), (f"  — {what}", "dim")))
        tour.hits(hits)
    tour.done("search", results=found)


# ---- 3. context blocks, frozen prompt and tools ------------------------------------------------


async def _context(tour: Tour, store: Store, workdir: Path) -> None:
    tour.section("3. Context memory: blocks, frozen system prompt and the generated tools")
    static = _feature("StaticProvider")
    search_provider = _feature("StoreSearchProvider")
    skills = _feature("FileSkillProvider")
    if static is None or search_provider is None or skills is None:
        tour.skipped("context", "context providers are not in this build yet")
        return
    from mindstore.session import Session

    skill_dir = workdir / "skills" / "incident-report"
    skill_dir.mkdir(parents=True, exist_ok=True)
    (skill_dir / "SKILL.md").write_text(SKILL_MD, encoding="utf-8")
    knowledge = search_provider(store)
    s = (
        Session.create(store, SESSION)
        .with_context("soul", provider=static("You are a calm, concise site-reliability engineer."))
        .with_context(
            "memory", description="Important facts learned during conversation", max_tokens=200
        )
        .with_context("knowledge", description="Runbooks and team facts", provider=knowledge)
        .with_context("skills", provider=skills(str(workdir / "skills")))
        .with_cached_prompt()
    )
    # Fill the knowledge base the way an operator would: through the provider, bound to the
    # namespace-wide collection the session's "knowledge" block reads.
    kb = knowledge.bind(namespace=s.namespace, session_id=s.session_id, label="knowledge")
    for key, content in KNOWLEDGE.items():
        written = kb.set(key, content)
        if inspect.isawaitable(written):
            await written
    tools = await s.tools()
    prompt = await s.freeze_system_prompt()
    tour.say(
        "Frozen system prompt (rendered once, reused every turn so the prefix cache stays warm):"
    )
    tour.say(Panel(Text(prompt), expand=False))
    tour.say(f"Generated tools: {', '.join(sorted(tools))}")

    calls: list[tuple[str, dict[str, Any]]] = [
        (
            "set_context",
            {
                "label": "memory",
                "content": "Deploys of v42+ need migration m17 split first.",
                "action": "append",
            },
        ),
        ("search_context", {"label": "knowledge", "query": "rollback"}),
        ("load_context", {"label": "skills", "key": "incident-report"}),
        ("unload_context", {"label": "skills", "key": "incident-report"}),
    ]
    results: dict[str, str] = {}
    for name, args in calls:
        result = await tools.execute(name, args)
        results[name] = result
        tour.say(
            Text.assemble(("⚙ ", "yellow"), (name, "bold yellow"), (f"({_args(args)})", "dim"))
        )
        tour.say(Text(textwrap.indent(shorten(result, 300), "    → ")))
    same = await s.freeze_system_prompt() == prompt
    tour.say(f"Prompt unchanged after the write (frozen): [bold]{same}[/]")
    refreshed = await s.refresh_system_prompt()
    memory_line = next((ln for ln in refreshed.splitlines() if ln.startswith("MEMORY")), "")
    tour.say(f"After refresh_system_prompt(): {memory_line}")
    block = await s.get_context_block("memory")
    tour.done(
        "context",
        tools=sorted(tools),
        results=results,
        prompt_stable=same,
        memory=block.content if block is not None else None,
    )


def _args(args: dict[str, Any]) -> str:
    return ", ".join(f"{k}={shorten(str(v), 40)!r}" for k, v in args.items())


# ---- 4. compaction -----------------------------------------------------------------------------


def _extractive() -> Callable[..., Any] | None:
    try:
        extractive = importlib.import_module("mindstore.compaction.extractive")
    except ImportError:
        return None
    for name in ("extractive_summarize", "summarize", "extractive_summary", "summarize_extractive"):
        fn = getattr(extractive, name, None)
        if callable(fn):
            return fn  # type: ignore[no-any-return]
    return None


async def _compaction(tour: Tour, store: Store, _workdir: Path) -> None:
    tour.section("4. Compaction: a summary overlay, nothing deleted")
    make = _feature("create_compact_function")
    summarize = _extractive()
    if make is None or summarize is None:
        tour.skipped("compaction", "compaction is not in this build yet")
        return
    from mindstore.session import Session

    s = Session.create(store, SESSION).on_compaction(
        make(summarize=summarize, protect_head=1, tail_token_budget=60, min_tail_messages=2)
    )
    followups = [
        ("user", "Write down the timeline for the report."),
        (
            "assistant",
            "22:04 deploy of v42 started. 22:06 migration m17 took a lock on the orders table. "
            "22:09 checkout latency alerts fired. 22:15 rollback to v41 finished.",
        ),
        ("user", "Who was on call and did we escalate?"),
        ("assistant", "Priya was on call; she escalated to the database team at 22:12."),
        ("user", "What do we change so this cannot happen again?"),
        (
            "assistant",
            "Split m17 into batches, set lock_timeout, and run migrations in the "
            "maintenance window.",
        ),
    ]
    for i, (role, text) in enumerate(followups):
        await s.append_message(_text(role, text, f"{role[0]}{3 + i // 2}"))
    before = await s.get_history()
    tour.say(f"The active branch now has {len(before)} messages.")
    result = await s.compact()
    if result is None:
        tour.skipped("compaction", "the compaction function found nothing to summarise")
        return
    after = await s.get_history()
    raw = await s.get_path_length()
    tour.history(f"get_history() after compact(): {len(after)} messages (stored: {raw})", after)
    tour.say(Panel(Text(result.summary), title="the extractive summary", expand=False))
    comps = await s.get_compactions()
    cid = comps[-1].id
    expanded = await s.expand_compaction(cid)
    tour.say(
        f"Overlay #{cid} covers {result.from_message_id}..{result.to_message_id}; "
        f"expand_compaction({cid}) returns the {len(expanded)} original messages."
    )
    tour.say(await _tree(store, s.key))
    tour.done(
        "compaction",
        before=len(before),
        after=len(after),
        stored=raw,
        overlay=cid,
        summary=shorten(result.summary, 400),
    )


# ---- 5. many sessions and cross-session search -------------------------------------------------


async def _sessions(tour: Tour, store: Store, _workdir: Path) -> None:
    tour.section("5. Many conversations: SessionManager and cross-session search")
    manager_cls = _feature("SessionManager")
    if manager_cls is None:
        tour.skipped("sessions", "SessionManager is not in this build yet")
        return
    manager = manager_cls(store)
    info = await manager.create("Capacity planning", model="demo-model", source="demo")
    await manager.append_all(
        info.id,
        [
            _text(
                "user",
                "Plan capacity for Black Friday: checkout peaked at 4,000 requests per second.",
            ),
            _text(
                "assistant",
                "Scale checkout to 12 pods and keep database migrations out of the week; "
                "the orders table migration caused last night's incident.",
                "cap-a1",
            ),
        ],
    )
    if await manager.get(SESSION) is not None:
        await manager.rename(SESSION, "Deploy incident")
    listed = await manager.list()
    table = Table(title="manager.list()", title_justify="left")
    for col in ("session", "name", "messages"):
        table.add_column(col)
    for i in listed:
        table.add_row(Text(i.id), Text(i.name or ""), str(i.message_count))
    tour.say(table)
    hits = await manager.search("orders table")
    tour.say(
        Text.assemble(
            ("manager.search", "dim"),
            ("('orders table')", "bold cyan"),
            (" across sessions:", "dim"),
        )
    )
    tour.hits(hits, sessions=True)
    tools = await manager.tools()
    result = await tools.execute("session_search", {"query": "Black Friday"})
    tour.say(
        Text.assemble(
            ("⚙ ", "yellow"), ("session_search", "bold yellow"), ("(query='Black Friday')", "dim")
        )
    )
    tour.say(Text(textwrap.indent(shorten(result, 300), "    → ")))
    tour.done(
        "sessions",
        sessions=[i.id for i in listed],
        hits=[(h.session_id, h.message_id) for h in hits],
        session_search=result,
    )
