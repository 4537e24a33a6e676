"""Unencodable text (issue 14 item 5): a lone surrogate — what Python makes of argv bytes that
are not UTF-8 — in an id, name, namespace, label or key is refused by the shared argument
checks with the library's typed error, before any I/O, identically on every backend. Before
the fix the drivers leaked raw ``UnicodeEncodeError`` s (and SQLite answered ``[]`` where
PostgreSQL raised). Every public entry point that takes such a string is called; the store is
unchanged afterwards."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from mindstore import Session, SessionManager
from mindstore.errors import InvalidKeyError, InvalidMessageError
from mindstore.search import parse_query
from mindstore.store.base import AUTO, NewMessage, ScopeKey, SessionKey, Store

BAD_VALUES = ["a\udcffb", "\ud800", "x" * 10 + "\udfff"]

K = SessionKey(namespace="ns", session_id="s")
LABEL = ScopeKey(namespace="ns", session_id=None, label="kb")
Q = parse_query("hello")


def msg(mid: str) -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": "hello"}]}


def new(mid: str, parent: Any = AUTO) -> NewMessage:
    return NewMessage(message=msg(mid), parent=parent, tokens=1)


def sk(ns: str = "ns", sid: str = "s") -> SessionKey:
    return SessionKey(namespace=ns, session_id=sid)


def scope(ns: str = "ns", sid: str | None = "s", label: str = "memory") -> ScopeKey:
    return ScopeKey(namespace=ns, session_id=sid, label=label)


Call = Callable[[Store, str], Awaitable[Any]]
KEY, MESSAGE = InvalidKeyError, InvalidMessageError

# (name, call, expected error). `b` is the bad string.
STORE_CALLS: list[tuple[str, Call, type[Exception]]] = [
    ("append namespace", lambda s, b: s.append(sk(ns=b), [new("n1")]), KEY),
    ("append session", lambda s, b: s.append(sk(sid=b), [new("n1")]), KEY),
    ("append parent", lambda s, b: s.append(K, [new("n1", b)]), MESSAGE),
    ("append expected_leaf", lambda s, b: s.append(K, [], expected_leaf=b), MESSAGE),
    ("get_message namespace", lambda s, b: s.get_message(sk(ns=b), "m1"), KEY),
    ("get_message id", lambda s, b: s.get_message(K, b), MESSAGE),
    ("get_messages ids", lambda s, b: s.get_messages(K, [b]), MESSAGE),
    ("all_messages", lambda s, b: s.all_messages(sk(sid=b)), KEY),
    ("path leaf", lambda s, b: s.path(K, b), MESSAGE),
    (
        "path_window leaf",
        lambda s, b: s.path_window(K, b, max_tokens=None, max_bytes=None, min_messages=1),
        MESSAGE,
    ),
    ("path_length leaf", lambda s, b: s.path_length(K, b), MESSAGE),
    ("token_estimate", lambda s, b: s.token_estimate(sk(sid=b)), KEY),
    (
        "set_token_estimate leaf",
        lambda s, b: s.set_token_estimate(K, leaf_id=b, tokens=1, version=0),
        MESSAGE,
    ),
    (
        "set_token_estimate session",
        lambda s, b: s.set_token_estimate(sk(ns=b), leaf_id="m1", tokens=1, version=0),
        KEY,
    ),
    ("children", lambda s, b: s.children(K, b), MESSAGE),
    ("latest_leaf", lambda s, b: s.latest_leaf(sk(ns=b)), KEY),
    ("update session", lambda s, b: s.update(sk(sid=b), msg("m1"), tokens=1), KEY),
    ("delete ids", lambda s, b: s.delete(K, [b]), MESSAGE),
    ("clear", lambda s, b: s.clear(sk(sid=b)), KEY),
    ("search namespace", lambda s, b: s.search(b, Q), KEY),
    ("search session_ids", lambda s, b: s.search("ns", Q, session_ids=[b]), KEY),
    (
        "add_compaction from",
        lambda s, b: s.add_compaction(K, summary="x", from_id=b, to_id="m1"),
        MESSAGE,
    ),
    ("get_compactions", lambda s, b: s.get_compactions(sk(sid=b)), KEY),
    ("revert_compaction", lambda s, b: s.revert_compaction(sk(ns=b), 1), KEY),
    ("get_block label", lambda s, b: s.get_block(scope(label=b)), KEY),
    ("set_block label", lambda s, b: s.set_block(scope(label=b), "x"), KEY),
    ("set_block session", lambda s, b: s.set_block(scope(sid=b), "x"), KEY),
    ("update_block", lambda s, b: s.update_block(scope(ns=b), lambda t: t + "x"), KEY),
    ("delete_block", lambda s, b: s.delete_block(scope(label=b)), KEY),
    ("list_blocks namespace", lambda s, b: s.list_blocks(b, None), KEY),
    ("list_blocks session", lambda s, b: s.list_blocks("ns", b), KEY),
    ("get_prompt", lambda s, b: s.get_prompt(sk(sid=b)), KEY),
    ("put_prompt", lambda s, b: s.put_prompt(sk(sid=b), "p", overwrite=True), KEY),
    ("get_skill_states", lambda s, b: s.get_skill_states(sk(ns=b)), KEY),
    ("set_skill_loaded label", lambda s, b: s.set_skill_loaded(K, b, "k", True), KEY),
    ("set_skill_loaded key", lambda s, b: s.set_skill_loaded(K, "skills", b, True), KEY),
    ("put_entry key", lambda s, b: s.put_entry(LABEL, b, "c"), KEY),
    ("put_entry label", lambda s, b: s.put_entry(scope(sid=None, label=b), "k", "c"), KEY),
    ("get_entry key", lambda s, b: s.get_entry(LABEL, b), KEY),
    ("list_entries", lambda s, b: s.list_entries(scope(ns=b, sid=None)), KEY),
    ("count_entries", lambda s, b: s.count_entries(scope(sid=None, label=b)), KEY),
    ("delete_entry key", lambda s, b: s.delete_entry(LABEL, b), KEY),
    ("search_entries", lambda s, b: s.search_entries(scope(ns=b, sid=None), Q), KEY),
    ("put_entry data", lambda s, b: s.put_entry(LABEL, "k2", "c", data=b), ValueError),
    ("get_entries key", lambda s, b: s.get_entries(LABEL, ["k", b]), KEY),
    ("list_entry_labels namespace", lambda s, b: s.list_entry_labels(b), KEY),
    ("list_entry_labels prefix", lambda s, b: s.list_entry_labels("ns", prefix=b), KEY),
    ("set_entry_expiry key", lambda s, b: s.set_entry_expiry(LABEL, {b: None}), KEY),
    ("delete_expired_entries", lambda s, b: s.delete_expired_entries(b), KEY),
    ("create_session id", lambda s, b: s.create_session(sk(sid=b)), KEY),
    ("create_session name", lambda s, b: s.create_session(sk(sid="new"), name=b), KEY),
    ("create_session model", lambda s, b: s.create_session(sk(sid="new"), model=b), KEY),
    (
        "create_session parent",
        lambda s, b: s.create_session(sk(sid="new"), parent_session_id=b),
        KEY,
    ),
    ("get_session", lambda s, b: s.get_session(sk(ns=b)), KEY),
    ("list_sessions namespace", lambda s, b: s.list_sessions(b), KEY),
    ("list_sessions before", lambda s, b: s.list_sessions("ns", before=b), KEY),
    ("update_session id", lambda s, b: s.update_session(sk(sid=b), name="x"), KEY),
    ("update_session name", lambda s, b: s.update_session(K, name=b), KEY),
    ("update_session end_reason", lambda s, b: s.update_session(K, end_reason=b), KEY),
    ("add_usage", lambda s, b: s.add_usage(sk(sid=b), 1, 1, 0.0), KEY),
    ("delete_session", lambda s, b: s.delete_session(sk(ns=b)), KEY),
    ("delete_namespace", lambda s, b: s.delete_namespace(b), KEY),
]


async def _enter(cm: Any) -> None:
    async with cm:
        return None


# Store.transaction takes keys to lock: checked before anything is locked or begun.
STORE_CALLS.append(("transaction lock", lambda s, b: _enter(s.transaction(lock=[sk(sid=b)])), KEY))


async def _drain(changes: Any) -> None:
    async for _ in changes:
        pass


# The change feed (issue 32): a namespace or session key that cannot be stored is refused.
STORE_CALLS += [
    ("changes namespace", lambda s, b: _drain(s.changes(b, follow=False)), KEY),
    ("read_changes namespace", lambda s, b: s.read_changes(b), KEY),
    ("latest_change_seq namespace", lambda s, b: s.latest_change_seq(b), KEY),
    ("record_changes session", lambda s, b: s.record_changes(sk(sid=b), []), KEY),
]


async def _session_call(store: Store, bad: str, fn: Callable[[Session], Awaitable[Any]]) -> Any:
    return await fn(Session.create(store, "s", namespace="ns"))


async def _manager(store: Store, bad: str, fn: Callable[[SessionManager], Awaitable[Any]]) -> Any:
    return await fn(SessionManager(store, namespace="ns"))


async def _sync(fn: Callable[[], Any]) -> Any:
    return fn()


API_CALLS: list[tuple[str, Call, type[Exception]]] = [
    ("Session.create id", lambda s, b: _sync(lambda: Session.create(s, b)), KEY),
    (
        "Session.create namespace",
        lambda s, b: _sync(lambda: Session.create(s, "s", namespace=b)),
        KEY,
    ),
    (
        "Session.with_context label",
        lambda s, b: _sync(lambda: Session.create(s, "s", namespace="ns").with_context(b)),
        KEY,
    ),
    (
        "Session.append_message id",
        lambda s, b: _session_call(s, b, lambda x: x.append_message(msg(b))),
        MESSAGE,
    ),
    (
        "Session.append_message parent",
        lambda s, b: _session_call(s, b, lambda x: x.append_message(msg("n1"), b)),
        MESSAGE,
    ),
    ("Session.get_history", lambda s, b: _session_call(s, b, lambda x: x.get_history(b)), MESSAGE),
    ("Session.get_message", lambda s, b: _session_call(s, b, lambda x: x.get_message(b)), MESSAGE),
    ("Session.get_node", lambda s, b: _session_call(s, b, lambda x: x.get_node(b)), MESSAGE),
    (
        "Session.get_branches",
        lambda s, b: _session_call(s, b, lambda x: x.get_branches(b)),
        MESSAGE,
    ),
    (
        "Session.get_path_length",
        lambda s, b: _session_call(s, b, lambda x: x.get_path_length(b)),
        MESSAGE,
    ),
    (
        "Session.delete_messages",
        lambda s, b: _session_call(s, b, lambda x: x.delete_messages([b])),
        MESSAGE,
    ),
    (
        "SessionManager namespace",
        lambda s, b: _sync(lambda: SessionManager(s, namespace=b)),
        KEY,
    ),
    ("SessionManager.get", lambda s, b: _manager(s, b, lambda m: m.get(b)), KEY),
    ("SessionManager.create name", lambda s, b: _manager(s, b, lambda m: m.create(b)), KEY),
    (
        "SessionManager.create parent",
        lambda s, b: _manager(s, b, lambda m: m.create("n", parent_session_id=b)),
        KEY,
    ),
    ("SessionManager.list before", lambda s, b: _manager(s, b, lambda m: m.list(before=b)), KEY),
    ("SessionManager.rename id", lambda s, b: _manager(s, b, lambda m: m.rename(b, "n")), KEY),
    ("SessionManager.rename name", lambda s, b: _manager(s, b, lambda m: m.rename("s", b)), KEY),
    ("SessionManager.delete", lambda s, b: _manager(s, b, lambda m: m.delete(b)), KEY),
    (
        "SessionManager.append",
        lambda s, b: _manager(s, b, lambda m: m.append(b, msg("n1"))),
        KEY,
    ),
    (
        "SessionManager.fork at",
        lambda s, b: _manager(s, b, lambda m: m.fork("s", b, "n")),
        MESSAGE,
    ),
    (
        "SessionManager.search session_ids",
        lambda s, b: _manager(s, b, lambda m: m.search("hello", session_ids=[b])),
        KEY,
    ),
    (
        "SessionManager.add_usage",
        lambda s, b: _manager(s, b, lambda m: m.add_usage(b, 1, 1, 0.0)),
        KEY,
    ),
]


async def snapshot(store: Store) -> Any:
    return (
        await store.stats(),
        [r.message for r in await store.all_messages(K)],
        await store.list_blocks("ns", "s"),
        [(i.id, i.name, i.input_tokens) for i in await store.list_sessions("ns")],
        [(e.key, e.content) for e in await store.list_entries(LABEL)],
    )


@pytest.mark.parametrize("bad", BAD_VALUES, ids=["middle", "alone", "end"])
async def test_every_entry_point_refuses_unencodable_text(store: Store, bad: str) -> None:
    s = Session.create(store, "s", namespace="ns")
    await s.append_message(msg("m1"))
    await store.set_block(scope(), "memo")
    await store.put_entry(LABEL, "k", "content")
    before = await snapshot(store)
    failures: list[str] = []
    for name, call, expected in STORE_CALLS + API_CALLS:
        try:
            result = await call(store, bad)
        except expected as exc:
            if "\n" in str(exc) or ("Unicode" not in str(exc) and "256" not in str(exc)):
                failures.append(f"{name}: unclear message {str(exc)!r:.120}")
            continue
        except Exception as exc:
            failures.append(f"{name}: {type(exc).__name__}: {str(exc)[:80]}")
            continue
        failures.append(f"{name}: no error, returned {result!r:.60}")
    assert not failures, "\n".join(failures)
    assert await snapshot(store) == before


def test_the_catalogue_covers_every_store_method() -> None:
    """A new Store method that takes strings must be added to STORE_CALLS."""
    import inspect

    from mindstore.store import base

    names = {n for n, _ in inspect.getmembers(base.Store) if not n.startswith("_")}
    covered = {name.split()[0] for name, _, _ in STORE_CALLS}
    stringless = {"aclose", "stats", "reindex", "list_namespaces"}
    assert names - covered - stringless == set()
