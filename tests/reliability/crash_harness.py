"""Crash-consistency harness: run ``crash_writer.py``, SIGKILL it at random moments, verify.

Shared by ``test_crash.py`` (CI: ≥100 kills per backend) and ``bench/reliability.py --soak``.

After every kill the database must satisfy, whatever instant the kill landed on:

* SQLite: ``PRAGMA integrity_check`` is ``ok`` and the lexical index matches its statistics;
* every acknowledged append is there (unless an acknowledged delete removed it later) and every
  acknowledged delete is gone; an operation in flight at the kill either happened whole or not
  at all;
* every message decodes and validates (no half-written message) and shows the last acknowledged
  update (or the one in flight);
* the search index matches the messages exactly: a query for the word every message contains
  returns exactly the stored messages, each with its current text (no ghost, none missing);
* every parent exists (paths connected); the latest leaf is the newest childless message; the
  registry's message count equals the messages stored;
* the block holds every acknowledged append, each whole, none twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mindstore import Session
from mindstore.messages import validate_message

WRITER = Path(__file__).with_name("crash_writer.py")
SRC = Path(__file__).resolve().parents[2] / "src"
_VERSION = re.compile(r"version v(\d+)")


@dataclass
class Model:
    present: set[str] = field(default_factory=set)
    absent: set[str] = field(default_factory=set)
    versions: dict[str, set[int]] = field(default_factory=dict)
    block_items: set[str] = field(default_factory=set)
    maybe_block_items: set[str] = field(default_factory=set)
    acked_ops: int = 0


@dataclass
class Report:
    kills: int = 0
    acked_ops: int = 0
    lost: int = 0
    corrupt: int = 0
    problems: list[str] = field(default_factory=list)


def lexical_index_problems(con: sqlite3.Connection) -> list[str]:
    """The SQLite lexical index after a kill: no rows of missing messages, and statistics that
    match the rows (pending documents included)."""
    problems: list[str] = []
    indexed = (
        "SELECT coll, part, doc FROM search_terms UNION SELECT coll, part, doc FROM search_pending"
    )
    ghosts = con.execute(
        f"SELECT count(*) FROM ({indexed}) t LEFT JOIN messages m ON m.seq = t.doc "
        "WHERE t.coll LIKE 'm:%' AND m.seq IS NULL"
    ).fetchone()[0]
    if ghosts:
        problems.append(f"search index: {ghosts} documents of missing messages")
    counted = {
        (c, p): n
        for c, p, n in con.execute(
            f"SELECT coll, part, count(DISTINCT doc) FROM ({indexed}) GROUP BY coll, part"
        )
    }
    stats = {(c, p): n for c, p, n in con.execute("SELECT coll, part, docs FROM search_stats")}
    if counted != stats:
        problems.append(f"search statistics {stats} != index rows {counted}")
    return problems


def _run_writer(
    backend: str, target: str, round_no: int, seed: int, kill_after: float
) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), backend, target, str(round_no), str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    lines: list[dict[str, Any]] = []
    ready = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            try:
                event = json.loads(raw)
            except ValueError:
                continue  # a line cut by the kill
            lines.append(event)
            if "ready" in event:
                ready.set()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        if not ready.wait(30):
            proc.kill()
            proc.wait()
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise RuntimeError(f"crash writer did not start: {err[-2000:]}")
        threading.Event().wait(kill_after)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        t.join(10)
    finally:
        # Every path (a writer that never started included) closes the pipes and reaps the
        # process: a leak here is a ResourceWarning, an error under filterwarnings=error.
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        t.join(10)
        if proc.stderr is not None:
            proc.stderr.close()
        if proc.stdout is not None:
            proc.stdout.close()
    return lines


def _apply_events(model: Model, events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Fold acknowledged operations into the model; return the operation in flight, if any."""
    pending: dict[str, Any] | None = None
    for event in events:
        if "intent" in event:
            pending = event["intent"]  # an earlier un-acked intent raised: it did not happen
            continue
        if "ack" not in event:
            continue
        op = event["ack"]
        pending = None
        model.acked_ops += 1
        if op["op"] == "append":
            model.present.add(op["id"])
            model.versions[op["id"]] = {0}
        elif op["op"] == "delete":
            model.present.discard(op["id"])
            model.absent.add(op["id"])
            model.versions.pop(op["id"], None)
        elif op["op"] == "update":
            model.versions[op["id"]] = {op["version"]}
        elif op["op"] == "block":
            model.block_items.add(op["item"])
    return pending


async def verify(
    store: Any, backend: str, target: str, model: Model, pending: dict[str, Any] | None
) -> list[str]:
    """Check every invariant; return the problems found (empty = consistent). Updates the model
    with the fate of the in-flight operation."""
    problems: list[str] = []
    session = Session.create(store, "s1", namespace="crash").with_context("log")
    if backend == "sqlite":
        con = sqlite3.connect(target)
        try:
            ok = con.execute("PRAGMA integrity_check").fetchone()[0]
            if ok != "ok":
                problems.append(f"integrity_check: {ok}")
            problems += lexical_index_problems(con)
        finally:
            con.close()

    rows = await store.all_messages(session.key)
    by_id = {r.id: r for r in rows}

    # The operation in flight either happened whole or not at all; learn which.
    if pending is not None:
        if pending["op"] == "append" and pending["id"] in by_id:
            model.present.add(pending["id"])
            model.versions[pending["id"]] = {0}
        elif pending["op"] == "delete" and pending["id"] not in by_id:
            model.present.discard(pending["id"])
            model.absent.add(pending["id"])
            model.versions.pop(pending["id"], None)
        elif pending["op"] == "update" and pending["id"] in model.versions:
            model.versions[pending["id"]] = model.versions[pending["id"]] | {pending["version"]}
        elif pending["op"] == "block":
            model.maybe_block_items.add(pending["item"])

    for mid in model.present:
        if mid not in by_id:
            problems.append(f"LOST acknowledged message {mid}")
    for mid in model.absent:
        if mid in by_id:
            problems.append(f"acknowledged delete of {mid} is not visible")
    unexpected = set(by_id) - model.present
    if unexpected:
        problems.append(f"messages nobody appended: {sorted(unexpected)[:5]}")

    childless = set(by_id)
    for r in rows:
        try:
            validate_message(r.message, generate_id=False)
        except Exception as exc:  # a half-written or undecodable message
            problems.append(f"CORRUPT message {r.id}: {exc}")
            continue
        text = r.message["parts"][0]["text"]
        m = _VERSION.search(text)
        allowed = model.versions.get(r.id)
        if m is None or (allowed is not None and int(m.group(1)) not in allowed):
            problems.append(f"message {r.id} shows version {m and m.group(1)}, expected {allowed}")
        elif allowed is not None:
            model.versions[r.id] = {int(m.group(1))}
        if r.parent_id is not None:
            if r.parent_id not in by_id:
                problems.append(f"message {r.id} has a missing parent {r.parent_id}")
            childless.discard(r.parent_id)

    leaf = await store.latest_leaf(session.key)
    if rows:
        expected_leaf = max((by_id[i] for i in childless), key=lambda r: r.seq).id
        if leaf is None or leaf.id != expected_leaf:
            problems.append(f"latest leaf {leaf and leaf.id} != newest childless {expected_leaf}")
    elif leaf is not None:
        problems.append(f"latest leaf {leaf.id} in an empty session")

    hits = await session.search("crashcheck", limit=1_000_000)
    hit_ids = [h.message_id for h in hits]
    if len(hit_ids) != len(set(hit_ids)) or set(hit_ids) != set(by_id):
        problems.append(
            f"search index mismatch: {len(set(hit_ids) - set(by_id))} ghosts, "
            f"{len(set(by_id) - set(hit_ids))} missing"
        )
    for h in hits:
        row = by_id.get(h.message_id)
        if row is not None and row.message["parts"][0]["text"] not in h.text:
            problems.append(f"search text of {h.message_id} is stale")

    info = await store.get_session(session.key)
    count = info.message_count if info is not None else 0
    if count != len(rows):
        problems.append(f"registry message_count {count} != {len(rows)} stored")

    block = await session.get_context_block("log")
    lines = [ln for ln in (block.content if block else "").split("\n") if ln]
    items = [ln[len("item ") :] for ln in lines]
    if any(not ln.startswith("item u") for ln in lines) or len(items) != len(set(items)):
        problems.append(f"block is malformed: {lines[-3:]}")
    missing_items = model.block_items - set(items)
    if missing_items:
        problems.append(f"LOST acknowledged block appends {sorted(missing_items)[:5]}")
    extra = set(items) - model.block_items - model.maybe_block_items
    if extra:
        problems.append(f"block items nobody appended: {sorted(extra)[:5]}")
    model.block_items |= set(items) & model.maybe_block_items
    model.maybe_block_items.clear()
    return problems


WRITER_APP = "mindstore_crash_writer"


def _writer_target(backend: str, target: str) -> str:
    """PostgreSQL writers connect with an application_name, so the verifier can wait for the
    server to finish what a killed client left behind (see :func:`_settle`)."""
    if backend != "postgres":
        return target
    url, schema = target.split("|")
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}application_name={WRITER_APP}|{schema}"


async def _settle(backend: str, target: str) -> None:
    """Wait until the server has no backend left of a killed writer.

    A client killed right after sending COMMIT leaves its server process to finish the commit
    on its own; until that process exits, a verifier could read the state from before the
    commit and then see the message appear later. SQLite has no server: nothing to wait for.
    """
    if backend != "postgres":
        return
    import psycopg

    url = target.split("|")[0]
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for _ in range(200):
            cur = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                (WRITER_APP,),
            )
            row = await cur.fetchone()
            if row is None or row[0] == 0:
                return
            await asyncio.sleep(0.05)
    raise RuntimeError("a killed writer's server process did not exit within 10 s")


async def run_crash_rounds(
    backend: str, target: str, open_store: Any, kills: int, seed: int = 1234
) -> Report:
    """Kill the writer ``kills`` times at random instants, verifying after every kill."""
    rng = random.Random(seed)
    model = Model()
    report = Report()
    writer_target = _writer_target(backend, target)
    for round_no in range(1, kills + 1):
        kill_after = rng.uniform(0.005, 0.12)
        events = await asyncio.to_thread(
            _run_writer, backend, writer_target, round_no, rng.randrange(1 << 30), kill_after
        )
        await _settle(backend, target)
        pending = _apply_events(model, events)
        report.kills += 1
        store = await open_store()
        try:
            problems = await verify(store, backend, target, model, pending)
        finally:
            await store.aclose()
        for p in problems:
            report.problems.append(f"kill {round_no}: {p}")
            if "LOST" in p:
                report.lost += 1
            else:
                report.corrupt += 1
        if len(report.problems) > 20:
            break
    report.acked_ops = model.acked_ops
    return report
