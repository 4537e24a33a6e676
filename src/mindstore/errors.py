"""Every deliberate error mindstore raises.

The tree::

    MindstoreError
    ├── InvalidMessageError      (also ValueError)   a message failed validation; nothing written
    │   └── UnserialisableValueError (also TypeError) a value of a type JSON cannot hold
    ├── MessageNotFoundError     (also LookupError)  an id that does not exist in this session
    ├── SessionNotFoundError     (also LookupError)  no session with that id in this namespace
    ├── InvalidKeyError          (also ValueError)   a skill/entry key that could escape its root
    ├── ConflictError                                compare-and-append lost the race
    ├── BlockNotFoundError       (also LookupError)  no context block with that label
    ├── MediaNotFoundError       (also LookupError)  an evicted media object is missing or corrupt
    ├── ReadOnlyBlockError                           the block cannot be written
    ├── TokenBudgetError                             a write would exceed the block's max_tokens
    ├── CompactionError                              no compaction function, or an invalid result
    ├── SchemaVersionError                           the database was written by a newer mindstore
    ├── StoreError                                   a driver failure (original on __cause__)
    ├── ConfigError              (also ValueError)   an invalid `mindstore mcp --config` file
    ├── MissingDependencyError   (also ImportError)  an optional extra is not installed
    └── EmbeddingError                               no embedder for semantic search, or it failed

Invariant: an operation that raises any of these has changed nothing in the store — except a
``StoreError`` with ``maybe_committed=True``, whose outcome is unknown (see its docstring).
Messages say what was wrong and what to do about it.
"""

from __future__ import annotations

__all__ = [
    "BlockNotFoundError",
    "CompactionError",
    "ConfigError",
    "ConflictError",
    "EmbeddingError",
    "InvalidKeyError",
    "InvalidMessageError",
    "MediaNotFoundError",
    "MessageNotFoundError",
    "MindstoreError",
    "MissingDependencyError",
    "ReadOnlyBlockError",
    "SchemaVersionError",
    "SessionNotFoundError",
    "StoreError",
    "TokenBudgetError",
    "UnserialisableValueError",
]


class MindstoreError(Exception):
    """Base class of every error mindstore raises on purpose."""


class InvalidMessageError(MindstoreError, ValueError):
    """A message is malformed; the message names the offending field. Nothing was written."""


class UnserialisableValueError(InvalidMessageError, TypeError):
    """A message (or an SDK item) holds a value of a type JSON has no form for (an object, a
    set, bytes, a non-string key); the message names where. Nothing was written.

    It is an :class:`InvalidMessageError` like every validation failure, and also a
    ``TypeError``, which is what ``json.dumps`` raises for such a value and what code written
    for the OpenAI Agents SDK's ``SQLiteSession`` (or LangGraph's stores) catches.
    """


class MessageNotFoundError(MindstoreError, LookupError):
    """A message id does not exist in this session."""


class SessionNotFoundError(MindstoreError, LookupError):
    """No session with that id exists in this namespace."""


class InvalidKeyError(MindstoreError, ValueError):
    """A key (skill, entry) is empty, too long or could escape its root."""


class ConflictError(MindstoreError):
    """A compare-and-append found a different latest leaf than expected."""


class BlockNotFoundError(MindstoreError, LookupError):
    """No context block with that label is configured for this session."""


class MediaNotFoundError(MindstoreError, LookupError):
    """An evicted media object that a marker names cannot be read back: it is missing from the
    blob store, its bytes do not match its SHA-256 name, or no blob store is known."""


class ReadOnlyBlockError(MindstoreError):
    """The context block is read-only."""


class TokenBudgetError(MindstoreError):
    """A write would push a context block over its ``max_tokens``; nothing changed."""


class CompactionError(MindstoreError):
    """Compaction is not configured, or the compaction function returned an invalid result."""


class SchemaVersionError(MindstoreError):
    """The database schema is newer than this version of mindstore understands."""


class StoreError(MindstoreError):
    """The storage driver failed; the original exception is on ``__cause__``.

    Attributes:
        maybe_committed: True when the connection was lost while the transaction was being
            committed, so whether it took effect is unknown (PostgreSQL: the server crashed or
            the network failed after ``COMMIT`` was sent). False means nothing was written.
        message_ids: for an append, the ids of the messages it tried to write — including ids
            generated for messages given without one. Retrying with these ids is idempotent
            (an id that is already stored is skipped), so a retry never duplicates a message.
    """

    def __init__(
        self,
        message: str = "",
        *,
        maybe_committed: bool = False,
        message_ids: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.maybe_committed = maybe_committed
        self.message_ids = message_ids


class ConfigError(MindstoreError, ValueError):
    """A configuration file (``mindstore mcp --config``) is invalid; the message says where."""


class MissingDependencyError(MindstoreError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"{package} is not installed; install it with: pip install 'mindstore[{extra}]'"
        )
        self.package = package
        self.extra = extra


class EmbeddingError(MindstoreError):
    """Semantic search or embedding failed: no embedder was given to the store, or the embedder
    failed or returned something other than one vector per text of its declared size (the
    embedder's own error, when there was one, is on ``__cause__``)."""
