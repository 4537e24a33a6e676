"""What each store write records in the change feed — pure, shared by both backends.

A write method of :class:`~mindstore.store._front.StoreFront` hands its domain function to the
backend wrapped by ``_changes.logged`` (``sqlite/_changes.py`` ~ ``postgres/_changes.py``): the
domain function runs, then one of the ``describe_*`` functions below turns its arguments and
result into :data:`ChangeRow` tuples, and the backend records them in the same transaction
(or, inside ``store.transaction()``, once at the end of the block, so the namespace's counter is
locked only while the block commits). :func:`follow` is the one reading loop both backends'
``Feed`` objects drive. Nothing here does I/O of its own.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, TypeAlias

from mindstore.changes import CHANGE_KINDS, SESSION_EVENT_KINDS, Change
from mindstore.errors import InvalidKeyError
from mindstore.store._checks import check_key, check_name
from mindstore.store.types import Compaction, SessionKey

__all__ = [
    "ChangeRow",
    "Describe",
    "Feed",
    "change_from_row",
    "check_changes_args",
    "check_record",
    "describe_append",
    "dumps_data",
    "follow",
]

#: (namespace, kind, session_id, data) — one event before it has a number.
ChangeRow: TypeAlias = tuple[str, str, str | None, Mapping[str, Any]]
#: describe(args of the domain function after the connection, its result, what ``before``
#: returned) -> the events of the write.
Describe: TypeAlias = Callable[[tuple[Any, ...], Any, Any], list[ChangeRow]]

_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def dumps_data(data: Mapping[str, Any]) -> str:
    """An event's data as stored (compact JSON)."""
    return _ENCODE(data)


def change_from_row(
    namespace: str, seq: int, kind: str, session_id: str | None, data: str, created_at: datetime
) -> Change:
    """A stored feed row as the :class:`~mindstore.changes.Change` readers get."""
    return Change(
        seq=int(seq),
        namespace=namespace,
        kind=kind,  # type: ignore[arg-type]
        session_id=session_id,
        data=json.loads(data),
        created_at=created_at,
    )


def check_record(
    key: SessionKey, events: Sequence[tuple[str, Mapping[str, Any]]]
) -> list[ChangeRow]:
    """The arguments of ``record_changes``: session-level kinds with JSON data only.

    Raises:
        InvalidKeyError: a kind that is not a session-level event kind.
        TypeError: data that is not a JSON-serialisable mapping.
    """
    check_key(key)
    rows: list[ChangeRow] = []
    for kind, data in events:
        if kind not in SESSION_EVENT_KINDS:
            raise InvalidKeyError(
                f"record_changes records only {sorted(SESSION_EVENT_KINDS)}, got {kind!r:.80}; "
                "the store records the other kinds with the writes they describe"
            )
        if not isinstance(data, Mapping):
            raise TypeError(f"event data must be a mapping, got {type(data).__name__}")
        try:
            dumps_data(data)
        except (TypeError, ValueError) as e:
            raise TypeError(f"event data must be JSON-serialisable: {e}") from None
        rows.append((key.namespace, kind, key.session_id, dict(data)))
    return rows


def check_changes_args(namespace: str, since: int, batch: int, poll_interval: float) -> None:
    """The arguments of ``changes()``."""
    check_name(namespace, "namespace")
    for name, value in (("since", since), ("batch", batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    if batch < 1:
        raise ValueError("batch must be at least 1")
    if (
        isinstance(poll_interval, bool)
        or not isinstance(poll_interval, int | float)
        or not 0 < poll_interval <= 60
    ):
        raise ValueError("poll_interval must be a number of seconds in (0, 60]")


def _session(key: SessionKey, kind: str, data: Mapping[str, Any]) -> ChangeRow:
    assert kind in CHANGE_KINDS
    return (key.namespace, kind, key.session_id, data)


def _scope(k: tuple[str, str, str], kind: str, data: Mapping[str, Any]) -> ChangeRow:
    """``k``: the checked ``(namespace, scope, label)`` of a block or entry collection."""
    assert kind in CHANGE_KINDS
    return (k[0], kind, k[1] or None, data)


# ---- one describe function per write (args are the domain function's, after the connection) --
def describe_append(args: tuple[Any, ...], result: Any, _: Any) -> list[ChangeRow]:
    key, prepared = args[0], args[1]
    return [
        _session(
            key,
            "message_appended",
            {"message_id": p.id, "role": p.role, "tokens": p.item.tokens},
        )
        for p, new in zip(prepared, result, strict=True)
        if new
    ]


def describe_update(args: tuple[Any, ...], result: Any, _: Any) -> list[ChangeRow]:
    key, u = args[0], args[1]
    return [_session(key, "message_updated", {"message_id": u.id, "role": u.role})]


def describe_delete(args: tuple[Any, ...], result: Any, _: Any) -> list[ChangeRow]:
    key, wanted = args[0], args[1]
    return [_session(key, "message_deleted", {"message_id": i}) for i in wanted]


def describe_clear(args: tuple[Any, ...], result: Any, _: Any) -> list[ChangeRow]:
    return [_session(args[0], "session_cleared", {})]


def describe_add_compaction(args: tuple[Any, ...], result: Compaction, _: Any) -> list[ChangeRow]:
    key, new = args[0], args[1]
    data = {
        "compaction_id": result.id,
        "from_id": result.from_message_id,
        "to_id": result.to_message_id,
        "supersedes": list(new.supersedes),
    }
    return [_session(key, "compaction_finished", data)]


def describe_revert_compaction(
    args: tuple[Any, ...], result: Compaction, _: Any
) -> list[ChangeRow]:
    return [_session(args[0], "compaction_reverted", {"compaction_id": result.id})]


def describe_block(deleted: bool) -> Describe:
    def describe(args: tuple[Any, ...], result: Any, _: Any) -> list[ChangeRow]:
        k = args[0]
        return [_scope(k, "block_written", {"label": k[2], "deleted": deleted})]

    return describe


def describe_prompt(args: tuple[Any, ...], result: Any, _: Any) -> list[ChangeRow]:
    key, prompt, overwrite = args[0], args[1], args[2]
    if not overwrite and result != prompt:
        return []  # an existing prompt was kept: nothing was written
    return [_session(key, "prompt_written", {})]


def describe_skill(args: tuple[Any, ...], result: Any, _: Any) -> list[ChangeRow]:
    key, label, skill_key, loaded = args
    if not result:
        return []
    kind = "skill_loaded" if loaded else "skill_unloaded"
    return [_session(key, kind, {"label": label, "key": skill_key})]


def describe_put_entry(args: tuple[Any, ...], result: Any, _: Any) -> list[ChangeRow]:
    k, new = args[0], args[1]
    return [_scope(k, "entry_written", {"label": k[2], "key": new.key})]


def describe_delete_entry(args: tuple[Any, ...], result: Any, _: Any) -> list[ChangeRow]:
    if not result:
        return []
    k = args[0]
    return [_scope(k, "entry_deleted", {"label": k[2], "key": args[1]})]


def describe_expired(
    args: tuple[Any, ...], result: list[tuple[str, str, str, str]], _: Any
) -> list[ChangeRow]:
    """``result``: (namespace, scope, label, key) of the entries the call deleted (scope
    ``''``: namespace-wide)."""
    return [
        (ns, "entry_deleted", scope or None, {"label": label, "key": entry_key})
        for ns, scope, label, entry_key in result
    ]


def describe_session(kind: str) -> Describe:
    def describe(args: tuple[Any, ...], result: Any, _: Any) -> list[ChangeRow]:
        if kind == "session_deleted" and not result:
            return []
        data: dict[str, Any] = {}
        if kind == "session_updated":
            data["fields"] = sorted(args[1]) if len(args) == 2 else ["usage"]
        return [_session(args[0], kind, data)]

    return describe


def describe_recorded(args: tuple[Any, ...], result: Any, _: Any) -> list[ChangeRow]:
    """``record_changes``: the checked rows it was given."""
    rows: list[ChangeRow] = args[0]
    return rows


class Feed(Protocol):
    """A backend's reader of one namespace's feed (``sqlite/_changes.Feed``,
    ``postgres/_changes.Feed``)."""

    namespace: str

    async def mark(self) -> int:
        """A token taken before a read: :meth:`wait` returns once something committed after."""
        ...

    async def read(self, since: int, limit: int) -> list[Change]: ...

    async def latest(self) -> int: ...

    async def wait(self, mark: int) -> None: ...

    async def close(self) -> None: ...


async def follow(
    feed: Feed, since: int, *, follow: bool, batch: int
) -> AsyncGenerator[Change, None]:
    """The events after ``since`` in order, then (``follow``) each new one as it commits.

    The mark is taken before each read, so a commit that lands between a read and the wait
    still wakes the wait. A read that finds nothing while the namespace's counter stands below
    the position means ``delete_namespace`` removed the feed: a ``namespace_deleted`` event
    numbered 0 is given, and reading starts again from the feed's beginning.
    """
    last = since
    try:
        while True:
            mark = await feed.mark()
            rows = await feed.read(last, batch)
            for change in rows:
                last = change.seq
                yield change
            if len(rows) == batch:
                continue
            if not rows:
                latest = await feed.latest()
                if latest < last:
                    last = 0  # the namespace's feed starts again: all of it is new
                    yield Change(
                        seq=0,
                        namespace=feed.namespace,
                        kind="namespace_deleted",
                        session_id=None,
                        data={},
                        created_at=datetime.now(UTC),
                    )
                    continue
            if not follow:
                return
            await feed.wait(mark)
    finally:
        await feed.close()
