"""SQLite-only behaviour of the store: the forms of ``sqlite://`` URLs, ``:memory:``, and the
sync wrapper around a file that cannot be opened. The behaviour both backends share is the
contract suite (``tests/contract``)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import mindstore.sync as sync
from mindstore import Session, SessionManager, SQLiteStore, open_store
from mindstore.errors import StoreError


def msg(mid: str) -> dict[str, object]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": f"hello {mid}"}]}


def text(role: str, body: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "text": body}]}


@pytest.mark.parametrize("form", ["path", "relative-url", "absolute-url"])
async def test_sqlite_urls_open_the_named_file(
    form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "agent.db"
    url = {
        "path": str(target),
        "relative-url": "sqlite:///agent.db",
        "absolute-url": f"sqlite:///{target}",  # sqlite:////abs/path
    }[form]
    store = await open_store(url)
    async with store:
        assert isinstance(store, SQLiteStore)
        await Session.create(store, "s").append_message(msg("a"))
    assert target.exists()
    async with SQLiteStore(target) as again:
        assert await Session.create(again, "s").get_message("a") == msg("a")


async def test_sqlite_memory_url() -> None:
    for url in ("sqlite://:memory:", ":memory:"):
        async with await open_store(url) as store:
            s = Session.create(store, "s")
            await s.append_message(msg("a"))
            assert [m["id"] for m in await s.get_history()] == ["a"]


async def test_a_sqlite_url_without_a_path_is_an_error() -> None:
    """``sqlite:///`` (say, ``sqlite:///$DB`` with DB unset) is not a throwaway in-memory
    database: only ``sqlite://:memory:`` is."""
    for url in ("sqlite://", "sqlite:///", "sqlite:///  "):
        with pytest.raises(ValueError, match="names no file"):
            await open_store(url)


def test_sync_with_opens_the_store_at_once(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    before = set(threading.enumerate())
    store = sync.SQLiteStore(tmp_path / "dir.db")
    with pytest.raises(StoreError), store:
        pass  # pragma: no cover - the store cannot be opened
    started = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert started == []  # its loop thread was stopped


def test_sync_session_needs_a_sync_store(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"mindstore.sync"):
        sync.Session.create(SQLiteStore(tmp_path / "a.db"), "x")


def test_sync_open_store_url(tmp_path: Path) -> None:
    store = sync.open_store(f"sqlite:///{tmp_path / 'c.db'}")
    assert isinstance(store, sync.SQLiteStore)
    s = sync.Session.create(store, "x")
    s.append_message(text("user", "hi"))
    store.close()
    with pytest.raises(StoreError, match="closed"):
        s.get_history()


def test_a_sync_store_or_no_store_where_an_async_store_is_needed(tmp_path: Path) -> None:
    """The async classes given a mindstore.sync store, or something that is no store, refuse
    it at construction with a TypeError naming what to pass (they failed on the first call
    with Python's own "can't be used in 'await' expression", LangGraph's after writing)."""
    pytest.importorskip("langgraph")
    from mindstore.integrations.langgraph import MindstoreStore
    from mindstore.integrations.openai_agents import MindstoreSession

    with sync.SQLiteStore(tmp_path / "sync.db") as store:
        for make in (
            lambda s: Session.create(s, "x"),
            lambda s: SessionManager(s),
        ):
            with pytest.raises(TypeError, match="needs an async mindstore store"):
                make(store)
        # (these run a sync store's calls on its own loop: accepted)
        MindstoreSession("x", store)
        MindstoreStore(store)
        for bad in (None, "agent.db", object()):
            for make in (
                lambda s: Session.create(s, "x"),
                lambda s: SessionManager(s),
                lambda s: MindstoreStore(s),
                lambda s: MindstoreSession("x", s),
            ):
                with pytest.raises(TypeError, match="needs a mindstore store"):
                    make(bad)
