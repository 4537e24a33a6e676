"""Unit: the search query language (parse_query), index_text and the SQLite MATCH builder."""

from __future__ import annotations

import pytest

from mindstore.search import MAX_QUERY_TOKENS, ParsedQuery, index_text, parse_query, word_tokens
from mindstore.store.sqlite.store import match_sql


def test_words_are_lowercased_and_deduplicated() -> None:
    assert parse_query("Deploy the DEPLOY") == ParsedQuery(words=("deploy", "the"))


def test_phrases() -> None:
    q = parse_query('"red car" blue')
    assert q.phrases == (("red", "car"),)
    assert q.words == ("blue",)
    # a one-word phrase is a word; an unterminated quote runs to the end
    assert parse_query('"single"').words == ("single",)
    assert parse_query('x "open phrase').phrases == (("open", "phrase"),)


def test_prefixes() -> None:
    q = parse_query("deploy* Kube*")
    assert q.prefixes == ("deploy", "kube")
    assert q.words == ()
    # only the last token of a bare term is the prefix
    q = parse_query("foo-ba*")
    assert q.words == ("foo",) and q.prefixes == ("ba",)
    assert parse_query("*").empty


@pytest.mark.parametrize(
    "query",
    ["", "   ", "***", '""', "!!!", "-", ":", "()", "'; --", "\x00", "\t\n"],
)
def test_queries_without_words_are_empty(query: str) -> None:
    assert parse_query(query).empty


def test_operator_characters_are_just_separators() -> None:
    q = parse_query("text:deploy -hotfix NEAR(a, b) (x OR y)")
    assert q.words == ("text", "deploy", "hotfix", "near", "a", "b", "x", "or", "y")
    for token in q.words:
        assert token.isalnum()


def test_token_count_is_bounded() -> None:
    q = parse_query(" ".join(f"w{i}" for i in range(200)))
    assert len(q.words) == MAX_QUERY_TOKENS


def test_non_string_query_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        parse_query(b"bytes")  # type: ignore[arg-type]


def test_word_tokens_unicode() -> None:
    # Latin diacritics fold (as FTS5 unicode61 does); other scripts stay as typed
    assert word_tokens("Héllo, 世界! x_y 42") == ["hello", "世界", "x", "y", "42"]


def test_index_text_splits_text_and_tool_text() -> None:
    text, tool = index_text(
        {
            "id": "a",
            "role": "assistant",
            "parts": [
                {"type": "text", "text": "one"},
                {"type": "reasoning", "text": "two"},
                {"type": "tool-get", "toolCallId": "c", "input": {"q": "x"}, "output": "ok"},
                {"type": "dynamic-tool", "toolName": "dyn", "toolCallId": "d", "errorText": "bad"},
                {"type": "file", "url": "http://x"},
            ],
        }
    )
    assert text == "one\ntwo"
    assert tool == 'get {"q": "x"} ok\ndyn bad'


def test_match_sql_quotes_every_token() -> None:
    q = parse_query('deploy "red car" kube*')
    stem, raw = match_sql(q)
    assert stem == '"deploy" AND "red car"'
    assert raw == '"kube"*'
    assert match_sql(parse_query("x*")) == (None, '"x"*')
    assert match_sql(parse_query("x")) == ('"x"', None)
    # a token can never carry a quote, but the builder escapes one anyway
    assert match_sql(ParsedQuery(words=('a"b',))) == ('"a""b"', None)


def test_search_result_builder_makes_the_same_result() -> None:
    from dataclasses import fields
    from datetime import UTC, datetime

    from mindstore.search import SearchResult, search_result

    values = ("s", "m", "user", "text", "[snip]", 1.5, datetime(2026, 1, 2, tzinfo=UTC))
    names = [f.name for f in fields(SearchResult)]
    assert names == ["session_id", "message_id", "role", "text", "snippet", "score", "created_at"]
    built = search_result(*values)
    assert built == SearchResult(**dict(zip(names, values, strict=True)))
    assert type(built) is SearchResult and hash(built) == hash(
        SearchResult(**dict(zip(names, values, strict=True)))
    )
    with pytest.raises(AttributeError):
        built.text = "changed"  # type: ignore[misc]


def test_estimated_fraction_is_the_planner_estimate() -> None:
    from mindstore.store.postgres.fts import estimated_fraction

    frequencies = {"common": 0.5, "deploy": 0.1}
    other = 0.001

    def stem(word: str) -> str:
        return {"deployment": "deploy"}.get(word, word)

    def fraction(query: str) -> float:
        return estimated_fraction(parse_query(query), frequencies, other, stem)

    assert fraction("common") == 0.5
    assert fraction("deployment") == 0.1  # stemmed before the lookup
    assert fraction("rare") == other
    assert fraction("common deployment") == pytest.approx(0.05)  # independent terms
    assert fraction('"common rare"') == pytest.approx(0.5 * other)  # phrase words count too
    assert fraction("pre*") == 1.0  # prefixes are not estimated (never a prepared plan)
