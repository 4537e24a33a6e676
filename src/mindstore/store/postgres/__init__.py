"""The PostgreSQL backend (psycopg 3, async connection pool). See
:mod:`mindstore.store.postgres.store`.

Importing this package does not require psycopg; :meth:`PostgresStore.open` raises
:class:`~mindstore.errors.MissingDependencyError` naming the ``postgres`` extra when it is missing.
"""

from __future__ import annotations

from mindstore.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
