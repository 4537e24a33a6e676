"""Domain rules shared by every backend: pure functions, no I/O, no driver imports.

A store method reads: validate the arguments (:mod:`._checks`), apply the rules here, then run
one transaction through the backend's ``_write``/``_read``. Everything that decides *what*
happens — how a new message is prepared, which parent it gets, whether an expected leaf
matches, where the children of a deleted message go, whether a compaction may supersede
another, how a row becomes a value, and the user-facing error messages — lives here once, so
the SQLite and PostgreSQL stores cannot drift apart. Unit-tested without a database
(``tests/unit/test_store_rules.py``).
"""

from __future__ import annotations

# ---- messages: preparation, parents, expected leaf, delete plans, message rows -------------


# ---- compactions, blocks, prompts, skill states, entries, registry ---------------------------
