"""Compaction: non-destructive summary overlays, the default planner, micro-compaction.

* :mod:`.overlays` — applying stored summaries to a path at read time (pure);
* :mod:`.compact_function` — :func:`create_compact_function` and :class:`CompactResult`;
* :mod:`.truncation` — :func:`truncate_older_messages` (shape-keeping shrink of old outputs);
* :mod:`.rowlimit` — the row-size limit applied on append and update;
* :mod:`.extractive` — :func:`extractive_summarize`, an offline summariser for demos and tests;
* :mod:`.session_compaction` — the ``Session`` methods (``add_compaction``, ``compact``, …).
"""

from __future__ import annotations

from mindstore.compaction.compact_function import (
    CompactContext,
    CompactResult,
    create_compact_function,
)
from mindstore.compaction.extractive import extractive_summarize
from mindstore.compaction.overlays import apply_overlays
from mindstore.compaction.rowlimit import enforce_row_limit
from mindstore.compaction.truncation import shrink_json, truncate_older_messages

__all__ = [
    "CompactContext",
    "CompactResult",
    "apply_overlays",
    "create_compact_function",
    "enforce_row_limit",
    "extractive_summarize",
    "shrink_json",
    "truncate_older_messages",
]
