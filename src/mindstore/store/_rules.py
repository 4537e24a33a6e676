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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from mindstore.errors import CompactionError, ConflictError, SessionNotFoundError
from mindstore.lexical.hits import Hits
from mindstore.lexical.snippet import SnippetQuery, make_snippet
from mindstore.search import ParsedQuery, SearchResult, search_result
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
from mindstore.store.base import (
    Compaction,
    Entry,
    EntryHit,
    ScopeKey,
    SessionInfo,
    SessionKey,
    SkillState,
)

# ---- messages: preparation, parents, expected leaf, delete plans, message rows -------------


# ---- compactions, blocks, prompts, skill states, entries, registry ---------------------------
#
# Rows: the SELECT column lists of both backends are in the same order, so one decoder serves
# both; ``when`` turns a stored time into an aware datetime (SQLite stores integer microseconds,
# PostgreSQL returns ``timestamptz`` values as they are).


Scope = tuple[str, str, str]
"""A block or entry collection as stored: ``(namespace, scope, label)``, scope ``''`` for
namespace-wide (see :func:`mindstore.store._checks.check_scope`)."""


def _as_is(value: Any) -> datetime:
    return value  # type: ignore[no-any-return]


def decode_compaction(row: Sequence[Any], when: Callable[[Any], datetime] = _as_is) -> Compaction:
    """A row ``(id, from_id, to_id, summary, created, superseded_by, reverted)``."""
    return Compaction(
        id=row[0],
        from_message_id=row[1],
        to_message_id=row[2],
        summary=row[3],
        created_at=when(row[4]),
        superseded_by=row[5],
        reverted=bool(row[6]),
    )


def decode_session(row: Sequence[Any], when: Callable[[Any], datetime] = _as_is) -> SessionInfo:
    """A registry row: ``session_id, name, parent_session_id, model, source, metadata,
    input_tokens, output_tokens, estimated_cost, end_reason, created, updated,
    message_count``."""
    return SessionInfo(
        id=row[0],
        name=row[1],
        parent_session_id=row[2],
        model=row[3],
        source=row[4],
        metadata=json.loads(row[5]) if row[5] is not None else None,
        input_tokens=row[6],
        output_tokens=row[7],
        estimated_cost=row[8],
        end_reason=row[9],
        created_at=when(row[10]),
        updated_at=when(row[11]),
        message_count=row[12],
    )


def decode_entry(row: Sequence[Any], when: Callable[[Any], datetime] = _as_is) -> Entry:
    """A row ``(key, content, description, updated, data, created, expires)``; a row written
    before entries had a creation time was created when it was last updated."""
    updated = when(row[3])
    return Entry(
        key=row[0],
        content=row[1],
        description=row[2],
        updated_at=updated,
        data=row[4],
        created_at=updated if row[5] is None else when(row[5]),
        expires_at=None if row[6] is None else when(row[6]),
    )


def decode_skill_state(row: Sequence[Any]) -> SkillState:
    """A row ``(label, skill_key, loaded, unloaded_before_seq)``."""
    return SkillState(label=row[0], key=row[1], loaded=bool(row[2]), unloaded_before_seq=row[3])


def decode_blocks(namespace: str, rows: Sequence[Sequence[Any]]) -> list[tuple[ScopeKey, str]]:
    """Rows ``(scope, label, content)`` of ``namespace``; scope ``''`` is namespace-wide."""
    return [
        (ScopeKey(namespace=namespace, session_id=scope or None, label=label), content)
        for scope, label, content in rows
    ]


# Search: candidates ranked by the backend's index become results through one assembly loop
# (:class:`mindstore.lexical.hits.Hits`); these say what a row is and what a result looks like.


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

    def build(row: Any, found: Sequence[str], score: float) -> SearchResult:
        text = found[0] or found[1] or ""
        snippet = make_snippet(snip, found)
        return search_result(row[1], row[2], row[3], text, snippet, score, created(row))

    return Hits(query, limit, fields, build)


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
    return float(cost)


def session_exists(key: SessionKey) -> ConflictError:
    return ConflictError(
        f"session {key.session_id!r} already exists in namespace {key.namespace!r}"
    )


def session_not_found(key: SessionKey) -> SessionNotFoundError:
    return SessionNotFoundError(f"no session {key.session_id!r} in namespace {key.namespace!r}")
