"""Crash consistency of the multi-step operations: ``fork``, ``compact_and_split`` and import.

Shared by ``test_crash_operations.py`` (CI: ≥100 kills per operation and backend) and
``bench/reliability.py``. Each round forks a writer process that repeats one operation as fast
as it can, reporting every call on a pipe *before* it starts (``intent``) and *after* it
returned (``ack``); the parent SIGKILLs it at a random instant, then checks the database:

* **fork** — every fork is whole: exactly the source path up to its message (ids and parent
  links), the overlays lying within it, the source's skill state and ``forked_from`` metadata;
  every acknowledged fork exists, the one in flight exists whole or not at all, and no session
  exists that nobody forked; the source never changes.
* **split** — the sessions form one chain: every ended session has exactly one continuation,
  every continuation's parent has ended, exactly one session is active, and each continuation
  starts with its seed message. A new writer always first repeats the split it was told to do
  (the natural retry): if the killed one had committed, the retry must be refused
  (``ConflictError``), never make a second continuation.
* **import** — every imported session re-exports exactly as the file (messages, overlays,
  blocks, skills, prompt, registry); an import in flight at the kill exists whole or not at all;
  when it left nothing, the next writer runs the same import again first, which must succeed.
* SQLite: ``PRAGMA integrity_check`` and the lexical index check after every kill.

Writers are forked from a ``forkserver`` that has imported mindstore already, so a round costs
milliseconds rather than a Python start-up: 100 kills take seconds, not minutes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import random
import signal
import sqlite3
import statistics
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from crash_harness import _settle, _writer_target, lexical_index_problems

from mindstore import SessionManager
from mindstore.cli.transfer import import_data, read_export
from mindstore.errors import ConflictError
from mindstore.formats.export import export_lines, parse_export
from mindstore.manager import SPLIT_CONTEXT_PREFIX
from mindstore.store.base import NewMessage, ScopeKey, SessionKey, Store

# Imported here, so the forkserver's writers start with it loaded (~0.4 s a round otherwise);
# without the postgres extra only SQLite runs.
with contextlib.suppress(ImportError):
    import mindstore.store.postgres  # noqa: F401

OPS = ("fork", "split", "import")
NS = "ops"
SOURCE = "src"  # fork: the session every fork copies from
SOURCE_MESSAGES = 120
EXPORT_NS = "exported"  # import: where the exported session was built
IMPORT_CHUNK = 40


@dataclass
class OpReport:
    op: str
    kills: int = 0
    acked_ops: int = 0
    in_flight: int = 0  # kills that landed inside an operation
    in_flight_committed: int = 0  # ... of which the operation had committed
    retries: int = 0  # split: retries refused; import: killed imports re-run successfully
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def lost(self) -> int:
        return sum("LOST" in p for p in self.problems)

    @property
    def corrupt(self) -> int:
        return len(self.problems) - self.lost


def _text(mid: str) -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": f"crash ops {mid}"}]}


async def open_store(backend: str, target: str) -> Store:
    if backend == "sqlite":
        from mindstore.store.sqlite import SQLiteStore

        return SQLiteStore(target)
    from mindstore.store.postgres import PostgresStore

    url, schema = target.split("|")
    return await PostgresStore.open(url, schema=schema, min_size=1, max_size=2)


# ---- the fixed starting state --------------------------------------------------------------


# fork: overlays on the source as (from index, to index, reverted, superseded by overlay #)
_FORK_OVERLAYS = [(0, 9, False, 2), (10, 19, False, 2), (0, 19, False, None), (30, 39, True, None)]
_FORK_OVERLAYS += [(50, 59, False, None), (60, 99, False, None), (100, 110, False, None)]
_SKILLS = [("skills", "deploy", True), ("skills", "runbook", False), ("kb", "api", True)]


async def prepare(op: str, store: Store, workdir: Path) -> dict[str, Any]:
    """Build what the writers start from; return the plan they and the verifier share."""
    if op == "fork":
        key = SessionKey(namespace=NS, session_id=SOURCE)
        await store.create_session(key, name="source", metadata={"origin": "crash"})
        ids = [f"m{i}" for i in range(SOURCE_MESSAGES)]
        await store.append(key, [NewMessage(message=_text(i), tokens=5) for i in ids])
        stored: list[int] = []
        for i, (a, b, _reverted, _by) in enumerate(_FORK_OVERLAYS):
            supersedes = [stored[j] for j, o in enumerate(_FORK_OVERLAYS[:i]) if o[3] == i]
            c = await store.add_compaction(
                key, summary=f"o{i}", from_id=ids[a], to_id=ids[b], supersedes=supersedes
            )
            stored.append(c.id)
        for i, o in enumerate(_FORK_OVERLAYS):
            if o[2]:
                await store.revert_compaction(key, stored[i])
        for label, skill, loaded in _SKILLS:
            await store.set_skill_loaded(key, label, skill, True)
            if not loaded:
                await store.set_skill_loaded(key, label, skill, False)
        return {"op": op}
    if op == "split":
        m = SessionManager(store, namespace=NS)
        first = await m.create("chain")
        await m.append_all(first.id, [_text("c1"), _text("c2")])
        return {"op": op, "current": first.id}
    key = SessionKey(namespace=EXPORT_NS, session_id="chat")
    await store.create_session(key, name="exported", model="m", metadata={"k": [1, 2]})
    await store.append(key, [NewMessage(message=_text(f"e{i}"), tokens=4) for i in range(150)])
    await store.append(key, [NewMessage(message=_text("side"), parent="e100", tokens=4)])
    a = await store.add_compaction(key, summary="first", from_id="e0", to_id="e20")
    await store.add_compaction(key, summary="wider", from_id="e0", to_id="e40", supersedes=[a.id])
    r = await store.add_compaction(key, summary="undone", from_id="e50", to_id="e60")
    await store.revert_compaction(key, r.id)
    await store.set_block(ScopeKey(namespace=EXPORT_NS, session_id="chat", label="memory"), "m")
    await store.set_block(ScopeKey(namespace=EXPORT_NS, session_id=None, label="profile"), "p")
    await store.set_skill_loaded(key, "skills", "deploy", True)
    await store.set_skill_loaded(key, "skills", "old", True)
    await store.set_skill_loaded(key, "skills", "old", False)
    await store.put_prompt(key, "PROMPT", overwrite=True)
    await store.add_usage(key, 10, 20, 0.25)
    text = "".join(export_lines(await read_export(store, key)))
    path = workdir / "export.jsonl"
    path.write_text(text, encoding="utf-8")
    return {"op": op, "file": str(path), "retry": None}


# ---- the writer (a forked child process) ---------------------------------------------------


def writer(
    backend: str, target: str, plan: dict[str, Any], round_no: int, seed: int, out: Any
) -> None:
    """Process entry point: repeat the plan's operation until killed."""
    try:
        asyncio.run(_writer(backend, target, plan, round_no, seed, out))
    except BaseException:
        _emit(out, "error", {"traceback": traceback.format_exc()[-3000:]})
        raise


def _read_lines(path: str) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return fh.readlines()


def _emit(out: Connection, kind: str, payload: dict[str, Any]) -> None:
    out.send_bytes(json.dumps({kind: payload}).encode())  # one write(): never torn by a kill


async def _writer(
    backend: str, target: str, plan: dict[str, Any], round_no: int, seed: int, out: Connection
) -> None:
    rng = random.Random(seed)
    store = await open_store(backend, target)
    m = SessionManager(store, namespace=NS)
    op = plan["op"]
    data = parse_export(_read_lines(plan["file"])) if op == "import" else None
    current = plan.get("current")
    retry = plan.get("retry")
    _emit(out, "ready", {})
    n = 0
    while True:
        n += 1
        if op == "fork":
            name = f"f{round_no}x{n}"
            at = f"m{rng.randrange(15, SOURCE_MESSAGES)}"
            _emit(out, "intent", {"name": name, "at": at})
            t0 = time.perf_counter()
            info = await m.fork(SOURCE, at, name)
            _emit(out, "ack", {"name": name, "id": info.id, "s": time.perf_counter() - t0})
        elif op == "split":
            summary = f"summary r{round_no}x{n}"
            _emit(out, "intent", {"old": current, "summary": summary})
            t0 = time.perf_counter()
            try:
                new = await m.compact_and_split(current, summary)
            except ConflictError:
                # The killed writer's split had landed: the retry is refused; carry on in the
                # continuation it made.
                nxt = [s.id for s in await m.list(limit=1000) if s.parent_session_id == current]
                _emit(out, "refused", {"old": current, "continuations": nxt})
                current = nxt[0]
                continue
            elapsed = time.perf_counter() - t0
            _emit(out, "ack", {"old": current, "new": new.id, "summary": summary, "s": elapsed})
            current = new.id
            await m.append(current, _text(f"r{round_no}x{n}"))
        else:
            assert data is not None
            sid = retry or f"i{round_no}x{n}"
            _emit(out, "intent", {"sid": sid, "retry": retry is not None})
            t0 = time.perf_counter()
            await import_data(store, data, namespace=NS, session_id=sid, chunk=IMPORT_CHUNK)
            elapsed = time.perf_counter() - t0
            _emit(out, "ack", {"sid": sid, "retry": retry is not None, "s": elapsed})
            retry = None


_CONTEXT: Any = None


def _context() -> Any:
    """The forkserver context, its server started with mindstore and this module imported."""
    global _CONTEXT
    if _CONTEXT is None:
        from multiprocessing import forkserver

        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["crash_ops"])
        # Python 3.11's forkserver ignores the parent's sys.path: hand it over in PYTHONPATH
        # for the server's start (the preload would fail silently and every writer would
        # import mindstore itself, ~0.5 s a round).
        here = str(Path(__file__).parent)
        saved = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join([here, *([saved] if saved else [])])
        try:
            forkserver.ensure_running()
        finally:
            if saved is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = saved
        _CONTEXT = ctx
    return _CONTEXT


def _run_writer(
    backend: str, target: str, plan: dict[str, Any], round_no: int, seed: int, kill_after: float
) -> list[dict[str, Any]]:
    ctx = _context()
    reader, out = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=writer, args=(backend, target, plan, round_no, seed, out))
    events: list[dict[str, Any]] = []
    try:
        proc.start()
        out.close()  # the child holds the write end now: EOF when it dies
        if not reader.poll(60):
            raise RuntimeError("crash writer did not start within 60 s")
        events.append(json.loads(reader.recv_bytes()))
        if "ready" not in events[0]:
            raise RuntimeError(f"crash writer failed to start: {events[0]}")
        time.sleep(kill_after)
        with contextlib.suppress(ProcessLookupError):  # a writer that failed has exited
            os.kill(proc.pid, signal.SIGKILL)  # type: ignore[arg-type]
        proc.join(30)
        while True:
            try:
                events.append(json.loads(reader.recv_bytes()))
            except (EOFError, OSError):
                break
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(30)
        proc.close()
        reader.close()
    return events


# ---- verification --------------------------------------------------------------------------


@dataclass
class Model:
    acked: dict[str, Any] = field(default_factory=dict)  # fork: name→id; import: sid→True
    verified: set[str] = field(default_factory=set)  # session ids already checked
    plan: dict[str, Any] = field(default_factory=dict)
    expected_export: str = ""


def _sqlite_problems(path: str) -> list[str]:
    problems: list[str] = []
    con = sqlite3.connect(path)
    try:
        ok = con.execute("PRAGMA integrity_check").fetchone()[0]
        if ok != "ok":
            problems.append(f"integrity_check: {ok}")
        problems += lexical_index_problems(con)
    finally:
        con.close()
    return problems


async def _all_sessions(store: Store, namespace: str) -> list[Any]:
    out: list[Any] = []
    before: str | None = None
    while True:
        page = await store.list_sessions(namespace, limit=1000, before=before)
        out.extend(page)
        if len(page) < 1000:
            return out
        before = page[-1].id


def _expected_fork_overlays(at: int) -> list[tuple[str, str, str]]:
    return sorted(
        (f"m{a}", f"m{b}", f"o{i}")
        for i, (a, b, reverted, _by) in enumerate(_FORK_OVERLAYS)
        if not reverted and b <= at
    )


async def _verify_fork(
    store: Store, model: Model, events: list[dict[str, Any]], report: OpReport
) -> list[str]:
    problems: list[str] = []
    pending: dict[str, Any] | None = None
    for e in events:
        if "intent" in e:
            pending = e["intent"]
        elif "ack" in e:
            model.acked[e["ack"]["name"]] = e["ack"]["id"]
            report.acked_ops += 1
            pending = None
    sessions = [s for s in await _all_sessions(store, NS) if s.id != SOURCE]
    by_name: dict[str, list[Any]] = {}
    for s in sessions:
        by_name.setdefault(s.name, []).append(s)
    for name, found in by_name.items():
        if len(found) > 1:
            problems.append(f"fork {name} exists {len(found)} times")
        if name not in model.acked and (pending is None or name != pending["name"]):
            problems.append(f"a session nobody forked: {name}")
    for name, sid in model.acked.items():
        if name not in by_name:
            problems.append(f"LOST acknowledged fork {name} ({sid})")
    if pending is not None:
        report.in_flight += 1
        if pending["name"] in by_name:
            report.in_flight_committed += 1
            model.acked[pending["name"]] = by_name[pending["name"]][0].id
    for s in sessions:
        if s.id in model.verified:
            continue
        model.verified.add(s.id)
        key = SessionKey(namespace=NS, session_id=s.id)
        at_id = (s.metadata or {}).get("forked_from", {}).get("message_id")
        if not isinstance(at_id, str) or (s.metadata or {}).get("origin") != "crash":
            problems.append(f"fork {s.name}: metadata {s.metadata}")
            continue
        at = int(at_id[1:])
        rows = await store.all_messages(key)
        want = [f"m{i}" for i in range(at + 1)]
        if [r.id for r in rows] != want or s.message_count != len(want):
            problems.append(f"PARTIAL fork {s.name}: {len(rows)} of {len(want)} messages")
        elif any(r.parent_id != (f"m{i - 1}" if i else None) for i, r in enumerate(rows)):
            problems.append(f"fork {s.name}: broken parent links")
        overlays = sorted(
            (c.from_message_id, c.to_message_id, c.summary)
            for c in await store.get_compactions(key)
        )
        if overlays != _expected_fork_overlays(at):
            problems.append(f"PARTIAL fork {s.name}: overlays {overlays}")
        skills = sorted((k.label, k.key, k.loaded) for k in await store.get_skill_states(key))
        if skills != sorted(_SKILLS):
            problems.append(f"PARTIAL fork {s.name}: skill state {skills}")
        if s.parent_session_id != SOURCE:
            problems.append(f"fork {s.name}: parent {s.parent_session_id}")
    src = SessionKey(namespace=NS, session_id=SOURCE)
    if len(await store.all_messages(src)) != SOURCE_MESSAGES:
        problems.append("the fork source changed")
    return problems


async def _verify_split(
    store: Store, model: Model, events: list[dict[str, Any]], report: OpReport
) -> list[str]:
    problems: list[str] = []
    pending: dict[str, Any] | None = None
    for e in events:
        if "intent" in e:
            pending = e["intent"]
        elif "ack" in e:
            report.acked_ops += 1
            model.acked[e["ack"]["new"]] = e["ack"]
            pending = None
        elif "refused" in e:
            report.retries += 1
            pending = None
            if len(e["refused"]["continuations"]) != 1:
                problems.append(f"retry found continuations {e['refused']['continuations']}")
    sessions = await _all_sessions(store, NS)
    by_id = {s.id: s for s in sessions}
    children: dict[str, list[str]] = {}
    for s in sessions:
        if s.parent_session_id is not None:
            children.setdefault(s.parent_session_id, []).append(s.id)
    for parent, kids in children.items():
        if len(kids) > 1:
            problems.append(f"session {parent} has {len(kids)} continuations")
        if parent not in by_id or by_id[parent].end_reason != "compaction":
            problems.append(f"PARTIAL split: {parent} continued but not ended")
    active = [s.id for s in sessions if s.end_reason is None]
    if len(active) != 1:
        problems.append(f"{len(active)} active sessions in the chain: {active[:5]}")
    for s in sessions:
        if s.end_reason == "compaction" and s.id not in children:
            problems.append(f"PARTIAL split: {s.id} ended without a continuation")
    for new in model.acked:
        if new not in by_id:
            problems.append(f"LOST acknowledged split continuation {new}")
    if pending is not None:
        report.in_flight += 1
        if pending["old"] in children:
            report.in_flight_committed += 1
    for s in sessions:
        if s.parent_session_id is None or s.id in model.verified:
            continue
        model.verified.add(s.id)
        rows = await store.all_messages(SessionKey(namespace=NS, session_id=s.id))
        seed = rows[0].message if rows else None
        text = seed["parts"][0]["text"] if seed else ""
        if (
            seed is None
            or not text.startswith(SPLIT_CONTEXT_PREFIX)
            or (seed.get("metadata") or {}).get("split_from") != s.parent_session_id
        ):
            problems.append(f"PARTIAL split: continuation {s.id} without its seed")
        elif s.message_count != len(rows):
            problems.append(f"continuation {s.id}: count {s.message_count} != {len(rows)}")
    # The next writer retries what this one was doing, as a client that lost the answer would:
    # the split in flight (refused if it had landed), else the last continuation it was told.
    if pending is not None:
        model.plan["current"] = pending["old"]
    else:
        acks = [e["ack"]["new"] for e in events if "ack" in e]
        if acks:
            model.plan["current"] = acks[-1]
    return problems


async def _verify_import(
    store: Store, model: Model, events: list[dict[str, Any]], report: OpReport
) -> list[str]:
    problems: list[str] = []
    pending: dict[str, Any] | None = None
    for e in events:
        if "intent" in e:
            pending = e["intent"]
        elif "ack" in e:
            report.acked_ops += 1
            model.acked[e["ack"]["sid"]] = True
            if e["ack"]["retry"]:
                report.retries += 1
            pending = None
    model.plan["retry"] = None
    sessions = {s.id for s in await _all_sessions(store, NS)}
    for sid in sessions - set(model.acked):
        if pending is None or sid != pending["sid"]:
            problems.append(f"an imported session nobody imported: {sid}")
    for sid in model.acked:
        if sid not in sessions:
            problems.append(f"LOST acknowledged import {sid}")
    if pending is not None:
        report.in_flight += 1
        if pending["sid"] in sessions:
            report.in_flight_committed += 1
            model.acked[pending["sid"]] = True
        else:
            model.plan["retry"] = pending["sid"]  # the next writer must be able to re-run it
        if pending["retry"] and pending["sid"] in sessions:
            report.retries += 1
    for sid in sorted(sessions - model.verified):
        model.verified.add(sid)
        text = "".join(
            export_lines(await read_export(store, SessionKey(namespace=NS, session_id=sid)))
        )
        want = model.expected_export.replace(f'"namespace":"{EXPORT_NS}"', f'"namespace":"{NS}"', 1)
        want = want.replace('"session_id":"chat"', f'"session_id":"{sid}"', 1)
        if text != want:
            problems.append(f"PARTIAL import {sid}: its export differs from the file")
    if pending is not None and pending["sid"] not in sessions:
        # Nothing at all of a killed import: no session row, message, block or skill state.
        key = SessionKey(namespace=NS, session_id=pending["sid"])
        if await store.all_messages(key) or await store.get_skill_states(key):
            problems.append(f"PARTIAL import {pending['sid']}: rows without a session")
        if await store.get_prompt(key) is not None:
            problems.append(f"PARTIAL import {pending['sid']}: a prompt without a session")
    shared = await store.list_blocks(NS, None)
    if model.acked and [(k.label, c) for k, c in shared] != [("profile", "p")]:
        problems.append(f"namespace blocks {shared}")
    return problems


_VERIFY: dict[str, Callable[..., Awaitable[list[str]]]] = {
    "fork": _verify_fork,
    "split": _verify_split,
    "import": _verify_import,
}


async def run_op_crash_rounds(
    op: str,
    backend: str,
    target: str,
    kills: int,
    workdir: Path,
    *,
    seed: int = 4321,
) -> OpReport:
    """Kill a writer repeating ``op`` ``kills`` times at random instants, verifying after each.

    ``target``: the SQLite file, or ``url|schema`` for PostgreSQL (the schema is created).
    The kill lands uniformly within a window of about two operations after the writer is
    ready (measured from the acknowledgements: the window adapts to the backend and the
    machine's load), so most kills hit an operation somewhere between its first and last
    statement."""
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}")
    started = time.perf_counter()
    rng = random.Random(seed)
    report = OpReport(op=op)
    model = Model()
    store = await open_store(backend, target)  # the verifier's, for the whole run
    try:
        model.plan = await prepare(op, store, workdir)
        if op == "import":
            model.expected_export = "".join(_read_lines(model.plan["file"]))
        await _rounds(op, backend, target, kills, rng, model, report, store)
    finally:
        await store.aclose()
    report.seconds = time.perf_counter() - started
    return report


async def _rounds(
    op: str,
    backend: str,
    target: str,
    kills: int,
    rng: random.Random,
    model: Model,
    report: OpReport,
    store: Store,
) -> None:
    writer_target = _writer_target(backend, target)
    window = 0.05
    for round_no in range(1, kills + 1):
        kill_after = rng.uniform(0.002, window)
        events = await asyncio.to_thread(
            _run_writer,
            backend,
            writer_target,
            dict(model.plan),
            round_no,
            rng.randrange(1 << 30),
            kill_after,
        )
        await _settle(backend, target)
        report.kills += 1
        took = [e["ack"]["s"] for e in events if "ack" in e and "s" in e["ack"]]
        window = min(5.0, 2 * statistics.median(took) if took else window * 1.5)
        problems = [f"writer error: {e['error']['traceback']}" for e in events if "error" in e]
        if backend == "sqlite":
            problems += _sqlite_problems(target)
        problems += await _VERIFY[op](store, model, events, report)
        report.problems.extend(f"kill {round_no}: {p}" for p in problems)
        if len(report.problems) > 20:
            break
