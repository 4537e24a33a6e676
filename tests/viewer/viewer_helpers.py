"""Helpers for the viewer tests (a module, not conftest, so imports are unambiguous)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any

__all__ = ["run_async"]


def run_async(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` to completion in a fresh thread with its own event loop (safe to call
    while Playwright's synchronous API owns this thread's loop)."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised in the caller's thread
            result["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result.get("value")
