"""open_store: a URL opens the storage it names, the store is an async context manager.
The forms of each backend's URLs are tested in tests/integration/test_*_backend.py."""

from __future__ import annotations

import pytest

from backends import Reopen, Storage
from mindstore import Session, StoreError, open_store


def msg(mid: str) -> dict[str, object]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": f"hello {mid}"}]}


async def test_the_url_opens_the_storage_as_an_async_context_manager(
    storage: Storage, reopen: Reopen
) -> None:
    store = await open_store(storage.url_string, **storage.open_options())
    async with store:
        await Session.create(store, "s").append_message(msg("a"))
    with pytest.raises(StoreError, match="closed"):
        await Session.create(store, "s").get_message("a")
    again = await reopen()
    assert await Session.create(again, "s").get_message("a") == msg("a")


@pytest.mark.parametrize("bad", ["", "   ", "mysql://localhost/db", "redis://x"])
async def test_unknown_or_empty_urls_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        await open_store(bad)
