"""Whole-store commands: ``stats`` (row counts) and ``reindex`` (rebuild the search index).

Both act on every namespace of the store. ``stats`` is a read command; ``reindex`` writes, and
shows a progress bar on a terminal (never with ``--json`` or when stderr is piped) that names
its phases (:mod:`.progress`): clearing, indexing N documents, writing the index.
"""

from __future__ import annotations

from dataclasses import asdict

import click
from rich.console import Console

from .common import Out, current_env, json_option, opened, run
from .progress import ReindexPhases, show

__all__ = ["reindex", "stats"]


# ---- reindex ---------------------------------------------------------------------------------


@click.command()
@json_option
def reindex() -> None:
    """Rebuild the search index of the whole store (every namespace) from the stored messages
    and entries. Opening a store written by an older mindstore does this once by itself."""
    env = current_env()

    async def go() -> int:
        async with opened(env) as store:
            if not Console(stderr=True).is_terminal or env.json:
                return await store.reindex()
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            phases = ReindexPhases()
            columns = (
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
            )
            with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
                task = bar.add_task("", **asdict(phases.start()))

                def on_progress(done: int, total: int) -> None:
                    show(bar, task, phases.progress(done, total))

                return await store.reindex(progress=on_progress)

    count = run(go())
    out = Out()
    if env.json:
        out.json({"documents": count})
        return
    out.print(f"reindexed {count} documents")


# ---- stats -----------------------------------------------------------------------------------


@click.command()
@json_option
def stats() -> None:
    """Row counts of the whole store (every namespace)."""
    env = current_env()

    async def go() -> dict[str, int]:
        async with opened(env, read_only=True) as store:
            return await store.stats()

    counts = run(go())
    out = Out()
    if env.json:
        out.json(counts)
        return
    out.table(["what", "count"], [[k, v] for k, v in counts.items()], title=f"store {env.db}")
