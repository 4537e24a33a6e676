"""The vector packing and max-pooled cosine scoring behind MindstoreStore's semantic search,
with numpy and with the pure-Python fallback (numpy is an optional extra)."""

from __future__ import annotations

import math
import random

import pytest

from mindstore.integrations import _langgraph_vectors as lv


def cosine(a: list[float], b: list[float]) -> float:
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(x * x for x in b))
    return 0.0 if not na or not nb else sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb)


@pytest.mark.parametrize("numpy", [True, False])
def test_max_similarity_is_the_best_cosine_per_item(
    numpy: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not numpy:
        monkeypatch.setattr(lv, "_np", None)
    rng = random.Random(4)
    dims = 7
    items = [[[rng.uniform(-1, 1) for _ in range(dims)] for _ in range(n)] for n in (1, 3, 0, 2)]
    items.append([[0.0] * dims])  # a zero vector scores 0, as in InMemoryStore
    query = [rng.uniform(-1, 1) for _ in range(dims)]
    records = [lv.encode_vectors([f"p{i}" for i in range(len(v))], v, dims) for v in items]
    blobs = [lv.decode_vectors(r, dims) for r in records]
    got = lv.max_similarity(query, blobs, dims)
    want = [max((cosine(query, v) for v in vs), default=None) for vs in items]
    assert got[2] is None and want[2] is None
    for g, w in zip(got, want, strict=True):
        assert (g is None) == (w is None)
        if g is not None and w is not None:
            assert g == pytest.approx(w, abs=1e-6)


def test_vectors_of_another_size_are_ignored() -> None:
    record = lv.encode_vectors(["text"], [[1.0, 0.0, 0.0]], 3)
    assert lv.decode_vectors(record, 4) == b""
    assert lv.decode_vectors(None, 3) == b""
    assert lv.max_similarity([1.0, 0.0, 0.0, 0.0], [b""], 4) == [None]
