"""PostgreSQL outage scenarios, shared by ``test_postgres_outages.py`` and ``bench/reliability.py``.

* :func:`restart_recovery` — stop a PRIVATE throw-away server (see
  ``test_postgres_concurrency.PrivateServer``; never the shared one) for ``outage`` seconds while
  a store keeps calling, start it again and time the first call that succeeds.
* :func:`frozen_holder` — a worker process takes a session's row lock inside an append
  transaction and is frozen with SIGSTOP; other appenders of that session must fail within
  ``lock_timeout`` (StoreError, nothing written) and appends succeed again once the server has
  ended the frozen transaction (``idle_in_transaction_timeout``).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time
from multiprocessing.synchronize import Event
from typing import Any

from mindstore.errors import StoreError
from mindstore.session import Session
from mindstore.store.base import NewMessage, SessionKey


def _text(mid: str, text: str) -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}


async def restart_recovery(
    server: Any, *, outage: float, connect_timeout: float = 1.0
) -> dict[str, Any]:
    """Seconds from the server accepting connections again to the first successful append."""
    from mindstore.store.postgres import PostgresStore

    store = await PostgresStore.open(
        server.url, min_size=2, max_size=4, connect_timeout=connect_timeout
    )
    try:
        s = Session.create(store, "restart")
        for i in range(3):
            await s.append_message(_text(f"before{i}", "before the outage"))
        await asyncio.to_thread(server.stop)
        failed = 0
        down_until = time.monotonic() + outage
        i = 0
        while time.monotonic() < down_until:  # calls during the outage fail, never hang
            i += 1
            try:
                await asyncio.wait_for(
                    s.append_message(_text(f"down{i}", "during")), connect_timeout + 10
                )
            except StoreError:
                failed += 1
            await asyncio.sleep(0.2)
        await asyncio.to_thread(server.start)
        back = time.monotonic()
        while True:
            i += 1
            try:
                await asyncio.wait_for(
                    s.append_message(_text(f"after{i}", "after")), connect_timeout + 10
                )
                break
            except StoreError:
                failed += 1
                if time.monotonic() - back > 120:
                    raise
        first_ok = time.monotonic() - back
        history = [m["id"] for m in await s.get_history()]
        assert history[:3] == ["before0", "before1", "before2"] and history[-1] == f"after{i}"
        return {"outage_s": outage, "failed_calls": failed, "first_success_s": first_ok}
    finally:
        await store.aclose()


# ---- a frozen lock holder ------------------------------------------------------------------------
def _holder(url: str, schema: str, timeouts: dict[str, float], inside: Event) -> None:
    from mindstore.store import failpoints
    from mindstore.store.postgres import PostgresStore

    async def hold() -> None:
        """Stops inside the append transaction (session row locked) until frozen."""
        inside.set()
        await asyncio.sleep(600)

    async def run() -> None:
        store = await PostgresStore.open(url, schema=schema, min_size=1, max_size=1, **timeouts)
        key = SessionKey(namespace="default", session_id="frozen")
        with failpoints.armed("append.after_insert", hold):
            await store.append(key, [NewMessage(message=_text("held", "held lock"))])

    asyncio.run(run())


async def frozen_holder(
    url: str,
    schema: str,
    *,
    lock_timeout: float,
    idle_in_transaction_timeout: float,
    appenders: int = 3,
) -> dict[str, Any]:
    """Max seconds an appender waited behind a SIGSTOPped lock holder, and seconds from the
    freeze until an append succeeded again."""
    from mindstore.store.postgres import PostgresStore

    timeouts = {
        "lock_timeout": lock_timeout,
        "idle_in_transaction_timeout": idle_in_transaction_timeout,
    }
    store = await PostgresStore.open(url, schema=schema, max_size=appenders + 1, **timeouts)
    ctx = multiprocessing.get_context("spawn")
    inside = ctx.Event()
    proc = ctx.Process(target=_holder, args=(url, schema, timeouts, inside))
    try:
        s = Session.create(store, "frozen")
        await s.append_message(_text("first", "before the freeze"))
        proc.start()
        assert await asyncio.to_thread(inside.wait, 60), "the holder never took the lock"
        os.kill(proc.pid, signal.SIGSTOP)  # type: ignore[arg-type]
        frozen_at = time.monotonic()

        async def blocked(n: int) -> tuple[float, str]:
            t = time.monotonic()
            try:
                await asyncio.wait_for(s.append_message(_text(f"blocked{n}", "x")), 120)
                outcome = "ok"
            except StoreError as e:
                outcome = f"StoreError: {e}"
            except TimeoutError:
                outcome = "hung"
            return time.monotonic() - t, outcome

        waits = await asyncio.gather(*(blocked(n) for n in range(appenders)))
        stored = {m.id for m in await store.all_messages(s.key)}
        while True:  # the server ends the frozen transaction: appends work again
            try:
                await s.append_message(_text("recovered", "after the freeze"))
                break
            except StoreError:
                if time.monotonic() - frozen_at > 120:
                    raise
                await asyncio.sleep(0.1)
        recovered = time.monotonic() - frozen_at
        history = [m["id"] for m in await s.get_history()]
        return {
            "waits_s": [w for w, _ in waits],
            "outcomes": [o for _, o in waits],
            "max_wait_s": max(w for w, _ in waits),
            "written_while_blocked": sorted(i for i in stored if i.startswith("blocked")),
            "recovered_s": recovered,
            "history": history,
        }
    finally:
        if proc.pid is not None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            await asyncio.to_thread(proc.join, 30)
        await store.aclose()
