"""The search query language and what gets indexed. Pure: no I/O; shared by every backend.

Query language (DESIGN §5.1, identical on SQLite and PostgreSQL because both index and query
through :mod:`mindstore.lexical.tokens`):

* words: with ``match="any"`` (the default) a message holding at least one of them is a hit,
  ranked by BM25; with ``match="all"`` every word must occur in the message's own text (or its
  tool text). Words match stemmed (``deploying`` finds ``deployed``); English stop words are
  dropped in ``any`` mode unless nothing else is left;
* ``"quoted phrase"`` matches adjacent words (stemmed): required with ``match="all"``; with
  ``match="any"`` it ranks — messages holding the phrase come first, then the messages its words
  find (as if unquoted), so quotes in a verbatim question never empty the result
  (:attr:`ParsedQuery.loose`, applied by the stores' search);
* ``word*`` matches every word that begins with the letters *as typed* (unstemmed; required in
  ``all`` mode, optional in ``any``);
* CJK text is split into characters: a run of CJK characters is looked up by its adjacent
  pairs and by its single characters, as the index holds both (a pair ranks far above a
  character: it is much rarer);
* every other character is text: nothing the user typed ever reaches a backend's query syntax —
  backends read index keys from :class:`ParsedQuery` only, always as bound parameters.

An empty query (or one with no word characters) parses to an empty :class:`ParsedQuery`, and
searching with it returns ``[]``.

Indexed text: text and reasoning parts go to the ``text`` column; tool names, inputs and outputs
(as JSON text) go to the ``tool_text`` column, which is weighted lower — except the memory tools'
own calls and results (:data:`MEMORY_TOOLS`), which echo memory and are not indexed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from mindstore.lexical.stopwords import STOP_WORDS
from mindstore.lexical.tokens import Unit, phrase_keys, units
from mindstore.messages import is_tool_part, tool_name

__all__ = [
    "MATCH_MODES",
    "MAX_QUERY_TOKENS",
    "MEMORY_TOOLS",
    "ParsedQuery",
    "SearchResult",
    "index_text",
    "parse_query",
    "search_result",
]

_TERM = re.compile(r'"([^"]*)"?|(\S+)')
MAX_QUERY_TOKENS = 256
"""Words of a query looked at; the rest are ignored (a question is rarely over 50 words)."""

MATCH_MODES: Final = ("any", "all")

MEMORY_TOOLS: Final = frozenset(
    {"set_context", "load_context", "unload_context", "search_context", "session_search"}
)
"""Tools whose calls and results are not indexed: they echo memory that is searchable (or
loaded) anyway, and in cross-session search they crowd out the facts they point to."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchResult:
    """One search hit, best first (ties broken by recency)."""

    session_id: str
    message_id: str
    role: str
    text: str
    snippet: str
    score: float
    created_at: datetime


_RESULT_SLOTS = tuple(
    SearchResult.__dict__[name].__set__
    for name in ("session_id", "message_id", "role", "text", "snippet", "score", "created_at")
)


def search_result(
    session_id: str,
    message_id: str,
    role: str,
    text: str,
    snippet: str,
    score: float,
    created_at: datetime,
) -> SearchResult:
    """``SearchResult(...)`` for stores, about 4× faster: a frozen dataclass's ``__init__``
    assigns each field through ``object.__setattr__``, which was a tenth of a PostgreSQL search
    (up to ``limit`` results each). Same object, same fields (a unit test compares the two)."""
    result = object.__new__(SearchResult)
    a, b, c, d, e, f, g = _RESULT_SLOTS
    a(result, session_id)
    b(result, message_id)
    c(result, role)
    d(result, text)
    e(result, snippet)
    f(result, score)
    g(result, created_at)
    return result


@dataclass(frozen=True, kw_only=True, slots=True)
class ParsedQuery:
    """A safe, backend-neutral query: index keys only (see :mod:`mindstore.lexical.tokens`).

    Attributes:
        words: index keys (stems; CJK characters and character pairs) — optional with
            ``match="any"``, each required with ``match="all"``.
        phrases: each a tuple of ≥2 terms that must appear adjacent in a hit of this query
            (with ``match="any"`` a search runs :meth:`loosened` after it, see below).
        prefixes: word beginnings to match unstemmed, as typed (folded).
        match: ``"any"`` or ``"all"``.
        loose: the phrases' words as unquoted words of the same mode would be (stop words
            dropped in ``any`` mode unless nothing else is left).
    """

    words: tuple[str, ...] = ()
    phrases: tuple[tuple[str, ...], ...] = ()
    prefixes: tuple[str, ...] = field(default=())
    match: str = "any"
    loose: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.words or self.phrases or self.prefixes)

    @property
    def ranks_phrases(self) -> bool:
        """Whether a search fills up with :meth:`loosened` after the phrase holders
        (``match="any"`` with phrases: quotes rank, they do not filter — DESIGN §5.1)."""
        return self.match == "any" and bool(self.phrases)

    def loosened(self) -> ParsedQuery:
        """This query with its phrases dissolved into words (the second pass of an ``any``
        search with phrases)."""
        loose = self.loose or tuple(t for p in self.phrases for t in p)
        return ParsedQuery(
            words=tuple(dict.fromkeys((*self.words, *loose))),
            prefixes=self.prefixes,
            match=self.match,
        )


def parse_query(query: str, match: str = "any") -> ParsedQuery:
    """Parse a user query. Never raises for any string; see the module docstring. ``match``
    other than ``"any"``/``"all"`` raises ``ValueError``."""
    if not isinstance(query, str):
        raise TypeError(f"query must be a string, got {type(query).__name__}")
    if match not in MATCH_MODES:
        raise ValueError(f'match must be "any" or "all", got {match!r}')
    words: list[str] = []
    stops: list[str] = []
    phrases: list[tuple[str, ...]] = []
    prefixes: list[str] = []
    loose: list[str] = []
    loose_stops: list[str] = []
    count = 0
    for m in _TERM.finditer(query):
        if count >= MAX_QUERY_TOKENS:
            break
        quoted, bare = m.group(1), m.group(2)
        if quoted is not None:
            seq = list(units(quoted))[: MAX_QUERY_TOKENS - count]
            count += len(seq)
            terms = tuple(u.term for u in seq)
            if len(terms) == 1:
                words.append(terms[0])
            elif terms:
                phrases.append(terms)
                _words_of(seq, match, loose, loose_stops)
            continue
        assert bare is not None
        seq = list(units(bare))[: MAX_QUERY_TOKENS - count]
        if not seq:
            continue
        count += len(seq)
        last = seq[-1]
        is_prefix = bare.endswith("*") and not last.cjk
        if is_prefix:
            seq = seq[:-1]
        _words_of(seq, match, words, stops)
        if is_prefix:
            prefixes.append(last.raw)
    if not (words or phrases or prefixes):
        words = stops  # a query of stop words only: search for them
    return ParsedQuery(
        words=tuple(dict.fromkeys(words)),
        phrases=tuple(dict.fromkeys(phrases)),
        prefixes=tuple(dict.fromkeys(prefixes)),
        match=match,
        loose=tuple(dict.fromkeys(loose or loose_stops)) if phrases else (),
    )


def _words_of(seq: list[Unit], match: str, words: list[str], stops: list[str]) -> None:
    """Add the word keys of unquoted units ``seq`` to ``words`` (CJK runs by their pairs), and
    in ``any`` mode stop words to ``stops`` instead."""
    for run in _runs(seq):
        if run[0].cjk:
            chars = tuple(u.term for u in run)
            words.extend(phrase_keys(chars))
            words.extend(chars)  # the index holds every character too (issue 28 item 4)
        else:
            for u in run:
                (stops if match == "any" and u.raw in STOP_WORDS else words).append(u.term)


def _runs(seq: list[Unit]) -> list[list[Unit]]:
    """Split units into maximal runs of adjacent CJK characters and single other words."""
    out: list[list[Unit]] = []
    for u in seq:
        if u.cjk and out and out[-1][-1].cjk and out[-1][-1].end >= u.start:
            out[-1].append(u)
        else:
            out.append([u])
    return out


_BLOBS: Final = re.compile(
    r"data:[\w.+-]+/[\w.+-]+(?:;[^,;\s]*)*;base64,[A-Za-z0-9+/=]*"
    r"|(?<![A-Za-z0-9+/])(?=[A-Za-z0-9]*[+/])[A-Za-z0-9+/]{256,}+={0,2}"
)
"""Inline media (``data:`` URLs) and base64 runs (256+ characters of its alphabet, ``+`` or
``/`` among them) are bytes, not words: they are never indexed, so a screenshot in a tool
output adds no keys. A long word of letters and digits alone stays findable (DESIGN §5.1)."""


def _without_blobs(text: str) -> str:
    return _BLOBS.sub(" ", text) if "data:" in text or len(text) >= 256 else text


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def index_text(message: Mapping[str, Any]) -> tuple[str, str]:
    """Return ``(text, tool_text)`` to index for a message.

    ``text`` joins text and reasoning parts with newlines; ``tool_text`` joins, per tool part,
    the tool name, the input and the output rendered as JSON.
    """
    texts: list[str] = []
    tools: list[str] = []
    for part in message.get("parts") or ():
        if not isinstance(part, Mapping):
            continue
        t = part.get("type")
        if t in ("text", "reasoning") and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif is_tool_part(part):
            if tool_name(part) in MEMORY_TOOLS:
                continue
            pieces = [tool_name(part)]
            if part.get("input") is not None:
                pieces.append(_json(part["input"]))
            if part.get("output") is not None:
                pieces.append(_json(part["output"]))
            if part.get("errorText"):
                pieces.append(str(part["errorText"]))
            tools.append(" ".join(pieces))
    return (
        _without_blobs("\n".join(texts).replace("\x00", "")),
        _without_blobs("\n".join(tools).replace("\x00", "")),
    )
