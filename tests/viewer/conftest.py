"""Fixtures for the viewer tests: stores built on disk, the viewer served on a free loopback
port (uvicorn in a thread, see :class:`mindstore.viewer.server.ViewerServer`), and a headless
Chromium driven by Playwright.

The browser is Debian's ``chromium`` (``/usr/bin/chromium``; ``.ci/run`` installs it with
apt). Without it the browser tests skip with a reason — except under CI (``CI`` set), where a
missing browser fails them: the viewer's promise is tested in a real browser or not at all.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from viewer_helpers import PageWatch, run_async

pytest.importorskip("starlette", reason="the viewer extra is not installed")

CHROMIUM = os.environ.get("MINDSTORE_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store ``mindstore demo`` builds (branches, a compaction, blocks, two sessions)."""
    from mindstore.cli.demo import run_demo

    path = tmp_path_factory.mktemp("viewer-demo") / "demo.db"
    summary = run_async(run_demo(str(path), console=None))
    failed = {k: v for k, v in summary["sections"].items() if not v.get("ok")}
    assert not failed, failed
    return path


@pytest.fixture(scope="session")
def demo_server(demo_db: Path) -> Iterator[str]:
    from mindstore.viewer.server import ViewerServer

    with ViewerServer(str(demo_db)) as server:
        yield server.url


def _browser_available() -> bool:
    return Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is not None


@pytest.fixture(scope="module")  # not session: Playwright's sync API keeps an event loop
def browser() -> Iterator[Any]:  # running in this thread, which asyncio.run() elsewhere refuses
    if not _browser_available():
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but there is no Chromium at {CHROMIUM} (apt install chromium)")
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium; CI installs it)")
    playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed")
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def watched(browser: Any) -> Iterator[PageWatch]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        yield PageWatch(context.new_page())
    finally:
        context.close()
