"""The synchronous API: the same classes for code that is not async.

``from mindstore.sync import SQLiteStore, Session`` gives ``SQLiteStore``, ``PostgresStore``
(``PostgresStore.open(dsn)``), ``open_store``, ``Session``, ``SessionManager`` and the
``ToolSet`` returned by ``tools()`` with the same names, arguments and results as the async
API — methods are plain calls (no ``await``), stores are plain ``with`` context managers, and
builder methods chain. Everything else (``StaticProvider``, ``SearchResult``, errors, the
converters…) is re-exported unchanged from :mod:`mindstore`.

How: one implementation. Every sync object wraps the async object (``.aio``) and runs each
coroutine on an event loop in a helper thread, started and stopped with anyio's
:class:`~anyio.from_thread.BlockingPortal` (calls are submitted to it with
:func:`asyncio.run_coroutine_threadsafe`, see :class:`Loop`).
Each store opened here owns one such loop thread (started when the store is opened, stopped by
``close()``), and the sessions, managers and tool sets made from it use the same loop, so the
async core sees one loop per store as it expects (the PostgreSQL pool is bound to its loop). The
portal is thread-safe: several threads may call one store; their calls run as concurrent tasks
on the store's loop, which the async core already makes safe (concurrent auto-parented appends
form one chain). Because the loop is in another thread, the sync API also works where a loop is
already running in the calling thread (Jupyter, or inside an ``async def``) — the call blocks
that thread until it is done. The loop thread is a daemon thread, so a store that is never
closed does not keep the interpreter alive (close stores anyway: ``with`` does it).

The sync methods are generated from the async classes (:func:`_twin`) so the two cannot drift;
a test checks that every public async method has a sync twin with the same signature. Type
checkers cannot see generated methods, so they read ``sync.pyi`` instead: the typed stub that
``scripts/gen_sync_stub.py`` writes from the same async signatures (a test fails when it is
stale: regenerate it after changing an async signature). ``aclose`` is ``close`` here.
Calling a sync method from inside the store's own loop (for example from a synchronous
summarizer callback that mindstore runs there) would deadlock and raises ``RuntimeError``
instead; such callbacks should use the async objects they are given.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import functools
import inspect
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar

import anyio
from anyio.from_thread import BlockingPortal

import mindstore
from mindstore._async import maybe_await
from mindstore.changes import Change
from mindstore.context import StoreSearchProvider as _AsyncStoreSearchProvider
from mindstore.context import StoreSkillProvider as _AsyncStoreSkillProvider
from mindstore.errors import StoreError
from mindstore.manager import SessionManager as _AsyncSessionManager
from mindstore.session import Session as _AsyncSession
from mindstore.store import open_store as _async_open_store
from mindstore.store.sqlite import SQLiteStore as _AsyncSQLiteStore
from mindstore.tools import Tool
from mindstore.tools import ToolSet as _AsyncToolSet

__all__ = [
    "ChangeIterator",
    "Loop",
    "PostgresStore",
    "SQLiteStore",
    "Session",
    "SessionManager",
    "StoreSearchProvider",
    "StoreSkillProvider",
    "ToolSet",
    "open_store",
]


class Loop:
    """An event loop in a daemon thread: started and stopped by anyio's :class:`BlockingPortal`.

    Calls are submitted with :func:`asyncio.run_coroutine_threadsafe` on the portal's loop
    rather than ``portal.call``: same semantics (the result or the exception comes back to the
    calling thread) at less than half the cost per call (measured on a loaded 2-core machine:
    ~0.2 ms against ~0.5 ms for ``portal.call``, which adds a task and a cancel scope per call).
    """

    def __init__(self) -> None:
        ready = threading.Event()
        self._portal: BlockingPortal | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._failure: BaseException | None = None

        async def main() -> None:
            async with BlockingPortal() as portal:
                self._portal = portal
                self._loop = asyncio.get_running_loop()
                ready.set()
                await portal.sleep_until_stopped()

        def run() -> None:
            try:
                anyio.run(main, backend="asyncio")
            except BaseException as exc:  # pragma: no cover - the loop failed to start
                self._failure = exc
                ready.set()

        self._thread = threading.Thread(target=run, name="mindstore-sync", daemon=True)
        self._thread.start()
        ready.wait()
        if self._portal is None:  # pragma: no cover
            raise RuntimeError("mindstore.sync could not start its event loop") from self._failure

    def call(self, fn: Callable[..., Any], /, *args: Any) -> Any:
        """Run ``fn(*args)`` on the loop (awaiting its result if awaitable) and return it.

        Raises:
            RuntimeError: the loop was stopped (the store was closed), or the call was made
                from the loop's own thread (it would wait for itself forever).
        """
        if self.in_thread():
            raise RuntimeError(
                "a mindstore.sync method was called from the store's own event loop thread "
                "(e.g. from a callback mindstore runs); use the async object (.aio) there"
            )
        return self.submit(fn, *args).result()

    def in_thread(self) -> bool:
        """Whether the caller runs on this loop's own thread (where :meth:`call` would wait
        for itself, and a coroutine can simply be awaited)."""
        return threading.get_ident() == self._thread.ident

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> concurrent.futures.Future[Any]:
        """Start ``fn(*args)`` on the loop; a future of its (awaited) result."""
        loop = self._loop
        if self._portal is None or loop is None or not self._thread.is_alive():
            # (StoreError, as the async objects of a closed store raise)
            raise StoreError("this mindstore.sync object's store is closed; open a new store")

        async def run() -> Any:
            return await maybe_await(fn(*args))

        return asyncio.run_coroutine_threadsafe(run(), loop)

    def stop(self) -> None:
        """Stop the loop and wait for its thread. Idempotent."""
        portal, self._portal = self._portal, None
        if portal is not None and self._thread.is_alive():
            portal.start_task_soon(portal.stop).result()
            self._thread.join()


class _Twin:
    """Base of the sync classes: the async object (``aio``) and the loop that runs it."""

    _aio_class: ClassVar[type]
    _twinned: ClassVar[tuple[tuple[str, str], ...]] = ()
    """(sync name, async name) of the members :func:`_twin` generated (the type stub's list)."""

    def __init__(self, aio: Any, loop: Loop, store: _Twin | None = None) -> None:
        self._aio = aio
        self._loop = loop
        self._store = self if store is None else store

    @property
    def aio(self) -> Any:
        """The async object underneath (for async code and for objects that take a store)."""
        return self._aio

    def __repr__(self) -> str:
        return f"mindstore.sync.{type(self).__name__}({self._aio!r})"

    if TYPE_CHECKING:
        # (Type checkers read sync.pyi, not this module; kept so that checking this file on
        # its own still lets the generated methods through.)
        def __getattr__(self, name: str) -> Any: ...


def _unwrap(value: Any) -> Any:
    return value._aio if isinstance(value, _Twin) else value


def _wrap(owner: _Twin, value: Any) -> Any:
    """Results that are async objects come back as their sync twins."""
    if value is owner._aio:
        return owner  # builder methods chain on the sync object
    if value is owner._store._aio:
        return owner._store  # e.g. Session.store
    for aio_class, factory in _TWINS.items():
        if isinstance(value, aio_class):
            return factory(value, owner._loop, owner._store)
    return value


def _sync_method(name: str, member: Callable[..., Any]) -> Callable[..., Any]:
    is_async = inspect.iscoroutinefunction(member)

    def method(self: _Twin, *args: Any, **kwargs: Any) -> Any:
        bound = getattr(self._aio, name)
        args = tuple(_unwrap(a) for a in args)
        kwargs = {k: _unwrap(v) for k, v in kwargs.items()}
        if is_async:
            result = self._loop.call(functools.partial(bound, *args, **kwargs))
        else:
            result = bound(*args, **kwargs)
        return _wrap(self, result)

    method.__name__ = name
    method.__qualname__ = name
    method.__doc__ = member.__doc__
    method.__signature__ = inspect.signature(member)  # type: ignore[attr-defined]
    return method


def _sync_property(name: str, member: property) -> property:
    def get(self: _Twin) -> Any:
        return _wrap(self, getattr(self._aio, name))

    return property(get, doc=member.__doc__)


def _twin(sync_class: type[_Twin], *, skip: frozenset[str] = frozenset()) -> None:
    """Give ``sync_class`` a plain twin of every public method and property of its async class.

    Coroutine methods run on the loop; plain methods (builders, pure helpers) run in the
    calling thread. ``aclose`` becomes ``close``. Names already defined on ``sync_class`` are
    kept (hand-written where the sync shape differs: constructors, ``open``, context managers).
    """
    own = {n for c in sync_class.__mro__ if issubclass(c, _Twin) for n in vars(c)}
    twinned: list[tuple[str, str]] = []
    for name, member in inspect.getmembers(sync_class._aio_class):
        target = "close" if name == "aclose" else name
        if name.startswith("_") or name in skip or target in own:
            continue
        twinned.append((target, name))
        if isinstance(inspect.getattr_static(sync_class._aio_class, name), property):
            setattr(sync_class, target, _sync_property(name, member))
        elif callable(member) and not isinstance(
            inspect.getattr_static(sync_class._aio_class, name), classmethod | staticmethod
        ):
            method = _sync_method(name, member)
            method.__name__ = method.__qualname__ = target
            setattr(sync_class, target, method)
    sync_class._twinned = tuple(twinned)


# ---------------------------------------------------------------- stores

_OPEN_STORES: weakref.WeakSet[_SyncStore] = weakref.WeakSet()


@atexit.register
def _close_forgotten_stores() -> None:
    """Close the sync stores still open when the interpreter exits (their loop threads are
    daemons): a PostgreSQL pool left open printed "Task was destroyed but it is pending!" for
    each of its workers as the thread died. Bounded: a store that does not close within
    10 seconds is left to the thread's end, as before."""
    for store in list(_OPEN_STORES):
        loop = store._loop
        if loop._portal is None or not loop._thread.is_alive():
            continue
        with contextlib.suppress(Exception):
            loop.submit(store._aio.aclose).result(timeout=10)


class _SyncStore(_Twin):
    """A store: closes its loop with it; a plain context manager."""

    def __init__(self, aio: Any, loop: Loop, store: _Twin | None = None) -> None:
        super().__init__(aio, loop, store)
        _OPEN_STORES.add(self)

    def transaction(self, *args: Any, **kwargs: Any) -> Any:
        """Not available in sync code: every call of a sync store is its own transaction.

        Raises:
            TypeError: always; group several calls in one transaction with the async store,
                ``async with store.aio.transaction(): ...`` in an async function.
        """
        raise TypeError(
            "a mindstore.sync store has no transaction(): each call is its own transaction; "
            "to group calls, use the async store in an async function "
            "(async with store.aio.transaction(): ...)"
        )

    def changes(self, *args: Any, **kwargs: Any) -> ChangeIterator:
        """``for event in store.changes(namespace, since=seq): ...`` — the change feed as a
        plain iterator (see :meth:`mindstore.store.base.ChangeStore.changes`); each ``next``
        waits on the store's loop. Close it (``with`` or ``.close()``) when stopping early, to
        release the follower's connection."""
        agen = self._aio.changes(*args, **kwargs)  # arguments checked now, as in async
        return ChangeIterator(agen, self._loop)

    def close(self) -> None:
        """Close the store and stop its loop thread. Idempotent."""
        if self._loop._portal is None:
            return
        try:
            self._loop.call(self._aio.aclose)
        finally:
            self._loop.stop()

    def __enter__(self) -> Any:
        try:
            self._loop.call(self._aio.__aenter__)  # opens (and migrates) now, as `async with`
        except BaseException:
            self._loop.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class ChangeIterator(Iterator[Change]):
    """The change feed of a sync store: a plain iterator (and context manager) over the
    async follower running on the store's loop."""

    def __init__(self, agen: AsyncIterator[Change], loop: Loop) -> None:
        self._agen: Any = agen
        self._loop = loop
        self._done = False

    def __iter__(self) -> ChangeIterator:
        return self

    def __next__(self) -> Change:
        if self._done:
            raise StopIteration
        try:
            change: Change = self._loop.call(self._agen.__anext__)
        except StopAsyncIteration:
            self._done = True
            raise StopIteration from None
        return change

    def close(self) -> None:
        """Stop following and release the follower's connection. Idempotent."""
        if not self._done:
            self._done = True
            with contextlib.suppress(StoreError, RuntimeError):
                self._loop.call(self._agen.aclose)

    def __enter__(self) -> ChangeIterator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _open(factory: Callable[[], Any]) -> tuple[Any, Loop]:
    loop = Loop()
    try:
        return loop.call(factory), loop
    except BaseException:
        loop.stop()
        raise


class SQLiteStore(_SyncStore):
    """:class:`mindstore.SQLiteStore` for code that is not async."""

    _aio_class = _AsyncSQLiteStore

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        aio = _AsyncSQLiteStore(*args, **kwargs)  # validates the arguments; no I/O
        super().__init__(aio, Loop())


SQLiteStore.__init__.__signature__ = inspect.signature(  # type: ignore[attr-defined]
    _AsyncSQLiteStore.__init__
)
_SyncStore.transaction.__signature__ = inspect.signature(  # type: ignore[attr-defined]
    _AsyncSQLiteStore.transaction
)
_SyncStore.changes.__signature__ = inspect.signature(  # type: ignore[attr-defined]
    _AsyncSQLiteStore.changes
)


def _postgres_class() -> Any:
    from mindstore.store.postgres import PostgresStore as _AsyncPostgresStore

    return _AsyncPostgresStore


class PostgresStore(_SyncStore):
    """:class:`mindstore.PostgresStore` for code that is not async: ``PostgresStore.open(dsn)``."""

    _aio_class: ClassVar[Any]

    @classmethod
    def open(cls, *args: Any, **kwargs: Any) -> PostgresStore:
        """Open the pool (and migrate) on a new loop thread; see ``PostgresStore.open``."""
        aio_class = _postgres_class()
        aio, loop = _open(functools.partial(aio_class.open, *args, **kwargs))
        return cls(aio, loop)


def open_store(url: str, **options: Any) -> SQLiteStore | PostgresStore:
    """Open a store from a URL (see :func:`mindstore.open_store`), as a sync store."""
    aio, loop = _open(functools.partial(_async_open_store, url, **options))
    sync_class: type[_SyncStore] = SQLiteStore if type(aio) is _AsyncSQLiteStore else PostgresStore
    store = object.__new__(sync_class)
    _SyncStore.__init__(store, aio, loop)
    return store  # type: ignore[return-value]


open_store.__signature__ = inspect.signature(_async_open_store)  # type: ignore[attr-defined]


# ---------------------------------------------------------------- sessions, managers, tools


def _store_of(store: Any, what: str) -> tuple[Any, Loop]:
    if not isinstance(store, _SyncStore):
        raise TypeError(
            f"mindstore.sync.{what} needs a store from mindstore.sync (SQLiteStore, "
            f"PostgresStore.open, open_store), got {type(store).__name__}; with an async store "
            f"use mindstore.{what}"
        )
    return store._aio, store._loop


class Session(_Twin):
    """:class:`mindstore.Session` for code that is not async."""

    _aio_class = _AsyncSession

    def __init__(self, store: Any, *args: Any, **kwargs: Any) -> None:
        aio_store, loop = _store_of(store, "Session")
        super().__init__(_AsyncSession(aio_store, *args, **kwargs), loop, store)

    @classmethod
    def create(cls, store: Any, *args: Any, **kwargs: Any) -> Session:
        """Return a session handle. Does no I/O."""
        return cls(store, *args, **kwargs)

    @classmethod
    def _from_async(cls, aio: Any, loop: Loop, store: _Twin) -> Session:
        obj = object.__new__(cls)
        _Twin.__init__(obj, aio, loop, store)
        return obj


class SessionManager(_Twin):
    """:class:`mindstore.SessionManager` for code that is not async."""

    _aio_class = _AsyncSessionManager

    def __init__(self, store: Any, *args: Any, **kwargs: Any) -> None:
        aio_store, loop = _store_of(store, "SessionManager")
        super().__init__(_AsyncSessionManager(aio_store, *args, **kwargs), loop, store)

    @classmethod
    def _from_async(cls, aio: Any, loop: Loop, store: _Twin) -> SessionManager:
        obj = object.__new__(cls)
        _Twin.__init__(obj, aio, loop, store)
        return obj


class ToolSet(_Twin, Mapping[str, Tool]):
    """The :class:`mindstore.ToolSet` that sync ``tools()`` returns: ``execute`` is plain."""

    _aio_class = _AsyncToolSet

    def __getitem__(self, name: str) -> Tool:
        tool: Tool = self._aio[name]
        return tool

    def __iter__(self) -> Iterator[str]:
        return iter(self._aio)

    def __len__(self) -> int:
        return len(self._aio)

    def __or__(self, other: object) -> ToolSet:
        return ToolSet(self._aio | _unwrap(other), self._loop, self._store)

    def __ror__(self, other: object) -> ToolSet:
        return ToolSet(_unwrap(other) | self._aio, self._loop, self._store)


Session.__init__.__signature__ = inspect.signature(_AsyncSession.__init__)  # type: ignore[attr-defined]
Session.create.__func__.__signature__ = inspect.signature(_AsyncSession.create.__func__)  # type: ignore[attr-defined]
SessionManager.__init__.__signature__ = inspect.signature(  # type: ignore[attr-defined]
    _AsyncSessionManager.__init__
)


class StoreSearchProvider(_AsyncStoreSearchProvider):
    """:class:`mindstore.StoreSearchProvider` that also takes a sync store."""

    def __init__(self, store: Any, **kwargs: Any) -> None:
        super().__init__(_unwrap(store), **kwargs)


class StoreSkillProvider(_AsyncStoreSkillProvider):
    """:class:`mindstore.StoreSkillProvider` that also takes a sync store."""

    def __init__(self, store: Any, **kwargs: Any) -> None:
        super().__init__(_unwrap(store), **kwargs)


# Results of these async types come back wrapped (checked in this order).
_TWINS: dict[type, Callable[[Any, Loop, _Twin], Any]] = {
    _AsyncSession: Session._from_async,
    _AsyncSessionManager: SessionManager._from_async,
    _AsyncToolSet: ToolSet,
}

# Async members not twinned (hand-written above, or Mapping's own); scripts/gen_sync_stub.py
# makes the same selection for the type stub.
_TWIN_SKIPS: dict[str, frozenset[str]] = {
    "SQLiteStore": frozenset(),
    "PostgresStore": frozenset({"open"}),
    "Session": frozenset({"create"}),
    "SessionManager": frozenset(),
    "ToolSet": frozenset({"get", "items", "keys", "values"}),
}
_twin(SQLiteStore, skip=_TWIN_SKIPS["SQLiteStore"])
_twin(Session, skip=_TWIN_SKIPS["Session"])
_twin(SessionManager, skip=_TWIN_SKIPS["SessionManager"])
_twin(ToolSet, skip=_TWIN_SKIPS["ToolSet"])


def _twin_postgres() -> None:
    try:
        PostgresStore._aio_class = _postgres_class()
    except ImportError:  # pragma: no cover - the postgres module always imports
        return
    _twin(PostgresStore, skip=_TWIN_SKIPS["PostgresStore"])
    PostgresStore.open.__func__.__signature__ = inspect.signature(  # type: ignore[attr-defined]
        PostgresStore._aio_class.open.__func__
    )


_twin_postgres()


def __getattr__(name: str) -> Any:
    """Everything else is the same object as in :mod:`mindstore` (data classes, errors…)."""
    if name in mindstore.__all__:
        return getattr(mindstore, name)
    raise AttributeError(f"module 'mindstore.sync' has no attribute {name!r}")
