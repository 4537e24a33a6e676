"""Automatic compaction when the summariser fails, and off the append path (issue 30 item 2).

* A summariser that raises (a model API outage) backs off like a compaction that stays above
  the threshold: the next attempt waits for the context to grow by a doubling margin, each
  failure is reported once (handler, else one log line), and a recovered summariser compacts
  again.
* ``compact_after(threshold, background=True)``: ``append_message`` returns without waiting
  for the model; the compaction runs in a task the session owns; ``wait_compaction()`` waits
  for it; its errors go to ``on_compaction_error``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from mindstore.compaction.compact_function import create_compact_function
from mindstore.manager import SessionManager
from mindstore.session import Session
from mindstore.store.base import Store

TEXT = "word " * 20  # ~25 tokens a message


def msg(mid: str, text: str = TEXT) -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": f"{text} {mid}"}]}


class Summariser:
    """A scripted model: fails while ``down``, else answers a short summary; counts calls."""

    def __init__(self, *, down: bool = False) -> None:
        self.down = down
        self.calls = 0

    def __call__(self, prompt: str) -> str:
        self.calls += 1
        if self.down:
            raise ConnectionError("model API unavailable (HTTP 503)")
        return "## Topic\nshort summary"


def compact_fn(summarise: Any) -> Any:
    return create_compact_function(summarize=summarise, protect_head=1, tail_token_budget=50)


async def test_a_failing_summariser_backs_off_and_recovers(store: Store) -> None:
    """Regression: every append past the threshold called the failing model again."""
    model = Summariser(down=True)
    errors: list[BaseException] = []
    s = (
        Session.create(store, "outage")
        .on_compaction(compact_fn(model))
        .compact_after(300)
        .on_compaction_error(errors.append)
    )
    for i in range(60):
        assert await s.append_message(msg(f"m{i}"))  # never fails the append
    # ~50 appends over the threshold: with a doubling margin (30, 60, 120, … tokens of
    # growth) only a handful of attempts; without back-off it was one per append.
    assert 2 <= model.calls <= 6, model.calls
    assert len(errors) == model.calls  # each failure reported once
    assert all(isinstance(e, ConnectionError) for e in errors)
    assert await s.get_compactions() == []
    est = await store.token_estimate(s.key)
    assert est is not None and est.floor is not None and est.margin is not None
    # The model comes back: once the context grows past the back-off, it compacts.
    model.down = False
    calls = model.calls
    for i in range(60, 160):
        await s.append_message(msg(f"m{i}"))
        if await s.get_compactions():
            break
    assert model.calls > calls
    assert await s.get_compactions()
    assert len(errors) == calls  # no new error once it recovered


async def test_each_back_off_step_is_one_log_line(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    model = Summariser(down=True)
    s = Session.create(store, "outage-log").on_compaction(compact_fn(model)).compact_after(300)
    with caplog.at_level(logging.ERROR, logger="mindstore"):
        for i in range(40):
            await s.append_message(msg(f"m{i}"))
    records = [r for r in caplog.records if r.name == "mindstore"]
    assert model.calls >= 2
    assert len(records) == model.calls  # one line per failed attempt, nothing else
    floors = []
    for record in records:
        text = record.getMessage()
        assert record.exc_info is None and "\n" not in text  # no traceback
        assert "ConnectionError: model API unavailable (HTTP 503)" in text
        assert "'outage-log'" in text
        floors.append(int(text.split("context exceeds ")[1].split()[0]))
    assert floors == sorted(floors) and len(set(floors)) == len(floors)  # later each time


class GatedModel:
    """An async summariser that waits for ``release`` (a slow model call)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.calls = 0
        self.fail = False

    async def __call__(self, prompt: str) -> str:
        self.calls += 1
        self.started.set()
        await self.release.wait()
        if self.fail:
            raise TimeoutError("the model timed out")
        return "## Topic\nbackground summary"


async def test_background_compaction_does_not_hold_the_append(store: Store) -> None:
    model = GatedModel()
    s = (
        Session.create(store, "bg")
        .on_compaction(compact_fn(model))
        .compact_after(300, background=True)
    )
    for i in range(14):  # past the threshold: a compaction starts and waits for the model
        assert await s.append_message(msg(f"m{i}"))
    await asyncio.wait_for(model.started.wait(), 10)
    assert s.compactor.running
    # Appends go on while the model is still working, and return.
    for i in range(14, 18):
        assert await asyncio.wait_for(s.append_message(msg(f"m{i}")), 5)
    assert await s.get_compactions() == []
    assert model.calls == 1  # one compaction at a time per session
    model.release.set()
    await asyncio.wait_for(s.wait_compaction(), 10)
    assert not s.compactor.running
    compactions = await s.get_compactions()
    assert compactions
    history = await s.get_history()
    assert history[-1]["id"] == "m17"
    assert any(m["id"].startswith("compaction_") for m in history)
    # The appends made during the compaction were checked afterwards (at most once more).
    assert model.calls <= 2


async def test_background_errors_go_to_the_handler_and_wait_does_not_raise(
    store: Store,
) -> None:
    model = GatedModel()
    model.fail = True
    model.release.set()
    errors: list[BaseException] = []
    s = (
        Session.create(store, "bg-fail")
        .on_compaction(compact_fn(model))
        .compact_after(300, background=True)
        .on_compaction_error(errors.append)
    )
    for i in range(16):
        assert await s.append_message(msg(f"m{i}"))
        await s.wait_compaction()
    assert model.calls >= 1
    assert len(errors) == model.calls
    assert all(isinstance(e, TimeoutError) for e in errors)
    assert await s.get_compactions() == []
    assert len(await s.get_history()) == 16


async def test_cancelling_the_wait_leaves_the_compaction_running(store: Store) -> None:
    model = GatedModel()
    s = (
        Session.create(store, "bg-cancel")
        .on_compaction(compact_fn(model))
        .compact_after(300, background=True)
    )
    await s.wait_compaction()  # nothing running: returns at once
    for i in range(14):
        await s.append_message(msg(f"m{i}"))
    await asyncio.wait_for(model.started.wait(), 10)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(s.wait_compaction(), 0.05)
    assert s.compactor.running
    model.release.set()
    await asyncio.wait_for(s.wait_compaction(), 10)
    assert await s.get_compactions()


async def test_background_must_be_a_bool(store: Store) -> None:
    with pytest.raises(TypeError, match="background"):
        Session.create(store, "x").compact_after(100, background="yes")  # type: ignore[arg-type]


async def test_one_background_compaction_per_session_whatever_object_appends(
    store: Store,
) -> None:
    """A server builds a Session per request: the appends of many Session objects of one
    session share one background compaction, and the manager waits for it."""
    model = GatedModel()
    manager = (
        SessionManager(store, session_cache_size=0)
        .on_compaction(compact_fn(model))
        .compact_after(300, background=True)
    )
    for i in range(14):
        assert await manager.append("served", msg(f"m{i}"))
    await asyncio.wait_for(model.started.wait(), 10)
    for i in range(14, 20):  # each through a fresh Session object, while the model works
        assert await manager.append("served", msg(f"m{i}"))
    assert model.calls == 1
    assert manager.session("served").compactor.running  # seen from yet another object
    waiting = asyncio.ensure_future(manager.wait_compaction())
    await asyncio.sleep(0.05)
    assert not waiting.done()
    model.release.set()
    await asyncio.wait_for(waiting, 10)
    assert not manager.session("served").compactor.running
    assert await manager.session("served").get_compactions()
    assert model.calls <= 2
