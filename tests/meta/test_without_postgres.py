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


def test_postgres_skips_are_one_summary_line() -> None:
    """Regression: without PostgreSQL the run ended with one ``SKIPPED`` line per test (284)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MINDSTORE_TEST_POSTGRES_URL", "MINDSTORE_REQUIRE_POSTGRES")
    }
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/contract/test_list_namespaces.py", "tests/contract/test_isolation.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    out = result.stdout
    assert result.returncode == 0, out[-4000:]
    skipped = int(out.splitlines()[-1].split(" skipped")[0].split()[-1])
    assert skipped >= 2, out[-4000:]
    summary = [ln for ln in out.splitlines() if "PostgreSQL tests skipped" in ln]
    assert summary == [
        f"{skipped} PostgreSQL tests skipped: set MINDSTORE_TEST_POSTGRES_URL="
        "postgresql://USER@HOST:5432/DB to run them (each test uses its own schema)"
    ], out[-4000:]
    assert not [ln for ln in out.splitlines() if ln.startswith("SKIPPED")], out[-4000:]


def test_docs_pages_without_python_are_not_skipped_tests() -> None:
    """Regression: three docs pages were reported "skipped" for having no ```python blocks."""
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        import test_docs
    finally:
        sys.path.pop(0)
    pages = {str(p.relative_to(ROOT)) for p in test_docs.doc_files()}
    tested = {str(p.relative_to(ROOT)) for p in test_docs.docs_with_python()}
    without = pages - tested
    assert "docs/cli.md" in without and "README.md" in tested
    for page in without:
        text = (ROOT / page).read_text(encoding="utf-8")
        assert not test_docs.python_blocks(text, page)
