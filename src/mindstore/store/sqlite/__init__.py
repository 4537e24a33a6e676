"""The SQLite backend (stdlib ``sqlite3``, WAL). See :mod:`mindstore.store.sqlite.store`."""

from __future__ import annotations

from mindstore.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
