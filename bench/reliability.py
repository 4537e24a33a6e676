"""Reliability report: crash kills, contention and hostile inputs, with lost = 0 and corrupt = 0.

Runs the same harnesses as ``tests/reliability/`` at a chosen size and prints one table (plus,
with PostgreSQL, the outage measurements of :func:`postgres_outages`):

    python bench/reliability.py                 # 100 kills per backend, 4 s contention
    python bench/reliability.py --soak          # 2,000 kills per backend, 30 s contention
    python bench/reliability.py --kills 300 --postgres postgresql://postgres@127.0.0.1/test

A second table covers the multi-step operations — fork, compact_and_split, import — each
SIGKILLed ``--op-kills`` times per backend (``tests/reliability/crash_ops.py``): kills that
landed inside an operation, how many of those had committed, retries (split: a retried split
refused; import: a killed import re-run), partial results found (must be 0).

SQLite always runs; PostgreSQL runs when ``--postgres URL`` (or MINDSTORE_TEST_POSTGRES_URL) is
given. Exit code 1 if anything was lost or corrupt.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "reliability"))

import crash_harness  # noqa: E402
import crash_ops  # noqa: E402
import test_bad_input  # noqa: E402
import test_contention  # noqa: E402


async def crash(backend: str, url: str | None, kills: int) -> dict[str, Any]:
    start = time.perf_counter()
    if backend == "sqlite":
        from mindstore.store.sqlite import SQLiteStore

        path = str(Path(tempfile.mkdtemp()) / "crash.db")

        async def open_store() -> Any:
            return SQLiteStore(path)

        report = await crash_harness.run_crash_rounds("sqlite", path, open_store, kills)
    else:
        from backends import drop_schema
        from mindstore.store.postgres import PostgresStore

        assert url is not None
        schema = f"mindstore_rel_{uuid.uuid4().hex[:12]}"

        async def open_store() -> Any:
            return await PostgresStore.open(url, schema=schema, min_size=1, max_size=2)

        try:
            report = await crash_harness.run_crash_rounds(
                "postgres", f"{url}|{schema}", open_store, kills
            )
        finally:
            await drop_schema(url, schema)
    return {
        "kills": report.kills,
        "acked_ops": report.acked_ops,
        "lost": report.lost,
        "corrupt": report.corrupt,
        "problems": report.problems[:10],
        "seconds": time.perf_counter() - start,
    }


async def contention(backend: str, url: str | None, seconds: float) -> dict[str, Any]:
    test_contention.SECONDS = seconds
    if backend == "sqlite":
        from mindstore.store.sqlite import SQLiteStore

        path = str(Path(tempfile.mkdtemp()) / "contention.db")
        async with SQLiteStore(path) as store:
            await store.stats()
        results = await asyncio.to_thread(test_contention.run_workers, "sqlite", path)
        async with SQLiteStore(path) as store:
            ok, problem = await _check(store, results)
    else:
        from backends import drop_schema
        from mindstore.store.postgres import PostgresStore

        assert url is not None
        schema = f"mindstore_rel_{uuid.uuid4().hex[:12]}"
        try:
            results = await asyncio.to_thread(
                test_contention.run_workers, "postgres", f"{url}|{schema}"
            )
            store = await PostgresStore.open(url, schema=schema, min_size=1, max_size=2)
            try:
                ok, problem = await _check(store, results)
            finally:
                await store.aclose()
        finally:
            await drop_schema(url, schema)
    typed: dict[str, int] = {}
    for r in results:
        for k, v in r["counts"].items():
            typed[k] = typed.get(k, 0) + v
    return {
        "ops": sum(r["ops"] for r in results),
        "typed_errors": typed,
        "consistent": ok,
        "problem": problem,
        "seconds": seconds,
    }


async def postgres_outages(url: str) -> dict[str, Any]:
    """PostgreSQL restart and freeze (issue 13 item 12), with the store's default limits.

    * restart: a PRIVATE throw-away server (initdb in a temp dir, Unix socket only — never the
      shared one) is stopped for 2, 5 and 10 s while a store keeps calling; after each restart,
      the seconds until the first call succeeds;
    * freeze: a worker SIGSTOPped inside an append transaction holds the session's row lock;
      the longest wait of 3 other appenders of that session (they fail after ``lock_timeout``)
      and the seconds until appends succeed again (``idle_in_transaction_timeout``).
    """
    import shutil

    import pg_outage
    import test_postgres_concurrency as pgc

    from backends import drop_schema
    from mindstore.store.postgres.store import (
        DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT,
        DEFAULT_LOCK_TIMEOUT,
    )

    # psycopg_pool logs every refused reconnection attempt during the outage: expected here
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    out: dict[str, Any] = {"restart": [], "freeze": None, "ok": True}
    bindir = pgc._pg_bindir()
    if bindir is None:
        out["restart_skipped"] = "initdb/pg_ctl not installed"
    else:
        root = Path(tempfile.mkdtemp(prefix="mindstore-pg-"))
        server = pgc.PrivateServer(bindir, root)
        try:
            server.init()
            server.start()
            for outage in (2.0, 5.0, 10.0):
                r = await pg_outage.restart_recovery(server, outage=outage)
                out["restart"].append(r)
                out["ok"] &= r["first_success_s"] < 2.0
        finally:
            with contextlib.suppress(Exception):  # already stopped
                server.stop()
            shutil.rmtree(root, ignore_errors=True)
    schema = f"mindstore_rel_{uuid.uuid4().hex[:12]}"
    try:
        f = await pg_outage.frozen_holder(
            url,
            schema,
            lock_timeout=DEFAULT_LOCK_TIMEOUT,
            idle_in_transaction_timeout=DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT,
        )
    finally:
        await drop_schema(url, schema)
    f["lock_timeout"] = DEFAULT_LOCK_TIMEOUT
    f["idle_in_transaction_timeout"] = DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT
    out["freeze"] = f
    out["ok"] &= f["max_wait_s"] < DEFAULT_LOCK_TIMEOUT + 5 and not f["written_while_blocked"]
    return out


def print_outages(out: dict[str, Any]) -> None:
    print()
    print("PostgreSQL restart (private server): first successful call after the server is back")
    for r in out["restart"]:
        print(
            f"  outage {r['outage_s']:>4.0f} s: first success after {r['first_success_s']:.2f} s"
            f" ({r['failed_calls']} calls failed with StoreError meanwhile)"
        )
    if out.get("restart_skipped"):
        print(f"  skipped: {out['restart_skipped']}")
    f = out["freeze"]
    print(
        "PostgreSQL freeze (holder SIGSTOPped in an append; "
        f"lock_timeout={f['lock_timeout']:.0f} s, "
        f"idle_in_transaction_timeout={f['idle_in_transaction_timeout']:.0f} s)"
    )
    print(
        f"  blocked appenders: max wait {f['max_wait_s']:.2f} s, all StoreError: "
        f"{all(o.startswith('StoreError') for o in f['outcomes'])}, written while blocked: "
        f"{len(f['written_while_blocked'])}; appends succeed again after {f['recovered_s']:.1f} s"
    )


async def _check(store: Any, results: list[dict[str, Any]]) -> tuple[bool, str]:
    try:
        await test_contention.check_final_state(store, results)
    except AssertionError as exc:
        return False, str(exc)[:500]
    return True, ""


# ---- multi-step operations under SIGKILL (fork, compact_and_split, import) --------------------


async def operation_crashes(backend: str, url: str | None, kills: int) -> list[dict[str, Any]]:
    """Run the fork/split/import kill rounds on one backend; one row per operation."""
    rows = []
    for op in crash_ops.OPS:
        workdir = Path(tempfile.mkdtemp())
        if backend == "sqlite":
            target = str(workdir / "ops.db")
            report = await crash_ops.run_op_crash_rounds(op, "sqlite", target, kills, workdir)
        else:
            from backends import drop_schema

            assert url is not None
            schema = f"mindstore_rel_{uuid.uuid4().hex[:12]}"
            try:
                report = await crash_ops.run_op_crash_rounds(
                    op, "postgres", f"{url}|{schema}", kills, workdir
                )
            finally:
                await drop_schema(url, schema)
        rows.append(
            {
                "backend": backend,
                "op": op,
                "kills": report.kills,
                "acked_ops": report.acked_ops,
                "in_flight": report.in_flight,
                "in_flight_committed": report.in_flight_committed,
                "retries": report.retries,
                "lost": report.lost,
                "partial_or_corrupt": report.corrupt,
                "problems": report.problems[:10],
                "seconds": report.seconds,
            }
        )
    return rows


def print_operation_crashes(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'backend':<9} {'operation':<10} {'kills':>6} {'acked ops':>10} {'in flight':>10} "
        f"{'committed':>10} {'retries':>8} {'lost':>5} {'partial':>8} {'seconds':>8}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['backend']:<9} {r['op']:<10} {r['kills']:>6} {r['acked_ops']:>10} "
            f"{r['in_flight']:>10} {r['in_flight_committed']:>10} {r['retries']:>8} "
            f"{r['lost']:>5} {r['partial_or_corrupt']:>8} {r['seconds']:>8.1f}"
        )
    for r in rows:
        for p in r["problems"]:
            print(f"  {r['backend']} {r['op']}: {p}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--contention-seconds", type=float, default=4.0)
    parser.add_argument("--soak", action="store_true", help="2,000 kills, 30 s contention")
    parser.add_argument("--postgres", default=os.environ.get("MINDSTORE_TEST_POSTGRES_URL"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--op-kills", type=int, default=100, help="kills per multi-step operation and backend"
    )
    parser.add_argument("--no-outages", action="store_true", help="skip PostgreSQL restart/freeze")
    args = parser.parse_args()
    if args.soak:
        args.kills, args.contention_seconds, args.op_kills = 2000, 30.0, 1000
    backends = ["sqlite"] + (["postgres"] if args.postgres else [])
    inputs = len(test_bad_input.BAD_MESSAGES) * 2 + len(test_bad_input.HOSTILE_QUERIES) * 3
    rows = []
    for backend in backends:
        c = asyncio.run(crash(backend, args.postgres, args.kills))
        k = asyncio.run(contention(backend, args.postgres, args.contention_seconds))
        rows.append(
            {
                "backend": backend,
                "crash": c,
                "contention": k,
                "hostile_inputs_in_test_suite": inputs,
            }
        )
    op_rows: list[dict[str, Any]] = []
    for row in rows:
        row["operations"] = asyncio.run(
            operation_crashes(row["backend"], args.postgres, args.op_kills)
        )
        op_rows += row["operations"]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        head = (
            f"{'backend':<9} {'kills':>6} {'acked ops':>10} {'lost':>5} {'corrupt':>8} "
            f"{'crash s':>8} {'contention ops':>15} {'cont. s':>8} {'consistent':>11} "
            f"{'typed errors':<28} {'inputs':>7}"
        )
        print(head)
        print("-" * len(head))
        for r in rows:
            c, k = r["crash"], r["contention"]
            typed = ", ".join(f"{n}={v}" for n, v in sorted(k["typed_errors"].items())) or "-"
            print(
                f"{r['backend']:<9} {c['kills']:>6} {c['acked_ops']:>10} {c['lost']:>5} "
                f"{c['corrupt']:>8} {c['seconds']:>8.1f} {k['ops']:>15} {k['seconds']:>8.1f} "
                f"{'yes' if k['consistent'] else 'NO':>11} {typed:<28} "
                f"{r['hostile_inputs_in_test_suite']:>7}"
            )
        for r in rows:
            for p in r["crash"]["problems"]:
                print(f"  {r['backend']}: {p}")
            if r["contention"]["problem"]:
                print(f"  {r['backend']} contention: {r['contention']['problem']}")
        print()
        print_operation_crashes(op_rows)
    bad = any(
        r["crash"]["lost"] or r["crash"]["corrupt"] or not r["contention"]["consistent"]
        for r in rows
    ) or any(r["lost"] or r["partial_or_corrupt"] for r in op_rows)
    if args.postgres and not args.no_outages:
        outages = asyncio.run(postgres_outages(args.postgres))
        print(json.dumps(outages, indent=2)) if args.json else print_outages(outages)
        bad = bad or not outages["ok"]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
