"""Domain rules shared by every backend: pure functions, no I/O, no driver imports.

A store method reads: validate the arguments (:mod:`._checks`), apply the rules here, then run
one transaction through the backend's ``_write``/``_read``. Everything that decides *what*
happens — how a new message is prepared, which parent it gets, whether an expected leaf
matches, where the children of a deleted message go, whether a compaction may supersede
another, how a row becomes a value, and the user-facing error messages — lives here once, so
the SQLite and PostgreSQL stores cannot drift apart. Unit-tested without a database
(``tests/unit/test_store_rules.py``).
"""

from __future__ import annotations

import json
import types
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from mindstore.errors import ConflictError, InvalidMessageError, MessageNotFoundError
from mindstore.messages import dumps
from mindstore.search import index_text
from mindstore.store import failpoints
from mindstore.store._checks import check_id, check_int
from mindstore.store.base import (
    AUTO,
    UNSET,
    NewMessage,
    ParentSpec,
    SessionKey,
    StoredMessage,
)

# ---- messages: preparation, parents, expected leaf, delete plans, message rows -------------


# Where a test may interrupt an append (:mod:`mindstore.store.failpoints`): the same places on
# every backend, both inside the append's one transaction.
APPEND_BEFORE_INSERT = failpoints.register(
    "append.before_insert",
    "append: the session is locked and the expected leaf checked; nothing inserted yet",
)
APPEND_AFTER_INSERT = failpoints.register(
    "append.after_insert",
    "append: every row is written (messages, search rows, session row); not yet committed",
)


# The user-facing errors of the message domain: one text on every backend.
def message_not_found(key: SessionKey, message_id: str) -> MessageNotFoundError:
    """A message named by the caller (a leaf, a message to update, a compaction's end) is not
    in the session."""
    return MessageNotFoundError(
        f"no message {message_id!r} in session {key.session_id!r} (namespace {key.namespace!r})"
    )


def parent_not_found(key: SessionKey, parent: str) -> MessageNotFoundError:
    """An append named a parent the session does not have; the whole append is refused."""
    return MessageNotFoundError(
        f"parent message {parent!r} does not exist in session {key.session_id!r}; "
        "nothing was written"
    )


def delete_not_found(key: SessionKey, message_id: str) -> MessageNotFoundError:
    """A delete named a message the session does not have; nothing is deleted."""
    return MessageNotFoundError(
        f"cannot delete {message_id!r}: no such message in session {key.session_id!r}; "
        "nothing was deleted"
    )


def leaf_conflict(key: SessionKey, expected: str | None, current: str | None) -> ConflictError:
    """A compare-and-append found another latest leaf than the caller expected."""
    return ConflictError(
        f"expected the latest leaf of session {key.session_id!r} to be {expected!r} but it is "
        f"{current!r}: re-read the history and retry"
    )


def _id_and_role(message: dict[str, Any]) -> tuple[str, str]:
    mid = check_id(message.get("id"), "message.id")
    role = message.get("role")
    if not isinstance(role, str):
        raise InvalidMessageError("message.role must be a string")
    return mid, role


class PreparedMessage:
    """A :class:`~mindstore.store.base.NewMessage` checked and serialised, ready to insert.

    Built before the transaction, so the work holds no lock: ``content`` is the stored JSON
    (the caller's :attr:`NewMessage.content` when given — it is exactly ``dumps(message)`` —
    else serialised here, once), ``nbytes`` its UTF-8 size. ``text``/``tool`` are the indexed
    text of :func:`mindstore.search.index_text` when asked for (``index=True``), else empty.
    """

    __slots__ = ("content", "id", "item", "nbytes", "role", "text", "tool")

    def __init__(self, item: NewMessage, *, index: bool = False) -> None:
        if not isinstance(item, NewMessage):
            raise TypeError(f"append takes NewMessage items, got {type(item).__name__}")
        msg = item.message
        if not isinstance(msg, dict):
            raise InvalidMessageError("NewMessage.message must be a validated message dict")
        self.id, self.role = _id_and_role(msg)
        parent = item.parent
        if isinstance(parent, str):
            check_id(parent, "parent_id")
        elif parent is not None and parent is not AUTO:
            raise TypeError("parent must be a message id, None (new root) or AUTO")
        check_int(item.tokens, "NewMessage.tokens")
        self.item = item
        content = item.content
        if isinstance(content, str):
            self.content, self.nbytes = content, utf8_size(content)
        else:
            self.content, self.nbytes = serialise(msg, self.id)
        self.text = self.tool = ""
        if index:
            self.text, self.tool = index_text(msg)


def prepare_append(
    items: Sequence[NewMessage], expected_leaf: object, *, index: bool = False
) -> list[PreparedMessage] | None:
    """The checked items of an append (see :class:`PreparedMessage`), or None when there is
    nothing to do (no items and no expected-leaf check). ``expected_leaf`` is checked too."""
    prepared = [PreparedMessage(item, index=index) for item in items]
    if expected_leaf is not UNSET and expected_leaf is not None:
        check_id(expected_leaf, "expected_leaf")
    if not prepared and expected_leaf is UNSET:
        return None
    return prepared


def utf8_size(text: str) -> int:
    """Bytes of ``text`` in UTF-8 (ASCII text, the common case, without encoding it)."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def serialise(message: dict[str, Any], message_id: str) -> tuple[str, int]:
    """The stored JSON of a message and its UTF-8 size. ``dumps`` escapes control characters,
    so the text never holds a NUL (which PostgreSQL's text type rejects)."""
    try:
        content = dumps(message)
    except (TypeError, ValueError) as e:
        raise InvalidMessageError(f"message {message_id!r} is not JSON-serialisable: {e}") from e
    return content, utf8_size(content)


class PreparedUpdate:
    """A message that replaces its stored version, checked and serialised before the
    transaction (``text``/``tool`` as in :class:`PreparedMessage`)."""

    __slots__ = ("content", "id", "nbytes", "role", "text", "tokens", "tool")

    def __init__(self, message: Any, tokens: Any, *, index: bool = False) -> None:
        if not isinstance(message, dict):
            raise InvalidMessageError("update takes a validated message dict")
        self.id, self.role = _id_and_role(message)
        self.tokens: int = check_int(tokens, "tokens")
        self.content, self.nbytes = serialise(message, self.id)
        self.text = self.tool = ""
        if index:
            self.text, self.tool = index_text(message)


def check_leaf_id(leaf_id: str | None) -> None:
    """A path's end: a message id, or None for the session's latest leaf."""
    if leaf_id is not None:
        check_id(leaf_id, "leaf_id")


def check_window(max_tokens: int | None, max_bytes: int | None, min_messages: int) -> None:
    """The budget of a path window: integers (None: no limit on that measure)."""
    for name, value in (("max_tokens", max_tokens), ("max_bytes", max_bytes)):
        if value is not None:
            check_int(value, name)
    check_int(min_messages, "min_messages")


def check_token_estimate(
    leaf_id: str, tokens: int, version: int, floor: int | None, margin: int | None
) -> None:
    """The arguments of ``set_token_estimate``."""
    check_id(leaf_id, "leaf_id")
    check_int(tokens, "tokens")
    check_int(version, "version")
    for name, opt in (("floor", floor), ("margin", margin)):
        if opt is not None:
            check_int(opt, name)


def check_expected_leaf(key: SessionKey, expected: str | None, current: str | None) -> None:
    """The compare-and-append check: the session's latest leaf (None: empty) must be the one
    the caller read. Raises :class:`~mindstore.errors.ConflictError` otherwise."""
    if current != expected:
        raise leaf_conflict(key, expected, current)


def resolve_parent(
    key: SessionKey, parent: ParentSpec, leaf: int | None, lookup: Callable[[str], int | None]
) -> int | None:
    """The seq a new message hangs under: the current leaf for ``AUTO`` (None when the session
    is empty: a root), None for an explicit new root, else the seq ``lookup`` finds for the
    named parent — a missing parent refuses the whole append."""
    if parent is AUTO:
        return leaf
    if parent is None:
        return None
    assert isinstance(parent, str)
    seq = lookup(parent)
    if seq is None:
        raise parent_not_found(key, parent)
    return seq


def extend_estimate(
    est_seq: int | None, est_tokens: int | None, parent_seq: int | None, seq: int, tokens: int
) -> tuple[int | None, int | None]:
    """The running token estimate (see TokenEstimate) after inserting ``seq`` under
    ``parent_seq``: a child of the measured leaf extends it, a new root starts it, anything
    else clears it."""
    if parent_seq is None:
        return seq, tokens
    if est_seq is not None and est_tokens is not None and parent_seq == est_seq:
        return seq, est_tokens + tokens
    return None, None


def delete_ids(ids: Any) -> list[str]:
    """The distinct, checked message ids of a delete, in the caller's order."""
    if isinstance(ids, str):
        raise TypeError("ids must be a sequence of message ids, not a string")
    return list(dict.fromkeys(check_id(i) for i in ids))


def message_ids(ids: Any) -> list[str]:
    """The checked message ids of a multi-get (duplicates allowed)."""
    if isinstance(ids, str):
        raise TypeError("ids must be a sequence of message ids, not a string")
    return [check_id(i) for i in ids]


def plan_delete(
    key: SessionKey, wanted: Sequence[str], rows: Sequence[Sequence[Any]]
) -> dict[int, int | None]:
    """Where the children of deleted messages go: for each deleted seq, its nearest surviving
    ancestor (None: the children become roots).

    ``rows`` are the found ``(seq, id, parent_seq)`` of the ``wanted`` ids; a wanted id that
    was not found refuses the whole delete. Re-parenting every child of a deleted seq to the
    returned seq keeps each surviving message on its old root path, minus the deleted ones.
    """
    if len(rows) != len(wanted):
        found = {r[1] for r in rows}
        raise delete_not_found(key, next(i for i in wanted if i not in found))
    parent_of: dict[int, int | None] = {r[0]: r[2] for r in rows}
    plan: dict[int, int | None] = {}
    for seq, survivor in parent_of.items():
        while survivor is not None and survivor in parent_of:
            survivor = parent_of[survivor]
        plan[seq] = survivor
    return plan


# Message rows. Path reads build thousands of StoredMessage objects, so both are fast paths:
_scan_json: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def loads(text: str) -> Any:
    """``json.loads`` of a stored message, without its per-call overhead.

    Stored JSON is always our own compact :func:`~mindstore.messages.dumps` output, so the C
    scanner can start at offset 0; ``json.loads``' type checks and two whitespace regex matches
    cost ~40% of decoding a small message. Anything unexpected goes through ``json.loads`` (and
    its error).
    """
    try:
        value, end = _scan_json(text, 0)
    except StopIteration:
        return json.loads(text)
    if end != len(text):
        return json.loads(text)
    return value


STORED_FIELDS = ("id", "parent_id", "message", "created_at", "seq", "tokens", "nbytes")


def _stored_message_factory() -> Callable[..., StoredMessage]:
    """A fast constructor for :class:`StoredMessage`, positional in :data:`STORED_FIELDS` order.

    The dataclass is frozen with slots; its generated ``__init__`` goes through
    ``object.__setattr__`` per field, which costs about as much as decoding a small message.
    Setting the slots through their member descriptors is ~3x faster and produces an identical
    object. Falls back to the normal constructor if the class ever stops using slots.
    """
    setters = [StoredMessage.__dict__.get(n) for n in STORED_FIELDS]
    if not all(isinstance(d, types.MemberDescriptorType) for d in setters):
        return lambda *a: StoredMessage(**dict(zip(STORED_FIELDS, a, strict=True)))
    new = object.__new__
    s_id, s_parent, s_msg, s_created, s_seq, s_tokens, s_nbytes = (
        d.__set__  # type: ignore[union-attr]
        for d in setters
    )

    def make(
        id: str,
        parent_id: str | None,
        message: dict[str, Any],
        created_at: datetime,
        seq: int,
        tokens: int,
        nbytes: int,
    ) -> StoredMessage:
        obj = new(StoredMessage)
        s_id(obj, id)
        s_parent(obj, parent_id)
        s_msg(obj, message)
        s_created(obj, created_at)
        s_seq(obj, seq)
        s_tokens(obj, tokens)
        s_nbytes(obj, nbytes)
        return obj

    return make


make_stored = _stored_message_factory()


def message_row(row: Sequence[Any], created_at: datetime) -> StoredMessage:
    """A message row of both backends — ``(seq, id, parent id, content, <time>, tokens,
    nbytes)`` — as a StoredMessage; ``created_at`` is the row's time as an aware datetime."""
    return make_stored(row[1], row[2], loads(row[3]), created_at, row[0], row[5], row[6])


# ---- compactions, blocks, prompts, skill states, entries, registry ---------------------------
