"""What the stores report drives the ``reindex`` / ``embed`` bars through their phases, on
every backend (issue 30 item 4): the counts start after the uncounted first step, reach the
total, and the bar ends in the uncounted last step rather than standing at 100 %."""

from __future__ import annotations

from backends import Storage
from embedders import HashEmbedder
from mindstore.cli.progress import BarState, EmbedPhases, ReindexPhases
from mindstore.session import Session
from mindstore.store.base import NewMessage, Store


async def fill(store: Store, n: int) -> None:
    s = Session.create(store, "p")
    batch = [
        NewMessage(
            message={"id": f"m{i}", "role": "user",
                     "parts": [{"type": "text", "text": f"deploy {i} staging"}]},
            tokens=5,
        )
        for i in range(n)
    ]  # fmt: skip
    await store.append(s.key, batch)


async def test_reindex_ends_in_the_writing_phase(store: Store) -> None:
    await fill(store, 4503)
    phases = ReindexPhases()
    states: list[BarState] = [phases.start()]
    count = await store.reindex(progress=lambda d, t: states.append(phases.progress(d, t)))
    assert count == 4503
    assert states[0].description == "reindex: clearing the old index"
    counted = [s for s in states if s.total is not None]
    assert counted and all(s.total == 4503 for s in counted)
    assert [s.completed for s in counted] == sorted(s.completed for s in counted)
    assert states[-1] == BarState(
        description="reindex: writing the index of 4,503 documents", completed=4503
    )


async def test_embed_leaves_the_loading_phase_with_the_first_batch(storage: Storage) -> None:
    store = await storage.open(embedder=HashEmbedder())
    try:
        await fill(store, 150)
        total = await store.pending_embeddings()  # type: ignore[attr-defined]
        phases = EmbedPhases(total, 64)
        states = [phases.start()]
        done = await store.embed_pending(  # type: ignore[attr-defined]
            batch_size=64, progress=lambda n: states.append(phases.progress(n))
        )
        assert done == total == 150
        assert states[0].description.startswith("embed: loading the embedder")
        assert [s.completed for s in states[1:]] == [64, 128, 150]
        assert states[-1] == BarState(description="embed: embedding", completed=150, total=150)
    finally:
        await store.aclose()
