"""Contract: compaction (DESIGN §6) through the Session API, on every backend."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from mindstore.compaction.compact_function import CompactResult, create_compact_function
from mindstore.compaction.extractive import extractive_summarize
from mindstore.compaction.truncation import json_size, truncate_older_messages
from mindstore.errors import CompactionError, MessageNotFoundError
from mindstore.messages import dumps
from mindstore.session import Session
from mindstore.store.base import Store
from mindstore.tokens import estimate_string_tokens


def msg(mid: str, text: str | None = None, role: str = "user") -> dict[str, Any]:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": text or f"text of {mid}"}]}


def ids(messages: list[dict[str, Any]]) -> list[str]:
    return [m["id"] for m in messages]


async def chain(session: Session, *names: str, parent: str | None = None) -> None:
    for i, n in enumerate(names):
        if i == 0 and parent is not None:
            assert await session.append_message(msg(n), parent_id=parent)
        else:
            assert await session.append_message(msg(n))


def m(*numbers: int) -> list[str]:
    return [f"m{i}" for i in numbers]


class Scripted:
    """A compaction function returning a fixed range and summary; records its calls."""

    def __init__(self, frm: str, to: str, summary: str = "## Topic\nscripted summary") -> None:
        self.result = CompactResult(from_message_id=frm, to_message_id=to, summary=summary)
        self.calls: list[list[str]] = []

    def __call__(self, messages: list[dict[str, Any]], context: Any) -> CompactResult:
        self.calls.append(ids(messages))
        return self.result


# ---- overlays (§6.1) ---------------------------------------------------------------------------
async def test_overlay_replaces_range(store: Store) -> None:
    s = Session.create(store, "ov")
    await chain(s, *m(0, 1, 2, 3, 4, 5))
    c = await s.add_compaction("Summary of m1-m3", "m1", "m3")
    history = await s.get_history()
    assert ids(history) == ["m0", f"compaction_{c.id}", "m4", "m5"]
    assert history[1] == {
        "id": f"compaction_{c.id}",
        "role": "assistant",
        "parts": [{"type": "text", "text": "Summary of m1-m3"}],
        "metadata": {"compaction": {"id": c.id, "from": "m1", "to": "m3"}},
    }
    assert (c.from_message_id, c.to_message_id, c.summary) == ("m1", "m3", "Summary of m1-m3")
    assert c.superseded_by is None and not c.reverted
    # nothing was deleted
    assert await s.get_path_length() == 6
    assert await s.get_message("m2") == msg("m2")
    assert await s.get_compactions() == [c]
    # a leaf inside the range: the range is not on that path
    assert ids(await s.get_history("m2")) == m(0, 1, 2)
    assert ids(await s.get_history("m3")) == ["m0", f"compaction_{c.id}"]


async def test_iterative_rounds(store: Store) -> None:
    s = Session.create(store, "iter")
    await chain(s, *m(*range(10)))
    first = await s.add_compaction("round 1", "m1", "m7")
    assert ids(await s.get_history()) == ["m0", f"compaction_{first.id}", "m8", "m9"]
    await chain(s, *m(*range(10, 15)))
    second = await s.add_compaction("round 2", "m1", "m12")
    history = await s.get_history()
    assert ids(history) == ["m0", f"compaction_{second.id}", "m13", "m14"]
    assert history[1]["parts"][0]["text"] == "round 2"
    stored = await s.get_compactions()
    assert [c.id for c in stored] == [first.id, second.id]
    assert stored[0].superseded_by == second.id and stored[1].superseded_by is None


async def test_iterative_rounds_through_compact_extend_to_oldest_overlay(store: Store) -> None:
    s = Session.create(store, "iter2")
    await chain(s, *m(*range(10)))
    s.on_compaction(Scripted("m1", "m7", "## Topic\nround 1"))
    first = await s.compact()
    assert first is not None
    await chain(s, *m(*range(10, 15)))
    fn = Scripted("m8", "m12", "## Topic\nround 2")
    s.on_compaction(fn)
    second = await s.compact()
    assert fn.calls == [["m0", f"compaction_{first.id}", *m(*range(8, 15))]]
    assert second is not None and second.from_message_id == "m1" and second.to_message_id == "m12"
    assert ids(await s.get_history()) == ["m0", f"compaction_{second.id}", "m13", "m14"]
    assert (await s.get_compactions())[0].superseded_by == second.id


async def test_iterative_rounds_with_create_compact_function(store: Store) -> None:
    prompts: list[str] = []

    def summarize(prompt: str) -> str:
        prompts.append(prompt)
        return extractive_summarize(prompt)

    s = Session.create(store, "iter3").on_compaction(
        create_compact_function(summarize=summarize, protect_head=1, tail_token_budget=0)
    )
    await chain(s, *m(*range(10)))
    first = await s.compact()
    assert first is not None and (first.from_message_id, first.to_message_id) == ("m1", "m7")
    await chain(s, *m(*range(10, 15)))
    second = await s.compact()
    assert second is not None and (second.from_message_id, second.to_message_id) == ("m1", "m12")
    assert ids(await s.get_history()) == ["m0", f"compaction_{second.id}", "m13", "m14"]
    assert "<previous_summary>" not in prompts[0] and "<previous_summary>" in prompts[1]
    assert "text of m8" in prompts[1] and "text of m2" not in prompts[1]


async def test_sibling_branches_see_only_their_own_summaries(store: Store) -> None:
    s = Session.create(store, "branches")
    await chain(s, *m(0, 1, 2, 3))
    shared = await s.add_compaction("shared prefix", "m1", "m2")
    await chain(s, "a4", "a5", parent="m3")
    await chain(s, "b4", "b5", parent="m3")
    assert ids(await s.get_history("a5")) == ["m0", f"compaction_{shared.id}", "m3", "a4", "a5"]
    on_a = await s.add_compaction("branch a", "m1", "a4")
    assert ids(await s.get_history("a5")) == ["m0", f"compaction_{on_a.id}", "a5"]
    # the shared overlay is superseded on branch a, but still applies on branch b
    assert ids(await s.get_history("b5")) == ["m0", f"compaction_{shared.id}", "m3", "b4", "b5"]
    on_b = await s.add_compaction("branch b", "m3", "b4")
    assert ids(await s.get_history("b5")) == [
        "m0",
        f"compaction_{shared.id}",
        f"compaction_{on_b.id}",
        "b5",
    ]
    assert ids(await s.get_history("a5")) == ["m0", f"compaction_{on_a.id}", "a5"]
    stored = {c.id: c for c in await s.get_compactions()}
    assert stored[shared.id].superseded_by == on_a.id
    assert stored[on_b.id].superseded_by is None


async def test_same_millisecond_overlays_resolve_deterministically(store: Store) -> None:
    s1 = Session.create(store, "race")
    s2 = Session.create(store, "race")
    await chain(s1, *m(0, 1, 2, 3, 4))
    a, b = await asyncio.gather(
        s1.add_compaction("one", "m1", "m3"), s2.add_compaction("two", "m1", "m3")
    )
    newest = max(a.id, b.id)
    for session in (s1, s2):
        for _ in range(3):
            assert ids(await session.get_history()) == ["m0", f"compaction_{newest}", "m4"]
    # and sequentially, with identical timestamps possible
    c = await s1.add_compaction("three", "m1", "m3")
    d = await s1.add_compaction("four", "m1", "m3")
    assert c.id < d.id
    assert (await s2.get_history())[1]["parts"][0]["text"] == "four"


async def test_add_compaction_validation_changes_nothing(store: Store) -> None:
    s = Session.create(store, "valid")
    await chain(s, *m(0, 1, 2, 3))
    await chain(s, "b2", parent="m1")
    with pytest.raises(MessageNotFoundError):
        await s.add_compaction("x", "m1", "nope")
    with pytest.raises(MessageNotFoundError):
        await s.add_compaction("x", "nope", "m2")
    with pytest.raises(ValueError, match="m3"):
        await s.add_compaction("x", "m3", "m1")  # from after to
    with pytest.raises(ValueError):
        await s.add_compaction("x", "m2", "b2")  # different branches
    with pytest.raises(ValueError):
        await s.add_compaction("  ", "m1", "m2")
    assert await s.get_compactions() == []
    single = await s.add_compaction("one message", "m2", "m2")
    assert ids(await s.get_history("m3")) == ["m0", "m1", f"compaction_{single.id}", "m3"]


async def test_expand_and_revert(store: Store) -> None:
    s = Session.create(store, "revert")
    await chain(s, *m(*range(8)))
    older = await s.add_compaction("older", "m1", "m3")
    newer = await s.add_compaction("newer", "m1", "m5")
    assert await s.expand_compaction(older.id) == [msg("m1"), msg("m2"), msg("m3")]
    assert ids(await s.expand_compaction(newer.id)) == m(1, 2, 3, 4, 5)
    assert ids(await s.get_history()) == ["m0", f"compaction_{newer.id}", "m6", "m7"]
    reverted = await s.revert_compaction(newer.id)
    assert reverted.id == newer.id and reverted.reverted
    # the overlay it had superseded applies again
    assert ids(await s.get_history()) == ["m0", f"compaction_{older.id}", "m4", "m5", "m6", "m7"]
    stored = {c.id: c for c in await s.get_compactions()}
    assert stored[newer.id].reverted and stored[older.id].superseded_by is None
    await s.revert_compaction(older.id)
    assert ids(await s.get_history()) == m(*range(8))
    assert len(await s.get_compactions()) == 2  # reverted rows are kept
    with pytest.raises(CompactionError):
        await s.expand_compaction(999_999)
    with pytest.raises(CompactionError):
        await s.revert_compaction(999_999)


async def test_delete_drops_compactions_whose_range_vanished(store: Store) -> None:
    s = Session.create(store, "delete")
    await chain(s, *m(*range(7)))
    inner = await s.add_compaction("covers m1-m3", "m1", "m3")
    other = await s.add_compaction("covers m4-m5", "m4", "m5")
    await s.delete_messages(["m2"])  # inside the range: still contiguous, still applies
    assert ids(await s.get_history()) == [
        "m0",
        f"compaction_{inner.id}",
        f"compaction_{other.id}",
        "m6",
    ]
    assert ids(await s.expand_compaction(inner.id)) == ["m1", "m3"]
    await s.delete_messages(["m5"])  # the end of a range: that compaction is dropped
    assert [c.id for c in await s.get_compactions()] == [inner.id]
    assert ids(await s.get_history()) == ["m0", f"compaction_{inner.id}", "m4", "m6"]
    await s.clear_messages()
    assert await s.get_compactions() == []


async def test_recent_history_window_inside_a_range(store: Store) -> None:
    s = Session.create(store, "window")
    await chain(s, *m(*range(10)))
    c = await s.add_compaction("summary", "m1", "m6")
    full = await s.get_history()
    assert ids(full) == ["m0", f"compaction_{c.id}", "m7", "m8", "m9"]
    per_message = s.count_message_tokens([msg("m1")])
    for n in range(1, 11):
        recent = await s.get_recent_history(max_tokens=per_message * n)
        # a window is always a suffix of the full history; a cut through the range shows the
        # summary, never the compacted originals
        assert ids(recent.messages) == ids(full)[-len(recent.messages) :]
    recent = await s.get_recent_history(max_tokens=per_message * 5)
    assert ids(recent.messages) == [f"compaction_{c.id}", "m7", "m8", "m9"]
    assert recent.truncated


async def test_recent_history_with_overlapping_manual_overlays(store: Store) -> None:
    s = Session.create(store, "window2")
    await chain(s, *m(*range(10)))
    await s.add_compaction("old", "m2", "m7")
    newer = await s.add_compaction("new", "m1", "m4")  # overlaps: newest wins, old dropped
    full = await s.get_history()
    assert ids(full) == ["m0", f"compaction_{newer.id}", "m5", "m6", "m7", "m8", "m9"]
    per_message = s.count_message_tokens([msg("m1")])
    recent = await s.get_recent_history(max_tokens=per_message * 4)
    assert ids(recent.messages) == ids(full)[-len(recent.messages) :]


# ---- compact() (§6.2) --------------------------------------------------------------------------
async def test_compact_without_function_or_with_none(store: Store) -> None:
    s = Session.create(store, "nofn")
    await chain(s, *m(0, 1, 2))
    with pytest.raises(CompactionError, match="on_compaction"):
        await s.compact()
    s.on_compaction(lambda messages, context: None)
    assert await s.compact() is None
    assert await s.get_compactions() == []


@pytest.mark.parametrize(
    "summary", ["", "   \n\t", "## Topic\n## Key Points\n- \n## Current State\n...\n## Open Items"]
)
async def test_blank_summary_rejected_nothing_stored(store: Store, summary: str) -> None:
    s = Session.create(store, "blank")
    await chain(s, *m(0, 1, 2, 3))
    s.on_compaction(Scripted("m1", "m2", summary))
    with pytest.raises(CompactionError, match="no content"):
        await s.compact()
    assert await s.get_compactions() == []
    assert ids(await s.get_history()) == m(0, 1, 2, 3)


@pytest.mark.parametrize("wrong", [None, 42, {"summary": "x"}])
async def test_a_summarizer_returning_no_string_is_a_compaction_error(
    store: Store, wrong: object
) -> None:
    """``create_compact_function`` with a summarize() that returns no string: the invalid
    summary's CompactionError (it was a TypeError), nothing stored."""
    s = Session.create(store, "wrongtype")
    await chain(s, *m(0, 1, 2, 3, 4, 5))
    s.on_compaction(
        create_compact_function(summarize=lambda prompt: wrong, protect_head=1, tail_token_budget=0)
    )
    with pytest.raises(CompactionError, match="must return a string"):
        await s.compact()
    assert await s.get_compactions() == []


async def test_invalid_range_rejected(store: Store) -> None:
    s = Session.create(store, "badrange")
    await chain(s, *m(0, 1, 2, 3))
    await chain(s, "b2", parent="m1")
    for frm, to in [("m2", "m1"), ("m1", "nope"), ("m1", "m3")]:  # m3 is not on b2's path
        s.on_compaction(Scripted(frm, to))
        with pytest.raises(CompactionError):
            await s.compact("b2")
    s.on_compaction(lambda messages, context: {"not": "a result"})
    with pytest.raises(CompactionError):
        await s.compact()
    assert await s.get_compactions() == []


async def test_compact_on_a_leaf_refreshes_prompt_and_is_async_friendly(store: Store) -> None:
    s = Session.create(store, "leaf").with_context("memory")
    await chain(s, *m(0, 1, 2, 3))
    await chain(s, "b2", "b3", parent="m1")
    assert "learned later" not in await s.freeze_system_prompt()
    await s.replace_context_block("memory", "learned later")
    assert "learned later" not in await s.freeze_system_prompt()  # frozen until a refresh
    seen: list[Any] = []

    async def fn(messages: list[dict[str, Any]], context: Any) -> CompactResult:
        seen.append((ids(messages), context.leaf_id, context.session_id))
        return CompactResult(from_message_id="m1", to_message_id="m2", summary="## Topic\nok")

    s.on_compaction(fn)
    stored = await s.compact("m3")
    assert seen == [(m(0, 1, 2, 3), "m3", "leaf")]
    assert stored is not None and stored.to_message_id == "m2"
    assert "learned later" in await s.freeze_system_prompt()  # the compaction refreshed it
    assert ids(await s.get_history("b3")) == [*m(0, 1), "b2", "b3"]
    with pytest.raises(MessageNotFoundError):
        await s.compact("nope")


# ---- automatic compaction ----------------------------------------------------------------------
async def _total_tokens(s: Session, leaf: str) -> int:
    prompt = await s.freeze_system_prompt()
    return s.count_message_tokens(await s.get_history(leaf)) + estimate_string_tokens(prompt)


async def test_auto_compaction_strictly_above_threshold(store: Store) -> None:
    probe = Session.create(store, "probe")
    await chain(probe, *m(*range(6)))
    total_at_6 = await _total_tokens(probe, "m5")
    total_at_5 = await _total_tokens(probe, "m4")

    at = Scripted("m1", "m2")
    s = Session.create(store, "at").on_compaction(at).compact_after(total_at_6)
    await chain(s, *m(*range(6)))
    assert at.calls == []  # equal to the threshold: no compaction

    above = Scripted("m1", "m4")
    s = Session.create(store, "above").on_compaction(above).compact_after(total_at_6 - 1)
    await chain(s, *m(*range(5)))
    assert total_at_5 <= total_at_6 - 1 and above.calls == []
    await chain(s, "m5")
    assert above.calls == [m(*range(6))]  # threshold + 1: compaction
    assert len(await s.get_compactions()) == 1
    # the estimate now counts the overlaid path: the next small append does not compact again
    await chain(s, "m6")
    assert len(above.calls) == 1


async def test_auto_compaction_estimate_follows_branches_and_deletes(store: Store) -> None:
    probe = Session.create(store, "probe2")
    await chain(probe, *m(*range(4)))
    four = await _total_tokens(probe, "m3")
    fn = Scripted("m0", "m0")
    s = Session.create(store, "branchy").on_compaction(fn).compact_after(four)
    await chain(s, *m(*range(4)))
    await chain(s, "b1", parent="m0")  # a short branch: its own path is small
    assert fn.calls == []
    await chain(s, "b2", "b3")
    assert fn.calls == []
    await chain(s, "b4")  # five messages on this path
    assert fn.calls == [["m0", "b1", "b2", "b3", "b4"]]
    # another handle appended behind our back: the estimate is recomputed, not guessed
    other = Session.create(store, "branchy")
    await other.append_message(msg("x1"), parent_id="m3")
    await chain(s, "x2", parent="x1")
    assert len(fn.calls) == 2


async def test_auto_compaction_with_user_token_counter(store: Store) -> None:
    seen: list[tuple[list[str], str]] = []

    async def counter(messages: list[dict[str, Any]], system_prompt: str) -> int:
        seen.append((ids(messages), system_prompt))
        return 10 * len(messages)

    fn = Scripted("m1", "m3")
    s = Session.create(store, "counter").on_compaction(fn).compact_after(60, counter)
    await chain(s, *m(*range(6)))
    assert fn.calls == []
    await chain(s, "m6")
    assert len(fn.calls) == 1
    await chain(s, "m7")
    c = (await s.get_compactions())[0]
    assert seen[-1][0] == ["m0", f"compaction_{c.id}", "m4", "m5", "m6", "m7"]  # overlaid path


async def test_failing_summarizer_never_fails_the_append(store: Store) -> None:
    errors: list[BaseException] = []

    def boom(prompt: str) -> str:
        raise RuntimeError("model unavailable")

    s = (
        Session.create(store, "boom")
        .on_compaction(create_compact_function(summarize=boom, protect_head=1, tail_token_budget=0))
        .compact_after(1)
        .on_compaction_error(errors.append)
    )
    await chain(s, *m(0, 1))  # too short to compact: fn returns None, no error
    assert errors == []
    assert await s.append_message(msg("m2")) is True
    assert await s.append_message(msg("m3")) is True
    assert await s.get_message("m3") == msg("m3")
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError)
    assert str(errors[0]) == "model unavailable"
    assert await s.get_compactions() == []


async def test_async_handler_and_blank_auto_summary(store: Store) -> None:
    errors: list[BaseException] = []

    async def handler(exc: BaseException) -> None:
        errors.append(exc)

    s = (
        Session.create(store, "blank-auto")
        .on_compaction(Scripted("m0", "m0", "## Topic\n"))
        .compact_after(1)
        .on_compaction_error(handler)
    )
    assert await s.append_message(msg("m0"))
    assert len(errors) == 1 and isinstance(errors[0], CompactionError)
    assert await s.get_compactions() == []


async def test_no_handler_logs(store: Store, caplog: pytest.LogCaptureFixture) -> None:
    def fn(messages: list[dict[str, Any]], context: Any) -> CompactResult:
        raise ValueError("planner exploded")

    s = Session.create(store, "logged").on_compaction(fn).compact_after(1)
    with caplog.at_level(logging.ERROR, logger="mindstore"):
        assert await s.append_message(msg("m0"))
    records = [r for r in caplog.records if r.name == "mindstore"]
    assert len(records) == 1  # one line: the error and when the next attempt comes
    assert "ValueError: planner exploded" in records[0].getMessage()
    assert "next attempt" in records[0].getMessage()
    assert records[0].exc_info is None  # the traceback is logged at DEBUG only
    assert await s.get_message("m0") is not None


async def test_handler_that_raises_is_logged(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    def handler(exc: BaseException) -> None:
        raise KeyError("handler bug")

    s = (
        Session.create(store, "badhandler")
        .on_compaction(Scripted("zz", "zz"))
        .compact_after(1)
        .on_compaction_error(handler)
    )
    with caplog.at_level(logging.ERROR, logger="mindstore"):
        assert await s.append_message(msg("m0"))
    assert any("handler" in r.getMessage() for r in caplog.records)


# ---- boundary alignment on stored histories ----------------------------------------------------
def sdk_tool(mid: str, call: str, done: bool = True) -> dict[str, Any]:
    part: dict[str, Any] = {
        "type": "tool-deploy",
        "toolCallId": call,
        "state": "output-available" if done else "input-available",
        "input": {"env": "prod"},
    }
    if done:
        part["output"] = {"ok": True}
    return {"id": mid, "role": "assistant", "parts": [part]}


def call_msg(mid: str, call: str) -> dict[str, Any]:
    part = {"type": "dynamic-tool", "toolName": "q", "toolCallId": call, "input": {"a": 1}}
    return {"id": mid, "role": "assistant", "parts": [{**part, "state": "input-available"}]}


def result_msg(mid: str, call: str) -> dict[str, Any]:
    part = {"type": "dynamic-tool", "toolName": "q", "toolCallId": call, "output": [1, 2]}
    return {"id": mid, "role": "tool", "parts": [{**part, "state": "output-available"}]}


async def _compact_range(store: Store, name: str, messages: list[dict[str, Any]]) -> Any:
    s = Session.create(store, name).on_compaction(
        create_compact_function(summarize=extractive_summarize, protect_head=2, tail_token_budget=0)
    )
    for message in messages:
        await s.append_message(message)
    stored = await s.compact()
    return None if stored is None else (stored.from_message_id, stored.to_message_id)


async def test_alignment_separate_result_messages(store: Store) -> None:
    history = [
        msg("m0"),
        call_msg("m1", "c1"),
        result_msg("m2", "c1"),  # head would cut here: moved after the result
        msg("m3", role="assistant"),
        msg("m4"),
        call_msg("m5", "c2"),
        result_msg("m6", "c2"),  # tail would start here: moved back to the call
    ]
    assert await _compact_range(store, "sep", history) == ("m3", "m4")


async def test_alignment_ai_sdk_parts_and_pending_call(store: Store) -> None:
    history = [
        msg("m0"),
        msg("m1"),
        sdk_tool("m2", "c1"),
        msg("m3"),
        sdk_tool("m4", "c2", done=False),  # pending (no user turn since): never summarised
        msg("m5", role="assistant"),
        msg("m6", role="assistant"),
    ]
    assert await _compact_range(store, "sdk", history) == ("m2", "m3")


# ---- micro-compaction (§6.4) -------------------------------------------------------------------
async def test_truncate_older_messages_on_stored_history(store: Store) -> None:
    s = Session.create(store, "trunc")
    outputs: list[Any] = [
        "s" * 5000,
        {"status": "ok", "detail": {"log": "l" * 5000, "codes": [1, 2, 3]}},
        [{"row": i, "v": "x" * 20} for i in range(500)],
    ]
    for i, output in enumerate(outputs):
        await s.append_message(
            {
                "id": f"t{i}",
                "role": "assistant",
                "parts": [
                    {
                        "type": "tool-read",
                        "toolCallId": f"c{i}",
                        "state": "output-available",
                        "input": {"i": i},
                        "output": output,
                    }
                ],
            }
        )
    await chain(s, *m(*range(4)))
    history = await s.get_history()
    out = truncate_older_messages(history)
    assert history == await s.get_history()  # input untouched
    assert ids(out) == ids(history) and out[-4:] == history[-4:]
    string, nested, array = (out[i]["parts"][0]["output"] for i in range(3))
    rerun = "re-run the tool if you need the full output]"
    assert string.startswith("sss") and string.endswith(rerun) and len(string) < 600
    assert set(nested) == {"status", "detail", "__truncated"}
    assert nested["__truncated"].endswith(rerun) and set(nested["detail"]) == {"log", "codes"}
    assert nested["detail"]["codes"] == [1, 2, 3] and "[truncated" in nested["detail"]["log"]
    assert isinstance(array, list) and array[0] == {"row": 0, "v": "x" * 20}
    assert array[-2].endswith("more items]") and array[-1].endswith(rerun)
    assert all(json_size(o) <= 600 for o in (string, nested, array))


async def test_row_limit_giant_tool_output_and_text(store: Store) -> None:
    s = Session.create(store, "rows")
    limit = s.max_message_bytes
    tool = {
        "id": "big-tool",
        "role": "assistant",
        "parts": [
            {
                "type": "tool-cat",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {"file": "huge.log"},
                "output": "o" * 2_000_000,
            }
        ],
    }
    text = {"id": "big-text", "role": "user", "parts": [{"type": "text", "text": "u" * 2_000_000}]}
    assert await s.append_message(tool) is True
    assert await s.append_message(text) is True
    stored_tool = await s.get_message("big-tool")
    stored_text = await s.get_message("big-text")
    assert stored_tool is not None and stored_text is not None
    for stored in (stored_tool, stored_text):
        assert len(dumps(stored).encode()) <= limit
    assert stored_tool["parts"][0]["output"].startswith("ooo")
    assert stored_tool["metadata"]["mindstore"]["truncated"][0]["field"] == "output"
    # Only what does not fit is cut (issue 14 item 6): most of the 2 MB text is kept.
    kept_text = stored_text["parts"][0]["text"]
    assert kept_text.startswith("u" * 1_700_000)
    assert kept_text.endswith(" chars cut]") and "kept the first" in kept_text
    assert stored_text["metadata"]["mindstore"]["truncated"][0]["field"] == "text"
    # update goes through the same limit
    await s.update_message({"id": "big-tool", "role": "assistant", "parts": [text["parts"][0]]})
    updated = await s.get_message("big-tool")
    assert updated is not None and len(dumps(updated).encode()) <= limit
    node = await s.get_node("big-text")
    assert node is not None


async def test_row_limit_is_a_session_option(store: Store) -> None:
    s = Session.create(store, "small-rows", max_message_bytes=10_000)
    await s.append_message(msg("m0", "w" * 50_000))
    stored = await s.get_message("m0")
    assert stored is not None and len(dumps(stored).encode()) <= 10_000
    await s.append_message(msg("m1", "fits"))
    assert await s.get_message("m1") == msg("m1", "fits")


async def test_add_compaction_accepts_virtual_summary_ids(store: Store) -> None:
    s = Session.create(store, "virtual")
    await chain(s, *m(*range(6)))
    first = await s.add_compaction("first", "m1", "m2")
    second = await s.add_compaction("second", f"compaction_{first.id}", "m4")
    assert (second.from_message_id, second.to_message_id) == ("m1", "m4")
    assert ids(await s.get_history()) == ["m0", f"compaction_{second.id}", "m5"]


async def test_builder_rejects_bad_arguments(store: Store) -> None:
    s = Session.create(store, "builder")
    with pytest.raises(TypeError):
        s.on_compaction("not callable")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        s.compact_after(0)
    with pytest.raises(TypeError):
        s.compact_after(10, token_counter=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        s.on_compaction_error(None)  # type: ignore[arg-type]
