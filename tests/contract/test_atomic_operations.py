"""Contract: the multi-step operations — fork, compact_and_split, import, export — are each one
transaction, on every backend (issue 13, items 2, 4 and 6).

Races are forced, not hoped for: a proxy store runs "another worker" (its own store object and
connections, in a thread with its own event loop where it must be able to run concurrently) at
the exact point between two steps where the old multi-transaction code was exposed. The kill
side (a process SIGKILLed mid-operation) is in ``tests/reliability/test_crash_operations.py``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from backends import close_test_store, open_test_store, reopen_test_store
from mindstore import SessionManager
from mindstore.cli.transfer import import_data, read_export
from mindstore.errors import ConflictError
from mindstore.formats.export import export_lines, parse_export
from mindstore.manager import SPLIT_CONTEXT_PREFIX
from mindstore.store.base import NewMessage, ScopeKey, SessionKey, Store

NS = "ns"


def msg(mid: str, text: str | None = None, role: str = "user") -> dict[str, Any]:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": text or f"text {mid}"}]}


def item(mid: str, parent: str | None = None) -> NewMessage:
    if parent is None:
        return NewMessage(message=msg(mid), tokens=2)
    return NewMessage(message=msg(mid), parent=parent, tokens=2)


@dataclass
class World:
    """The store under test plus a way to open more store objects on the same database."""

    backend: str
    store: Store
    tmp_path: Path
    token: Any

    async def open_other(self) -> Store:
        return await reopen_test_store(self.backend, self.tmp_path, self.token)


@pytest.fixture
async def world(backend: str, tmp_path: Path) -> AsyncIterator[World]:
    store, token = await open_test_store(backend, tmp_path)
    await store.stats()  # the schema exists before other store objects open
    try:
        yield World(backend, store, tmp_path, token)
    finally:
        await close_test_store(store, token)


class Hooked:
    """A Store that runs ``hook(name, args, result)`` after each call of the methods named."""

    def __init__(
        self, inner: Store, names: set[str], hook: Callable[[str, tuple[Any, ...], Any], Any]
    ) -> None:
        self._inner = inner
        self._names = names
        self._hook = hook

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in self._names:
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            result = await attr(*args, **kwargs)
            outcome = self._hook(name, args, result)
            if isinstance(outcome, Awaitable):
                await outcome
            return result

        return call


class Worker:
    """Another worker: a coroutine run in its own thread, event loop and store object."""

    def __init__(self, world: World, job: Callable[[Store], Awaitable[Any]]) -> None:
        self.error: BaseException | None = None
        self.result: Any = None

        async def main() -> None:
            other = await world.open_other()
            try:
                self.result = await job(other)
            finally:
                await other.aclose()

        def run() -> None:
            try:
                asyncio.run(main())
            except BaseException as exc:  # reported by join()
                self.error = exc

        self.thread = threading.Thread(target=run)
        self.thread.start()

    def join(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout``); True when the worker finished."""
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def outcome(self) -> Any:
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.result


async def session_ids(store: Store) -> set[str]:
    return {s.id for s in await store.list_sessions(NS, limit=1000)}


# ---- fork ------------------------------------------------------------------------------------


async def test_fork_is_never_seen_half_made(world: World) -> None:
    """Between the fork's steps another worker sees no trace of it (before: the new session with
    its messages but no overlays or skill state)."""
    m = SessionManager(world.store, namespace=NS)
    src = (await m.create("source")).id
    key = SessionKey(namespace=NS, session_id=src)
    await m.append_all(src, [msg("a"), msg("b"), msg("c"), msg("d")])
    await world.store.add_compaction(key, summary="ab", from_id="a", to_id="b")
    await world.store.set_skill_loaded(key, "skills", "deploy", True)
    other = await world.open_other()
    seen: list[set[str]] = []

    async def observe(name: str, args: tuple[Any, ...], result: Any) -> None:
        if args[0].session_id != src:  # a write to the fork
            seen.append(await session_ids(other))

    try:
        hooked = Hooked(world.store, {"append", "add_compaction", "set_skill_loaded"}, observe)
        info = await SessionManager(hooked, namespace=NS).fork(src, "c", "copy")  # type: ignore[arg-type]
        assert len(seen) == 3
        assert all(s == {src} for s in seen), seen
        assert await session_ids(other) == {src, info.id}
        fork_key = SessionKey(namespace=NS, session_id=info.id)
        assert [r.id for r in await other.all_messages(fork_key)] == ["a", "b", "c"]
        assert [
            (c.from_message_id, c.to_message_id) for c in await other.get_compactions(fork_key)
        ] == [("a", "b")]
        assert [s.key for s in await other.get_skill_states(fork_key)] == ["deploy"]
    finally:
        await other.aclose()


async def test_failed_fork_leaves_nothing(world: World) -> None:
    m = SessionManager(world.store, namespace=NS)
    src = (await m.create("source")).id
    await m.append_all(src, [msg("a"), msg("b")])
    key = SessionKey(namespace=NS, session_id=src)
    await world.store.add_compaction(key, summary="ab", from_id="a", to_id="b")

    def fail(name: str, args: tuple[Any, ...], result: Any) -> None:
        raise RuntimeError("the process dies here")

    hooked = Hooked(world.store, {"add_compaction"}, fail)
    with pytest.raises(RuntimeError):
        await SessionManager(hooked, namespace=NS).fork(src, "b", "copy")  # type: ignore[arg-type]
    assert await session_ids(world.store) == {src}
    assert (await world.store.stats())["messages"] == 2


# ---- compact_and_split -----------------------------------------------------------------------


async def test_split_is_never_seen_half_made(world: World) -> None:
    m = SessionManager(world.store, namespace=NS)
    old = (await m.create("chat")).id
    await m.append_all(old, [msg("a"), msg("b")])
    other = await world.open_other()
    seen: list[tuple[set[str], str | None]] = []

    async def observe(name: str, args: tuple[Any, ...], result: Any) -> None:
        info = await other.get_session(SessionKey(namespace=NS, session_id=old))
        assert info is not None
        seen.append((await session_ids(other), info.end_reason))

    try:
        hooked = Hooked(world.store, {"create_session", "append", "update_session"}, observe)
        new = await SessionManager(hooked, namespace=NS).compact_and_split(old, "summary")  # type: ignore[arg-type]
        assert seen == [({old}, None)] * 3
        assert await session_ids(other) == {old, new.id}
    finally:
        await other.aclose()


async def test_concurrent_splits_make_exactly_one_continuation(world: World) -> None:
    """Four workers split one session at once; each is held right after reading the session
    (when it has seen "not ended") until all four got there or 0.5 s passed. Before: four
    continuations. Now the split locks the session first: one continuation, three
    ConflictErrors."""
    m = SessionManager(world.store, namespace=NS)
    old = (await m.create("chat")).id
    await m.append_all(old, [msg("a"), msg("b")])
    workers_n = 4
    count = [0]
    lock = threading.Lock()

    def hold(name: str, args: tuple[Any, ...], result: Any) -> None:
        if args[0].session_id != old:
            return
        with lock:
            count[0] += 1
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            with lock:
                if count[0] >= workers_n:
                    break
            time.sleep(0.01)

    async def split(other: Store) -> str:
        hooked = Hooked(other, {"get_session"}, hold)
        try:
            info = await SessionManager(hooked, namespace=NS).compact_and_split(old, "sum")  # type: ignore[arg-type]
        except ConflictError as exc:
            assert "already ended" in str(exc)
            return "conflict"
        return info.id

    workers = [Worker(world, split) for _ in range(workers_n)]
    outcomes = [w.outcome() for w in workers]
    made = [o for o in outcomes if o != "conflict"]
    assert len(made) == 1, outcomes
    continuations = [
        s for s in await world.store.list_sessions(NS, limit=100) if s.parent_session_id == old
    ]
    assert [c.id for c in continuations] == made
    seed = await world.store.all_messages(SessionKey(namespace=NS, session_id=made[0]))
    assert len(seed) == 1 and seed[0].message["parts"][0]["text"].startswith(SPLIT_CONTEXT_PREFIX)
    ended = await m.get(old)
    assert ended is not None and ended.end_reason == "compaction"
    # a later (retried) split is refused the same way
    with pytest.raises(ConflictError, match="already ended"):
        await m.compact_and_split(old, "again")


# ---- import ----------------------------------------------------------------------------------


async def _export_of(store: Store, key: SessionKey) -> str:
    return "".join(export_lines(await read_export(store, key)))


async def _sample_export(world: World) -> str:
    """An export of session "chat" of namespace "src" (5 messages, an overlay, blocks)."""
    key = SessionKey(namespace="src", session_id="chat")
    await world.store.create_session(key, name="chat")
    await world.store.append(key, [item("m1"), item("m2"), item("m3"), item("m4"), item("m5")])
    await world.store.add_compaction(key, summary="s", from_id="m1", to_id="m2")
    await world.store.set_block(ScopeKey(namespace="src", session_id="chat", label="memory"), "m")
    await world.store.set_block(ScopeKey(namespace="src", session_id=None, label="profile"), "p")
    return await _export_of(world.store, key)


async def test_import_never_deletes_an_application_session_created_meanwhile(
    world: World,
) -> None:
    """The application appends to the session id the import targets right after the import
    checked that it does not exist. Before: the import failed on the conflict and deleted the
    application's session, acknowledged messages included. Now the application's messages are
    always kept: either the import claimed the session first (the application's append then
    lands after it, SQLite) or the import fails and writes nothing (PostgreSQL)."""
    text = await _sample_export(world)
    data = parse_export(text.splitlines(keepends=True))
    target = SessionKey(namespace=NS, session_id="chat")
    workers: list[Worker] = []

    async def app(other: Store) -> None:
        await other.append(target, [item("app1")])

    def race(name: str, args: tuple[Any, ...], result: Any) -> None:
        if args[0] == target and not workers:
            workers.append(Worker(world, app))
            workers[0].join(2.0)  # let it finish if nothing holds it back

    hooked = Hooked(world.store, {"latest_leaf"}, race)
    try:
        await import_data(hooked, data, namespace=NS)  # type: ignore[arg-type]
        imported = True
    except ConflictError:
        imported = False
    assert workers
    workers[0].outcome()  # the application's append was acknowledged
    stored = [r.id for r in await world.store.all_messages(target)]
    assert "app1" in stored  # never deleted
    if imported:
        assert stored == ["m1", "m2", "m3", "m4", "m5", "app1"]
        assert len(await world.store.get_compactions(target)) == 1
    else:
        assert stored == ["app1"]
        assert await world.store.get_compactions(target) == []
        blocks = await world.store.list_blocks(NS, "chat")
        assert blocks == []  # neither the session block nor the namespace block
    # importing under a free id works either way
    again = await import_data(world.store, data, namespace=NS, session_id="chat2")
    assert len(await world.store.all_messages(again)) == 5


async def test_import_is_never_seen_half_made_and_a_failure_leaves_nothing(
    world: World,
) -> None:
    text = await _sample_export(world)
    data = parse_export(text.splitlines(keepends=True))
    other = await world.open_other()
    target = SessionKey(namespace=NS, session_id="chat")
    seen: list[tuple[set[str], int]] = []

    async def observe(name: str, args: tuple[Any, ...], result: Any) -> None:
        seen.append((await session_ids(other), len(await other.list_blocks(NS, None))))
        if name == "add_compaction":
            raise RuntimeError("the process dies here")

    try:
        hooked = Hooked(world.store, {"append", "add_compaction"}, observe)
        with pytest.raises(RuntimeError):
            await import_data(hooked, data, namespace=NS, chunk=2)  # type: ignore[arg-type]
        assert seen == [(set(), 0)] * 4  # three batches, then the overlay
        assert await world.store.all_messages(target) == []
        assert await world.store.get_session(target) is None
        assert await world.store.list_blocks(NS, "chat") == []
        # and running it again succeeds
        await import_data(world.store, data, namespace=NS)
        assert len(await other.all_messages(target)) == 5
        assert len(await other.list_blocks(NS, "chat")) == 2
    finally:
        await other.aclose()


async def test_import_keeps_a_namespace_block_written_meanwhile(world: World) -> None:
    """A namespace block another worker creates after the import checked for it is not
    overwritten (before: the import's set_block replaced it). Either the import committed
    first (SQLite: the worker's write lands after it) or it refuses (PostgreSQL: different
    content) and writes nothing."""
    text = await _sample_export(world)
    data = parse_export(text.splitlines(keepends=True))
    profile = ScopeKey(namespace=NS, session_id=None, label="profile")
    workers: list[Worker] = []

    async def app(other: Store) -> None:
        await other.set_block(profile, "the application's profile")

    def race(name: str, args: tuple[Any, ...], result: Any) -> None:
        if not workers:
            workers.append(Worker(world, app))
            workers[0].join(2.0)

    hooked = Hooked(world.store, {"create_session"}, race)
    try:
        await import_data(hooked, data, namespace=NS)  # type: ignore[arg-type]
        imported = True
    except ConflictError as exc:
        assert "profile" in str(exc)
        imported = False
    workers[0].outcome()
    assert await world.store.get_block(profile) == "the application's profile"
    stored = await world.store.all_messages(SessionKey(namespace=NS, session_id="chat"))
    assert len(stored) == (5 if imported else 0)


# ---- export ----------------------------------------------------------------------------------


async def test_export_reads_one_snapshot(world: World) -> None:
    """Another worker appends a message and an overlay ending at it between the export's read
    of the messages and of the overlays. Before: the file named a message it did not contain
    and could not be imported. Now: the export is the state before the write, importable."""
    key = SessionKey(namespace=NS, session_id="live")
    await world.store.append(key, [item("a"), item("b"), item("c")])
    other = await world.open_other()

    async def write(name: str, args: tuple[Any, ...], result: Any) -> None:
        await other.append(key, [item("late", parent="c")])
        await other.add_compaction(key, summary="up to late", from_id="a", to_id="late")
        await other.set_skill_loaded(key, "skills", "k", True)

    try:
        text = await _export_of(Hooked(world.store, {"all_messages"}, write), key)  # type: ignore[arg-type]
        data = parse_export(text.splitlines(keepends=True))
        assert [m.message["id"] for m in data.messages] == ["a", "b", "c"]
        assert data.compactions == [] and data.skills == []
        copy = await import_data(world.store, data, namespace="copy")
        assert [r.id for r in await world.store.all_messages(copy)] == ["a", "b", "c"]
    finally:
        await other.aclose()


async def test_export_during_appends_and_compactions_always_imports_back(world: World) -> None:
    """A writer appends, compacts and deletes as fast as it can in another thread while the
    session is exported again and again; every export imports back and re-exports the same."""
    key = SessionKey(namespace=NS, session_id="live")
    await world.store.append(key, [item("w0")])
    stop = threading.Event()

    async def writer(other: Store) -> int:
        alive = ["w0"]
        n = 0
        while not stop.is_set() and n < 2000:
            n += 1
            await other.append(key, [item(f"w{n}")])
            alive.append(f"w{n}")
            if n % 3 == 0:
                await other.add_compaction(key, summary=f"s{n}", from_id=alive[-3], to_id=alive[-1])
            if n % 7 == 0:
                await other.delete(key, [alive.pop(-2)])
        return n

    worker = Worker(world, writer)
    try:
        exports = 0
        deadline = time.monotonic() + 20
        while exports < 15 and time.monotonic() < deadline:
            text = await _export_of(world.store, key)
            data = parse_export(text.splitlines(keepends=True))
            copy = await import_data(world.store, data, namespace="copy", session_id=f"e{exports}")
            again = await _export_of(world.store, copy)
            assert again == text.replace(f'"namespace":"{NS}"', '"namespace":"copy"', 1).replace(
                '"session_id":"live"', f'"session_id":"e{exports}"', 1
            )
            exports += 1
            await asyncio.sleep(0.01)
    finally:
        stop.set()
        written = worker.outcome()
    assert exports >= 5 and written > 0
