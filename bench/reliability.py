"""Reliability report: crash kills, contention and hostile inputs, with lost = 0 and corrupt = 0.

Runs the same harnesses as ``tests/reliability/`` at a chosen size and prints one table:

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
import json
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
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
