"""Full-text search pieces of the PostgreSQL backend. Pure: builds SQL fragments and parameters.

The stored ``tsvector`` (see migration m002) holds, for one document with a main text and a
secondary text (messages: text/reasoning and tool text; entries: key+content and description):

* ``mindstore_porter`` lexemes (original Porter stemmer, no stop words — what SQLite's FTS5
  ``porter`` tokenizer produces) of the main text at weight A and of the secondary text at
  weight C (words and phrases);
* ``simple`` lexemes (lower-cased, unstemmed) of the main text at weight B and of the secondary
  text at weight D (prefixes as typed, stop words).

Both sides see the same tokens: the texts are split with :func:`mindstore.search.word_tokens`
and re-joined with spaces before ``to_tsvector``, so PostgreSQL's own parser (which treats
e-mails, URLs, hyphenated words and numbers specially) cannot tokenise differently from the
query side or from the SQLite backend.

Query side — only :class:`~mindstore.search.ParsedQuery` tokens (nothing but word characters)
ever reach a tsquery, always quoted, always as bound parameters:

* a word ``w``: ``to_tsquery('mindstore_porter', 'w')`` (stemmed);
* a phrase: the stemmed words adjacent (``<->``) within ONE weight — A or C — so a phrase never
  matches across the text/tool boundary or the stemmed/unstemmed copies;
* a prefix ``p``: ``'p':*`` as a raw tsquery, unstemmed;
* terms are ANDed (``&&``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from mindstore.search import ParsedQuery, word_tokens

__all__ = [
    "CONFIG",
    "MAX_LEXEME_BYTES",
    "index_tokens",
    "tsquery_sql",
    "tsvector_sql",
]

CONFIG: Final = "mindstore_porter"
"""The stemming text search configuration created by migration m002."""

MAX_LEXEME_BYTES: Final = 2046
"""PostgreSQL drops longer words from a tsvector (and rejects them in a tsquery literal)."""

# tsvector values are limited to 1 MiB. Under this many characters of joined tokens the vector
# (four copies at most: stemmed/simple x main/secondary) cannot come near the limit; above it
# the token stream is cut using a size estimate.
_FAST_PATH_CHARS: Final = 40_000
_VECTOR_BUDGET: Final = 700_000


def tsvector_sql(main: str, secondary: str) -> str:
    """SQL expression building the stored vector from two text expressions (already tokenised
    with :func:`index_tokens`)."""
    return (
        f"setweight(to_tsvector('{CONFIG}', {main}), 'A')"
        f" || setweight(to_tsvector('{CONFIG}', {secondary}), 'C')"
        f" || setweight(to_tsvector('simple', {main}), 'B')"
        f" || setweight(to_tsvector('simple', {secondary}), 'D')"
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
            # a new lexeme in both configs: entry header + text (+ alignment) + one position
            cost = 2 * (size + 10) if size <= MAX_LEXEME_BYTES else 0
            seen[t] = 1
        else:
            cost = 4 if n < 256 else 0  # PostgreSQL keeps at most 256 positions per lexeme
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


def tsquery_sql(query: ParsedQuery) -> tuple[str, list[Any]] | None:
    """A tsquery SQL expression (with ``%s`` placeholders) and its parameters.

    Returns None when nothing can match (a token longer than any indexable word), so callers
    return ``[]`` without asking the server.
    """
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
    for p in query.prefixes:
        terms.append("%s::tsquery")
        params.append(f"{_quote(p)}:*")
    if not terms:
        return None
    return " && ".join(terms), params


def _phrase(words: Sequence[str], weight: str) -> str:
    return " <-> ".join(f"{_quote(w)}:{weight}" for w in words)
