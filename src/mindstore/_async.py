"""Awaiting what user code returns.

User-supplied callables and providers (compaction functions, token counters, summarisers,
error handlers, context providers) may be sync or async; mindstore calls them and awaits the
result only when it is awaitable. This is the one place that rule is written.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["maybe_await"]

T = TypeVar("T")


async def maybe_await(value: T | Awaitable[T]) -> T:
    """``value``, awaited first if it is awaitable."""
    if inspect.isawaitable(value):
        return await value
    return value
