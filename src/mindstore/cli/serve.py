"""``mindstore serve``: the read-only web viewer (docs/viewer.md).

``mindstore demo && mindstore serve`` works: when no database was named (no ``--db``, no
``MINDSTORE_DB``) and there is no ``./mindstore.db``, ``serve`` shows the newest database a
``mindstore demo`` wrote into its default temporary folder (owned by this user), and says so.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import click

from .common import shown_db

__all__ = ["serve"]


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token",
    default=None,
    envvar="MINDSTORE_VIEWER_TOKEN",
    help="Require this token on every request (needed to bind a non-loopback host; "
    "env MINDSTORE_VIEWER_TOKEN).",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the viewer in a browser.")
@click.option(
    "--json", "as_json", is_flag=True, help='Print {"url", "database"} as JSON once listening.'
)
@click.pass_context
def serve(
    ctx: click.Context,
    host: str,
    port: int,
    token: str | None,
    open_browser: bool,
    as_json: bool,
) -> None:
    """Serve a read-only web viewer of the store: sessions, branches, compactions, blocks,
    the frozen prompt and search (needs the `viewer` extra)."""
    from mindstore.viewer.server import serve as run

    db: str = ctx.obj.db
    demo = None if ctx.obj.db_given or os.environ.get("MINDSTORE_DB") else latest_demo_db(db)
    if demo is not None:
        click.echo(
            f"no {db} here; showing the latest `mindstore demo` database, {demo} "
            "(pass --db to choose another)",
            err=True,
        )
        db = str(demo)

    def announce(url: str) -> None:
        if as_json or ctx.obj.json:
            click.echo(json.dumps({"url": url, "database": shown_db(db)}))
        else:
            click.echo(
                f"mindstore viewer of {shown_db(db)} at {url} (read-only; Ctrl-C stops it)",
                err=True,
            )

    run(db, host=host, port=port, token=token, open_browser=open_browser, announce=announce)


def latest_demo_db(default: str) -> Path | None:
    """The newest ``mindstore demo`` database in the temporary folder, when ``default`` (the
    database ``serve`` would open) does not exist; only files owned by this user count."""
    if Path(default).exists():
        return None
    uid = os.getuid() if hasattr(os, "getuid") else None
    found: list[tuple[float, Path]] = []
    for path in Path(tempfile.gettempdir()).glob("mindstore-demo-*/demo.db"):
        try:
            st = path.stat()
        except OSError:
            continue
        if uid is None or st.st_uid == uid:
            found.append((st.st_mtime, path))
    return max(found)[1] if found else None
