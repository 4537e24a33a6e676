"""Context memory: providers, blocks bound per session, and the generated memory tools.

See :mod:`mindstore.context.providers` for the provider protocols and the built-in providers,
and :mod:`mindstore.context.session_context` for what a :class:`~mindstore.Session` does with
them (writes, budgets, the frozen system prompt, tools, loaded skills).
"""

from __future__ import annotations

from mindstore.context.providers import (
    ContextProvider,
    FileSkillProvider,
    SearchProvider,
    SkillProvider,
    StaticProvider,
    StoreSearchProvider,
    StoreSkillProvider,
    WritableContextProvider,
)

__all__ = [
    "ContextProvider",
    "FileSkillProvider",
    "SearchProvider",
    "SkillProvider",
    "StaticProvider",
    "StoreSearchProvider",
    "StoreSkillProvider",
    "WritableContextProvider",
]
