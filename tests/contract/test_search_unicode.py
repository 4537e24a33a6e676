"""Search treats Latin diacritics alike on both backends (DESIGN §5.1: one Python tokenizer
folds them for both)."""

from __future__ import annotations

import pytest

from mindstore import Session
from mindstore.store.base import Store

TEXT = "Naïve café résumé from Ångström"


@pytest.mark.parametrize(
    "query",
    ["cafe", "café", "CAFÉ", "naive", "resume", "angstrom", "résu*", "resu*", '"naive cafe"'],
)
async def test_latin_diacritics_are_ignored(store: Store, query: str) -> None:
    s = Session.create(store, "accents")
    await s.append_message({"id": "m", "role": "user", "parts": [{"type": "text", "text": TEXT}]})
    # another session (a reply in the same one would match through its context field)
    await Session.create(store, "accents-2").append_message(
        {"id": "o", "role": "user", "parts": [{"type": "text", "text": "other"}]}
    )
    hits = await s.search(query)
    assert [h.message_id for h in hits] == ["m"], query
    assert hits[0].text == TEXT  # the stored text keeps its accents


async def test_other_scripts_are_matched_as_typed(store: Store) -> None:
    s = Session.create(store, "scripts")
    await s.append_message(
        {"id": "k", "role": "user", "parts": [{"type": "text", "text": "Привет мир"}]}
    )
    assert [h.message_id for h in await s.search("привет")] == ["k"]
    assert [h.message_id for h in await s.search("прив*")] == ["k"]
