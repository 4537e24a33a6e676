"""BlockSpec: what ``with_context(...)`` registered. Pure data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["BlockSpec", "Scope"]

Scope = Literal["session", "namespace"]


@dataclass(frozen=True, kw_only=True, slots=True)
class BlockSpec:
    """One configured context block; ``provider=None`` means the store-backed writable block."""

    label: str
    description: str | None = None
    max_tokens: int | None = None
    provider: Any = None
    scope: Scope = "session"
