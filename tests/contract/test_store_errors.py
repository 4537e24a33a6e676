"""StoreError tells a caller what a retry needs (issue 13 item 5), on both backends.

Every append error carries the ids it used — including generated ones — so retrying with them
is idempotent; ``maybe_committed`` is False when the store knows nothing was written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from backends import close_test_store, open_test_store
from mindstore.errors import StoreError
from mindstore.manager import SessionManager
from mindstore.session import Session


async def test_append_errors_carry_the_ids_used(backend: str, tmp_path: Path) -> None:
    store, token = await open_test_store(backend, tmp_path)
    try:
        s = Session.create(store, "retry")
        first = {"role": "user", "parts": [{"type": "text", "text": "no id given"}]}
        await s.append_message({"id": "kept", **first})
    finally:
        await store.aclose()  # every later call fails with StoreError
    try:
        with pytest.raises(StoreError) as info:
            await s.append_message(first)
        assert info.value.maybe_committed is False
        [generated] = info.value.message_ids
        assert generated and generated != "kept"
        with pytest.raises(StoreError) as info:
            await SessionManager(store).append_all("retry", [first, {"id": "b", **first}])
        assert info.value.message_ids[1] == "b" and len(info.value.message_ids) == 2
        assert info.value.maybe_committed is False
    finally:
        await close_test_store(store, token)

    # the documented retry, on a live store: the same id twice stores one message
    (tmp_path / "again").mkdir()
    store, token = await open_test_store(backend, tmp_path / "again")
    try:
        s = Session.create(store, "retry")
        assert await s.append_message({"id": generated, **first}) is True
        assert await s.append_message({"id": generated, **first}) is False
        assert [m["id"] for m in await s.get_history()] == [generated]
    finally:
        await close_test_store(store, token)


def test_store_error_defaults_and_pickling() -> None:
    import pickle

    e = StoreError("boom")
    assert e.maybe_committed is False and e.message_ids == ()
    e = StoreError("lost", maybe_committed=True, message_ids=("a",))
    back = pickle.loads(pickle.dumps(e))
    assert (str(back), back.maybe_committed, back.message_ids) == ("lost", True, ("a",))
