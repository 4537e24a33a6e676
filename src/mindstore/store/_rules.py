"""Domain rules shared by every backend: pure functions, no I/O, no driver imports.

A store method (:mod:`._front`) reads: validate the arguments (:mod:`._checks`), apply the rules
here, then run one transaction through the backend's ``_write``/``_read``. Everything that
decides *what* happens — how a new message is prepared, which parent it gets, whether an
expected leaf matches, where the children of a deleted message go, whether a compaction may
supersede another, and the user-facing error messages — lives here once, so the SQLite and
PostgreSQL stores cannot drift apart; how a row becomes a value is :mod:`._rows`. Unit-tested
without a database (``tests/unit/test_store_rules.py``, ``tests/unit/test_store_rules_state.py``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final, TypeVar

from mindstore.errors import (
    CompactionError,
    ConflictError,
    InvalidMessageError,
    MessageNotFoundError,
    SessionNotFoundError,
)
from mindstore.lexical.hits import Hits
from mindstore.lexical.snippet import SnippetQuery, deferred, make_snippet
from mindstore.messages import dumps
from mindstore.search import ParsedQuery, SearchResult, index_text, search_result
from mindstore.store import failpoints
from mindstore.store._checks import (
    CREATE_FIELDS,
    check_entry_key,
    check_expiry,
    check_id,
    check_int,
    check_key,
    check_name,
    check_query,
    check_scope,
    check_session_fields,
    check_text,
)
from mindstore.store.types import (
    AUTO,
    UNSET,
    Entry,
    EntryHit,
    NewMessage,
    ParentSpec,
    ScopeKey,
    SessionKey,
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


Window = tuple[int | None, int | None, int]
"""A checked path-window budget: ``(max_tokens, max_bytes, min_messages)``."""


def check_window(max_tokens: int | None, max_bytes: int | None, min_messages: int) -> Window:
    """The budget of a path window: integers (None: no limit on that measure)."""
    for name, value in (("max_tokens", max_tokens), ("max_bytes", max_bytes)):
        if value is not None:
            check_int(value, name)
    check_int(min_messages, "min_messages")
    return (max_tokens, max_bytes, min_messages)


def token_estimate_params(
    key: SessionKey,
    leaf_id: str,
    tokens: int,
    version: int,
    floor: int | None,
    margin: int | None,
) -> tuple[Any, ...]:
    """The checked arguments of ``set_token_estimate``, as the parameters of its statement
    (the same order on every backend): leaf id, tokens, floor, margin, namespace, session id,
    expected version."""
    check_id(leaf_id, "leaf_id")
    check_int(tokens, "tokens")
    check_int(version, "version")
    for name, opt in (("floor", floor), ("margin", margin)):
        if opt is not None:
            check_int(opt, name)
    return (leaf_id, tokens, floor, margin, key.namespace, key.session_id, version)


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


# ---- compactions, blocks, prompts, skill states, entries, registry ---------------------------
# (rows become values in :mod:`._rows`)


Scope = tuple[str, str, str]
"""A block or entry collection as stored: ``(namespace, scope, label)``, scope ``''`` for
namespace-wide (see :func:`mindstore.store._checks.check_scope`)."""


def check_search(
    namespace: str, query: ParsedQuery, session_ids: Sequence[str] | None, limit: int
) -> list[str] | None:
    """The validated session filter of a search (None: the whole namespace)."""
    check_name(namespace, "namespace")
    check_query(query)
    check_int(limit, "limit")
    if session_ids is None:
        return None
    if isinstance(session_ids, str):
        raise TypeError("session_ids must be a sequence of session ids, not a string")
    return [check_name(s, "session id") for s in session_ids]


def message_hits(
    query: ParsedQuery,
    limit: int,
    fields: Callable[[Any], Sequence[str]],
    created: Callable[[Any], datetime],
) -> Hits[Any, SearchResult]:
    """Assembles message rows ``(seq, session_id, id, role, …)`` into search results.

    ``fields(row)`` is the message's ``(text, tool text)`` (phrases are checked and snippets
    cut in them; a message without text shows its tool text); ``created(row)`` its time."""
    snip = SnippetQuery.from_query(query)

    later = deferred()

    def build(row: Any, found: Sequence[str], score: float) -> SearchResult:
        text = found[0] or found[1] or ""
        if later is not None:
            later[(row[1], row[2])] = functools.partial(make_snippet, snip, found)
            snippet = ""
        else:
            snippet = make_snippet(snip, found)
        return search_result(row[1], row[2], row[3], text, snippet, score, created(row))

    return Hits(query, limit, fields, build)


H = TypeVar("H", SearchResult, EntryHit)


def phrase_first(first: list[H], loose: list[H], limit: int, key: Callable[[H], Any]) -> list[H]:
    """The hits of an ``any`` query with phrases: the phrase holders (``first``, best first),
    then the hits of its loosened query (``loose``) that are not among them, their scores scaled
    below the last phrase holder's so the list stays best first and comparable (DESIGN §5.1:
    quotes rank, they never remove every other hit)."""
    seen = {key(h) for h in first}
    rest: list[H] = [h for h in loose if key(h) not in seen][: max(0, limit - len(first))]
    if not rest:
        return first
    if first:
        floor = min(h.score for h in first)
        top = max(h.score for h in rest)
        if top >= floor:
            ratio = floor / top * 0.999 if top > 0 and floor > 0 else 0.0
            rest = [replace(h, score=h.score * ratio) for h in rest]
    out: list[H] = list(first)
    out.extend(rest)
    return out


def _entry_fields(row: Any) -> tuple[str, str]:
    return f"{row[1]}\n{row[2]}", row[3] or ""


def entry_hits(query: ParsedQuery, limit: int) -> Hits[Any, EntryHit]:
    """Assembles entry rows ``(id, key, content, description)`` into hits. Phrases are found
    in the key and content (one field) or the description; the snippet comes from the
    content, then the description, then the key."""
    snip = SnippetQuery.from_query(query)

    def build(row: Any, _found: Sequence[str], score: float) -> EntryHit:
        snippet = make_snippet(snip, (row[2], row[3] or "", row[1]))
        return EntryHit(
            key=row[1], content=row[2], description=row[3], snippet=snippet, score=score
        )

    return Hits(query, limit, _entry_fields, build)


# Compactions.


@dataclass(frozen=True, slots=True)
class NewCompaction:
    """A checked ``add_compaction`` call: the overlay ``from_id``..``to_id`` and the ids of
    the compactions it supersedes."""

    summary: str
    from_id: str
    to_id: str
    supersedes: tuple[int, ...]


def check_compaction(
    key: SessionKey, summary: str, from_id: str, to_id: str, supersedes: Sequence[int]
) -> NewCompaction:
    """The arguments of ``add_compaction``."""
    check_key(key)
    check_text(summary, "summary")
    check_id(from_id, "from_id")
    check_id(to_id, "to_id")
    ids = tuple(supersedes)
    for c in ids:
        if isinstance(c, bool) or not isinstance(c, int):
            raise TypeError(f"supersedes must be compaction ids (integers), got {type(c).__name__}")
        if not -(2**63) <= c < 2**63:
            raise ValueError(f"supersedes must be compaction ids (64-bit integers), got {c}")
    return NewCompaction(summary, from_id, to_id, ids)


def check_superseded(key: SessionKey, supersedes: Sequence[int], known: set[int]) -> None:
    """Every superseded id must be a compaction of the session (``known``: those found)."""
    unknown = [c for c in supersedes if c not in known]
    if unknown:
        raise CompactionError(
            f"cannot supersede compaction {unknown[0]}: not a compaction of "
            f"session {key.session_id!r}"
        )


def compaction_not_found(key: SessionKey, compaction_id: int) -> CompactionError:
    return CompactionError(f"no compaction {compaction_id} in session {key.session_id!r}")


# Blocks, skill states.


def check_block_function(fn: Any) -> Callable[[str], str]:
    if not callable(fn):
        raise TypeError("fn must be a callable taking the current content")
    return fn  # type: ignore[no-any-return]


def updated_block(fn: Callable[[str], str], current: str | None) -> str:
    """The new content of a block: ``fn`` of the current one (``""`` for a missing block),
    checked like any block text. Runs inside the write transaction, under the block's lock."""
    new = fn("" if current is None else current)
    check_text(new, "the block update function's result")
    return new


def check_block_listing(namespace: str, session_id: str | None) -> None:
    check_name(namespace, "namespace")
    if session_id is not None:
        check_name(session_id, "session_id")


def check_skill_state(key: SessionKey, label: str, skill_key: str, loaded: bool) -> None:
    check_key(key)
    check_name(label, "label")
    check_entry_key(skill_key)
    if not isinstance(loaded, bool):
        raise TypeError("loaded must be a bool")


# Entries.


@dataclass(frozen=True, slots=True)
class NewEntry:
    """A checked ``put_entry`` call (its collection apart)."""

    key: str
    content: str
    description: str | None
    data: str | None
    expires_at: datetime | None


def check_entry(
    entry_key: str,
    content: str,
    description: str | None,
    data: str | None,
    expires_at: datetime | None,
) -> NewEntry:
    """The arguments of ``put_entry`` after its scope."""
    check_entry_key(entry_key)
    check_text(content, "content")
    if description is not None:
        check_text(description, "description")
    if data is not None:
        check_text(data, "data")
    return NewEntry(entry_key, content, description, data, check_expiry(expires_at))


def check_entry_lookup(key: ScopeKey, entry_keys: Sequence[str]) -> tuple[Scope, list[str]]:
    """The arguments of ``get_entries``: the collection and the keys asked for."""
    return check_scope(key), [check_entry_key(e) for e in entry_keys]


def check_entry_search(key: ScopeKey, query: ParsedQuery, limit: int) -> Scope:
    """The arguments of ``search_entries``; returns the collection."""
    k = check_scope(key)
    check_query(query)
    check_int(limit, "limit")
    return k


def check_expiries(
    expiries: Mapping[str, datetime | None],
) -> list[tuple[str, datetime | None]]:
    """The arguments of ``set_entry_expiry`` as ``(entry key, expiry)`` pairs."""
    out = []
    for entry_key, at in expiries.items():
        at = check_expiry(at)
        out.append((check_entry_key(entry_key), at))
    return out


def in_request_order(keys: Sequence[str], found: Mapping[str, Entry]) -> list[Entry]:
    """The entries found, in the order their keys were asked for, each once."""
    return [found[e] for e in dict.fromkeys(keys) if e in found]


# Registry.

# Where a test may interrupt a namespace deletion (:mod:`mindstore.store.failpoints`): the same
# place on every backend, inside the deletion's one transaction.
DELETE_NAMESPACE_AFTER_DELETE = failpoints.register(
    "delete_namespace.after_delete",
    "delete_namespace: every row of the namespace is deleted; not yet committed",
)

NAMESPACE_TABLES: Final = (
    "sessions",
    "messages",
    "compactions",
    "blocks",
    "entries",
    "prompts",
    "skill_states",
)
"""The tables ``stats`` counts: every kind of row a namespace owns."""


@dataclass(frozen=True, slots=True)
class NewSession:
    """A checked ``create_session`` call; ``metadata`` is JSON text."""

    name: str | None
    parent_session_id: str | None
    model: str | None
    source: str | None
    metadata: str | None

    @property
    def columns(self) -> tuple[str | None, ...]:
        """``name, parent_session_id, model, source, metadata``: the registry columns set."""
        return self.name, self.parent_session_id, self.model, self.source, self.metadata


def check_new_session(
    key: SessionKey,
    name: str | None,
    parent_session_id: str | None,
    model: str | None,
    source: str | None,
    metadata: Mapping[str, Any] | None,
) -> NewSession:
    """The arguments of ``create_session``."""
    check_key(key)
    fields = {
        "name": name,
        "parent_session_id": parent_session_id,
        "model": model,
        "source": source,
        "metadata": metadata,
    }
    meta: str | None = check_session_fields(fields, CREATE_FIELDS)["metadata"]
    return NewSession(name, parent_session_id, model, source, meta)


def check_session_listing(namespace: str, limit: int, before: str | None) -> None:
    check_name(namespace, "namespace")
    check_int(limit, "limit")
    if before is not None:
        check_name(before, "before")


def check_usage(input_tokens: int, output_tokens: int, cost: float) -> float:
    """The arguments of ``add_usage``; returns the cost as a float."""
    check_int(input_tokens, "input_tokens")
    check_int(output_tokens, "output_tokens")
    if isinstance(cost, bool) or not isinstance(cost, int | float) or cost != cost:
        raise TypeError("cost must be a number")
    if not math.isfinite(cost):
        raise ValueError(f"cost must be a finite number, got {cost!r}")
    return float(cost)


def check_usage_totals(
    before: tuple[int, int, float] | None, input_tokens: int, output_tokens: int, cost: float
) -> None:
    """The session's totals after ``add_usage`` (``before``: its totals, None for a new row)
    stay 64-bit integers and a finite cost: SQLite turned an overflowing total into a float
    (and then ``inf``, which export and the viewer could not write as JSON), PostgreSQL
    raised a driver error; both raise this ValueError now and change nothing."""
    old_in, old_out, old_cost = before or (0, 0, 0.0)
    for field, total in (
        ("input_tokens", old_in + input_tokens),
        ("output_tokens", old_out + output_tokens),
    ):
        if not -(2**63) <= total < 2**63:
            raise ValueError(f"the session's {field} total would leave the 64-bit range ({total})")
    if not math.isfinite(old_cost + cost):
        raise ValueError("the session's estimated cost total would overflow")


def session_exists(key: SessionKey) -> ConflictError:
    return ConflictError(
        f"session {key.session_id!r} already exists in namespace {key.namespace!r}"
    )


def session_not_found(key: SessionKey) -> SessionNotFoundError:
    return SessionNotFoundError(f"no session {key.session_id!r} in namespace {key.namespace!r}")
