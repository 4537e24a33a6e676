"""The session score's statistics and BM25 of a query against each session as one document
(:mod:`mindstore.lexical.bm25` adds it to each message's score). Pure."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

__all__ = ["WIDE_SESSIONS", "Sessions", "session_scores"]

WIDE_SESSIONS: Final = 200
"""Sessions (statistics rows) up to which a namespace is *narrow*: a search reads every
session's statistics row. A *wider* namespace's statistics are summed by the database and
only the lengths of the sessions a search's postings are in are read: a rare word's search
in 10,000 sessions spent most of its time on those rows (12 ms on SQLite, 44 ms on
PostgreSQL, docs/benchmarks.md). Both stores use this bound (SQLite ``WIDE_PARTS``,
PostgreSQL ``STAMP_PARTS``)."""


@dataclass(slots=True)
class Sessions:
    """What the session score needs of a namespace's sessions: how many hold indexed
    documents, their summed weighted length, and the lengths of those the search's postings
    are in (``lengths``: every session's in a narrow namespace; in a wide one, filled by the
    store before ranking, see :meth:`mindstore.lexical.bm25.Ranking.missing`): reading every
    session's row made a rare word's search in 10,000 sessions read 10,000 rows."""

    count: int
    total: float
    lengths: dict[int, float]

    @classmethod
    def of(cls, lengths: Mapping[int, float]) -> Sessions:
        """The statistics of every session given by its length."""
        return cls(len(lengths), sum(lengths.values()), dict(lengths))


def session_scores(
    session_tf: Callable[[str], Mapping[int, float]],
    names: Sequence[str],
    sessions: Sessions,
    k1: float,
    b: float,
) -> dict[int, float]:
    """BM25 of the query terms ``names`` against each session: ``session_tf(name)`` is each
    session's summed own term frequency of ``name``; ``k1``/``b`` as for messages."""
    n = sessions.count
    avg = max(sessions.total / n, 1e-9)
    lengths = sessions.lengths
    out: dict[int, float] = defaultdict(float)
    norms: dict[int, float] = {}  # each session's length normalisation, computed once
    for name in names:
        per = session_tf(name)
        if not per:
            continue
        df = len(per)
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        for sid, f in per.items():
            norm = norms.get(sid)
            if norm is None:
                norm = norms[sid] = k1 * (1.0 - b + b * lengths.get(sid, avg) / avg)
            out[sid] += idf * f * (k1 + 1.0) / (f + norm)
    return out
