"""PostgreSQL outages: unknown commit outcomes, restart recovery, frozen lock holders.

* An append whose COMMIT lost its connection asks the server (``txid_status``) whether it
  committed: committed → it returns normally; rolled back → ``StoreError`` with
  ``maybe_committed=False``; server still away → ``StoreError(maybe_committed=True)``. Every
  ``StoreError`` of an append carries the ``message_ids`` it used, so a retry never duplicates.
* After a restart the first call succeeds within ~2 s (the pool's reconnect back-off is capped).
* A worker frozen inside an append transaction blocks the other appenders of its session for at
  most ``lock_timeout`` (StoreError, nothing written); the server ends the frozen transaction
  after ``idle_in_transaction_timeout``.

Restarts run on a PRIVATE throw-away server (``PrivateServer``); never on the shared one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import test_postgres_concurrency
from pg_outage import _text, frozen_holder, restart_recovery
from test_postgres_concurrency import PrivateServer

from backends import drop_schema, new_schema_name, postgres_url_or_skip
from mindstore.errors import StoreError
from mindstore.session import Session
from mindstore.store import failpoints

pytestmark = pytest.mark.postgres

private_server = test_postgres_concurrency.private_server  # the throw-away server fixture


@pytest.fixture
async def schema() -> AsyncIterator[tuple[str, str]]:
    url = postgres_url_or_skip()
    name = new_schema_name()
    try:
        yield url, name
    finally:
        await drop_schema(url, name)


async def _admin(url: str) -> Any:
    import psycopg

    return await psycopg.AsyncConnection.connect(url, autocommit=True)


async def _wait_for_row(conn: Any, sql: str) -> Any:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        cur = await conn.execute(sql)
        row = await cur.fetchone()
        if row is not None:
            return row
        await asyncio.sleep(0.02)
    raise AssertionError(f"nothing matched {sql!r}")


async def _block_commits(admin: Any) -> None:
    """Make every synchronous COMMIT wait for a standby that never comes (committed locally,
    acknowledgement withheld): the backend can then be cut off between commit and reply."""
    await admin.execute("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
    await admin.execute("SELECT pg_reload_conf()")
    # The reload reaches the backends asynchronously: wait until this backend sees it (the
    # postmaster signals every backend together), so the next COMMIT elsewhere waits too.
    await _wait_for_row(
        admin,
        "SELECT 1 FROM pg_settings WHERE name = 'synchronous_standby_names' AND setting = 'nobody'",
    )


async def _unblock_commits(admin: Any) -> None:
    await admin.execute("ALTER SYSTEM RESET synchronous_standby_names")
    await admin.execute("SELECT pg_reload_conf()")


_WAITING_FOR_ACK = "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
_IDLE_IN_TRANSACTION = "SELECT pid FROM pg_stat_activity WHERE state = 'idle in transaction'"


# ---- item 5: the truth about a lost COMMIT --------------------------------------------------
async def test_append_whose_commit_ack_was_lost_reports_success(
    private_server: PrivateServer,
) -> None:
    """Regression: this append committed, yet raised StoreError ('server closed the connection
    unexpectedly'); a retry without an id then stored the message twice."""
    from mindstore.store.postgres import PostgresStore

    url = private_server.url
    admin = await _admin(url)
    store = await PostgresStore.open(url, settings={"synchronous_commit": "on"}, connect_timeout=20)
    try:
        s = Session.create(store, "ack")
        await s.append_message(_text("m0", "before"))
        await _block_commits(admin)
        task = asyncio.create_task(s.append_message(_text("m1", "committed, reply lost")))
        [pid] = await _wait_for_row(admin, _WAITING_FOR_ACK)
        await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        await _unblock_commits(admin)
        assert await asyncio.wait_for(task, 30) is True
        assert [m["id"] for m in await s.get_history()] == ["m0", "m1"]
    finally:
        await store.aclose()
        await admin.close()


async def test_append_cut_off_before_commit_says_nothing_was_written(
    private_server: PrivateServer,
) -> None:
    from mindstore.store.postgres import PostgresStore

    url = private_server.url
    inside = asyncio.Event()
    release = asyncio.Event()

    async def stall() -> None:
        """The append waits inside its open transaction (rows written) until released."""
        inside.set()
        await release.wait()

    admin = await _admin(url)
    store = await PostgresStore.open(url, connect_timeout=20)
    try:
        s = Session.create(store, "cut")
        with failpoints.armed("append.after_insert", stall):
            task = asyncio.create_task(
                s.append_message({"role": "user", "parts": [{"type": "text", "text": "no id"}]})
            )
            await asyncio.wait_for(inside.wait(), 20)
            # the stalled append's connection: the only one idle inside a transaction
            [pid] = await _wait_for_row(admin, _IDLE_IN_TRANSACTION)
            await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            release.set()
            with pytest.raises(StoreError) as info:
                await asyncio.wait_for(task, 30)
            assert info.value.maybe_committed is False
            [generated] = info.value.message_ids
            assert await s.get_history() == []
            # the retry with the id the error reports stores it once
            retry = {"id": generated, "role": "user", "parts": [{"type": "text", "text": "no id"}]}
            inside.clear()
            release.set()
            assert await s.append_message(retry) is True
            assert [m["id"] for m in await s.get_history()] == [generated]
    finally:
        release.set()
        await store.aclose()
        await admin.close()


async def test_append_lost_with_the_server_is_maybe_committed_and_retry_is_idempotent(
    private_server: PrivateServer,
) -> None:
    from mindstore.store.postgres import PostgresStore

    url = private_server.url
    admin = await _admin(url)
    store = await PostgresStore.open(url, settings={"synchronous_commit": "on"}, connect_timeout=2)
    msg = {"role": "user", "parts": [{"type": "text", "text": "in flight at the crash"}]}
    try:
        s = Session.create(store, "crash")
        await s.append_message(_text("m0", "before"))
        await _block_commits(admin)
        task = asyncio.create_task(s.append_message(msg))
        await _wait_for_row(admin, _WAITING_FOR_ACK)
        await admin.close()
        private_server._run("pg_ctl", "-D", str(private_server.data), "-m", "immediate", "stop")
        (private_server.data / "postgresql.auto.conf").write_text("")  # no standby to wait for
        with pytest.raises(StoreError) as info:
            await asyncio.wait_for(task, 30)
        assert info.value.maybe_committed is True
        assert "may or may not" in str(info.value)
        [mid] = info.value.message_ids
        await asyncio.to_thread(private_server.start)
        # the documented retry: same id → stored exactly once, whatever happened
        await s.append_message({**msg, "id": mid})
        ids = [m["id"] for m in await s.get_history()]
        assert ids == ["m0", mid]
    finally:
        await store.aclose()
        if not admin.closed:
            await admin.close()


# ---- item 12: restart recovery and frozen holders -------------------------------------------
async def test_first_call_after_a_restart_succeeds_within_two_seconds(
    private_server: PrivateServer,
) -> None:
    """Regression: psycopg_pool's exponential reconnect back-off (1, 2, 4, 8 … s) kept every
    call failing for up to as long as the outage after the server was back."""
    report = await restart_recovery(private_server, outage=8.0)
    assert report["failed_calls"] > 0
    assert report["first_success_s"] < 2.0, report


async def test_frozen_lock_holder_blocks_appenders_for_at_most_lock_timeout(
    schema: tuple[str, str],
) -> None:
    """Regression: a SIGSTOPped worker holding a session's row lock blocked every appender of
    that session indefinitely (still waiting after 30 s)."""
    url, name = schema
    report = await frozen_holder(url, name, lock_timeout=1.0, idle_in_transaction_timeout=4.0)
    assert all(o.startswith("StoreError") and "lock_timeout=1.0s" in o for o in report["outcomes"])
    assert report["max_wait_s"] < 4.0, report  # 1 s lock_timeout, generous for a loaded machine
    assert report["written_while_blocked"] == []
    assert report["history"] == ["first", "recovered"]  # the frozen append was rolled back
    assert report["recovered_s"] < 30, report


async def test_timeouts_are_applied_to_every_connection(schema: tuple[str, str]) -> None:
    from mindstore.store.postgres import PostgresStore

    url, name = schema
    async with await PostgresStore.open(url, schema=name) as store:
        got = await store._fetchone(
            "SELECT current_setting('lock_timeout'), current_setting('statement_timeout'), "
            "current_setting('idle_in_transaction_session_timeout')",
            (),
        )
        assert got == ("10s", "1min", "30s")
    async with await PostgresStore.open(
        url,
        schema=name,
        lock_timeout=2.5,
        statement_timeout=None,
        idle_in_transaction_timeout=None,
        settings={"lock_timeout": "3s"},  # an explicit setting wins
    ) as store:
        got = await store._fetchone(
            "SELECT current_setting('lock_timeout'), current_setting('statement_timeout'), "
            "current_setting('idle_in_transaction_session_timeout')",
            (),
        )
        assert got == ("3s", "0", "0")
    for bad in (0, -1, "10", True):
        with pytest.raises(ValueError, match="lock_timeout"):
            await PostgresStore.open(url, schema=name, lock_timeout=bad)  # type: ignore[arg-type]


async def test_statement_timeout_is_a_store_error_saying_what_to_do(
    schema: tuple[str, str],
) -> None:
    from mindstore.store.postgres import PostgresStore

    url, name = schema
    async with await PostgresStore.open(url, schema=name, statement_timeout=0.2) as store:
        with pytest.raises(StoreError, match=r"statement_timeout=0\.2s"):
            await store._fetchone("SELECT pg_sleep(2)", ())


async def test_appends_in_flight_at_a_server_crash_report_the_truth(
    private_server: PrivateServer,
) -> None:
    """Many appenders while the server crashes (``-m immediate``) and comes back: an append
    that returned is stored, one that raised with ``maybe_committed=False`` is not (the crash
    test behind the issue found 10 of 29 such 'failed' appends in the database)."""
    from mindstore.store.postgres import PostgresStore

    store = await PostgresStore.open(
        private_server.url,
        min_size=4,
        max_size=8,
        connect_timeout=15,
        settings={"synchronous_commit": "on"},
    )
    outcomes: list[tuple[str, str, str]] = []  # (session, id, ok | not | maybe)
    wrong_ids: list[str] = []
    stop = asyncio.Event()

    async def writer(n: int) -> None:
        s = Session.create(store, f"w{n}")
        i = 0
        while not stop.is_set():
            mid = f"w{n}-{i}"
            try:
                await s.append_message(_text(mid, "in flight"))
                outcomes.append((s.session_id, mid, "ok"))
            except StoreError as e:
                if getattr(e, "message_ids", None) != (mid,):
                    wrong_ids.append(mid)
                maybe = getattr(e, "maybe_committed", False)
                outcomes.append((s.session_id, mid, "maybe" if maybe else "not"))
                await asyncio.sleep(0.05)
            i += 1

    try:
        tasks = [asyncio.create_task(writer(n)) for n in range(8)]
        await asyncio.sleep(1.0)
        # Widen the window between "committed" and "acknowledged" so the crash surely hits
        # some: commits now wait for a standby that never comes (flushed, not acknowledged).
        admin = await _admin(private_server.url)
        try:
            await _block_commits(admin)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                cur = await admin.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
                )
                row = await cur.fetchone()
                if row is not None and row[0] >= 4:
                    break
                await asyncio.sleep(0.02)
        finally:
            await admin.close()
        await asyncio.to_thread(
            private_server._run, "pg_ctl", "-D", str(private_server.data), "-m", "immediate", "stop"
        )
        (private_server.data / "postgresql.auto.conf").write_text("")  # no standby after restart
        await asyncio.sleep(0.5)
        await asyncio.to_thread(private_server.start)
        await asyncio.sleep(1.5)
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        stored: set[tuple[str, str]] = set()
        for n in range(8):
            key = Session.create(store, f"w{n}").key
            stored |= {(key.session_id, m.id) for m in await store.all_messages(key)}
        lies = [
            (sess, mid, outcome)
            for sess, mid, outcome in outcomes
            if (outcome == "ok") != ((sess, mid) in stored) and outcome != "maybe"
        ]
        assert lies == [], f"{len(lies)} wrong outcomes of {len(outcomes)} appends: {lies[:5]}"
        assert wrong_ids == []
        assert {o for _, _, o in outcomes} >= {"ok"}
    finally:
        stop.set()
        await store.aclose()
