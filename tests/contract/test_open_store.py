"""open_store (DESIGN §8): URLs for both backends, stores as async context managers."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends import drop_schema, new_schema_name, postgres_url_or_skip
from mindstore import Session, SQLiteStore, open_store


def msg(mid: str) -> dict[str, object]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": f"hello {mid}"}]}


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


@pytest.mark.parametrize("bad", ["", "   ", "mysql://localhost/db", "redis://x"])
async def test_unknown_or_empty_urls_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        await open_store(bad)


@pytest.mark.postgres
async def test_postgresql_url() -> None:
    url = postgres_url_or_skip()
    schema = new_schema_name()
    try:
        store = await open_store(url, schema=schema, min_size=1, max_size=2)
        async with store:
            assert type(store).__name__ == "PostgresStore"
            s = Session.create(store, "s")
            await s.append_message(msg("a"))
            assert await s.get_message("a") == msg("a")
    finally:
        await drop_schema(url, schema)
