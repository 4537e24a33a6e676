"""Context memory: providers, blocks bound per session, and the generated memory tools.

* :mod:`.providers` — the provider protocols and the built-in providers (:mod:`.files` for
  skills in folders and fsspec URLs; :mod:`.keys` and :mod:`.frontmatter` for the safe keys and
  documents they share);
* :mod:`.spec` — :class:`~mindstore.context.spec.BlockSpec` and the one definition of
  ``with_context``'s arguments;
* :mod:`.session_context` — :class:`~mindstore.context.session_context.ContextBlocks`, a
  session's blocks: writes, budgets, the frozen system prompt, the generated tools;
* :mod:`.tooling` — the pure parts of those tools (keys, schemas, descriptions);
* :mod:`.unloads` — skill unloads applied when history is read (pure).

Nothing here imports :mod:`mindstore.session` or :mod:`mindstore.compaction`: a session is built
on top of its context blocks, never the other way round.
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
