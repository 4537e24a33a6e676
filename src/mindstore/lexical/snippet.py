"""Search snippets, made in Python from a bounded window of a result's text. Pure.

Both backends call :func:`make_snippet`, so they show the same snippet. The work per result is
bounded whatever the text: at most :data:`MAX_SOURCE` characters of each field are looked at
and at most :data:`MAX_HITS` hits collected, so a 1.7 MB tool output repeating the query word
costs no more than a short message (the FTS5 ``snippet()`` this replaces was quadratic in the
hits of a document).

A snippet is a window of at most :data:`SNIPPET_TOKENS` words (CJK characters count as one
each) of the message's own text — or its tool text when only that matched — chosen to hold the
most distinct query terms (the earliest such window wins); each hit is wrapped in ``[`` ``]``,
and ``…`` marks text cut at either end. A hit is a word whose term is a query word or part of a
phrase, a word starting with a ``prefix*``, or a CJK character of a query's CJK key.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final

from mindstore.lexical.tokens import (
    _APOSTROPHES,
    _ASCII_WORD,
    _CONTRACTIONS,
    MAX_WORD,
    Unit,
    _shorten,
    is_cjk,
    stem,
    units,
)
from mindstore.search import ParsedQuery

__all__ = [
    "MAX_HITS",
    "MAX_SOURCE",
    "SNIPPET_TOKENS",
    "SnippetQuery",
    "deferred",
    "deferred_snippets",
    "make_snippet",
]

SNIPPET_TOKENS: Final = 16
# ASCII text as separators and words (a word at each odd place)
_ASCII_SPLIT: Final = re.compile(f"({_ASCII_WORD.pattern})")
MAX_SOURCE: Final = 10_000
MAX_HITS: Final = 64


@dataclass(frozen=True, slots=True)
class SnippetQuery:
    """A query prepared for snippets: the terms that are hits, the prefixes, and the CJK keys."""

    terms: frozenset[str]
    prefixes: tuple[str, ...]
    cjk: frozenset[str]

    @classmethod
    def from_query(cls, query: ParsedQuery) -> SnippetQuery:
        words = [*query.words, *(t for p in query.phrases for t in p)]
        cjk = frozenset(w for w in words if is_cjk(w[0]))
        return cls(
            terms=frozenset(w for w in words if not is_cjk(w[0])),
            prefixes=query.prefixes,
            cjk=cjk,
        )

    def hit(self, seq: list[Unit], i: int) -> str | None:
        """The query term unit ``i`` of ``seq`` matches, or None."""
        u = seq[i]
        if u.cjk:
            t = u.term
            if t in self.cjk:
                return t
            if i + 1 < len(seq) and seq[i + 1].cjk and t + seq[i + 1].term in self.cjk:
                return t + seq[i + 1].term
            if i > 0 and seq[i - 1].cjk and seq[i - 1].term + t in self.cjk:
                return seq[i - 1].term + t
            return None
        if u.term in self.terms:
            return u.term
        for p in self.prefixes:
            if u.raw.startswith(p):
                return p + "*"
        return None


def make_snippet(query: SnippetQuery, fields: Sequence[str]) -> str:
    """The snippet of the first field (own text, then tool text) with a hit; the start of the
    first non-empty field when none has one (a hit on the context field alone). A field longer
    than :data:`MAX_SOURCE` with no hit in its first MAX_SOURCE characters is looked at further
    on, where a word could be a hit (:func:`_further`)."""
    for text in fields:
        if not text:
            continue
        found = _snippet_of(query, text[:MAX_SOURCE], len(text) > MAX_SOURCE)
        if found is None and len(text) > MAX_SOURCE:
            found = _further(query, text)
        if found is not None:
            return found
    for text in fields:
        if text:
            source = text[:MAX_SOURCE]
            lead: list[Unit] = []
            for u in units(source):
                lead.append(u)
                if len(lead) > SNIPPET_TOKENS:
                    break
            spans = [u.start for u in lead], [u.end for u in lead]
            return _render(source, *spans, [], len(text) > len(source))
    return ""


def _snippet_of(query: SnippetQuery, source: str, cut: bool) -> str | None:
    """The snippet of ``source`` (``cut``: text follows it), or None when it has no hit."""
    hits: list[tuple[int, str]] = []
    if source.isascii() and not query.cjk:
        if "'" not in source and not query.prefixes:
            return _plain_ascii(query, source, cut)
        starts: list[int] = []
        ends: list[int] = []
        _ascii_hits(query, source, starts, ends, hits)
        return _render(source, starts, ends, hits, cut) if hits else None
    seq: list[Unit] = []
    for u in units(source):
        seq.append(u)
        if len(seq) >= 2:
            _collect(query, seq, len(seq) - 2, hits)
            if len(hits) >= MAX_HITS and len(seq) > hits[-1][0] + SNIPPET_TOKENS:
                break
    else:
        if seq:
            _collect(query, seq, len(seq) - 1, hits)
    if not hits:
        return None
    return _render(source, [u.start for u in seq], [u.end for u in seq], hits, cut)


FURTHER_TRIES: Final = 8
"""Places past the first :data:`MAX_SOURCE` characters :func:`_further` looks at."""
_LEAD: Final = 200  # characters shown before a hit found further on, at most


def _further(query: SnippetQuery, text: str) -> str | None:
    """The snippet around the first hit past the first :data:`MAX_SOURCE` characters of a
    long ``text`` (a tool output that matched near its end showed its beginning, without the
    hit), or None. Places where a word could be a hit are found by one regular expression in
    C (:func:`_candidates`); a window of MAX_SOURCE characters from a little before each
    (at most :data:`FURTHER_TRIES`) is made into a snippet as usual, so a long text costs a
    scan and a few windows, whatever its length."""
    pattern = _candidates(query.terms, query.prefixes, query.cjk)
    if pattern is None:
        return None
    pos = MAX_SOURCE - _LEAD  # (a word cut at the first window's end is looked at again)
    for _ in range(FURTHER_TRIES):
        m = pattern.search(text, pos)
        if m is None:
            return None
        at = m.start()
        space = text.find(" ", max(0, at - _LEAD), at)
        begin = space + 1 if space >= 0 else at
        while begin > max(0, at - SNIPPET_TOKENS) and is_cjk(text[begin - 1]):
            begin -= 1  # (CJK text has no spaces: a few characters before the hit)
        chunk = text[begin : begin + MAX_SOURCE]
        found = _snippet_of(query, chunk, begin + len(chunk) < len(text))
        if found is not None:
            return found if found.startswith("…") else "…" + found
        pos = max(m.end(), begin + len(chunk) - _LEAD)  # (that window had no hit)
    return None


@functools.lru_cache(maxsize=256)
def _candidates(
    terms: frozenset[str], prefixes: tuple[str, ...], cjk: frozenset[str]
) -> re.Pattern[str] | None:
    """Where a word may be a hit: a word beginning with a term's stem less its last letter (a
    Porter stem is a prefix of its word but for its last letter: ``happi`` ← ``happy``,
    ``hope`` ← ``hoping``; a stem of one or two letters is the whole word's beginning), or with
    a prefix; a CJK key anywhere. Case-insensitive on the original text, so offsets are the
    text's. A word whose letters fold (``Việt`` for ``viet``) is not found this way: its
    snippet stays the text's beginning."""
    heads = sorted({t[:-1] if len(t) >= 3 else t for t in terms if t.isalnum()} | set(prefixes))
    parts = []
    if heads:
        parts.append(r"(?<!\w)(?:" + "|".join(map(re.escape, heads)) + ")")
    if cjk:
        parts.append("|".join(map(re.escape, sorted(cjk))))
    return re.compile("|".join(parts), re.IGNORECASE) if parts else None


def _plain_ascii(query: SnippetQuery, source: str, cut: bool) -> str | None:
    """The snippet of an ASCII text without apostrophes for a query without prefixes (the
    common case), or None when it has no hit: what :func:`_ascii_hits` and :func:`_render`
    make, with each step one call into C rather than a Python loop over the words. The text
    is split once into separators and words (``parts``: words at odd places); the words are
    stemmed in one ``map``; the hits are found by term with ``list.index`` (a query has a few
    terms, a text many words); the window's spans are sums of the parts' lengths. A snippet of
    a 15-40-word message: 25 → 21 µs against the former one pass (findall, a Python loop
    over the stems, finditer for the window's spans), itself a quarter faster than the loop
    of :func:`_ascii_hits`."""
    lower = source.lower()
    parts = _ASCII_SPLIT.split(lower)
    words = parts[1::2]
    keys = list(map(_shorten, words)) if max(map(len, words), default=0) > MAX_WORD else words
    stems = list(map(stem, keys))
    present = query.terms.intersection(stems)
    if not present:
        return None
    hits: list[tuple[int, str]] = []
    for term in present:
        i = -1
        for _ in range(stems.count(term)):
            i = stems.index(term, i + 1)
            hits.append((i, term))
    hits.sort()
    n = len(words)
    if len(hits) >= MAX_HITS:  # _ascii_hits stops SNIPPET_TOKENS words after its last hit
        hits = hits[:MAX_HITS]
        n = min(n, hits[-1][0] + SNIPPET_TOKENS + 1)
    start, end = _window(n, hits)
    # word i is parts[2i + 1]: it starts after the lengths of parts[:2i + 1]
    offsets = list(
        itertools.accumulate(
            map(len, parts[2 * start + 1 : 2 * end]), initial=sum(map(len, parts[: 2 * start + 1]))
        )
    )
    return _compose(source, offsets[0::2], offsets[1::2], hits, start, end, end < n or cut, start)


def _ascii_hits(
    query: SnippetQuery,
    source: str,
    starts: list[int],
    ends: list[int],
    hits: list[tuple[int, str]],
) -> None:
    """The spans of :func:`units` and the hits for ASCII text: the same words (contractions
    dropped), a hit test by stem or prefix. (The text is lowered once, ASCII keeps its
    offsets; :func:`stem` is cached; no unit objects: 43 → 21 µs a snippet of a 40-word
    message.)"""
    terms, prefixes = query.terms, query.prefixes
    add_start, add_end = starts.append, ends.append
    prev_end = -2
    n_hits = 0
    for m in _ASCII_WORD.finditer(source.lower()):
        begin, finish = m.span()
        raw = m.group()
        if (
            begin == prev_end + 1
            and source[prev_end] in _APOSTROPHES
            and len(raw) <= 2
            and raw in _CONTRACTIONS
        ):
            prev_end = finish
            continue
        prev_end = finish
        if len(raw) > MAX_WORD:
            raw = _shorten(raw)
        term = stem(raw)
        add_start(begin)
        add_end(finish)
        if n_hits < MAX_HITS:
            if term in terms:
                hits.append((len(starts) - 1, term))
                n_hits += 1
            elif prefixes:
                for p in prefixes:
                    if raw.startswith(p):
                        hits.append((len(starts) - 1, p + "*"))
                        n_hits += 1
                        break
        elif len(starts) > hits[-1][0] + SNIPPET_TOKENS:
            return


def _collect(query: SnippetQuery, seq: list[Unit], i: int, hits: list[tuple[int, str]]) -> None:
    if len(hits) < MAX_HITS:
        term = query.hit(seq, i)
        if term is not None:
            hits.append((i, term))


def _render(
    source: str, starts: list[int], ends: list[int], hits: list[tuple[int, str]], cut: bool
) -> str:
    """The snippet: ``starts``/``ends`` are the units' spans in ``source``."""
    n = len(starts)
    if not n:
        return source[:200]
    start, end = _window(n, hits)
    return _compose(source, starts, ends, hits, start, end, end < n or cut)


def _window(n: int, hits: list[tuple[int, str]]) -> tuple[int, int]:
    """The units ``[start, end)`` a snippet shows of ``n``: the window (of SNIPPET_TOKENS
    units) starting at a hit, or a few units before it, that holds the most distinct terms;
    earliest wins."""
    best_start, best_score = 0, -1
    lead = 2  # show a little text before the first hit
    for k, (i, _) in enumerate(hits[:64]):
        start = max(0, i - lead)
        end = start + SNIPPET_TOKENS
        distinct = {t for j, t in hits[k:] if j < end}
        distinct |= {t for j, t in hits[max(0, k - lead) : k] if j >= start}
        if len(distinct) > best_score:
            best_start, best_score = start, len(distinct)
    start = min(best_start, max(0, n - SNIPPET_TOKENS))
    return start, min(n, start + SNIPPET_TOKENS)


def _compose(
    source: str,
    starts: list[int],
    ends: list[int],
    hits: list[tuple[int, str]],
    start: int,
    end: int,
    cut_after: bool,
    first: int = 0,
) -> str:
    """Units ``[start, end)`` of ``source`` with their hits bracketed: ``starts[i - first]``
    and ``ends[i - first]`` are unit ``i``'s span; ``cut_after`` when text follows that is
    not shown. The text between units is kept as it is, so only the hits are visited."""
    marked = sorted({i for i, _ in hits if start <= i < end})
    out: list[str] = ["…"] if start > 0 else []
    pos = starts[start - first]
    k = 0
    while k < len(marked):
        prev = pos
        i = j = marked[k]
        k += 1
        # adjacent marked units that share the same span (a CJK run split from one word)
        while k < len(marked) and marked[k] == j + 1 and starts[j + 1 - first] == ends[j - first]:
            j += 1
            k += 1
        begin, pos = starts[i - first], ends[j - first]
        out += (source[prev:begin], "[", source[begin:pos], "]")
    last = ends[end - 1 - first]
    out.append(source[pos:last])
    if cut_after:
        # keep the text up to the end of the window's last unit; mark the cut
        out.append("…")
    else:
        out.append(source[last:])
    return "".join(out)


Deferred = dict[tuple[str, str], Callable[[], str]]
_DEFERRED: ContextVar[Deferred | None] = ContextVar("mindstore_deferred_snippets", default=None)


@contextmanager
def deferred_snippets() -> Iterator[Deferred]:
    """Inside the block, message search results are built with an empty snippet, and the work
    that makes each one is kept in the yielded dict under ``(session_id, message_id)``: a
    hybrid search asks its lexical half for three times the results it returns, and makes the
    snippets of those it returns only (measured: 20 snippets were ~3 ms of a 100,000-message
    hybrid search)."""
    out: Deferred = {}
    token = _DEFERRED.set(out)
    try:
        yield out
    finally:
        _DEFERRED.reset(token)


def deferred() -> Deferred | None:
    """The dict of the enclosing :func:`deferred_snippets` block, or None outside one."""
    return _DEFERRED.get()
