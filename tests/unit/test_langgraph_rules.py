"""The LangGraph adapter's pure rules: injective, prefix-friendly namespace labels; filters."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mindstore.integrations._store_rules import (
    decode_label,
    encode_namespace,
    label_prefix,
    literal_prefix,
    matches_filter,
    text_leaves,
)

labels = st.text(min_size=1, max_size=8).filter(lambda s: "\x00" not in s)
namespaces = st.lists(labels, min_size=1, max_size=4).map(tuple)


@given(namespaces, namespaces)
def test_labels_are_injective_and_decode(a: tuple[str, ...], b: tuple[str, ...]) -> None:
    assert decode_label(encode_namespace(a)) == a
    assert (encode_namespace(a) == encode_namespace(b)) == (a == b)


@given(namespaces, namespaces)
def test_label_prefix_matches_exactly_the_namespaces_under_it(
    prefix: tuple[str, ...], ns: tuple[str, ...]
) -> None:
    under = ns[: len(prefix)] == prefix
    assert encode_namespace(ns).startswith(label_prefix(prefix)) == under


def test_labels_of_others_do_not_decode() -> None:
    assert decode_label("knowledge") is None
    assert decode_label("langgraph:not json") is None
    assert decode_label('langgraph:{"a": 1}') is None
    assert decode_label("langgraph:[1]") is None


def test_literal_prefix_stops_at_wildcards_and_ignores_suffixes() -> None:
    assert literal_prefix([("prefix", ("a", "*", "c"))]) == ("a",)
    assert literal_prefix([("suffix", ("a", "b"))]) == ()
    assert literal_prefix([("prefix", ("*",)), ("prefix", ("a", "b"))]) == ("a", "b")


def test_filters() -> None:
    v = {"n": 3, "s": "x", "tags": ["a", "b"], "o": {"k": 1, "j": 2}, "flag": True}
    assert matches_filter(v, None) and matches_filter(v, {})
    assert matches_filter(v, {"n": 3, "s": "x"})
    assert not matches_filter(v, {"n": 4})
    assert matches_filter(v, {"tags": ["a", "b"]}) and not matches_filter(v, {"tags": ["a"]})
    assert matches_filter(v, {"o": {"k": 1}})  # nested dicts compare the keys given
    assert matches_filter(v, {"n": {"$gt": 2, "$lte": 3}})
    assert not matches_filter(v, {"n": {"$lt": 3}})
    assert matches_filter(v, {"missing": {"$ne": 1}})
    assert not matches_filter(v, {"s": {"$gt": 1}})  # non-numbers never order-match
    assert not matches_filter(v, {"flag": {"$gt": 0}})  # booleans are not numbers
    with pytest.raises(ValueError, match="unsupported filter operator"):
        matches_filter(v, {"n": {"$in": [1]}})


def test_text_leaves_keep_strings_in_order() -> None:
    assert text_leaves({"a": "one", "b": [1, {"c": "two"}, "three"], "d": None}) == [
        "one",
        "two",
        "three",
    ]


@given(st.text(max_size=6), st.text(max_size=6))
def test_prefix_upper_bound_is_exactly_starts_with(prefix: str, label: str) -> None:
    from mindstore.store._checks import prefix_upper_bound

    prefix, label = (s.encode("utf-8", "ignore").decode() for s in (prefix, label))
    bound = prefix_upper_bound(prefix)
    inside = label >= prefix and (bound is None or label < bound)
    assert inside == label.startswith(prefix)
    # Also holds for labels built from the prefix itself (the interesting neighbours).
    for near in (prefix, prefix + label, prefix[:-1] + label):
        assert (near >= prefix and (bound is None or near < bound)) == near.startswith(prefix)
