"""mindstore — the memory layer for LLM agents.

Conversation history as a branching message tree with full-text search and non-destructive
compaction, plus context memory blocks the agent reads, writes, searches and loads through
generated tools. SQLite by default, PostgreSQL when you outgrow one machine.

Public names are imported lazily so ``import mindstore`` stays fast and optional extras are only
needed when used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # errors
    "BlockNotFoundError": "mindstore.errors",
    "CompactionError": "mindstore.errors",
    "ConflictError": "mindstore.errors",
    "EmbeddingError": "mindstore.errors",
    # embeddings (DESIGN §5.2)
    "Embedder": "mindstore.embeddings",
    "OpenAIEmbedder": "mindstore.embeddings",
    "default_embedder": "mindstore.embeddings",
    "InvalidKeyError": "mindstore.errors",
    "InvalidMessageError": "mindstore.errors",
    "MediaNotFoundError": "mindstore.errors",
    "MessageNotFoundError": "mindstore.errors",
    "MindstoreError": "mindstore.errors",
    "MissingDependencyError": "mindstore.errors",
    "ReadOnlyBlockError": "mindstore.errors",
    "SchemaVersionError": "mindstore.errors",
    "SessionNotFoundError": "mindstore.errors",
    "StoreError": "mindstore.errors",
    "TokenBudgetError": "mindstore.errors",
    "UnserialisableValueError": "mindstore.errors",
    # messages, tokens, search
    "new_message_id": "mindstore.messages",
    "validate_message": "mindstore.messages",
    "Tokenizer": "mindstore.tokens",
    "estimate_message_tokens": "mindstore.tokens",
    "estimate_string_tokens": "mindstore.tokens",
    "SearchResult": "mindstore.search",
    # stores
    "AUTO": "mindstore.store.base",
    "UNSET": "mindstore.store.base",
    "Compaction": "mindstore.store.base",
    "SessionInfo": "mindstore.store.base",
    "Store": "mindstore.store.base",
    # change feed (DESIGN §14)
    "Change": "mindstore.changes",
    "Status": "mindstore.changes",
    "SQLiteStore": "mindstore.store",
    "PostgresStore": "mindstore.store",
    "open_store": "mindstore.store",
    # session
    "MessageNode": "mindstore.session",
    "RecentHistory": "mindstore.session",
    "Session": "mindstore.session",
    # manager
    "SessionManager": "mindstore.manager",
    # compaction
    "CompactResult": "mindstore.compaction",
    "create_compact_function": "mindstore.compaction",
    "truncate_older_messages": "mindstore.compaction",
    # context memory, prompt, tools
    "ContextProvider": "mindstore.context",
    "FileSkillProvider": "mindstore.context",
    "SearchProvider": "mindstore.context",
    "SkillProvider": "mindstore.context",
    "StaticProvider": "mindstore.context",
    "StoreSearchProvider": "mindstore.context",
    "StoreSkillProvider": "mindstore.context",
    "WritableContextProvider": "mindstore.context",
    "ContextBlock": "mindstore.prompt",
    "render_system_prompt": "mindstore.prompt",
    "Tool": "mindstore.tools",
    "ToolSet": "mindstore.tools",
    "HuggingFaceTokenizer": "mindstore.tokens",
    "TiktokenTokenizer": "mindstore.tokens",
    # whole-history converters (turning a conversation from an API shape into messages)
    "from_anthropic_messages": "mindstore.formats",
    "from_openai_chat_messages": "mindstore.formats",
    "from_openai_responses_items": "mindstore.formats",
}

# A literal list (not sorted(_EXPORTS)) so type checkers see the re-exports; a meta test
# checks it equals sorted(_EXPORTS).
__all__ = [
    "AUTO",
    "BlockNotFoundError",
    "Change",
    "CompactResult",
    "Compaction",
    "CompactionError",
    "ConflictError",
    "ContextBlock",
    "ContextProvider",
    "Embedder",
    "EmbeddingError",
    "FileSkillProvider",
    "HuggingFaceTokenizer",
    "InvalidKeyError",
    "InvalidMessageError",
    "MediaNotFoundError",
    "MessageNode",
    "MessageNotFoundError",
    "MindstoreError",
    "MissingDependencyError",
    "OpenAIEmbedder",
    "PostgresStore",
    "ReadOnlyBlockError",
    "RecentHistory",
    "SQLiteStore",
    "SchemaVersionError",
    "SearchProvider",
    "SearchResult",
    "Session",
    "SessionInfo",
    "SessionManager",
    "SessionNotFoundError",
    "SkillProvider",
    "StaticProvider",
    "Status",
    "Store",
    "StoreError",
    "StoreSearchProvider",
    "StoreSkillProvider",
    "TiktokenTokenizer",
    "TokenBudgetError",
    "Tokenizer",
    "Tool",
    "ToolSet",
    "UNSET",
    "UnserialisableValueError",
    "WritableContextProvider",
    "create_compact_function",
    "default_embedder",
    "estimate_message_tokens",
    "estimate_string_tokens",
    "from_anthropic_messages",
    "from_openai_chat_messages",
    "from_openai_responses_items",
    "new_message_id",
    "open_store",
    "render_system_prompt",
    "truncate_older_messages",
    "validate_message",
]

if TYPE_CHECKING:
    from mindstore.changes import Change, Status
    from mindstore.compaction import CompactResult, create_compact_function, truncate_older_messages
    from mindstore.context import (
        ContextProvider,
        FileSkillProvider,
        SearchProvider,
        SkillProvider,
        StaticProvider,
        StoreSearchProvider,
        StoreSkillProvider,
        WritableContextProvider,
    )
    from mindstore.embeddings import Embedder, OpenAIEmbedder, default_embedder
    from mindstore.errors import (
        BlockNotFoundError,
        CompactionError,
        ConflictError,
        EmbeddingError,
        InvalidKeyError,
        InvalidMessageError,
        MediaNotFoundError,
        MessageNotFoundError,
        MindstoreError,
        MissingDependencyError,
        ReadOnlyBlockError,
        SchemaVersionError,
        SessionNotFoundError,
        StoreError,
        TokenBudgetError,
        UnserialisableValueError,
    )
    from mindstore.formats import (
        from_anthropic_messages,
        from_openai_chat_messages,
        from_openai_responses_items,
    )
    from mindstore.manager import SessionManager
    from mindstore.messages import new_message_id, validate_message
    from mindstore.prompt import ContextBlock, render_system_prompt
    from mindstore.search import SearchResult
    from mindstore.session import MessageNode, RecentHistory, Session
    from mindstore.store import PostgresStore, SQLiteStore, open_store
    from mindstore.store.base import AUTO, UNSET, Compaction, SessionInfo, Store
    from mindstore.tokens import (
        HuggingFaceTokenizer,
        TiktokenTokenizer,
        Tokenizer,
        estimate_message_tokens,
        estimate_string_tokens,
    )
    from mindstore.tools import Tool, ToolSet


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mindstore' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
