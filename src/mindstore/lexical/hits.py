"""Ranked candidates → results: the one assembly loop of every lexical search. Pure: no I/O.

A store ranks candidate documents from its index, best first, as ``(score, document id,
part)``, then reads their rows. Rows are read a page at a time — the first page ``max(limit,
8)`` candidates, each later one twice as large as the one before — because a candidate can
still be rejected once its row is read: a phrase query ranks the documents holding the phrase's
words, and only the text shows whether they stand together; a document deleted since it was
ranked has no row and is skipped. Paging stops as soon as ``limit`` results are assembled, so
a search reads about ``limit`` rows when nothing is rejected. Results keep the rank order.

Every backend runs the same loop; only the read of a page is its own::

    hits = Hits(query, limit, fields, build)
    for ids in hits.pages(ranked):
        hits.add(rows_by_id(ids))
    return hits.results
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Generic, TypeVar

from mindstore.lexical.bm25 import passes_phrases
from mindstore.search import ParsedQuery

__all__ = ["Candidate", "Hits"]

Candidate = tuple[float, int, int]
"""``(score, document id, part)`` as an index ranks it."""

R = TypeVar("R")
T = TypeVar("T")


class Hits(Generic[R, T]):
    """Assembles at most ``limit`` results from ranked candidates and their rows.

    ``fields(row)`` gives the texts a row's phrases are checked in; ``build(row, fields,
    score)`` makes the result.
    """

    __slots__ = ("_build", "_fields", "_limit", "_page", "_query", "results")

    def __init__(
        self,
        query: ParsedQuery,
        limit: int,
        fields: Callable[[R], Sequence[str]],
        build: Callable[[R, Sequence[str], float], T],
    ) -> None:
        self._query = query
        self._limit = limit
        self._fields = fields
        self._build = build
        self._page: Sequence[Candidate] = ()
        self.results: list[T] = []

    def pages(self, ranked: Sequence[Candidate]) -> Iterator[list[int]]:
        """The document ids of each page to read, until ``limit`` results are assembled."""
        size = max(self._limit, 8)
        i = 0
        while i < len(ranked) and len(self.results) < self._limit:
            self._page = ranked[i : i + size]
            yield [c[1] for c in self._page]
            i += size
            size *= 2

    def add(self, rows: Mapping[int, R]) -> None:
        """Take the rows read for the last page (keyed by document id), in rank order."""
        query, results, limit = self._query, self.results, self._limit
        for score, doc, _ in self._page:
            row = rows.get(doc)
            if row is None:
                continue
            fields = self._fields(row)
            if query.phrases and not passes_phrases(query, fields):
                continue
            results.append(self._build(row, fields, score))
            if len(results) >= limit:
                return
