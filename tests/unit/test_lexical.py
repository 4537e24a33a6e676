"""Unit: the shared tokenizer, BM25 ranking and snippets (mindstore.lexical), including the
hangs of issue 13 items 7-8 and a property test over random Unicode under a time bound."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mindstore.lexical import bm25
from mindstore.lexical.snippet import SnippetQuery, make_snippet
from mindstore.lexical.tokens import MAX_WORD, units
from mindstore.search import parse_query


def bounded(fn: Callable[[], Any], seconds: float = 5.0) -> Any:
    """Run ``fn`` in a thread; fail (instead of hanging the suite) if it takes longer."""
    out: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as e:  # pragma: no cover - re-raised below
            errors.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"did not finish within {seconds} s"
    if errors:
        raise errors[0]
    return out[0]


def terms(text: str) -> list[str]:
    return [u.term for u in units(text)]


def test_folding_and_stemming() -> None:
    assert terms("Deploying the DEPLOYMENT café") == ["deploy", "the", "deploy", "cafe"]
    assert terms("người Việt tiếng sống ở phố Hồ") == [
        "nguoi", "viet", "tieng", "song", "o", "pho", "ho"
    ]  # fmt: skip
    # NFKC: superscripts, full-width letters; a lone combining mark is still a word
    assert terms("x⁵ ＡＢＣ \u0301") == ["x5", "abc", "\u0301"]
    assert terms("\ue000ab") == ["\ue000ab"]  # private use
    # short words keep their letters (PostgreSQL's snowball turned "is" into "i")
    assert terms("is as us s") == ["is", "as", "us", "s"]


def test_possessive_never_leaves_a_stray_s() -> None:
    assert terms("Dave's dream, it’s DON'T") == ["dave", "dream", "it", "don"]


def test_cjk_units_and_keys() -> None:
    seq = list(units("我喜欢喝咖啡 coffee"))
    assert [u.term for u in seq] == ["我", "喜", "欢", "喝", "咖", "啡", "coffe"]
    doc = bm25.document("我喜欢喝咖啡")
    keys = {k for kind, k, _, _ in doc.rows if kind == bm25.KIND_TERM}
    assert {"咖啡", "咖", "我", "喝咖"} <= keys


def test_long_words_get_a_bounded_key() -> None:
    word = "a" * 3000
    [u] = units(word)
    assert len(u.raw) <= MAX_WORD + 20 and u.raw == u.term
    assert parse_query(word).words == (u.term,)
    assert [x.term for x in units(word + "b")] != [u.term]


def test_snippet_possessive_query_terminates() -> None:
    """Issue 13.7: the PostgreSQL snippet loop never advanced on a bare ``s`` token."""
    q = SnippetQuery.from_query(parse_query("Dave's dreams"))
    text = "Keep going for those dreams, Dave. It's yours."
    assert bounded(lambda: make_snippet(q, (text, ""))) == (
        "Keep going for those [dreams], [Dave]. It's yours."
    )


def test_snippet_work_is_bounded_on_huge_repetitive_text() -> None:
    """Issue 13.8: FTS5 snippet() took 38 s on a 1.7 MB output repeating the word."""
    big = "deploy " * 250_000
    q = SnippetQuery.from_query(parse_query("deploy"))
    t0 = time.perf_counter()
    snippet = bounded(lambda: make_snippet(q, (big, "")))
    assert time.perf_counter() - t0 < 2.0  # ~1 ms; generous for a loaded machine
    assert snippet.startswith("[deploy] [deploy]") and snippet.endswith("…")


def test_a_hit_past_the_first_max_source_characters_is_shown() -> None:
    """A long text (a tool output) whose only hit lies past the first MAX_SOURCE characters
    shows that hit, not its beginning: in English (a near miss first: "cable" is not "cats"),
    behind a prefix, in Chinese without spaces, in the tool text; a text without a hit, or a
    huge one, still costs a bounded amount of work."""
    from mindstore.lexical import snippet

    filler = "filler words here. " * (snippet.MAX_SOURCE // 10)

    def snip(query: str, *fields: str) -> str:
        q = SnippetQuery.from_query(parse_query(query))
        return bounded(lambda: make_snippet(q, fields))

    found = snip("needle", filler + "and the needle at the end. " + filler)
    assert found.startswith("…") and "the [needle] at the end." in found and found.endswith("…")
    assert snip("cats", filler + "a cable, a catalogue and two cats").endswith("two [cats]")
    assert snip("deploy*", filler + "the deployment went fine").endswith("[deployment] went fine")
    assert snip("咖啡", "我" * 12_000 + "喜欢喝咖啡。").endswith("喜欢喝[咖啡]。")
    assert snip("needle", "no hit", filler + "a needle").endswith("a [needle]")
    assert snip("zebra", filler + "no such word").startswith("filler words here.")
    # words that could be hits and are not ("cable" for "cats"): each try looks at a whole
    # window, FURTHER_TRIES of them, then the text's start
    window_words = snippet.MAX_SOURCE // len("cable ")
    near = filler + "cable " * (window_words * 3) + "cats"
    assert snip("cats", near).endswith("[cats]")
    far = filler + "cable " * (window_words * (snippet.FURTHER_TRIES + 1)) + "cats"
    assert snip("cats", far).startswith("filler words")
    t0 = time.perf_counter()
    huge = "deploy " * 250_000
    assert snip("zebra deploy", "x " * 6_000 + huge).startswith("…")
    assert time.perf_counter() - t0 < 2.0  # a few ms; generous for a loaded machine


def test_snippet_marks_hits_and_cuts() -> None:
    q = SnippetQuery.from_query(parse_query('hotfix deploy* "red car" 咖啡'))
    text = "zero one two three four five six seven eight nine ten Deployed the hotfix; red car now"
    assert make_snippet(q, (text,)) == (
        "…one two three four five six seven eight nine ten [Deployed] the [hotfix]; [red] [car] now"
    )
    text = "one two three four five six seven eight nine Deployed the hotfix; a b c d e f g h i"
    assert make_snippet(q, (text,)) == (
        "…six seven eight nine [Deployed] the [hotfix]; a b c d e f g h i"
    )
    assert make_snippet(q, ("我喜欢喝咖啡",)) == "我喜欢喝[咖啡]"
    # no hit in the own text: the tool text's; none at all: the start of the text
    assert make_snippet(q, ("nothing here", "hotfix applied")) == "[hotfix] applied"
    assert make_snippet(q, ("nothing here", "")) == "nothing here"


def test_rank_context_only_hits_rank_below_own_hits() -> None:
    q = parse_query("kubernetes")
    own = bm25.document("kubernetes " + "filler words here " * 30)
    ctx = bm25.document("ok", "", "kubernetes kubernetes kubernetes")
    rows = [
        (k, key, doc, 1, tf, c, d.length)
        for doc, d in ((1, own), (2, ctx))
        for k, key, tf, c in d.rows
    ]
    ranked = bm25.rank(q, rows, 2, own.length + ctx.length)
    assert [d for _, d, _ in ranked] == [1, 2]
    assert ranked[0][0] > ranked[1][0] > 0


def test_rank_all_mode_requires_every_word_in_own_text() -> None:
    a = bm25.document("red car")
    b = bm25.document("red", "", "car")
    rows = [
        (k, key, doc, 1, tf, c, d.length) for doc, d in ((1, a), (2, b)) for k, key, tf, c in d.rows
    ]
    assert [d for _, d, _ in bm25.rank(parse_query("red car", "all"), rows, 2, 4.0)] == [1]
    assert [d for _, d, _ in bm25.rank(parse_query("red car"), rows, 2, 4.0)] == [1, 2]


unicode_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60
) | st.lists(
    st.sampled_from(
        [
            "a",
            "s",
            "'",
            "’",
            "Dave's",
            "x",
            "咖",
            "啡",
            "東京",
            "\u0301",
            "ệ",
            "-",
            " ",
            "⁵",
            "\ue000",
            '"',
            "*",
        ]
    ),
    max_size=20,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=unicode_text, query=unicode_text)
def test_any_text_and_query_terminate_and_every_word_is_findable(text: str, query: str) -> None:
    def work() -> None:
        parsed = parse_query(query)
        make_snippet(SnippetQuery.from_query(parsed), (text, query))
        doc = bm25.document(text, "", query)
        keys = {key for kind, key, _, _ in doc.rows if kind == bm25.KIND_TERM}
        raws = {key for kind, key, _, _ in doc.rows if kind == bm25.KIND_RAW}
        # every word of the text, typed as a query as written, finds the text's keys
        for u in units(text):
            q = parse_query(text[u.start : u.end], "all")
            assert set(q.words) <= keys, (u, q)
            if not u.cjk:
                assert u.raw in raws
        rows = [(k, key, 1, 1, tf, c, doc.length) for k, key, tf, c in doc.rows]
        bm25.rank(parsed, rows, 1, max(doc.length, 1.0))

    bounded(work)


ascii_text = st.lists(
    st.sampled_from(
        ["deploy", "Deployed", "deploying", "db", "a", "I", "x1", "cat", "cats", "the", "x" * 70]
    )
    | st.sampled_from([" ", ", ", ". ", "-", "\n", "/", " (", ") ", "  ", "'", "'s ", "n't "]),
    max_size=400,
).map("".join)


def unit_path_snippet(q: SnippetQuery, text: str, cut: bool) -> str | None:
    """The snippet the general path makes (every unit built, hits collected one by one), or
    None when the text has no hit."""
    from mindstore.lexical import snippet

    seq = list(units(text))
    hits: list[tuple[int, str]] = []
    for i in range(len(seq)):
        snippet._collect(q, seq, i, hits)
    # the general path stops collecting SNIPPET_TOKENS units after the MAX_HITS-th hit
    if len(hits) >= snippet.MAX_HITS:
        seq = seq[: hits[snippet.MAX_HITS - 1][0] + snippet.SNIPPET_TOKENS + 1]
    starts, ends = [u.start for u in seq], [u.end for u in seq]
    return snippet._render(text, starts, ends, hits, cut) if hits else None


@settings(max_examples=300, deadline=None)
@given(
    text=ascii_text,
    query=st.sampled_from(["deploy", "cat db", "the a", "i x1", "x" * 70, "dep*", "ca* s"]),
)
def test_ascii_snippets_are_those_of_the_unit_path(text: str, query: str) -> None:
    """The ASCII paths of make_snippet (one pass for text without apostrophes and a query
    without prefixes; a loop without unit objects otherwise) show what the general path
    shows: cut text, many hits, contractions and words longer than MAX_WORD included."""
    from mindstore.lexical import snippet

    q = SnippetQuery.from_query(parse_query(query))
    want = unit_path_snippet(q, text, False)
    if want is not None and len(text) <= snippet.MAX_SOURCE:
        assert make_snippet(q, (text, "")) == want
    if "'" not in text and not q.prefixes:
        assert snippet._plain_ascii(q, text, False) == want
        assert snippet._plain_ascii(q, text, True) == unit_path_snippet(q, text, True)


SUFFIXES = ["", "s", "ies", "ed", "ing", "ly", "ness", "ational", "ization", "fulness", "ity"]


@settings(max_examples=400, deadline=None)
@given(
    stem_=st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=12),
    suffix=st.sampled_from(SUFFIXES),
)
def test_stems_are_those_of_the_pure_python_english_stemmer(stem_: str, suffix: str) -> None:
    """mindstore stems with Snowball's C stemmers (PyStemmer, through snowballstemmer) when
    they are installed; an index written where they were must be searchable where they are
    not (and back), so both give the same stems. Checked here against the pure-Python
    English (Porter2) stemmer."""
    from snowballstemmer.english_stemmer import EnglishStemmer

    from mindstore.lexical.tokens import _stem

    word = stem_ + suffix
    assert _stem(word) == (EnglishStemmer().stemWord(word) or word)


def test_the_c_stemmer_is_used() -> None:
    """PyStemmer is a dependency: the pure-Python stemmer took 30 µs a word, the C one 3."""
    import snowballstemmer

    assert type(snowballstemmer.stemmer("english")).__module__ == "Stemmer"
