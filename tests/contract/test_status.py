"""Contract: status broadcasts (DESIGN §14) — ``Session.on_status`` in process, and the
compaction's states in the change feed for every other process."""

from __future__ import annotations

from typing import Any

import pytest

from mindstore import CompactResult, Session, SessionManager
from mindstore.changes import Change, Status
from mindstore.errors import CompactionError
from mindstore.store.base import Store


def msg(mid: str, text: str = "hello there") -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}


async def feed(store: Store) -> list[Change]:
    return [c async for c in store.changes("ns", follow=False)]


def summarize_all(messages: list[dict[str, Any]], context: Any) -> CompactResult:
    return CompactResult(messages[0]["id"], messages[-2]["id"], "## Topic\nthe talk so far")


async def test_on_status_after_every_append_and_around_compaction(store: Store) -> None:
    seen: list[Status] = []

    async def record(status: Status) -> None:
        seen.append(status)

    s = (
        Session.create(store, "s", namespace="ns")
        .on_status(record)
        .on_compaction(summarize_all)
        .compact_after(60)
    )
    await s.append_message(msg("m1"))
    assert len(seen) == 1
    first = seen[0]
    assert (first.state, first.threshold, first.session_id, first.namespace) == (
        "idle",
        60,
        "s",
        "ns",
    )
    assert first.token_estimate is not None and 0 < first.token_estimate <= 60
    for i in range(2, 12):
        await s.append_message(msg(f"m{i}", "words " * 10))
    states = [x.state for x in seen]
    assert "compacting" in states  # the threshold was crossed: an automatic compaction ran
    i = states.index("compacting")
    assert states[i + 1] == "idle"
    assert seen[i + 1].token_estimate is not None
    assert seen[i + 1].token_estimate < seen[i].token_estimate  # type: ignore[operator]

    changes = await feed(store)
    kinds = [c.kind for c in changes]
    start = kinds.index("compaction_started")
    assert kinds[start : start + 4] == [
        "compaction_started",
        "status",
        "compaction_finished",
        "status",
    ]
    assert changes[start].data == {"leaf_id": changes[start - 1].data["message_id"]}
    assert changes[start + 1].data["state"] == "compacting"
    assert changes[start + 3].data == {
        "state": "idle",
        "token_estimate": seen[i + 1].token_estimate,
        "threshold": 60,
    }
    # an append writes one event, not a status row too
    assert kinds.count("message_appended") == 11
    assert kinds.count("status") == 2 * kinds.count("compaction_started")


async def test_a_failed_compaction_is_in_the_feed_and_the_session_goes_idle(store: Store) -> None:
    seen: list[Status] = []

    def broken(messages: list[dict[str, Any]], context: Any) -> CompactResult:
        raise RuntimeError("the model is down")

    s = Session.create(store, "s", namespace="ns").on_status(seen.append).on_compaction(broken)
    await s.append_message(msg("m1"))
    # no compact_after: the callback still gets the measured context, threshold None
    assert [(x.state, x.threshold) for x in seen] == [("idle", None)]
    assert seen[0].token_estimate is not None and seen[0].token_estimate > 0
    with pytest.raises(RuntimeError):
        await s.compact()
    kinds = [c.kind for c in await feed(store)]
    assert kinds == [
        "message_appended",
        "compaction_started",
        "status",
        "compaction_failed",
        "status",
    ]
    failed = (await feed(store))[3]
    assert failed.data == {"leaf_id": "m1", "error": "RuntimeError: the model is down"}
    assert [x.state for x in seen][-2:] == ["compacting", "idle"]

    def invalid(messages: list[dict[str, Any]], context: Any) -> CompactResult:
        return CompactResult("m1", "m1", "   ")

    s.on_compaction(invalid)
    with pytest.raises(CompactionError):
        await s.compact()
    assert (await feed(store))[-2].kind == "compaction_failed"


async def test_a_raising_status_callback_never_fails_an_append(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    def bad(status: Status) -> None:
        raise ValueError("callback bug")

    s = Session.create(store, "s", namespace="ns").on_status(bad)
    assert await s.append_message(msg("m1"))
    assert "on_status callback" in caplog.text
    with pytest.raises(TypeError):
        s.on_status("not callable")  # type: ignore[arg-type]


async def test_manager_sessions_report_status(store: Store) -> None:
    seen: list[Status] = []
    m = SessionManager(store, namespace="ns").on_status(seen.append)
    info = await m.create("chat")
    await m.append(info.id, msg("m1"))
    assert [(x.session_id, x.state) for x in seen] == [(info.id, "idle")]
