"""PostgreSQL search snippets (``mindstore.store.postgres.snippets``) against SQLite's FTS5.

FTS5's ``snippet()`` is the oracle: the SQLite backend returns it, and the PostgreSQL backend
must return the same text for the same row and query. Word and phrase queries are compared with
a ``porter unicode61`` table (what the SQLite backend's stemmed index uses), prefix queries with
a plain ``unicode61`` one (its as-typed index).
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("snowballstemmer")

from mindstore.search import ParsedQuery, parse_query
from mindstore.store.postgres.snippets import (
    MAX_SNIPPET_SOURCE,
    SnippetQuery,
    make_snippet,
    stem,
)

WORDS = [
    "deploy",
    "deployed",
    "deployment",
    "deployments",
    "run",
    "running",
    "runs",
    "happy",
    "happily",
    "the",
    "a",
    "cluster",
    "Kubernetes",
    "DATABASE",
    "migration",
    "migrations",
    "café",
    "Crème",
    "x1",
    "42",
    "relational",
    "generously",
]
SEPARATORS = [" ", " ", " ", ", ", ". ", ": ", "\n", " - ", " (", ") ", "... ", ".", " 'q' "]


@st.composite
def texts(draw: st.DrawFn, max_words: int = 60) -> str:
    words = draw(st.lists(st.sampled_from(WORDS), max_size=max_words))
    out = [draw(st.sampled_from(["", "", " ", "(", ". "]))]
    for w in words:
        out += [w, draw(st.sampled_from(SEPARATORS))]
    return "".join(out)


def _fts5_snippet(columns: tuple[str, ...], query: str, *, prefix: bool) -> str | None:
    db = sqlite3.connect(":memory:")
    tokenize = "unicode61" if prefix else "porter unicode61"
    names = ", ".join(f"c{i}" for i in range(len(columns)))
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5({names}, tokenize = '{tokenize}')")
    db.execute(f"INSERT INTO t VALUES ({', '.join('?' * len(columns))})", columns)
    row = db.execute(
        "SELECT snippet(t, -1, '[', ']', '…', 16) FROM t WHERE t MATCH ?", (query,)
    ).fetchone()
    db.close()
    return None if row is None else str(row[0])


def _fts5_query(parsed: ParsedQuery) -> str:
    terms = [*parsed.words, *('"' + " ".join(p) + '"' for p in parsed.phrases)]
    return " ".join([*terms, *(p + "*" for p in parsed.prefixes)])


def _check(columns: tuple[str, ...], query: str) -> None:
    parsed = parse_query(query)
    expected = _fts5_snippet(columns, _fts5_query(parsed), prefix=bool(parsed.prefixes))
    if expected is None:  # not a match: the store never asks for a snippet
        return
    snippet_query = SnippetQuery.from_query(parsed)
    ours = make_snippet(snippet_query, columns)
    if parsed.phrases and ours != expected:
        # A phrase cut by the window's start: newer SQLite versions mark the part inside the
        # window, as mindstore does; older ones (3.40) leave it unmarked. Same window, and
        # every span FTS5 marked is marked.
        assert _unmarked(ours) == _unmarked(expected)
        assert set(_MARKED.findall(expected)) <= set(_MARKED.findall(ours))
    else:
        assert ours == expected
    # the one-term fast path and the general path agree
    general = dataclasses.replace(snippet_query, single=None)
    assert make_snippet(general, columns) == ours


_MARKED = re.compile(r"\[[^\]]*\]")


def _unmarked(snippet: str) -> str:
    return snippet.replace("[", "").replace("]", "")


QUERIES = [
    "deploy",
    "deployment",
    "running",
    "happy",
    "cafe",
    "creme",
    "database",
    "the",
    "42",
    "deploy*",
    "mig*",
    "ha*",
    "deploy cluster",
    "run happy",
    '"deployment cluster"',
    '"the cluster"',
    '"run the"',
    "relational",
    "generous",
    '"run the"',
    '"deployments cluster"',
]


@settings(max_examples=300, deadline=None)
@given(
    text=texts(), tool=st.one_of(st.just(""), texts(max_words=8)), query=st.sampled_from(QUERIES)
)
def test_snippet_is_fts5_snippet(text: str, tool: str, query: str) -> None:
    _check((text, tool), query)


@pytest.mark.parametrize(
    ("columns", "query", "expected"),
    [
        (("incident report filed", ""), "incident", "[incident] report filed"),
        (("", "run_tool deploying now"), "deploy", "run_tool [deploying] now"),
        (("Café crème at the café", ""), "cafe", "[Café] crème at the [café]"),
        (
            ("a b c d e f g h i j k l m n o p q r s t deployment u v w x y z a b c d e f", ""),
            "deployment",
            "…n o p q r s t [deployment] u v w x y z a b…",
        ),
        (
            (
                "We shipped it all out to everyone in the company. The deployment failed at"
                " noon and nobody saw it for hours or days",
                "",
            ),
            "deployment",
            "…The [deployment] failed at noon and nobody saw it for hours or days",
        ),
        (
            ("deployment kubernetes rollout", ""),
            '"deployment kubernetes"',
            "[deployment kubernetes] rollout",
        ),
    ],
)
def test_examples(columns: tuple[str, ...], query: str, expected: str) -> None:
    assert make_snippet(SnippetQuery.from_query(parse_query(query)), columns) == expected
    _check(columns, query)


def test_non_latin_text_and_long_text() -> None:
    _check(("Привет мир, deployment идёт", "日本語 deploy"), "deploy")
    _check(("Привет мир, deployment идёт",), "мир")
    long = " ".join(["filler"] * 5000 + ["deployment"] + ["tail"] * 100)
    _check((long, ""), "deployment")
    # shapes that once cost seconds a row: many hits, long punctuation runs, huge tokens
    _check(("deploy " * 3000, ""), "deploy")
    _check(("deploy run. " * 2000, ""), "deploy run")
    _check(("word " + "." * 5000 + " deployment end", ""), "deployment")
    _check(("x" + ":x" * 3000 + " deployment and more words after it", ""), "deployment")
    _check(("a" * 5000 + " deployment", ""), "deployment")
    _check(("слово " * 3000 + "deployment " + "слово " * 30, ""), "deployment")
    # a hit beyond the part looked at: the start of the first column, like a hit-less row
    beyond = "x " * MAX_SNIPPET_SOURCE + "deployment"
    snippet = make_snippet(SnippetQuery.from_query(parse_query("deployment")), (beyond, ""))
    assert snippet.startswith("x x") and snippet.endswith("…") and "[" not in snippet


def test_stem_matches_postgres_porter() -> None:
    # the server's mindstore_porter dictionary gives these (checked with ts_lexize)
    assert [stem(w) for w in ["migration", "happy", "organization", "relational"]] == [
        "migrat",
        "happi",
        "organ",
        "relat",
    ]
