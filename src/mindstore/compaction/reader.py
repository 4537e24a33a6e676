"""HistoryReader: a session's paths as the model sees them.

Every read of history — ``get_history``, ``get_recent_history``, the history a compaction
function is given and the one automatic compaction measures — goes through
:meth:`HistoryReader.present`, so they can never disagree. Presenting stored rows takes two
read-time steps, in this order:

1. skill unloads (:func:`~mindstore.context.unloads.apply_skill_unloads`), while rows and
   messages still correspond one to one;
2. compaction overlays (:func:`~mindstore.compaction.overlays.apply_overlays`), which replace
   whole ranges (whose content is not shown anyway).

Both are read from the store on every call, never cached, so unloads and compactions made by
other processes show at once. Neither step ever writes: stored rows stay as they were appended.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mindstore.compaction.overlays import apply_overlays
from mindstore.context.unloads import apply_skill_unloads
from mindstore.store.base import Compaction, SessionKey, Store, StoredMessage

__all__ = ["HistoryReader"]


class HistoryReader:
    """Reads one session's paths with skill unloads and compaction overlays applied."""

    def __init__(self, store: Store, key: SessionKey) -> None:
        self._store = store
        self._key = key

    async def history(self, leaf_id: str | None = None) -> list[dict[str, Any]]:
        """The root→``leaf_id`` path (``None``: the latest leaf), presented."""
        return await self.present(await self._store.path(self._key, leaf_id))

    async def present(
        self,
        rows: list[StoredMessage],
        *,
        window: bool = False,
        compactions: Sequence[Compaction] | None = None,
    ) -> list[dict[str, Any]]:
        """Stored rows → what a reader sees.

        Args:
            rows: a whole root→leaf path, or with ``window`` a suffix of one.
            window: ``rows`` may start inside a summarised range: the result then starts with
                that summary, so it is always a suffix of the whole path's presentation.
            compactions: the session's overlays when the caller has read them already.
        """
        if not rows:
            return []
        messages = await self.skill_unloads(rows)
        if compactions is None:
            compactions = await self._store.get_compactions(self._key)
        if not compactions:
            return messages
        if window and _window_needs_full_path(rows, compactions):
            # Overlapping overlays that begin before the window: resolve them on the whole path
            # so the window is exactly a suffix of get_history (rare; only manual overlaps).
            full = await self._store.path(self._key, rows[-1].id)
            full_messages = await self.skill_unloads(full)
            return apply_overlays(full_messages, compactions, start=len(full) - len(rows))
        return apply_overlays(messages, compactions, partial_start=window)

    async def skill_unloads(self, rows: list[StoredMessage]) -> list[dict[str, Any]]:
        """The messages of ``rows`` with unloaded skills' results replaced (no overlays).

        One small indexed query for the skill states: with no unload mark (the common case) no
        message is even looked at.
        """
        messages = [r.message for r in rows]
        if not rows:
            return messages
        states = await self._store.get_skill_states(self._key)
        return apply_skill_unloads(rows, messages, states)


def _window_needs_full_path(
    rows: Sequence[StoredMessage], compactions: Sequence[Compaction]
) -> bool:
    """A window overlay whose range starts before the window can only be resolved locally when
    no newer overlay ends before the window (such a one could overlap it there)."""
    ids = {r.id for r in rows}
    partial = [
        c.id
        for c in compactions
        if not c.reverted and c.to_message_id in ids and c.from_message_id not in ids
    ]
    if not partial:
        return False
    oldest = min(partial)
    return any(not c.reverted and c.to_message_id not in ids and c.id > oldest for c in compactions)
