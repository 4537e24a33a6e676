"""Reliability of the PostgreSQL backend with real processes and a real server.

* 8 processes × 200 auto-parented appends to ONE session → one chain of 1,600 (the sessions-row
  lock serialises read-leaf-then-insert across processes);
* 8 processes on 8 sessions → 8 independent chains, nothing lost;
* a worker SIGKILLed while its transaction is open leaves no partial batch and no stuck lock;
* several stores opening (and migrating) a fresh schema at once all succeed;
* a schema written by a newer mindstore is refused with SchemaVersionError, untouched;
* a PostgreSQL restart: the operation in flight fails with StoreError (and left nothing behind),
  later operations succeed on the same store. This one runs its OWN throw-away server
  (initdb + pg_ctl in a temp dir, Unix socket only) so it never disturbs a shared server.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import pytest

from backends import REQUIRE_POSTGRES, drop_schema, new_schema_name, postgres_url_or_skip
from mindstore.errors import SchemaVersionError, StoreError
from mindstore.search import parse_query
from mindstore.session import Session
from mindstore.store.base import NewMessage, SessionKey

pytestmark = pytest.mark.postgres

PROCESSES = 8
PER_PROCESS = 200


def _text(mid: str, text: str) -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}


@pytest.fixture
async def schema() -> AsyncIterator[tuple[str, str]]:
    url = postgres_url_or_skip()
    name = new_schema_name()
    try:
        yield url, name
    finally:
        await drop_schema(url, name)


# Commits need not wait for the WAL flush here: these tests are about locking and atomicity,
# and a flush per commit (~10 ms on a slow CI disk) would make 1,600 serialised appends crawl.
FAST = {"synchronous_commit": "off"}


async def _open(url: str, schema: str, **options: Any) -> Any:
    from mindstore.store.postgres import PostgresStore

    return await PostgresStore.open(url, schema=schema, settings=FAST, **options)


# ---- many processes ----------------------------------------------------------------------------
def _append_worker(url: str, schema: str, worker: int, session: str, start: Event) -> None:
    async def run() -> None:
        store = await _open(url, schema, min_size=1, max_size=1)
        try:
            s = Session.create(store, session)
            start.wait(60)
            for i in range(PER_PROCESS):
                m = _text(f"w{worker}-{i}", f"worker {worker} message {i}")
                assert await s.append_message(m) is True
        finally:
            await store.aclose()

    asyncio.run(run())


def _run_workers(url: str, schema: str, sessions: list[str]) -> None:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [
        ctx.Process(target=_append_worker, args=(url, schema, w, sessions[w], start))
        for w in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(180)
    codes = [p.exitcode for p in procs]
    for p in procs:
        if p.is_alive():  # pragma: no cover - only on a hung worker
            p.kill()
            p.join()
    assert codes == [0] * PROCESSES, f"worker exit codes {codes}"


async def _check_chain(store: Any, session: str, workers: list[int]) -> None:
    s = Session.create(store, session)
    total = len(workers) * PER_PROCESS
    every = await store.all_messages(s.key)
    assert len(every) == total
    roots = [m for m in every if m.parent_id is None]
    assert len(roots) == 1, f"{len(roots)} roots: the session forked"
    children: dict[str, int] = {}
    for m in every:
        if m.parent_id is not None:
            children[m.parent_id] = children.get(m.parent_id, 0) + 1
    assert max(children.values()) == 1, "a message has two children: the session forked"
    history = await s.get_history()
    assert len(history) == total
    for w in workers:  # each worker's messages in the order it appended them
        mine = [m["id"] for m in history if m["id"].startswith(f"w{w}-")]
        assert mine == [f"w{w}-{i}" for i in range(PER_PROCESS)]
    leaf = await s.get_latest_leaf()
    assert leaf is not None and leaf["id"] == history[-1]["id"]
    info = await store.get_session(s.key)
    assert info is not None and info.message_count == total
    seqs = [m.seq for m in await store.path(s.key, None)]
    assert seqs == sorted(seqs) and len(set(seqs)) == total


@pytest.mark.slow
async def test_eight_processes_append_to_one_session_form_one_chain(
    schema: tuple[str, str],
) -> None:
    url, name = schema
    store = await _open(url, name)  # migrates before the race
    try:
        await asyncio.to_thread(_run_workers, url, name, ["shared"] * PROCESSES)
        await _check_chain(store, "shared", list(range(PROCESSES)))
    finally:
        await store.aclose()


@pytest.mark.slow
async def test_eight_processes_on_eight_sessions(schema: tuple[str, str]) -> None:
    url, name = schema
    store = await _open(url, name)
    try:
        sessions = [f"s{w}" for w in range(PROCESSES)]
        await asyncio.to_thread(_run_workers, url, name, sessions)
        for w, session in enumerate(sessions):
            await _check_chain(store, session, [w])
        assert (await store.stats())["messages"] == PROCESSES * PER_PROCESS
    finally:
        await store.aclose()


# ---- SIGKILL mid-transaction -------------------------------------------------------------------
def _killed_worker(url: str, schema: str, inside: Event) -> None:
    from mindstore.store import failpoints
    from mindstore.store.postgres import PostgresStore

    async def stall() -> None:
        """Stops inside the append transaction, after the rows were inserted."""
        inside.set()
        await asyncio.sleep(120)

    async def run() -> None:
        store = await PostgresStore.open(url, schema=schema, min_size=1, max_size=1)
        key = SessionKey(namespace="default", session_id="victim")
        batch = [NewMessage(message=_text(f"doomed{i}", "doomed zebra")) for i in range(50)]
        with failpoints.armed("append.after_insert", stall):
            await store.append(key, batch)  # never returns: killed while the transaction is open

    asyncio.run(run())


async def test_sigkill_mid_transaction_leaves_no_partial_write(schema: tuple[str, str]) -> None:
    url, name = schema
    store = await _open(url, name)
    try:
        s = Session.create(store, "victim")
        for i in range(3):
            await s.append_message(_text(f"ok{i}", "committed giraffe"))
        ctx = multiprocessing.get_context("spawn")
        inside = ctx.Event()
        proc = ctx.Process(target=_killed_worker, args=(url, name, inside))
        proc.start()
        try:
            assert await asyncio.to_thread(inside.wait, 60), "worker never reached its txn"
            os.kill(proc.pid, signal.SIGKILL)  # type: ignore[arg-type]
        finally:
            await asyncio.to_thread(proc.join, 30)
        assert proc.exitcode == -signal.SIGKILL

        # The server notices the dead client and rolls its transaction back; the session's row
        # lock is then free again: this append must not hang.
        await asyncio.wait_for(s.append_message(_text("after", "after the kill")), 30)
        history = await s.get_history()
        assert [m["id"] for m in history] == ["ok0", "ok1", "ok2", "after"]
        every = await store.all_messages(s.key)
        assert not [m.id for m in every if m.id.startswith("doomed")]
        info = await store.get_session(s.key)
        assert info is not None and info.message_count == 4
        assert await s.search("zebra") == []
        assert len(await s.search("giraffe", match="all")) == 3
    finally:
        await store.aclose()


# ---- migrations ------------------------------------------------------------------------------
async def test_concurrent_opens_of_a_fresh_schema_all_succeed(schema: tuple[str, str]) -> None:
    from mindstore.store.postgres.migrations import LATEST_VERSION

    url, name = schema
    stores = await asyncio.gather(*(_open(url, name, min_size=1, max_size=1) for _ in range(6)))
    try:
        for i, st in enumerate(stores):
            await Session.create(st, "s").append_message(_text(f"m{i}", f"from store {i}"))
        assert (await stores[0].stats())["schema_version"] == LATEST_VERSION
        assert (await stores[0].stats())["messages"] == len(stores)
    finally:
        for st in stores:
            await st.aclose()


async def _schema_fingerprint(url: str, name: str) -> list[Any]:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = %s ORDER BY 1",
            (name,),
        )
        rels = await cur.fetchall()
        cur = await conn.execute(
            f'SELECT version FROM "{name}".mindstore_schema UNION ALL '
            f'SELECT count(*) FROM "{name}".messages UNION ALL '
            f'SELECT count(*) FROM "{name}".sessions'
        )
        return [rels, await cur.fetchall()]


async def test_newer_schema_is_refused_and_untouched(schema: tuple[str, str]) -> None:
    import psycopg

    from mindstore.store.postgres.migrations import LATEST_VERSION

    url, name = schema
    store = await _open(url, name)
    await Session.create(store, "s").append_message(_text("a", "hello"))
    await store.aclose()
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(
            f'UPDATE "{name}".mindstore_schema SET version = %s', (LATEST_VERSION + 1,)
        )
    before = await _schema_fingerprint(url, name)
    with pytest.raises(SchemaVersionError, match="upgrade mindstore"):
        await _open(url, name)
    assert await _schema_fingerprint(url, name) == before


# ---- server restart (private throw-away server) -------------------------------------------------
def _pg_bindir() -> str | None:
    found = shutil.which("pg_ctl")
    if found:
        return str(Path(found).parent)
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return str(Path(candidates[-1]).parent) if candidates else None


class PrivateServer:
    """A PostgreSQL cluster in a temp dir listening on a Unix socket only."""

    def __init__(self, bindir: str, root: Path) -> None:
        self.bindir = bindir
        self.root = root
        self.data = root / "data"
        self.port = 55432
        self.as_postgres = os.geteuid() == 0  # the server refuses to run as root

    def _run(self, *args: str, timeout: float = 60) -> None:
        cmd = [os.path.join(self.bindir, args[0]), *args[1:]]
        if self.as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=timeout)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@/postgres?host={self.root}&port={self.port}"

    def init(self) -> None:
        if self.as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")

    def start(self) -> None:
        opts = (
            f"-p {self.port} -k {self.root} -c listen_addresses='' -c fsync=off "
            "-c full_page_writes=off -c synchronous_commit=off"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-w",
            "-t",
            "30",
            "-o",
            opts,
            "-l",
            str(self.root / "log"),
            "start",
        )

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "30", "-m", "fast", "stop")


@pytest.fixture
def private_server() -> Iterator[PrivateServer]:
    bindir = _pg_bindir()
    if bindir is None or (os.geteuid() == 0 and shutil.which("runuser") is None):
        if REQUIRE_POSTGRES:
            pytest.fail("MINDSTORE_REQUIRE_POSTGRES=1 but initdb/pg_ctl are not available")
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    root = Path(tempfile.mkdtemp(prefix="mindstore-pg-"))
    server = PrivateServer(bindir, root)
    try:
        server.init()
        server.start()
        yield server
    finally:
        with contextlib.suppress(Exception):
            server.stop()
        shutil.rmtree(root, ignore_errors=True)


async def test_server_restart_in_flight_fails_later_calls_succeed(
    private_server: PrivateServer,
) -> None:
    from mindstore.store import failpoints
    from mindstore.store.postgres import PostgresStore

    release = asyncio.Event()
    inside = asyncio.Event()

    async def stall_first() -> None:
        """The first append to get here (id 'stall') waits inside its open transaction until
        released; the later ones (background traffic) pass."""
        if inside.is_set():
            return
        inside.set()
        await release.wait()

    store = await PostgresStore.open(private_server.url, min_size=2, max_size=4, connect_timeout=20)
    # A second store whose only connection sits idle across the restart: its next calls must
    # notice the dead connection at BEGIN (nothing sent yet) and transparently use a new one.
    idle = await PostgresStore.open(private_server.url, min_size=1, max_size=1, connect_timeout=20)
    try:
        idle_session = Session.create(idle, "idle")
        await idle_session.append_message(_text("i0", "idle store before"))
        s = Session.create(store, "r")
        for i in range(5):
            await s.append_message(_text(f"before{i}", "before the restart"))

        with failpoints.armed("append.after_insert", stall_first):
            stalled = asyncio.create_task(s.append_message(_text("stall", "in flight")))
            await asyncio.wait_for(inside.wait(), 10)

            # Background traffic on other sessions while the server goes away: every call either
            # succeeds or raises StoreError, never anything else, never hangs.
            outcomes: list[str] = []
            stop = asyncio.Event()
            restarted = asyncio.Event()
            recovered = asyncio.Event()
            ok_after_restart = 0

            async def traffic(n: int) -> None:
                nonlocal ok_after_restart
                t = Session.create(store, f"bg{n}")
                i = 0
                while not stop.is_set():
                    try:
                        await t.append_message(_text(f"bg{n}-{i}", "background"))
                        outcomes.append("ok")
                        if restarted.is_set():
                            ok_after_restart += 1
                            if ok_after_restart >= 5:
                                recovered.set()
                    except StoreError:
                        outcomes.append("store-error")
                        await asyncio.sleep(0.05)
                    i += 1

            workers = [asyncio.create_task(traffic(n)) for n in range(2)]
            started = time.monotonic()
            await asyncio.to_thread(private_server.stop)
            await asyncio.to_thread(private_server.start)
            release.set()
            with pytest.raises(StoreError) as info:
                await stalled
            assert info.value.__cause__ is not None  # the psycopg error is kept

            # Later calls succeed on the same store (the pool replaced its dead connections).
            await s.append_message(_text("after", "after the restart"))
            restarted.set()
            try:
                await asyncio.wait_for(recovered.wait(), 15)
            finally:
                stop.set()
                await asyncio.gather(*workers)
            assert set(outcomes) <= {"ok", "store-error"}
            assert time.monotonic() - started < 30

            history = await s.get_history()
            assert [m["id"] for m in history] == [*(f"before{i}" for i in range(5)), "after"]
            assert await store.get_message(s.key, "stall") is None  # no partial write
            info2 = await store.get_session(s.key)
            assert info2 is not None and info2.message_count == 6

            assert await idle_session.append_message(_text("i1", "idle store after")) is True
            assert [m["id"] for m in await idle_session.get_history()] == ["i0", "i1"]
    finally:
        release.set()
        await store.aclose()
        await idle.aclose()


async def test_search_query_is_never_executed_as_sql(schema: tuple[str, str]) -> None:
    """Query tokens are bound parameters: a hostile string only ever yields word keys, and
    searching with it leaves every table in place."""
    url, name = schema
    hostile = '\'; DROP TABLE messages; -- "a b" c* :* & | ! %s %(x)s $1'
    parsed = parse_query(hostile)
    for key in (*parsed.words, *parsed.prefixes, *(t for p in parsed.phrases for t in p)):
        assert re.fullmatch(r"[^\W_]+", key), key
    store = await _open(url, name)
    try:
        s = Session.create(store, "victim")
        await s.append_message(_text("m", "drop table messages a b c"))
        for match in ("any", "all"):
            assert isinstance(await s.search(hostile, match=match), list)
        assert [h.message_id for h in await s.search("messages", match="all")] == ["m"]
    finally:
        await store.aclose()
