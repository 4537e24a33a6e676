"""Export/import through the Store protocol on every backend (SQLite and PostgreSQL)."""

from __future__ import annotations

import json

from mindstore.cli.transfer import import_data, read_export
from mindstore.formats.export import export_lines, parse_export
from mindstore.session import Session
from mindstore.store.base import NewMessage, ScopeKey, SessionKey, Store


async def test_round_trip_on_backend(store: Store) -> None:
    key = SessionKey(namespace="ns", session_id="s")
    await store.create_session(key, name="n", model="m", metadata={"k": [1, 2]})
    s = Session.create(store, "s", namespace="ns")
    await s.append_message({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
    await s.append_message(
        {
            "id": "a1",
            "role": "assistant",
            "metadata": {"z": 1, "a": {"y": None, "b": 2.5}},
            "parts": [{"type": "text", "text": "hello ✓"}],
        }
    )
    await s.append_message({"id": "a1b", "role": "assistant", "parts": []}, "u1")
    await s.append_message({"id": "u2", "role": "user", "parts": [{"type": "text", "text": "x"}]})
    first = await store.add_compaction(key, summary="one", from_id="u1", to_id="a1b")
    await store.add_compaction(key, summary="two", from_id="u1", to_id="u2", supersedes=[first.id])
    await store.set_block(ScopeKey(namespace="ns", session_id="s", label="memory"), "m")
    await store.set_skill_loaded(key, "skills", "k", True)
    await store.set_skill_loaded(key, "skills", "k", False)
    await store.put_prompt(key, "P", overwrite=True)
    await store.update_session(key, end_reason="done")

    original = "".join(export_lines(await read_export(store, key)))
    data = parse_export(original.splitlines(keepends=True))
    copy = await import_data(store, data, namespace="copy")
    again = "".join(export_lines(await read_export(store, copy)))
    assert again == original.replace('"namespace":"ns"', '"namespace":"copy"', 1)
    copied = await Session.create(store, "s", namespace="copy").get_history()
    source = await s.get_history()
    # Same history, overlay included; only the store-wide overlay id differs.
    assert [m["parts"] for m in copied] == [m["parts"] for m in source]
    assert copied[0]["id"].startswith("compaction_") and copied[0]["parts"][0]["text"] == "two"


async def test_round_trip_keeps_skill_records_in_one_order(store: Store) -> None:
    """A loaded skill recorded before an unloaded one: the import replays unloads at their
    place in the conversation and loads at the end, so the store's own order changes — the
    export lists skill records sorted by (label, key), so the round trip stays identical."""
    key = SessionKey(namespace="ns", session_id="s")
    await store.append(key, [NewMessage(message=_msg("u1"), tokens=1)])
    await store.set_skill_loaded(key, "skills", "z-loaded", True)
    await store.set_skill_loaded(key, "skills", "a-unloaded", True)
    await store.set_skill_loaded(key, "skills", "a-unloaded", False)
    await store.set_skill_loaded(key, "kb", "b", True)
    original = "".join(export_lines(await read_export(store, key)))
    skills = [json.loads(line) for line in original.splitlines() if '"kind":"skill"' in line]
    assert [(r["label"], r["key"]) for r in skills] == [
        ("kb", "b"),
        ("skills", "a-unloaded"),
        ("skills", "z-loaded"),
    ]
    copy = await import_data(store, parse_export(original.splitlines(True)), namespace="copy")
    again = "".join(export_lines(await read_export(store, copy)))
    assert again == original.replace('"namespace":"ns"', '"namespace":"copy"', 1)


def _msg(mid: str) -> dict[str, object]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": mid}]}
