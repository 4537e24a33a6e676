"""Names of the index collections shared by both backends. Pure.

The lexical index (tables ``search_terms`` and ``search_stats``) is split into *collections*,
each with its own BM25 statistics: the messages of one namespace (``"m:" + namespace``) and the
keyed entries of one block (``"e:" + JSON [namespace, scope, label]``). Documents are numbered
inside their collection (message ``seq``, entry id); ``part`` groups a collection's statistics
(the session's ``sid`` for messages, so concurrent appenders of different sessions never update
the same row; 0 for entries).
"""

from __future__ import annotations

import json

__all__ = ["entry_collection", "message_collection"]


def message_collection(namespace: str) -> str:
    return "m:" + namespace


def entry_collection(namespace: str, scope: str, label: str) -> str:
    return "e:" + json.dumps([namespace, scope, label], ensure_ascii=False, separators=(",", ":"))
