"""Full-text search pieces of the PostgreSQL backend. Pure: builds SQL fragments and parameters.

Each document (messages: text/reasoning as the main text, tool names/inputs/outputs as the
secondary text; entries: key+content and description) has two vectors:

* ``tsv``: ``mindstore_porter`` lexemes (original Porter stemmer, no stop words — what SQLite's
  FTS5 ``porter`` tokenizer produces) of the main text at weight A and of the secondary text at
  weight C — answers words and phrases, and ranks;
* ``tsv_prefix``: ``simple`` lexemes (lower-cased, as typed) with the same weights — answers
  ``prefix*`` terms. Keeping it separate keeps ``tsv`` as small as a one-config vector, so
  ranking the (often many) matches of a common word costs no more than a plain tsvector query.

Both sides see the same tokens: the texts are split with :func:`mindstore.search.word_tokens`
and re-joined with spaces before ``to_tsvector``, so PostgreSQL's own parser (which treats
e-mails, URLs, hyphenated words and numbers specially) cannot tokenise differently from the
query side or from the SQLite backend.

Query side — only :class:`~mindstore.search.ParsedQuery` tokens (nothing but word characters)
ever reach a tsquery, always quoted, always as bound parameters:

* a word ``w``: ``to_tsquery('mindstore_porter', 'w')`` against ``tsv`` (stemmed);
* a phrase: the stemmed words adjacent (``<->``) within ONE weight — A or C — so a phrase never
  matches across the text/tool boundary;
* a prefix ``p``: ``'p':*`` as a raw tsquery against ``tsv_prefix`` (unstemmed);
* terms are ANDed (``&&``, and both vectors must match when both kinds of terms are present).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from mindstore.search import ParsedQuery, word_tokens

__all__ = [
    "CONFIG",
    "MAX_LEXEME_BYTES",
    "SearchSQL",
    "estimated_fraction",
    "index_tokens",
    "search_sql",
    "tsvector_sql",
]

CONFIG: Final = "mindstore_porter"
"""The stemming text search configuration created by migration m002."""

MAX_LEXEME_BYTES: Final = 2046
"""PostgreSQL drops longer words from a tsvector (and rejects them in a tsquery literal)."""

# tsvector values are limited to 1 MiB. Under this many characters of joined tokens a vector
# cannot come near the limit; above it the token stream is cut using a size estimate.
_FAST_PATH_CHARS: Final = 40_000
_VECTOR_BUDGET: Final = 700_000


def tsvector_sql(main: str, secondary: str, config: str = CONFIG) -> str:
    """SQL expression building a stored vector from two text expressions (already tokenised
    with :func:`index_tokens`); ``config`` is CONFIG for ``tsv``, ``'simple'`` for
    ``tsv_prefix``."""
    return (
        f"setweight(to_tsvector('{config}', {main}), 'A')"
        f" || setweight(to_tsvector('{config}', {secondary}), 'C')"
    )


def index_tokens(main: str, secondary: str) -> tuple[str, str]:
    """Tokenise both texts the way the query side does; cap the result below tsvector's limit.

    Only pathological documents (hundreds of thousands of distinct words) are cut: their tail
    is not searchable on PostgreSQL.
    """
    a = word_tokens(main)
    b = word_tokens(secondary)
    ja, jb = " ".join(a), " ".join(b)
    if len(ja) + len(jb) <= _FAST_PATH_CHARS:
        return ja, jb
    budget = [_VECTOR_BUDGET]
    seen: dict[str, int] = {}
    return " ".join(_cap(a, seen, budget)), " ".join(_cap(b, seen, budget))


def _cap(tokens: list[str], seen: dict[str, int], budget: list[int]) -> list[str]:
    out: list[str] = []
    for t in tokens:
        n = seen.get(t)
        if n is None:
            size = len(t.encode())
            # a new lexeme: entry header + text (+ alignment) + one position
            cost = size + 10 if size <= MAX_LEXEME_BYTES else 0
            seen[t] = 1
        else:
            cost = 2 if n < 256 else 0  # PostgreSQL keeps at most 256 positions per lexeme
            seen[t] = n + 1
        budget[0] -= cost
        if budget[0] < 0:
            break
        out.append(t)
    return out


def _quote(token: str) -> str:
    # Tokens are runs of Unicode letters/digits (ParsedQuery's guarantee): no quote, backslash,
    # operator or space can occur, so single quotes make each one a literal lexeme.
    return f"'{token}'"


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchSQL:
    """SQL pieces for one parsed query. Each method returns ``(sql, params)``; the tsquery
    expressions are inlined (not computed once in a CTE) so the planner can constant-fold them
    and estimate their selectivity from the column statistics — a common word is then read with
    a sequential scan, a rare one through the GIN index, as a plain tsvector query would."""

    stem: tuple[str, list[Any]] | None  # tsquery expression for ``tsv`` (words, phrases)
    prefix: tuple[str, list[Any]] | None  # tsquery expression for ``tsv_prefix`` (prefixes)

    def match(self, stem: str, prefix: str) -> tuple[str, list[Any]]:
        """The match condition; ``stem`` and ``prefix`` are the aliases of the tables holding
        ``tsv`` and ``tsv_prefix``."""
        conds: list[str] = []
        params: list[Any] = []
        if self.stem is not None:
            conds.append(f"{stem}.tsv @@ ({self.stem[0]})")
            params += self.stem[1]
        if self.prefix is not None:
            conds.append(f"{prefix}.tsv_prefix @@ ({self.prefix[0]})")
            params += self.prefix[1]
        return " AND ".join(conds), params

    def rank(self, stem: str, prefix: str, normalization: int) -> tuple[str, list[Any]]:
        """The rank expression (aliases as for :meth:`match`)."""
        ranks: list[str] = []
        params: list[Any] = []
        if self.stem is not None:
            ranks.append(f"ts_rank({stem}.tsv, ({self.stem[0]}), {normalization})")
            params += self.stem[1]
        if self.prefix is not None:
            ranks.append(f"ts_rank({prefix}.tsv_prefix, ({self.prefix[0]}), {normalization})")
            params += self.prefix[1]
        return " + ".join(ranks), params


def search_sql(query: ParsedQuery) -> SearchSQL | None:
    """Build the tsqueries for ``query``; None when nothing can match (empty, or a token longer
    than any indexable word), so callers return ``[]`` without asking the server."""
    tokens = [*query.words, *query.prefixes, *(t for p in query.phrases for t in p)]
    if any(len(t.encode()) > MAX_LEXEME_BYTES for t in tokens):
        return None
    terms: list[str] = []
    params: list[Any] = []
    for w in query.words:
        terms.append(f"to_tsquery('{CONFIG}', %s)")
        params.append(_quote(w))
    for phrase in query.phrases:
        terms.append(f"(to_tsquery('{CONFIG}', %s) || to_tsquery('{CONFIG}', %s))")
        params += [_phrase(phrase, "A"), _phrase(phrase, "C")]
    prefixes = [f"{_quote(p)}:*" for p in query.prefixes]
    if not terms and not prefixes:
        return None
    return SearchSQL(
        stem=(" && ".join(terms), params) if terms else None,
        # one literal: ``'a':* & 'b':*`` (tokens are quoted word characters only)
        prefix=("%s::tsquery", [" & ".join(prefixes)]) if prefixes else None,
    )


def _phrase(words: Sequence[str], weight: str) -> str:
    return " <-> ".join(f"{_quote(w)}:{weight}" for w in words)


def estimated_fraction(
    query: ParsedQuery,
    frequencies: Mapping[str, float],
    other: float,
    stem: Callable[[str], str],
) -> float:
    """The fraction of rows the word and phrase terms of ``query`` are expected to match, from
    the ``tsv`` column's statistics (``pg_stats.most_common_elems``: lexeme → fraction of rows
    containing it; ``other`` for a lexeme not listed), the way the planner estimates it: terms
    independent (a product). ``stem`` must stem like the ``mindstore_porter`` dictionary (a
    wrong stem only misjudges a plan, never a result)."""
    fraction = 1.0
    for word in query.words:
        fraction *= frequencies.get(stem(word), other)
    for phrase in query.phrases:
        for word in phrase:
            fraction *= frequencies.get(stem(word), other)
    return fraction
