"""Storage backends: the Store protocol, SQLiteStore (default) and PostgresStore; ``check_name``
is the rule every backend applies to namespaces, session ids and labels."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mindstore.store._checks import check_name
from mindstore.store.base import Store

if TYPE_CHECKING:
    from mindstore.store.postgres import PostgresStore
    from mindstore.store.sqlite import SQLiteStore

__all__ = ["PostgresStore", "SQLiteStore", "Store", "check_name", "open_store"]


def __getattr__(name: str) -> Any:
    if name == "SQLiteStore":
        from mindstore.store.sqlite import SQLiteStore

        return SQLiteStore
    if name == "PostgresStore":
        from mindstore.store.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(name)


async def open_store(url: str, **options: Any) -> Store:
    """Open a store from a URL: ``sqlite:///path``, ``sqlite://:memory:``, ``postgresql://…``.

    A plain path (no scheme) opens a SQLite file. As in SQLAlchemy, ``sqlite:///rel.db`` is a
    path relative to the working directory and ``sqlite:////abs/path.db`` an absolute one.

    Raises:
        ValueError: unknown scheme, or a ``sqlite://`` URL that names no file.
        MissingDependencyError: ``postgresql://`` without the ``postgres`` extra.
    """
    if not isinstance(url, str) or not url.strip():
        raise ValueError(
            "open_store needs a URL or path: sqlite:///path, sqlite://:memory:, postgresql://…"
        )
    if url.startswith(("postgresql://", "postgres://")):
        from mindstore.store.postgres import PostgresStore

        return await PostgresStore.open(url, **options)
    if url.startswith("sqlite://"):
        # sqlite:///rel.db -> rel.db; sqlite:////abs.db -> /abs.db; sqlite://:memory: -> :memory:
        rest = url[len("sqlite://") :]
        path = rest[1:] if rest.startswith("/") else rest
        if not path.strip():
            # (an unset variable in `sqlite:///$DB` must not become a throwaway database)
            raise ValueError(
                f"store URL {url!r} names no file: use sqlite:///path (relative), "
                "sqlite:////abs/path or sqlite://:memory:"
            )
        from mindstore.store.sqlite import SQLiteStore

        return SQLiteStore(path, **options)
    if "://" in url:
        raise ValueError(
            f"unsupported store URL {url!r}: use sqlite:///path, sqlite://:memory: or postgresql://…"
        )
    from mindstore.store.sqlite import SQLiteStore

    return SQLiteStore(url, **options)
