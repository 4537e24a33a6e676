"""The phases of ``reindex`` and ``embed`` as their progress bars show them.

A bar that only counts documents looks hung in the steps that count nothing: ``reindex``
clears the old index before the first count and, on SQLite, writes the index it built after
the last one (most of its run; docs/benchmarks.md); ``embed`` loads the embedding model and
embeds a whole batch before its first count. The store reports only counts
(``progress(done, total)`` / ``progress(n)``), so these classes turn the counts into named
phases — the step before the first count, the counting step, the step after the last count —
and the bar pulses (no total) in the uncounted ones instead of standing still. Each returns a
:class:`BarState` (pure) that :func:`show` applies to a rich task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["BarState", "EmbedPhases", "ReindexPhases", "show"]


@dataclass(frozen=True, kw_only=True, slots=True)
class BarState:
    """What the bar shows: ``description``, and ``completed`` of ``total`` (``total`` None: a
    step that counts nothing, shown pulsing)."""

    description: str
    completed: int = 0
    total: int | None = None


class ReindexPhases:
    """``reindex``: clearing the old index → indexing N documents → writing the index."""

    def start(self) -> BarState:
        return BarState(description="reindex: clearing the old index")

    def progress(self, done: int, total: int) -> BarState:
        if done >= total:
            # Every document is indexed; what remains (writing the postings, committing)
            # counts nothing, so the bar pulses instead of sitting at 100 %.
            return BarState(
                description=f"reindex: writing the index of {total:,} documents", completed=done
            )
        # (On SQLite the store's last count can come before the last few hundred documents
        # and the write that follows: the description says that a step comes after the bar.)
        return BarState(
            description="reindex: indexing documents, then writing the index",
            completed=done,
            total=total,
        )


class EmbedPhases:
    """``embed``: loading the embedder and embedding the first batch → embedding N messages."""

    def __init__(self, total: int, batch_size: int) -> None:
        self.total = total
        self.batch_size = batch_size
        self.done = 0

    def start(self) -> BarState:
        first = min(self.batch_size, self.total)
        return BarState(
            description=f"embed: loading the embedder, embedding the first {first:,} messages"
        )

    def progress(self, n: int) -> BarState:
        self.done += n
        return BarState(description="embed: embedding", completed=self.done, total=self.total)


def show(bar: Any, task_id: Any, state: BarState) -> None:
    """Apply ``state`` to the task of a rich ``Progress`` (``update`` cannot set the total
    back to None, which is what makes the bar pulse, so the task's total is set directly)."""
    bar.update(task_id, description=state.description, completed=state.completed)
    for task in bar.tasks:
        if task.id == task_id:
            task.total = state.total
