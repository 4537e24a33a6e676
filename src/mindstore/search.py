"""The search query language and what gets indexed. Pure: no I/O; shared by every backend.

Query language (identical on SQLite and PostgreSQL):

* words are ANDed in any order and matched stemmed (``deploying`` finds ``deployed``);
* ``"quoted phrase"`` matches adjacent words (stemmed);
* ``word*`` matches every word that begins with the letters *as typed* (unstemmed), so backends
  index an unstemmed copy of the text for prefix matching;
* diacritics of Latin letters are ignored on both sides (``cafe`` finds "café" and ``café``
  finds "cafe");
* every other character is text: a query is split into word tokens (Unicode letters and digits)
  and nothing the user typed ever reaches a backend's query parser — backends build their own
  syntax from :class:`ParsedQuery` tokens only, which contain nothing but word characters.

An empty query (or one with no word characters) parses to an empty :class:`ParsedQuery`, and
searching with it returns ``[]``.

Indexed text: text and reasoning parts go to the ``text`` column; tool names, inputs and outputs
(as JSON text) go to the ``tool_text`` column, which backends weight lower.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mindstore.messages import is_tool_part, tool_name

__all__ = [
    "ParsedQuery",
    "SearchResult",
    "fold_token",
    "index_text",
    "parse_query",
    "search_result",
    "word_tokens",
]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_TERM = re.compile(r'"([^"]*)"?|(\S+)')
MAX_QUERY_TOKENS = 32


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
    """A safe, backend-neutral query: every token is a run of Unicode letters/digits.

    Attributes:
        words: single words to match stemmed, ANDed.
        phrases: each a tuple of ≥2 words that must appear adjacent (stemmed).
        prefixes: word beginnings to match unstemmed, as typed (lower-cased).
    """

    words: tuple[str, ...] = ()
    phrases: tuple[tuple[str, ...], ...] = ()
    prefixes: tuple[str, ...] = field(default=())

    @property
    def empty(self) -> bool:
        return not (self.words or self.phrases or self.prefixes)


def word_tokens(text: str) -> list[str]:
    """Lower-cased runs of Unicode letters and digits with Latin diacritics removed — the
    tokenizer every backend agrees on (SQLite's FTS5 ``unicode61`` folds Latin diacritics, so
    ``cafe`` finds "café"; PostgreSQL is fed these tokens so it does the same)."""
    if text.isascii():
        return [t.lower() for t in _WORD.findall(text)]
    return [fold_token(t.lower()) for t in _WORD.findall(text)]


@functools.lru_cache(maxsize=65_536)
def fold_token(token: str) -> str:
    """Remove the diacritics of Latin letters (``é`` → ``e``), as FTS5 ``unicode61`` does;
    other scripts (kana voicing marks, Hangul, …) are left as they are."""
    if token.isascii():
        return token
    out: list[str] = []
    for ch in token:
        if ch.isascii() or not _is_latin(ch):
            out.append(ch)
            continue
        base = unicodedata.normalize("NFD", ch)
        out.append("".join(c for c in base if not unicodedata.combining(c)) or ch)
    return "".join(out)


def _is_latin(ch: str) -> bool:
    cp = ord(ch)
    return 0x00C0 <= cp <= 0x024F or 0x1E00 <= cp <= 0x1EFF


def parse_query(query: str) -> ParsedQuery:
    """Parse a user query. Never raises for any string; see the module docstring."""
    if not isinstance(query, str):
        raise TypeError(f"query must be a string, got {type(query).__name__}")
    words: list[str] = []
    phrases: list[tuple[str, ...]] = []
    prefixes: list[str] = []
    count = 0
    for m in _TERM.finditer(query):
        if count >= MAX_QUERY_TOKENS:
            break
        quoted, bare = m.group(1), m.group(2)
        if quoted is not None:
            tokens = word_tokens(quoted)
            if len(tokens) == 1:
                words.append(tokens[0])
            elif tokens:
                phrases.append(tuple(tokens))
            count += len(tokens)
            continue
        assert bare is not None
        is_prefix = bare.endswith("*")
        tokens = word_tokens(bare)
        if not tokens:
            continue
        if is_prefix:
            # "foo-ba*" -> words foo, prefix ba: only the last token is the typed beginning.
            words.extend(tokens[:-1])
            prefixes.append(tokens[-1])
        else:
            words.extend(tokens)
        count += len(tokens)
    return ParsedQuery(
        words=tuple(dict.fromkeys(words)),
        phrases=tuple(dict.fromkeys(phrases)),
        prefixes=tuple(dict.fromkeys(prefixes)),
    )


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
            pieces = [tool_name(part)]
            if part.get("input") is not None:
                pieces.append(_json(part["input"]))
            if part.get("output") is not None:
                pieces.append(_json(part["output"]))
            if part.get("errorText"):
                pieces.append(str(part["errorText"]))
            tools.append(" ".join(pieces))
    return "\n".join(texts).replace("\x00", ""), "\n".join(tools).replace("\x00", "")
