"""Search snippets for the PostgreSQL backend, made in Python from the rows a search returns.

Pure: text in, snippet out. Why not ``ts_headline``: it re-parses and re-stems the whole text of
every returned row on the server, which cost ~45 µs a row — for a rare word, 20 snippets took as
long as the whole search. Here the query terms are stemmed once, candidate tokens are found with
one compiled regular expression (in C), and only those are stemmed (cached), so a short message
costs a few microseconds.

The snippet follows SQLite's FTS5 ``snippet(…, '[', ']', '…', 16)`` so both backends answer
alike: the text column with the best window wins; a window of at most 16 tokens is scored 1000
for each query term it contains plus 1 for each repeat, and centred on its hits; each hit —
a word whose Porter stem equals a query word's, a run of tokens equal to a quoted phrase, a token
starting with a ``prefix*`` — is wrapped in ``[`` ``]``; ``…`` marks text cut at either end; the
text between tokens is kept as written. (FTS5 also prefers windows that start a sentence; this
does not.)

Stems come from the Snowball ``porter`` stemmer (``snowballstemmer``), the same algorithm as the
``mindstore_porter`` dictionary on the server and SQLite's ``porter`` tokenizer. Tokens are the
ones every backend indexes (:func:`mindstore.search.word_tokens`: runs of letters and digits,
lower-cased, Latin diacritics folded).
"""

from __future__ import annotations

import bisect
import functools
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from mindstore.search import ParsedQuery, fold_token

try:
    import snowballstemmer

    AVAILABLE = True
except ImportError:  # pragma: no cover - exercised by the missing-extra meta test
    AVAILABLE = False  # PostgresStore.open names the missing extra

__all__ = ["AVAILABLE", "SNIPPET_TOKENS", "SnippetQuery", "make_snippet", "stem"]

SNIPPET_TOKENS: Final = 16
"""Tokens in a snippet window (as SQLite's ``snippet(…, 16)``)."""

MAX_SNIPPET_SOURCE: Final = 100_000
"""Characters of a column looked at for a snippet: a hit further in is not shown."""

MAX_HITS: Final = 256
"""Hits of a column looked at: a text repeating the query words thousands of times costs no more
than this many."""

MAX_WINDOWS: Final = 64
"""Windows scored, one per hit (FTS5 scores all): the snippet's window starts near one of a
column's first 64 hits."""

_WORD: Final = re.compile(r"[^\W_]+")
_local = threading.local()


def stem(token: str) -> str:
    """The Porter stem of a lower-cased, folded token. A token longer than PostgreSQL indexes
    (2,046 bytes) is returned as it is: it never matches, and stemming it would take long."""
    return token if len(token) > _MAX_STEMMED else _stem(token)


_MAX_STEMMED: Final = 2046


@functools.lru_cache(maxsize=65_536)
def _stem(token: str) -> str:
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:  # Snowball stemmer objects keep state: one per thread
        stemmer = _local.stemmer = snowballstemmer.stemmer("porter")
    result: str = stemmer.stemWord(token)
    return result


def _candidate_prefix(stemmed: str) -> str:
    # Porter only rewrites the end of a word: the stem is a prefix of the word except that its
    # last character may be changed or added (``happy`` → ``happi``, ``hoping`` → ``hope``).
    # Up to three leading characters of the stem therefore begin every word that has it.
    return stemmed[: max(1, min(len(stemmed) - 1, 3))]


@dataclass(frozen=True, slots=True)
class SnippetQuery:
    """A parsed query prepared for snippets: one term per word, phrase and prefix (FTS5's
    "phrases"), with the stems computed once and the lower-case strings that begin every token
    that could be a hit."""

    terms: tuple[tuple[str, tuple[str, ...]], ...]  # ("word"|"phrase"|"prefix", stems/prefix)
    starts: tuple[str, ...]
    single: tuple[bool, str, str] | None = (
        None  # one ASCII word or prefix: (prefix?, target, start)
    )

    @classmethod
    def from_query(cls, query: ParsedQuery) -> SnippetQuery:
        terms: list[tuple[str, tuple[str, ...]]] = []
        terms += [("word", (stem(w),)) for w in query.words]
        terms += [("phrase", tuple(stem(w) for w in p)) for p in query.phrases]
        terms += [("prefix", (p,)) for p in query.prefixes]
        starts = {t[0] if kind == "prefix" else _candidate_prefix(t[0]) for kind, t in terms}
        single = None
        if len(terms) == 1 and terms[0][0] != "phrase" and terms[0][1][0].isascii():
            kind, (target,) = terms[0]
            single = (kind == "prefix", target, next(iter(starts)))
        return cls(terms=tuple(terms), starts=tuple(sorted(starts)), single=single)


def make_snippet(query: SnippetQuery, columns: Sequence[str]) -> str:
    """The snippet of the best column of one row (FTS5's ``snippet`` with column -1)."""
    if query.single is not None:
        fast = _single_term(query.single, columns)
        if fast is not None:
            return fast
    # score, column, the window's first token and (when known) the character it begins at
    best: tuple[int, _Column, int, int] | None = None
    for raw in columns:
        col = _Column.scan(query, raw[:MAX_SNIPPET_SOURCE])
        if col is None:
            continue
        hits, size = col.hits, col.size
        ends = _sentence_starts(col.text, hits[-1][3]) if size > SNIPPET_TOKENS else []
        for i, _, _, a, _ in hits[:MAX_WINDOWS]:
            score, start = _score(hits, i, size)
            if best is None or score > best[0]:
                best = (score, col, start, -1)
            # like FTS5: also try the window that starts the hit's sentence (+100, +120 for
            # the text's start), so a snippet rather begins a sentence than cuts one
            if size > SNIPPET_TOKENS:
                sentence, at = _sentence_before(col.text, col.mask, col.lead, a, i, ends)
                if sentence < i:
                    score = _score(hits, sentence, size)[0] + (120 if sentence == 0 else 100)
                    if score > best[0]:
                        best = (score, col, sentence, at)
    if best is None:  # nothing to mark (a hit past MAX_SNIPPET_SOURCE): the first column's start
        return _Column.of(columns[0][:MAX_SNIPPET_SOURCE]).render(0) if columns else ""
    return best[1].render(best[2], best[3])


def _single_term(single: tuple[bool, str, str], columns: Sequence[str]) -> str | None:
    """The snippet for a one-word (or one-prefix) query when the best column is ASCII text with
    exactly one hit — the usual search result — computed inline. None: use the general path,
    which gives the same result (a unit test checks) but costs ~5 µs more a row: 0.1 ms of a
    20-row search, measured as 2.0-2.3x instead of 1.6-1.8x a plain tsvector query. It shares
    the sentence rule, the token walk and the window patterns with the general path."""
    prefix, target, start_str = single
    # score, text, mask, hit start and end, lead, size, hit token, window token and character
    best: tuple[int, str, bytes, int, int, int, int, int, int, int] | None = None
    for raw in columns:
        if not raw:
            continue
        text = raw[:MAX_SNIPPET_SOURCE]
        if not text.isascii():
            return None
        low = text.lower()
        p = low.find(start_str)
        mask = b""
        hit: tuple[int, int] | None = None
        while p >= 0:
            mask = mask or text.encode("ascii").translate(_MASK)
            e = mask.find(b" ", p)
            e = len(mask) if e < 0 else e
            if p > 0 and mask[p - 1] == 97:  # inside a token: go on after it
                p = low.find(start_str, e)
                continue
            tok = low[p:e]
            if tok.startswith(target) if prefix else stem(tok) == target:
                if hit is not None:
                    return None  # two hits: the general path scores the windows
                hit = (p, e)
            p = low.find(start_str, e)
        if hit is None:
            continue
        a, e = hit
        lead = 1 if mask[:1] == b"a" else 0
        size = mask.count(b" a") + lead
        i = lead + mask.count(b" a", 0, a + 1) - 1
        # FTS5 scores the window centred on the hit 1000, and the one that starts the hit's
        # sentence 1000 + 100 (+120 at the text's start) when the hit is in it
        score, start, first = 1000, min(i - (SNIPPET_TOKENS - 1) // 2, size - SNIPPET_TOKENS), -1
        if size > SNIPPET_TOKENS:
            sentence, at = _sentence_before(text, mask, lead, a, i)
            if sentence < i < sentence + SNIPPET_TOKENS:
                score += 120 if sentence == 0 else 100
                start, first = sentence, at
        if best is None or score > best[0]:
            best = (score, text, mask, a, e, lead, size, i, start, first)
    if best is None:
        return None
    _, text, mask, a, e, lead, size, i, start, first = best
    if start <= 0:
        start, first = 0, (0 if lead else mask.find(b"a"))
    elif first < 0:  # walk back from the hit to the window's first token
        first = _walk(mask, a, start - i)
    stop = min(start + SNIPPET_TOKENS, size)
    match = _RUNS[stop - start - 1].match(mask, first)
    assert match is not None
    end = len(text) if stop == size else match.end()
    return "".join(
        (
            "…" if start else "",
            text[first if start else 0 : a],
            "[",
            text[a:e],
            "]",
            text[e:end],
            "…" if stop < size else "",
        )
    )


def _sentence_before(
    text: str, mask: bytes, lead: int, start: int, index: int, ends: list[int] | None = None
) -> tuple[int, int]:
    """(index, character) of the last token at or before the token ``index`` (which begins at
    character ``start``) that begins a sentence: the first token, or one that follows ``.`` or
    ``:`` and white space (FTS5's rule). ``ends``: every sentence start of the text (see
    :func:`_sentence_starts`), when the caller asks for many hits."""
    if ends is None:
        p = max(text.rfind(".", 0, start), text.rfind(":", 0, start))
        if p < 0:
            return 0, (0 if lead else mask.find(b"a"))
        m = _SENTENCE_END.match(text, p)
        if m is not None and m.end() <= start:
            at = m.end()
        else:  # the nearest "." or ":" starts no sentence: every one up to ``start`` (in C)
            found = _sentence_starts(text, start)
            if not found:
                return 0, (0 if lead else mask.find(b"a"))
            at = found[-1]
    else:
        j = bisect.bisect_right(ends, start) - 1
        if j < 0:
            return 0, (0 if lead else mask.find(b"a"))
        at = ends[j]
    # tokens beginning in [at, start] counted back from the hit's own index
    return index - mask.count(b" a", at - 1, start + 1) + 1, at


def _sentence_starts(text: str, upto: int) -> list[int]:
    """Where every sentence after the first begins, up to character ``upto``."""
    return [m.end() for m in _SENTENCE_END.finditer(text, 0, upto + 1) if m.end() <= upto]


_Hit = tuple[int, int, int, int, int]  # first token, token count, term number, start, end char


def _score(hits: list[_Hit], first: int, size: int) -> tuple[int, int]:
    """FTS5's score of the window starting at token ``first`` (1000 for each term in it, 1 for
    each repeat), and where to start a window so that those hits are centred."""
    if len(hits) == 1:  # the usual case, without the loop
        i, n = hits[0][:2]
        if not first <= i < first + SNIPPET_TOKENS:
            return 0, 0
        score, lo, hi = 1000, i, i + n
    else:
        score, lo, hi = _window(hits, first)
    spare = SNIPPET_TOKENS - (hi - lo)  # negative when a phrase runs past the window
    start = lo - (spare // 2 if spare >= 0 else -(-spare // 2))  # C division, as in FTS5
    if start + SNIPPET_TOKENS > size:
        start = size - SNIPPET_TOKENS
    return score, max(start, 0)


def _window(hits: list[_Hit], first: int) -> tuple[int, int, int]:
    """Score, first and end token of the hits in the window starting at token ``first``."""
    seen: set[int] = set()
    score = 0
    lo = hi = -1
    for k in range(bisect.bisect_left(hits, (first,)), len(hits)):
        i, n, term, _, _ = hits[k]
        if i >= first + SNIPPET_TOKENS:
            break
        score += 1 if term in seen else 1000
        seen.add(term)
        if lo < 0:
            lo = i
        hi = i + n
    return score, lo, hi


# Text is looked at through a mask of the same length — each character of a token → "a", any
# other → " " — so counting, finding and skipping tokens are bytes.count/find/rfind and short
# regular-expression calls (C) instead of a tokenizer walked from Python: a few microseconds
# for a 40-word message. For ASCII text the mask is one bytes.translate.
_MASK: Final = bytes(ord("a") if chr(c).isalnum() else ord(" ") for c in range(256))
_RUNS: Final = [re.compile(rb"a+(?: +a+){%d}" % k) for k in range(SNIPPET_TOKENS)]
_SENTENCE_END: Final = re.compile(r"[.:][ \t\n\r]+(?=[^\W_])")


class _Column:
    """One text column seen through its token mask, with the hits of a query."""

    __slots__ = ("hits", "lead", "mask", "size", "text")

    def __init__(self, text: str, mask: bytes) -> None:
        self.text = text
        self.mask = mask
        self.lead = 1 if mask[:1] == b"a" else 0  # the text starts with a token
        self.size = mask.count(b" a") + self.lead
        self.hits: list[_Hit] = []

    @classmethod
    def of(cls, text: str) -> _Column:
        return cls(text, cls._mask_of(text)[0])

    @staticmethod
    def _mask_of(text: str) -> tuple[bytes, dict[int, str]]:
        """The mask, and (non-ASCII text) each token's folded lower-case form by start."""
        if text.isascii():
            return text.encode("ascii").translate(_MASK), {}
        mask = bytearray(b" ") * len(text)
        tokens: dict[int, str] = {}
        for m in _WORD.finditer(text):
            a, e = m.span()
            mask[a:e] = b"a" * (e - a)
            tokens[a] = fold_token(m.group().lower())
        return bytes(mask), tokens

    @classmethod
    def scan(cls, query: SnippetQuery, text: str) -> _Column | None:
        """The column with its hits (the first MAX_HITS), or None when ``query`` has none."""
        if not text:
            return None
        starts = query.starts
        if text.isascii():
            low = text.lower()
            if not any(s in low for s in starts):
                return None
            col = cls(text, text.encode("ascii").translate(_MASK))
            mask = col.mask
            found: set[int] = set()
            for s in starts:
                p = low.find(s)
                while p >= 0:
                    if p > 0 and mask[p - 1] == 97:  # inside a token: go on after it
                        e = mask.find(b" ", p)
                        p = -1 if e < 0 else low.find(s, e)
                        continue
                    found.add(p)
                    p = low.find(s, p + 1)
            token: Callable[[int, int], str] = lambda a, e: low[a:e]  # noqa: E731
        else:
            mask, folded = cls._mask_of(text)
            col = cls(text, mask)
            found = {a for a, t in folded.items() if t.startswith(starts)}
            token = lambda a, e: folded[a]  # noqa: E731
        hits: list[_Hit] = []
        index, at = -1, -1  # the last token index computed and where that token begins
        for a in sorted(found):
            matched = col._match(query, a, token)
            if not matched:
                continue
            # token indexes counted from the previous hit, not from the start: linear overall
            index = (
                col.lead + mask.count(b" a", 0, a + 1) - 1
                if index < 0
                else index + mask.count(b" a", at, a + 1)
            )
            at = a
            hits += [(index, *h) for h in matched]
            if len(hits) >= MAX_HITS:
                break
        if not hits:
            return None
        col.hits = sorted(hits)
        return col

    def _match(
        self, query: SnippetQuery, a: int, token: Callable[[int, int], str]
    ) -> list[tuple[int, int, int, int]]:
        """The terms matching at the token that begins at ``a``: (tokens, term, start, end)."""
        mask = self.mask
        e = mask.find(b" ", a)
        e = len(mask) if e < 0 else e
        tok = token(a, e)
        stemmed = ""
        out: list[tuple[int, int, int, int]] = []
        for n, (kind, parts) in enumerate(query.terms):
            if kind == "prefix":
                if tok.startswith(parts[0]):
                    out.append((1, n, a, e))
                continue
            stemmed = stemmed or stem(tok)
            if stemmed != parts[0]:
                continue
            pos, end = a, e
            for part in parts[1:]:  # the rest of a phrase: the following tokens
                pos = mask.find(b" a", pos) + 1
                if pos == 0:
                    break
                end = mask.find(b" ", pos)
                end = len(mask) if end < 0 else end
                if stem(token(pos, end)) != part:
                    break
            else:
                out.append((len(parts), n, a, end))
        return out

    # ---- tokens -----------------------------------------------------------------------------
    def start_of(self, index: int) -> int:
        """Character where token ``index`` begins, walked to from the nearest hit."""
        mask = self.mask
        if index == 0:
            return 0 if self.lead else mask.find(b"a")
        i, pos = _nearest(self.hits, index)
        return _walk(mask, pos, index - i)

    # ---- output -------------------------------------------------------------------------------
    def render(self, start: int, first: int = -1) -> str:
        """Tokens [start, start + SNIPPET_TOKENS) with hits in brackets; ``…`` where cut.
        ``first``: the character token ``start`` begins at, when the caller knows it."""
        text, size = self.text, self.size
        if size == 0:
            return text
        stop = min(start + SNIPPET_TOKENS, size)  # tokens [start, stop)
        if first < 0:
            first = self.start_of(start)
        match = _RUNS[stop - start - 1].match(self.mask, first)
        assert match is not None
        last = match.end()
        out = ["…"] if start > 0 else []
        pos = first if start > 0 else 0
        for i, n, _, a, e in self.hits:
            if i + n <= start or i >= stop:
                continue
            a, e = max(a, first), min(e, last)  # a phrase cut by the window: its part inside
            if a < pos:  # overlaps the previous mark: extend it
                if e > pos:
                    out[-1] = out[-1][:-1] + text[pos:e] + "]"
                    pos = e
                continue
            out += (text[pos:a], "[", text[a:e], "]")
            pos = e
        out.append(text[pos : len(text) if stop == size else last])
        if stop < size:
            out.append("…")
        return "".join(out)


def _nearest(hits: list[_Hit], index: int) -> tuple[int, int]:
    """(token, character) of the hit nearest to token ``index`` (``hits`` are sorted)."""
    k = min(bisect.bisect_left(hits, (index,)), len(hits) - 1)
    if k > 0 and index - hits[k - 1][0] < abs(hits[k][0] - index):
        k -= 1
    return hits[k][0], hits[k][3]


def _walk(mask: bytes, pos: int, steps: int) -> int:
    """The start of the token ``steps`` tokens after (negative: before) the one at ``pos``;
    each step is one C call."""
    for _ in range(steps):
        pos = mask.find(b" a", pos) + 1
    for _ in range(-steps):
        pos = mask.rfind(b" a", 0, pos) + 1  # (-1 + 1: the text's first character)
    return pos
