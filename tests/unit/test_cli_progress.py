"""The phases the ``reindex`` and ``embed`` progress bars name (issue 30 item 4): a step that
counts nothing pulses under its own name instead of a bar standing at 0 or 100 %."""

from __future__ import annotations

from rich.progress import Progress

from mindstore.cli.progress import BarState, EmbedPhases, ReindexPhases, show


def test_reindex_phases() -> None:
    phases = ReindexPhases()
    assert phases.start() == BarState(description="reindex: clearing the old index")
    assert phases.progress(500, 1200) == BarState(
        description="reindex: indexing documents, then writing the index", completed=500, total=1200
    )
    # Everything counted: what is left (writing the index) is not shown as a full bar.
    last = phases.progress(1200, 1200)
    assert last == BarState(description="reindex: writing the index of 1,200 documents",
                            completed=1200, total=None)  # fmt: skip


def test_embed_phases() -> None:
    phases = EmbedPhases(total=130, batch_size=64)
    assert phases.start() == BarState(
        description="embed: loading the embedder, embedding the first 64 messages"
    )
    assert phases.progress(64) == BarState(description="embed: embedding", completed=64, total=130)
    assert phases.progress(64).completed == 128
    assert EmbedPhases(total=5, batch_size=64).start().description.endswith("first 5 messages")


def test_show_sets_a_pulsing_bar_back() -> None:
    with Progress(transient=True, disable=True) as bar:
        task = bar.add_task("x", total=10)
        show(bar, task, BarState(description="counting", completed=3, total=10))
        assert (bar.tasks[0].description, bar.tasks[0].completed, bar.tasks[0].total) == (
            "counting", 3, 10
        )  # fmt: skip
        show(bar, task, BarState(description="writing", completed=10))
        assert bar.tasks[0].total is None and bar.tasks[0].description == "writing"
