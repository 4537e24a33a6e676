"""A read-only web viewer of a store: ``mindstore serve`` (DESIGN §12, docs/viewer.md).

Installed with the ``viewer`` extra (Starlette, Jinja2, uvicorn). Layout:

* :mod:`.tree` — pure: the selected path of a session, windowed, with overlays and branches;
* :mod:`.readonly` — the read-only store facade and opening a store without writing;
* :mod:`.data` — one function per page, returning the dict both the page and ``/api/`` serve;
* :mod:`.app` — the Starlette application, its security middleware and templates;
* :mod:`.server` — running it with uvicorn (the CLI and the tests use it).
"""

from __future__ import annotations

from .readonly import ReadOnlyStore, open_read_only

__all__ = ["ReadOnlyStore", "open_read_only"]
