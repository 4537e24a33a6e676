"""Failpoints: named places inside store operations where a test can make a call fail or wait.

The one supported way for tests (ours and users') to interfere with a store operation at a
precise moment — instead of overriding a store's private methods. A store operation calls
:func:`hit` (SQLite, synchronous) or :func:`ahit` (PostgreSQL, awaited) at each named place;
with no failpoint armed that is one dictionary lookup. Arm one with :func:`armed`::

    from mindstore.store import failpoints

    def boom() -> None:
        raise RuntimeError("injected")

    with failpoints.armed("delete_namespace.after_delete", boom):
        ...  # the store call raises inside its transaction, which rolls back

An action may be a plain function or a coroutine function (awaited at PostgreSQL places; at
SQLite places a coroutine function is refused with ``TypeError``). Armed failpoints are
process-wide and not meant for production: arm them only in tests. The places are listed in
:data:`PLACES`; arming an unknown name raises ``ValueError``, so a renamed place cannot make a
test silently pass.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["PLACES", "ahit", "armed", "hit"]

#: Every named place, with where it sits. Add a place here when a store calls hit/ahit on it.
PLACES: dict[str, str] = {}

_armed: dict[str, Callable[[], Any]] = {}


def register(name: str, where: str) -> str:
    """Declare a place (called at import time by the module that hits it); returns ``name``."""
    PLACES[name] = where
    return name


@contextmanager
def armed(name: str, action: Callable[[], Any]) -> Iterator[None]:
    """Arm ``name`` with ``action`` for the duration of the block."""
    if name not in PLACES:
        raise ValueError(f"unknown failpoint {name!r}; known: {sorted(PLACES)}")
    if name in _armed:
        raise ValueError(f"failpoint {name!r} is already armed")
    _armed[name] = action
    try:
        yield
    finally:
        del _armed[name]


def hit(name: str) -> None:
    """Run the action armed at ``name``, if any (synchronous places)."""
    action = _armed.get(name)
    if action is None:
        return
    if inspect.iscoroutinefunction(action):
        raise TypeError(f"failpoint {name!r} is synchronous; arm it with a plain function")
    action()


async def ahit(name: str) -> None:
    """Run the action armed at ``name``, if any, awaiting it if it is a coroutine function."""
    action = _armed.get(name)
    if action is None:
        return
    result = action()
    if inspect.isawaitable(result):
        await result
