"""CompactionMixin: the compaction half of Session (DESIGN §6). Placeholder hooks only —
the compaction issue fills this module."""

from __future__ import annotations

from typing import Any

from mindstore.store.base import StoredMessage


class CompactionMixin:
    def _init_compaction_state(self) -> None:
        pass

    def _enforce_row_limit(self, message: dict[str, Any]) -> dict[str, Any]:
        return message

    async def _after_append(self, message: dict[str, Any]) -> None:
        pass

    def _invalidate_token_cache(self) -> None:
        pass

    async def _present(
        self, rows: list[StoredMessage], *, window: bool = False
    ) -> list[dict[str, Any]]:
        messages = [r.message for r in rows]
        return await self._apply_skill_unloads(rows, messages)  # type: ignore[attr-defined,no-any-return]
