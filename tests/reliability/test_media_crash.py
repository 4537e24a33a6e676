"""Crash safety of media eviction (issue 32 item 4): a real writer process that appends messages
with screenshots and runs ``evict_media`` after each is SIGKILLed at random instants, many times
per backend; after every kill nothing is lost.

Checked after every kill (``media_evict_worker.py`` is the writer):

* SQLite: ``PRAGMA integrity_check`` is ``ok`` and the lexical index matches its statistics;
* every acknowledged append is stored (the one in flight may or may not be);
* every stored message is either exactly its original or evicted — no large value left behind
  in an evicted message, no marker whose object is missing — and ``get_history(hydrate=True)``
  is byte-identical to the originals;
* the search index holds exactly the stored messages (the word every message has finds them
  all, no ghost), and the path is one unbroken chain.

``MINDSTORE_CRASH_KILLS`` (or ``--soak``) sets the number of kills.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from crash_harness import _settle, _writer_target, lexical_index_problems
from media_evict_worker import KEEP, NAMESPACE, SESSION, WORD, media_message

from backends import drop_schema, new_schema_name, postgres_url_or_skip
from mindstore import MediaNotFoundError, Session
from mindstore.media import is_evicted

WORKER = Path(__file__).with_name("media_evict_worker.py")
SRC = Path(__file__).resolve().parents[2] / "src"


@dataclass
class Outcome:
    kills: int = 0
    appends: int = 0
    in_eviction: int = 0  # kills that landed while evict_media was running
    evicted: int = 0
    problems: list[str] = field(default_factory=list)


def _kills(request: pytest.FixtureRequest) -> int:
    if request.config.getoption("--soak", default=False):
        return 500
    return int(os.environ.get("MINDSTORE_CRASH_KILLS", "40"))


def _run(backend: str, target: str, blobs: str, kill_after: float) -> list[dict[str, Any]]:
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), backend, target, blobs, "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    events: list[dict[str, Any]] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            try:
                events.append(json.loads(raw))
            except ValueError:
                continue  # a line cut by the kill
            if "ready" in events[-1]:
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if not ready.wait(30):
            raise RuntimeError("media worker did not start: " + proc.stderr.read().decode()[-2000:])  # type: ignore[union-attr]
        threading.Event().wait(kill_after)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(10)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    return events


async def _open(backend: str, target: str) -> Any:
    if backend == "sqlite":
        from mindstore.store.sqlite import SQLiteStore

        return SQLiteStore(target)
    from mindstore.store.postgres import PostgresStore

    url, schema = target.split("|")
    return await PostgresStore.open(url, schema=schema, min_size=1, max_size=2)


async def _verify(backend: str, target: str, blobs: str, acked: set[str]) -> list[str]:
    problems: list[str] = []
    if backend == "sqlite":
        con = sqlite3.connect(target)
        try:
            ok = con.execute("PRAGMA integrity_check").fetchone()[0]
            if ok != "ok":
                problems.append(f"integrity_check: {ok}")
            problems += lexical_index_problems(con)
        finally:
            con.close()
    store = await _open(backend, target)
    try:
        s = Session.create(store, SESSION, namespace=NAMESPACE).with_blob_store(blobs)
        rows = await store.all_messages(s.key)
        ids = {r.id for r in rows}
        problems += [f"LOST acknowledged message {m}" for m in sorted(acked - ids)]
        originals = [media_message(int(r.id[1:])) for r in rows]
        for row, original in zip(rows, originals, strict=True):
            if row.message == original:
                continue
            if not is_evicted(row.message) or "base64," in json.dumps(row.message):
                problems.append(f"message {row.id} is neither original nor evicted")
        history = await s.get_history()
        if [m["id"] for m in history] != [r.id for r in rows]:
            problems.append("the path is not one chain of every stored message")
        tail = [r.message for r in rows[-KEEP:]]
        if any(is_evicted(m) for m in tail):
            problems.append("a message of the tail was evicted")
        try:
            hydrated = await s.get_history(hydrate=True)
        except MediaNotFoundError as exc:
            problems.append(f"LOST media: {exc}")
        else:
            if json.dumps(hydrated) != json.dumps(originals):
                problems.append("hydrated history differs from the originals")
        hits = {h.message_id for h in await s.search(WORD, limit=100_000)}
        if hits != ids:
            problems.append(f"search: {len(hits - ids)} ghosts, {len(ids - hits)} missing")
        return problems
    finally:
        await store.aclose()


async def run_media_crash_rounds(
    backend: str, target: str, blobs: str, kills: int, seed: int = 32
) -> Outcome:
    rng = random.Random(seed)
    out = Outcome()
    acked: set[str] = set()
    worker_target = _writer_target(backend, target)
    for round_no in range(1, kills + 1):
        events = await asyncio.to_thread(
            _run, backend, worker_target, blobs, rng.uniform(0.02, 0.5)
        )
        await _settle(backend, target)
        out.kills += 1
        pending = None
        for e in events:
            if "intent" in e:
                pending = e["intent"]
            elif "ack" in e:
                pending = None
                if e["ack"]["op"] == "append":
                    acked.add(e["ack"]["id"])
                    out.appends += 1
                else:
                    out.evicted += e["ack"]["messages"]
        if pending is not None and pending["op"] == "evict":
            out.in_eviction += 1
        out.problems += [
            f"kill {round_no}: {p}" for p in await _verify(backend, target, blobs, acked)
        ]
        if len(out.problems) > 10:
            break
    return out


def _check(out: Outcome, kills: int) -> None:
    assert out.problems == [], "\n".join(out.problems)
    assert out.kills >= kills
    assert out.appends >= kills // 2  # the worker got work done between kills
    assert out.evicted >= kills // 4
    assert out.in_eviction >= kills // 5, out  # many kills landed inside an eviction pass


@pytest.mark.slow
async def test_sqlite_eviction_survives_sigkill(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    kills = _kills(request)
    out = await run_media_crash_rounds(
        "sqlite", str(tmp_path / "media.db"), str(tmp_path / "blobs"), kills
    )
    _check(out, kills)


@pytest.mark.slow
@pytest.mark.postgres
async def test_postgres_eviction_survives_sigkill(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = postgres_url_or_skip()
    kills = _kills(request)
    schema = new_schema_name()
    try:
        out = await run_media_crash_rounds(
            "postgres", f"{url}|{schema}", str(tmp_path / "blobs"), kills
        )
    finally:
        await drop_schema(url, schema)
    _check(out, kills)
