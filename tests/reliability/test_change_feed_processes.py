"""The change feed across processes (DESIGN §14, issue 32): a writer process appends 1,000
messages and writes blocks while a reader process follows ``store.changes()``; the reader is
SIGKILLed part-way and started again with ``since=`` the last event it recorded. Together its
two runs saw every event of the feed exactly once, in order — on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from backends import drop_schema, new_schema_name, postgres_url_or_skip

WORKER = Path(__file__).with_name("change_feed_worker.py")
SRC = Path(__file__).resolve().parents[2] / "src"
MESSAGES = 1_000


def spawn(*args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def recorded(out: Path) -> list[dict[str, Any]]:
    """The complete lines the reader wrote (a line cut by the kill is not an event seen)."""
    if not out.exists():
        return []
    text = out.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.split("\n")[:-1]]


def run(backend: str, target: str, out: Path) -> tuple[list[dict[str, Any]], int, int]:
    """Writer + reader, the reader killed at ~300 events and resumed; returns what the reader
    recorded, the writer's last seq and the number of events of the first reader run."""
    reader = spawn("read", backend, target, str(out), "0")
    time.sleep(1.0)  # the reader is following an empty feed
    writer = spawn("write", backend, target, str(MESSAGES))
    procs = [reader, writer]
    try:
        deadline = time.monotonic() + 120
        while len(recorded(out)) < 300:
            assert reader.poll() is None, reader.communicate()[1].decode()[-2000:]
            assert time.monotonic() < deadline, "the reader saw too little"
            time.sleep(0.01)
        reader.send_signal(signal.SIGKILL)
        reader.wait()
        first_run = len(recorded(out))
        time.sleep(0.5)  # the writer goes on while no reader runs
        with out.open("r+", encoding="utf-8") as f:  # drop a line the kill cut short
            text = f.read()
            f.seek(0)
            f.truncate()
            f.write(text[: text.rfind("\n") + 1])
        since = recorded(out)[-1]["seq"]
        reader = spawn("read", backend, target, str(out), str(since))
        procs.append(reader)
        w_out, w_err = writer.communicate(timeout=300)
        assert writer.returncode == 0, w_err.decode()[-3000:]
        _, r_err = reader.communicate(timeout=120)
        assert reader.returncode == 0, r_err.decode()[-3000:]
        last = json.loads(w_out.decode().strip().splitlines()[-1])["seq"]
        return recorded(out), last, first_run
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()


async def check(store: Any, seen: list[dict[str, Any]], last: int, first_run: int) -> None:
    seqs = [e["seq"] for e in seen]
    assert seqs == list(range(1, last + 1))  # every event once, in order, across the kill
    assert 300 <= first_run < last  # the kill really cut the stream
    stored = [c async for c in store.changes("feed", follow=False)]
    assert [(c.seq, c.kind, c.session_id, dict(c.data)) for c in stored] == [
        (e["seq"], e["kind"], e["session_id"], e["data"]) for e in seen
    ]
    kinds = [e["kind"] for e in seen]
    assert kinds.count("message_appended") == MESSAGES
    assert kinds.count("block_written") == MESSAGES // 10 + 1
    appended = [e["data"]["message_id"] for e in seen if e["kind"] == "message_appended"]
    assert appended == [f"m{i}" for i in range(MESSAGES)]


@pytest.mark.slow
async def test_sqlite_reader_process_sees_every_event_once_across_a_kill(tmp_path: Path) -> None:
    from mindstore.store.sqlite import SQLiteStore

    path = str(tmp_path / "feed.db")
    async with SQLiteStore(path) as store:
        await store.stats()  # the schema exists before the processes start
    seen, last, first_run = run("sqlite", path, tmp_path / "seen.jsonl")
    async with SQLiteStore(path) as store:
        await check(store, seen, last, first_run)


@pytest.mark.slow
@pytest.mark.postgres
async def test_postgres_reader_process_sees_every_event_once_across_a_kill(
    tmp_path: Path,
) -> None:
    from mindstore.store.postgres import PostgresStore

    url = postgres_url_or_skip()
    schema = new_schema_name()
    try:
        store = await PostgresStore.open(url, schema=schema, min_size=1, max_size=1)
        await store.aclose()
        seen, last, first_run = run("postgres", f"{url}|{schema}", tmp_path / "seen.jsonl")
        store = await PostgresStore.open(url, schema=schema, min_size=1, max_size=1)
        try:
            await check(store, seen, last, first_run)
        finally:
            await store.aclose()
    finally:
        await drop_schema(url, schema)
