"""Contract: ``Store.list_namespaces`` — every namespace holding a session, a block or a keyed
entry, sorted by code point, with nothing left behind once a namespace is emptied."""

from __future__ import annotations

from mindstore.store.base import NewMessage, ScopeKey, SessionKey, Store


def _msg(mid: str) -> NewMessage:
    return NewMessage(message={"id": mid, "role": "user", "parts": [{"type": "text", "text": mid}]})


async def test_empty_store_has_no_namespaces(store: Store) -> None:
    assert await store.list_namespaces() == []


async def test_sessions_blocks_and_entries_each_make_a_namespace(store: Store) -> None:
    await store.append(SessionKey(namespace="b-messages", session_id="s"), [_msg("m1")])
    await store.create_session(SessionKey(namespace="a-registry", session_id="s"))
    await store.set_block(ScopeKey(namespace="d-block", session_id=None, label="memory"), "x")
    await store.put_entry(ScopeKey(namespace="c-entry", session_id=None, label="kb"), "k", "v")
    # code-point order: upper case before lower case, "Z" < "a", "é" after ASCII
    await store.create_session(SessionKey(namespace="Zeta", session_id="s"))
    await store.create_session(SessionKey(namespace="été", session_id="s"))
    assert await store.list_namespaces() == [
        "Zeta",
        "a-registry",
        "b-messages",
        "c-entry",
        "d-block",
        "été",
    ]


async def test_a_namespace_emptied_is_no_longer_listed(store: Store) -> None:
    key = SessionKey(namespace="gone", session_id="s")
    await store.append(key, [_msg("m1")])
    await store.create_session(SessionKey(namespace="kept", session_id="s"))
    assert await store.list_namespaces() == ["gone", "kept"]
    assert await store.delete_session(key)
    assert await store.list_namespaces() == ["kept"]
