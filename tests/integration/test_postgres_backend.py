"""PostgreSQL-only behaviour of the store: options and situations the SQLite backend does not
have (the vector index choice, a pool outliving its event loop, ``postgresql://`` URLs). The
behaviour both backends share is the contract suite (``tests/contract``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from backends import Storage, drop_schema, new_schema_name, postgres_url_or_skip
from embedders import HashEmbedder
from mindstore import PostgresStore, Session, StoreError, open_store
from pgvector_server import SEMANTIC_BACKENDS

pytestmark = pytest.mark.postgres


def text(role: str, body: str, mid: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": role, "parts": [{"type": "text", "text": body}]}
    if mid is not None:
        msg["id"] = mid
    return msg


@pytest.mark.parametrize("backend", [b for b in SEMANTIC_BACKENDS if b != "sqlite"])
async def test_vector_index_choice(
    backend: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    storage = Storage.new(backend, tmp_path)
    store = await storage.open(embedder=HashEmbedder())
    try:
        assert store.vector_index == ("pgvector" if backend == "pgvector" else "exact")  # type: ignore[attr-defined]
        with pytest.raises(ValueError, match="vector_index"):
            await storage.open(vector_index="ivf")
        exact = await storage.open(embedder=HashEmbedder(), vector_index="exact")
        assert exact.vector_index == "exact"  # type: ignore[attr-defined]
        await exact.aclose()
        if backend == "postgres":
            # the shared server has no pgvector: "auto" logs why and uses the exact scan
            assert "pgvector is not available" in caplog.text
            with pytest.raises(StoreError, match="pgvector"):
                await storage.open(embedder=HashEmbedder(), vector_index="pgvector")
    finally:
        await store.aclose()
        await storage.drop()


def test_asyncio_run_per_operation_then_aclose() -> None:
    # The reported script: every call in its own asyncio.run; aclose raised "Event loop is
    # closed" because the pool's tasks died with the first loop.
    url = postgres_url_or_skip()
    schema = new_schema_name()
    store = asyncio.run(PostgresStore.open(url, schema=schema, min_size=1, max_size=2))
    try:
        s = Session.create(store, "x")
        asyncio.run(s.append_message(text("user", "hi")))
        assert len(asyncio.run(s.get_history())) == 1
    finally:
        asyncio.run(store.aclose())
    with pytest.raises(StoreError, match="closed"):
        asyncio.run(s.get_history())
    asyncio.run(drop_schema(url, schema))


async def test_postgresql_url() -> None:
    url = postgres_url_or_skip()
    schema = new_schema_name()
    try:
        store = await open_store(url, schema=schema, min_size=1, max_size=2)
        async with store:
            assert isinstance(store, PostgresStore)
            s = Session.create(store, "s")
            await s.append_message(text("user", "hello a", "a"))
            assert await s.get_message("a") == text("user", "hello a", "a")
    finally:
        await drop_schema(url, schema)


async def test_a_forgotten_sync_store_exits_quietly(tmp_path: Path) -> None:
    """A mindstore.sync PostgresStore never closed: the process exits 0 with nothing on
    stderr (its pool's worker tasks printed "Task was destroyed but it is pending!" as the
    daemon loop thread died; forgotten stores are closed at exit now)."""
    import subprocess
    import sys

    url = postgres_url_or_skip()
    schema = new_schema_name()
    script = tmp_path / "forgot.py"
    script.write_text(
        "import sys\n"
        "import mindstore.sync as ms\n"
        "st = ms.PostgresStore.open(sys.argv[1], schema=sys.argv[2])\n"
        "ms.Session.create(st, 'x').append_message(\n"
        "    {'id': 'a', 'role': 'user', 'parts': [{'type': 'text', 'text': 'hi'}]}\n"
        ")\n"
    )
    try:
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, str(script), url, schema],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0 and done.stderr == "", done.stderr
    finally:
        await drop_schema(url, schema)
