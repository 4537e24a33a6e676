"""Unit: the search query language (parse_query) and index_text."""

from __future__ import annotations

import pytest

from mindstore.search import MAX_QUERY_TOKENS, ParsedQuery, index_text, parse_query


def test_words_are_stemmed_and_deduplicated() -> None:
    assert parse_query("Deploying DEPLOYED deploy") == ParsedQuery(words=("deploy",))


def test_stop_words_are_dropped_in_any_mode_unless_nothing_else_is_left() -> None:
    assert parse_query("When did Caroline go to the group?").words == ("carolin", "go", "group")
    assert parse_query("the of and").words == ("the", "of", "and")
    # in all mode every word counts
    q = parse_query("the deploy", "all")
    assert q.words == ("the", "deploy") and q.match == "all"


def test_possessives_and_contractions_fold() -> None:
    assert parse_query("Dave's dreams").words == ("dave", "dream")
    assert parse_query("it’s DON'T can't").words == ("it", "don", "can")  # all stop words
    assert parse_query("it's Dave's").words == ("dave",)
    assert parse_query("o'clock").words == ("o", "clock")  # not a contraction ending


def test_phrases() -> None:
    q = parse_query('"red car" blue')
    assert q.phrases == (("red", "car"),)
    assert q.words == ("blue",)
    # a one-word phrase is a word; an unterminated quote runs to the end
    assert parse_query('"single"').words == ("singl",)
    assert parse_query('x "open phrase').phrases == (("open", "phrase"),)
    # stop words inside a phrase are kept
    assert parse_query('"the end"').phrases == (("the", "end"),)


def test_prefixes_are_as_typed() -> None:
    q = parse_query("deploy* Kube*")
    assert q.prefixes == ("deploy", "kube")
    assert q.words == ()
    q = parse_query("foo-ba*")
    assert q.words == ("foo",) and q.prefixes == ("ba",)
    assert parse_query("*").empty


def test_cjk_runs_become_character_pairs_and_characters() -> None:
    """As the index holds them: every pair and every single character of a CJK run."""
    assert parse_query("咖啡").words == ("咖啡", "咖", "啡")
    assert parse_query("東").words == ("東",)
    assert parse_query("我喜欢 coffee").words == ("我喜", "喜欢", "我", "喜", "欢", "coffe")
    assert parse_query('"東京"').phrases == (("東", "京"),)


@pytest.mark.parametrize(
    "query",
    ["", "   ", "***", '""', "!!!", "-", ":", "()", "'; --", "\x00", "\t\n"],
)
def test_queries_without_words_are_empty(query: str) -> None:
    assert parse_query(query).empty


def test_operator_characters_are_just_separators() -> None:
    q = parse_query("text:deploy -hotfix NEAR(a, b) (x OR y)", "all")
    assert q.words == ("text", "deploy", "hotfix", "near", "a", "b", "x", "or", "y")


def test_token_count_is_bounded() -> None:
    q = parse_query(" ".join(f"w{i}" for i in range(2 * MAX_QUERY_TOKENS)))
    assert len(q.words) == MAX_QUERY_TOKENS


def test_bad_arguments() -> None:
    with pytest.raises(TypeError):
        parse_query(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="match"):
        parse_query("x", "some")


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


@pytest.mark.parametrize(
    "name", ["set_context", "load_context", "unload_context", "search_context", "session_search"]
)
def test_memory_tools_are_not_indexed(name: str) -> None:
    msg = {
        "id": "a",
        "role": "assistant",
        "parts": [
            {"type": f"tool-{name}", "toolCallId": "c", "input": {"q": "x"}, "output": "echo"},
            {"type": "dynamic-tool", "toolName": name, "toolCallId": "d", "output": "echo"},
            {"type": "tool-weather", "toolCallId": "e", "output": "sunny"},
        ],
    }
    assert index_text(msg) == ("", "weather sunny")


def test_search_result_builder_makes_the_same_result() -> None:
    from dataclasses import fields
    from datetime import UTC, datetime

    from mindstore.search import SearchResult, search_result

    values = ("s", "m", "user", "text", "[snip]", 1.5, datetime(2026, 1, 2, tzinfo=UTC))
    names = [f.name for f in fields(SearchResult)]
    assert names == ["session_id", "message_id", "role", "text", "snippet", "score", "created_at"]
    built = search_result(*values)
    assert built == SearchResult(**dict(zip(names, values, strict=True)))
    with pytest.raises(AttributeError):
        built.text = "changed"  # type: ignore[misc]


def test_inline_media_and_base64_runs_are_not_indexed() -> None:
    """A screenshot in a tool output is bytes, not words (issue 32's 200 × 1 MB bench)."""
    shot = "data:image/png;base64," + "iVBORw0KGgo+/" * 3000 + "=="
    msg = {
        "id": "t",
        "role": "assistant",
        "parts": [
            {"type": "text", "text": f"see {shot} attached"},
            {
                "type": "tool-screenshot",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {"page": "home"},
                "output": {"png": "QU+D/" * 200, "title": "Home page"},
            },
        ],
    }
    text, tool = index_text(msg)
    assert text.split() == ["see", "attached"]
    assert "QU+D" not in tool and "Home page" in tool and "home" in tool
    short = {"id": "s", "role": "user", "parts": [{"type": "text", "text": "abc+/def=="}]}
    assert index_text(short)[0] == "abc+/def=="  # short base64-looking text stays text
    word = {"id": "w", "role": "user", "parts": [{"type": "text", "text": "x" * 3000}]}
    assert index_text(word)[0] == "x" * 3000  # a long word of letters stays a word
