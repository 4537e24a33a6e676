"""The tokenizer every backend indexes and queries with. Pure and deterministic.

A text becomes a sequence of *units*:

* a word: a run of Unicode letters, digits, combining marks and private-use characters, after
  NFKC normalisation (``⁵`` → ``5``, full-width → ASCII) and case folding; the diacritics of
  Latin letters are removed (``Hồ`` → ``ho``, ``café`` → ``cafe``); possessives and
  contractions are folded (``Dave's`` → ``dave``, ``it's`` → ``it``: the ``'s`` is dropped, so a
  stray ``s`` never becomes a word); a word is stemmed with Snowball's English stemmer (Porter2)
  into its *term* (``deploying``, ``deployed``, ``deployment`` → ``deploy``; the original
  Porter stemmer made ``deploi`` of the first two, so "deploy" missed "deployment");
* a CJK character (Han, kana, Hangul): one unit each. Such text has no spaces between words, so
  the index holds every character (unigram) and every pair of adjacent characters (bigram) of a
  CJK run: ``咖啡`` is a key of ``我喜欢喝咖啡``, ``東`` too.

Words longer than :data:`MAX_WORD` characters are shortened to a fixed-size key (their first
characters and a hash), identically on both sides, so even a 3,000-letter word is findable and
no index key exceeds a backend's limit.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
import threading
import unicodedata
from collections.abc import Iterator
from typing import Final, NamedTuple

import snowballstemmer

__all__ = [
    "MAX_WORD",
    "Unit",
    "ascii_words",
    "fold_word",
    "is_cjk",
    "stem",
    "units",
]

MAX_WORD: Final = 64
"""Characters of a word kept as they are; longer words become ``first 48 + '#' + hash``."""

_ASCII_WORD: Final = re.compile(r"[A-Za-z0-9]+")
# In ASCII text: a contraction ending right after an apostrophe that follows a word character
# (what :func:`units` skips), as a pattern.
_ASCII_CONTRACTION: Final = re.compile(r"(?<=[A-Za-z0-9])'(?i:s|t|re|ve|ll|d|m)(?![A-Za-z0-9])")
_APOSTROPHES: Final = frozenset("'’ʼ")
# Endings of possessives and contractions: after an apostrophe that follows a word character,
# these are not words ("Dave's" is "Dave", "don't" is "don").
_CONTRACTIONS: Final = frozenset({"s", "t", "re", "ve", "ll", "d", "m"})

_local = threading.local()


class Unit(NamedTuple):
    """One unit of a text: ``raw`` is the folded word as written (what ``prefix*`` matches),
    ``term`` its stem (what words and phrases match); ``cjk`` marks one CJK character (then
    ``raw == term``); ``start``/``end`` are character offsets in the text. (A named tuple: a
    frozen dataclass's constructor was a third of indexing a message.)"""

    raw: str
    term: str
    cjk: bool
    start: int
    end: int


def is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return (
        0x4E00 <= cp <= 0x9FFF  # CJK unified ideographs
        or 0x3400 <= cp <= 0x4DBF  # extension A
        or 0x20000 <= cp <= 0x3FFFF  # extensions B-H
        or 0xF900 <= cp <= 0xFAFF  # compatibility ideographs
        or 0x3040 <= cp <= 0x30FF  # hiragana, katakana
        or 0x31F0 <= cp <= 0x31FF  # katakana extensions
        or 0xAC00 <= cp <= 0xD7AF  # Hangul syllables
        or 0x1100 <= cp <= 0x11FF  # Hangul jamo
        or 0x3130 <= cp <= 0x318F  # Hangul compatibility jamo
        or 0xFF66 <= cp <= 0xFF9F  # half-width katakana
        or cp == 0x3005  # 々 iteration mark
    )


@functools.lru_cache(maxsize=1)
def _word_pattern() -> re.Pattern[str]:
    """A run of word characters: letters, digits (``\\w`` without ``_``), combining marks and
    private-use characters (which ``\\w`` leaves out). Built once, on the first non-ASCII text."""
    extra: list[tuple[int, int]] = []
    start = -1
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:
            inside = False
        else:
            cat = unicodedata.category(chr(cp))
            inside = cat[0] == "M" or cat == "Co"
        if inside and start < 0:
            start = cp
        elif not inside and start >= 0:
            extra.append((start, cp - 1))
            start = -1
    if start >= 0:
        extra.append((start, sys.maxunicode))
    cls = "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in extra)
    return re.compile(rf"(?:[^\W_]|[{cls}])+")


def units(text: str) -> Iterator[Unit]:
    """The units of ``text`` in order (see the module docstring); offsets index ``text``."""
    ascii_text = text.isascii()
    pattern = _ASCII_WORD if ascii_text else _word_pattern()
    prev_end = -2
    for m in pattern.finditer(text):
        begin, finish = m.span()
        run = m.group()
        if (
            begin == prev_end + 1
            and text[prev_end] in _APOSTROPHES
            and len(run) <= 2
            and run.lower() in _CONTRACTIONS
        ):
            prev_end = finish
            continue
        prev_end = finish
        if ascii_text or run.isascii():
            raw = run.lower()
            if len(raw) > MAX_WORD:
                raw = _shorten(raw)
            yield Unit(raw, stem(raw), False, begin, finish)
            continue
        yield from _non_ascii_units(run, begin, finish)


def ascii_words(text: str) -> list[str]:
    """``[u.raw for u in units(text)]`` for an ASCII ``text``, without building units (the
    common case of indexing a message, several times faster)."""
    if "'" in text:
        text = _ASCII_CONTRACTION.sub(" ", text)
    out = _ASCII_WORD.findall(text.lower())
    if any(len(w) > MAX_WORD for w in out):
        out = [_shorten(w) for w in out]
    return out


def _non_ascii_units(run: str, begin: int, finish: int) -> Iterator[Unit]:
    norm = "".join(unicodedata.normalize("NFKC", run).casefold().split())
    if not norm:
        return
    exact = len(norm) == len(run)  # offsets of pieces map 1:1 onto the original run
    i = 0
    n = len(norm)
    while i < n:
        j = i + 1
        if is_cjk(norm[i]):
            while j < n and unicodedata.combining(norm[j]):
                j += 1  # a combining mark after the character belongs to it
            piece = norm[i:j]
            cjk = True
        else:
            while j < n and not is_cjk(norm[j]):
                j += 1
            piece = fold_word(norm[i:j])
            cjk = False
        a, b = (begin + i, begin + j) if exact else (begin, finish)
        yield Unit(piece, piece if cjk else stem(piece), cjk, a, b)
        i = j


@functools.lru_cache(maxsize=65_536)
def fold_word(word: str) -> str:
    """Remove the diacritics of Latin letters (``ệ`` → ``e``); other scripts keep their marks.
    A word of marks only (nothing left after folding) stays as it is. Long words are shortened
    to their fixed-size key."""
    out: list[str] = []
    for ch in word:
        if ch.isascii():
            out.append(ch)
            continue
        cp = ord(ch)
        if 0x00C0 <= cp <= 0x024F or 0x1E00 <= cp <= 0x1EFF:
            base = unicodedata.normalize("NFD", ch)
            out.append("".join(c for c in base if not unicodedata.combining(c)) or ch)
        elif unicodedata.combining(ch) and out and _latin_base(out[-1]):
            continue  # a combining accent on a Latin letter (decomposed input)
        else:
            out.append(ch)
    folded = "".join(out) or word
    return _shorten(folded)


def _latin_base(ch: str) -> bool:
    return ch.isascii() and ch.isalpha()


def _shorten(word: str) -> str:
    if len(word) <= MAX_WORD:
        return word
    digest = hashlib.blake2b(word.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return f"{word[:48]}#{digest}"


@functools.lru_cache(maxsize=131_072)
def stem(word: str) -> str:
    """The English (Porter2) stem of a folded word; the word itself when it has one or two
    letters or is not alphabetic ASCII (shortened keys, other scripts).
    Cached whole, checks included: indexing and snippets call it for every word."""
    if len(word) <= 2 or len(word) > MAX_WORD or not word.isascii() or not word.isalpha():
        return word  # words of 1-2 letters are kept as they are
    return _stem(word)


def _stem(word: str) -> str:
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:  # Snowball stemmer objects keep state: one per thread
        stemmer = _local.stemmer = snowballstemmer.stemmer("english")
    result: str = stemmer.stemWord(word)
    return result or word


def keys(seq: list[Unit]) -> Iterator[str]:
    """The index keys of a unit sequence: every word's term; for CJK, every character and every
    pair of adjacent characters (a lone CJK character only its unigram)."""
    n = len(seq)
    for i, u in enumerate(seq):
        yield u.term
        if u.cjk and i + 1 < n:
            nxt = seq[i + 1]
            if nxt.cjk and nxt.start <= u.end:
                yield u.term + nxt.term


def phrase_keys(terms: tuple[str, ...]) -> list[str]:
    """The keys a text must hold to contain the adjacent ``terms`` (a query phrase or CJK run):
    words as they are; each pair of adjacent CJK characters as a bigram (a CJK character with no
    CJK neighbour in the phrase as its unigram)."""
    out: list[str] = []
    n = len(terms)
    for i, t in enumerate(terms):
        if is_cjk(t[0]):
            if i + 1 < n and is_cjk(terms[i + 1][0]):
                out.append(t + terms[i + 1])
            elif i == 0 or not is_cjk(terms[i - 1][0]):
                out.append(t)
        else:
            out.append(t)
    return list(dict.fromkeys(out))
