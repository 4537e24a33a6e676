"""ContextMixin: the context-memory half of Session (DESIGN §4). Placeholder hooks only —
the context-memory issue fills this module."""

from __future__ import annotations

from typing import Any

from mindstore.store.base import StoredMessage


class ContextMixin:
    def _init_context_state(self) -> None:
        pass

    def _on_blocks_changed(self) -> None:
        pass

    async def _after_clear(self) -> None:
        pass

    async def freeze_system_prompt(self) -> str:
        return ""

    async def refresh_system_prompt(self) -> str:
        return ""

    async def _apply_skill_unloads(
        self, rows: list[StoredMessage], messages: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        return messages
