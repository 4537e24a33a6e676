"""Compaction: non-destructive summary overlays, the default planner, micro-compaction.

* :mod:`.overlays` — applying stored summaries to a path at read time (pure);
* :mod:`.compact_function` — :func:`create_compact_function` and :class:`CompactResult`;
* :mod:`.truncation` — :func:`truncate_older_messages` (shape-keeping shrink of old outputs);
* :mod:`.rowlimit` — the row-size limit applied on append and update;
* :mod:`.extractive` — :func:`extractive_summarize`, an offline summariser for demos and tests;
* :mod:`.reader` — :class:`~mindstore.compaction.reader.HistoryReader`, stored rows as the
  model sees them (skill unloads, then overlays);
* :mod:`.session_compaction` — :class:`~mindstore.compaction.session_compaction.Compactor`, a
  session's compaction (``add_compaction``, ``compact``, automatic compaction).

Nothing here imports :mod:`mindstore.session`; the compactor reaches the session's system prompt
through the small :class:`~mindstore.compaction.session_compaction.SystemPrompt` protocol.
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
