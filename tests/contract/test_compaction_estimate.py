"""The running token estimate in the store, and the compact_after back-off (issue 13 item 13).

* The store extends the estimate in every append's transaction, so a fresh ``Session`` per
  request — or an append after another writer — never re-reads the history to decide whether
  to compact.
* Writes that change a path (update, delete, clear, add/revert compaction) clear it and bump
  its version; a recomputed value is stored only for the version it was computed from.
* A compaction that cannot get below the threshold backs off instead of re-compacting after
  every append, and says so once.
"""

from __future__ import annotations

from typing import Any

import pytest

from mindstore.compaction.compact_function import create_compact_function
from mindstore.errors import CompactionError
from mindstore.session import Session
from mindstore.store.base import Store


def msg(mid: str, text: str | None = None) -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text or f"text {mid}"}]}


class CountingStore:
    """Delegates to a real store, counting the calls that read a whole path."""

    def __init__(self, store: Store) -> None:
        self._inner = store
        self.path_reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def path(self, *args: Any, **kwargs: Any) -> Any:
        self.path_reads += 1
        return await self._inner.path(*args, **kwargs)


def never(messages: list[dict[str, Any]], context: Any) -> None:
    raise AssertionError("the threshold is never reached in this test")


async def test_store_extends_the_estimate_in_every_append(store: Store) -> None:
    s = Session.create(store, "est")
    for i in range(5):
        await s.append_message(msg(f"m{i}"))
    est = await store.token_estimate(s.key)
    assert est is not None
    assert est.leaf_id == "m4"
    assert est.tokens == s.count_message_tokens(await s.get_history())
    assert est.floor is None and est.margin is None
    # a batch extends it too
    from mindstore.manager import SessionManager

    await SessionManager(store).append_all("est", [msg("b0"), msg("b1")])
    est = await store.token_estimate(s.key)
    assert est is not None and est.leaf_id == "b1"
    assert est.tokens == s.count_message_tokens(await s.get_history())
    # a new root starts it again
    await s.append_message(msg("r0"), parent_id=None)
    est = await store.token_estimate(s.key)
    assert est is not None and est.leaf_id == "r0"
    assert est.tokens == s.count_message_tokens([msg("r0")])
    # an append that is not a child of the measured leaf makes it unknown
    await s.append_message(msg("x"), parent_id="m2")
    est = await store.token_estimate(s.key)
    assert est is not None and est.leaf_id is None and est.tokens is None
    assert await store.token_estimate(Session.create(store, "nobody").key) is None


async def test_set_token_estimate_is_versioned(store: Store) -> None:
    s = Session.create(store, "ver")
    for i in range(3):
        await s.append_message(msg(f"m{i}"))
    await s.append_message(msg("x"), parent_id="m0")  # unknown now
    est = await store.token_estimate(s.key)
    assert est is not None and est.tokens is None
    assert await store.set_token_estimate(
        s.key, leaf_id="x", tokens=7, version=est.version, floor=100, margin=10
    )
    got = await store.token_estimate(s.key)
    assert got is not None
    assert (got.leaf_id, got.tokens, got.floor, got.margin) == ("x", 7, 100, 10)

    # every path-changing write clears it (and the back-off) and bumps the version
    async def check(change: Any) -> None:
        before = await store.token_estimate(s.key)
        assert before is not None
        assert await store.set_token_estimate(
            s.key, leaf_id="m0", tokens=1, version=before.version, floor=5, margin=1
        )
        await change
        after = await store.token_estimate(s.key)
        assert after is not None and after.version > before.version
        assert (after.leaf_id, after.tokens, after.floor, after.margin) == (None, None, None, None)
        # a value computed before the change is refused
        assert not await store.set_token_estimate(
            s.key, leaf_id="m0", tokens=1, version=before.version
        )

    await check(s.update_message(msg("m1", "changed text")))
    await check(s.add_compaction("## Topic\nsummary", "m0", "m1"))
    [c] = await s.get_compactions()
    await check(s.revert_compaction(c.id))
    await check(s.delete_messages(["x"]))
    # unloading a skill shortens the results it had returned: re-measure; loading does not
    before = await store.token_estimate(s.key)
    assert await store.set_skill_loaded(s.key, "skills", "howto", True)
    after = await store.token_estimate(s.key)
    assert before is not None and after is not None and after.version == before.version
    await check(store.set_skill_loaded(s.key, "skills", "howto", False))
    await check(s.clear_messages())


async def test_fresh_session_per_request_never_rereads_the_history(store: Store) -> None:
    """Regression: the first append of every new Session object (and any append after another
    writer) re-read the whole history to update the compact_after estimate."""
    counting = CountingStore(store)

    def handle() -> Session:
        return Session.create(counting, "big").on_compaction(never).compact_after(10**9)  # type: ignore[arg-type]

    await _fill(store, "big", 200)
    for i in range(10):  # the server pattern: one Session per request
        await handle().append_message(msg(f"req{i}"))
    a, b = handle(), handle()
    for i in range(5):  # two writers interleaving on one session
        await a.append_message(msg(f"a{i}"))
        await b.append_message(msg(f"b{i}"))
    assert counting.path_reads <= 1  # at most the one recomputation of a never-measured session
    est = await store.token_estimate(a.key)
    assert est is not None and est.leaf_id == "b4"
    assert est.tokens == a.count_message_tokens(await a.get_history())


async def _fill(store: Store, session_id: str, n: int) -> None:
    from mindstore.manager import SessionManager

    await SessionManager(store).append_all(session_id, [msg(f"old{i}") for i in range(n)])


async def test_estimate_is_recomputed_once_after_a_compaction(store: Store) -> None:
    counting = CountingStore(store)
    s = Session.create(counting, "re").on_compaction(never).compact_after(10**9)  # type: ignore[arg-type]
    for i in range(6):
        await s.append_message(msg(f"m{i}"))
    await s.add_compaction("## Topic\nshort", "m1", "m4")
    reads = counting.path_reads
    await s.append_message(msg("m6"))
    await s.append_message(msg("m7"))
    assert counting.path_reads - reads <= 2  # recomputed once (get_history reads the path)
    est = await store.token_estimate(s.key)
    assert est is not None and est.leaf_id == "m7"
    assert est.tokens == s.count_message_tokens(await s.get_history())  # overlay counted


async def test_compaction_that_stays_above_threshold_backs_off_and_reports_once(
    store: Store,
) -> None:
    """Regression: when head + summary + tail stayed above the threshold, every append
    compacted again (53 summariser calls in 60 appends)."""
    calls: list[str] = []
    reports: list[BaseException] = []

    def summarize(prompt: str) -> str:
        calls.append(prompt)
        return f"## Topic\nsummary {len(calls)}"

    fn = create_compact_function(summarize=summarize, protect_head=3, tail_token_budget=400)
    text = "word " * 20  # ~25 tokens per message: the 400-token tail alone exceeds 300

    def handle() -> Session:  # a fresh Session per append: the back-off lives in the store
        return (
            Session.create(store, "thrash")
            .on_compaction(fn)
            .compact_after(300)
            .on_compaction_error(reports.append)
        )

    for i in range(60):
        await handle().append_message(msg(f"m{i}", f"{text} {i}"))
    assert 1 <= len(calls) <= 10, len(calls)
    assert len(reports) == 1
    assert isinstance(reports[0], CompactionError)
    assert "still above the compact_after threshold of 300" in str(reports[0])
    est = await store.token_estimate(handle().key)
    assert est is not None and est.floor is not None and est.margin is not None


async def test_back_off_warning_is_logged_without_a_handler(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    fn = create_compact_function(
        summarize=lambda p: "## Topic\nsummary", protect_head=3, tail_token_budget=400
    )
    s = Session.create(store, "logged").on_compaction(fn).compact_after(300)
    with caplog.at_level("WARNING", logger="mindstore"):
        for i in range(40):
            await s.append_message(msg(f"m{i}", "word " * 20))
    warnings = [r for r in caplog.records if "still above" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelname == "WARNING"


async def test_compaction_below_threshold_does_not_back_off(store: Store) -> None:
    calls: list[str] = []

    def summarize(prompt: str) -> str:
        calls.append(prompt)
        return "## Topic\nshort"

    fn = create_compact_function(summarize=summarize, protect_head=1, tail_token_budget=50)
    s = Session.create(store, "fine").on_compaction(fn).compact_after(300)
    for i in range(40):
        await s.append_message(msg(f"m{i}", "word " * 20))
    est = await store.token_estimate(s.key)
    assert est is not None and est.floor is None
    assert len(calls) >= 3  # compacts each time the context grows past 300 again
