"""Deterministic embedders for tests (no model, no network).

``HashEmbedder`` is a hashed bag of words: texts sharing words are near, texts sharing none are
orthogonal — enough to test what the store does with vectors, not what a model knows.
Import as ``from embedders import HashEmbedder`` (``tests/`` is on ``sys.path``).
"""

from __future__ import annotations

import hashlib
import re


class HashEmbedder:
    def __init__(self, name: str = "test-hash-bow", dimensions: int = 1024) -> None:
        self.name = name
        self.dimensions = dimensions
        self.calls: list[list[str]] = []
        self.fail = False

    def embed(self, texts: list[str]) -> list[list[float]]:
        if self.fail:
            raise RuntimeError("embedder down")
        self.calls.append(list(texts))
        out = []
        for text in texts:
            v = [0.0] * self.dimensions
            for word in re.findall(r"\w+", text.lower()):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
                v[h % self.dimensions] += 1.0
            out.append(v)
        return out

    @property
    def texts(self) -> list[str]:
        return [t for batch in self.calls for t in batch]


class AsyncHashEmbedder(HashEmbedder):
    async def embed(self, texts: list[str]) -> list[list[float]]:  # type: ignore[override]
        return HashEmbedder.embed(self, texts)
