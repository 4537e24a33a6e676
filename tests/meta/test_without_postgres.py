"""The README's test command passes on a machine without PostgreSQL.

Without ``MINDSTORE_TEST_POSTGRES_URL`` every PostgreSQL test skips. A test that opens something
(an event loop, a store, a connection, a subprocess) *before* deciding to skip leaks it, and
``filterwarnings = error`` turns the ResourceWarning into an error in whichever later test
collects the garbage — so a fresh clone fails. This runs every PostgreSQL-marked test in a
child pytest with the variables unset and requires a clean exit: nothing may leak on a skip
path. (``.ci/run`` also runs the whole README command once without PostgreSQL.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


# slow: ~20 s; .ci/run's second pass (no PostgreSQL at all) checks the same on every test.
@pytest.mark.slow
def test_postgres_tests_skip_without_leaking_anything() -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MINDSTORE_TEST_POSTGRES_URL", "MINDSTORE_REQUIRE_POSTGRES")
    }
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "postgres", "tests"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    tail = (result.stdout + result.stderr)[-4000:]
    assert result.returncode == 0, tail
    assert " skipped" in result.stdout, tail
    assert "error" not in result.stdout.splitlines()[-1], tail
