"""VectorIndex: exact k-NN, the same answer whether it scans the namespace or gathers a few
sessions' rows (compared with a brute-force reference)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from mindstore.vectors import VectorIndex, encode_vector


def reference(
    rows: list[tuple[int, str, bytes]], q: list[float], k: int, sessions: list[str] | None
) -> list[int]:
    qv = np.asarray(q, dtype=np.float32)
    qv = qv / np.linalg.norm(qv)
    scored = [
        (float(np.frombuffer(blob, dtype="<f2").astype(np.float32) @ qv), key)
        for key, sid, blob in rows
        if sessions is None or sid in sessions
    ]
    scored.sort(key=lambda p: (-p[0], -p[1]))
    return [key for _, key in scored[:k]]


@pytest.mark.parametrize("seed", range(6))
def test_search_matches_brute_force_for_any_session_subset(seed: int) -> None:
    rng = random.Random(seed)
    dims = 8
    n_sessions = rng.randint(1, 12)
    rows = []
    for key in range(1, rng.randint(2, 300)):
        vector = [rng.gauss(0, 1) for _ in range(dims)]
        rows.append((key * 3, f"s{rng.randrange(n_sessions)}", encode_vector(vector)))
    index = VectorIndex.build(rows, dims, generation=0)
    all_sessions = [f"s{i}" for i in range(n_sessions + 2)]  # two with no rows
    for _ in range(20):
        q = [rng.gauss(0, 1) for _ in range(dims)]
        k = rng.randint(1, 40)
        subset: list[str] | None = None
        if rng.random() < 0.8:
            subset = rng.sample(all_sessions, rng.randint(1, len(all_sessions)))
        got = index.search(q, k, subset)
        assert [key for key, _ in got] == reference(rows, q, k, subset)
        assert all(np.isfinite(score) for _, score in got)


def test_ties_duplicate_session_ids_and_unknown_sessions() -> None:
    rows = [(1, "a", encode_vector([1.0, 0.0])), (2, "b", encode_vector([0.0, 1.0]))]
    rows += [(3, "a", encode_vector([1.0, 0.0])), (4, "c", encode_vector([1.0, 0.0]))]
    index = VectorIndex.build(rows, 2, generation=0)
    # equal scores: the higher key (the newer message) first, scanned or gathered
    assert [k for k, _ in index.search([1.0, 0.0], 3)] == [4, 3, 1]
    assert [k for k, _ in index.search([1.0, 0.0], 3, ["a"])] == [3, 1]
    assert [k for k, _ in index.search([1.0, 0.0], 2, ["a", "c", "b"])] == [4, 3]
    assert [k for k, _ in index.search([1.0, 0.0], 5, ["a", "a"])] == [3, 1]
    assert [k for k, _ in index.search([1.0, 0.0], 5, ["b", "zzz"])] == [2]
    assert index.search([1.0, 0.0], 5, ["zzz"]) == []
    assert index.search([1.0, 0.0], 5, []) == []


@pytest.mark.parametrize("seed", range(4))
def test_kth_best_is_exact_with_ties_and_masked_rows(seed: int) -> None:
    """kth_best bounds the answer by block maxima before partitioning: the same value as a
    full sort, for arrays big enough to take that path and small ones."""
    from mindstore.vectors import BLOCK, kth_best

    rng = np.random.default_rng(seed)
    for _ in range(200):
        n = int(rng.integers(1, 40 * BLOCK))
        scores = rng.standard_normal(n).astype(np.float32)
        if rng.random() < 0.5:
            scores = np.round(scores, 1)  # many ties
        if rng.random() < 0.3:
            scores[rng.integers(0, n, n // 2)] = -np.inf  # rows of other sessions
        k = int(rng.integers(1, min(n, 12) + 1)) if rng.random() < 0.8 else int(n)
        assert kth_best(scores, k) == np.sort(scores)[::-1][k - 1]


def test_search_over_many_rows_matches_brute_force() -> None:
    """Enough rows for the block-maximum bound (and ties from coarse vectors)."""
    rng = random.Random(7)
    dims = 4
    rows = [
        (key, f"s{key % 5}", encode_vector([rng.choice([-1, 0, 1, 2]) for _ in range(dims)]))
        for key in range(1, 6000)
    ]
    index = VectorIndex.build(rows, dims, generation=0)
    for _ in range(10):
        q = [rng.gauss(0, 1) for _ in range(dims)]
        for k in (1, 10, 30):
            assert [key for key, _ in index.search(q, k)] == reference(rows, q, k, None)
