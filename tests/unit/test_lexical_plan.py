"""Unit: the search planner (bounded counting, exact whenever the rows fit the budget), the
incremental ranking and the cached tokenisation of documents (mindstore.lexical.bm25)."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mindstore.lexical import bm25
from mindstore.lexical.tokens import keys, units
from mindstore.search import parse_query


def run_planner(
    query_text: str, dfs: Mapping[str, int], match: str = "any", limit: int = 10
) -> tuple[Any, int]:
    """Drive the planner against known document frequencies; returns the plan and the rows
    the counting stepped through."""
    steps = bm25.planner(parse_query(query_text, match), limit)
    spent = 0
    try:
        request = next(steps)
        while True:
            wanted, cap = request
            counts = {k: min(dfs.get(k, 0), cap) for k in wanted}
            spent += sum(counts.values())
            request = steps.send(counts)
    except StopIteration as done:
        return done.value, spent


WORDS = [f"w{i}" for i in range(80)]


@settings(max_examples=300, deadline=None)
@given(
    dfs=st.lists(
        st.one_of(
            st.integers(0, 60),
            st.integers(0, 3_000),
            st.integers(0, 40_000),
        ),
        min_size=1,
        max_size=60,
    ),
    match=st.sampled_from(["any", "all"]),
)
def test_planner_is_exact_iff_the_rows_fit_and_counting_is_bounded(
    dfs: list[int], match: str
) -> None:
    words = WORDS[: len(dfs)]
    freq = dict(zip(words, dfs, strict=True))
    plan, spent = run_planner(" ".join(words), freq, match)
    total = sum(dfs)
    if total <= bm25.ROW_BUDGET:
        assert plan.full == words and plan.probe == []
        assert plan.dfs == freq
    else:
        if len(words) > 1:
            assert plan.probe, "over the budget the query is pruned"
        assert set(plan.full) | set(plan.probe) == set(words)
        assert not set(plan.full) & set(plan.probe)
        assert plan.full
        # every document frequency the plan reports as exact is exact; the others are bounds
        for k, n in plan.dfs.items():
            assert freq[k] == n
        for k, n in plan.lower.items():
            assert freq[k] >= n
        if match == "all":
            assert len(plan.full) == 1  # one anchor: the rarest word (of the first few,
            if min(dfs) <= bm25.ROW_BUDGET:  # when every word is common)
                assert freq[plan.full[0]] == min(dfs)
        elif min(dfs) <= bm25.PRUNED_BUDGET:
            # the rarest words are read in full, within the budget
            assert sum(freq[k] for k in plan.full) <= bm25.PRUNED_BUDGET
            assert min(freq[k] for k in plan.full) == min(dfs)
    # every word common: the anchor's most recent documents only; never sampled otherwise
    if min(dfs) > bm25.ROW_BUDGET:
        assert plan.sample == bm25.SAMPLE_ROWS
    if plan.sample is not None:
        assert all(freq[k] > bm25.ROW_BUDGET for k in plan.full)
    # counting steps through a few budgets of rows, never the keys times the budget
    bound = bm25.COUNT_BUDGET + 2 * bm25.ROW_BUDGET + len(dfs)
    bound += bm25.ANCHOR_KEYS * (bm25.ROW_BUDGET + 1)
    assert spent <= bound, (spent, sorted(dfs))


def test_a_limit_over_probed_plans_exact_without_counting() -> None:
    """Pruning bounds the candidates to a few best: a search asking for more reads every key."""
    dfs = {"alpha": 90_000, "beta": 80_000, "gamma": 3}
    plan, _ = run_planner("alpha beta gamma", dfs)
    assert plan.probe and plan.sample is None  # pruned at the default limit
    plan, spent = run_planner("alpha beta gamma", dfs, limit=bm25.PROBED + 1)
    assert (sorted(plan.full), plan.probe, plan.sample, spent) == (
        ["alpha", "beta", "gamma"],
        [],
        None,
        0,
    )
    plan, spent = run_planner("alpha", dfs, limit=1000)
    assert (plan.full, plan.sample, spent) == (["alpha"], None, 0)


def test_fill_reads_the_probed_keys_rarest_first_within_a_budget() -> None:
    dfs = {"alpha": 90_000, "beta": 4_000, "delta": 3_000, "gamma": 3}
    plan, _ = run_planner("alpha beta gamma delta", dfs)
    assert (plan.full, sorted(plan.probe)) == (["gamma", "delta"], ["alpha", "beta"])
    p = bm25.PROBED
    # beta counted exactly, under alpha's bound
    assert bm25.fill_reads(plan, False) == [("beta", p), ("alpha", p)]
    q = bm25.FILL_ROWS // 4  # limited to sessions: more rows a key, fewer keys
    assert bm25.fill_reads(plan, True) == [("beta", q), ("alpha", q)]
    plan, _ = run_planner("alpha beta gamma", {"alpha": 90_000, "beta": 80_000, "gamma": 3})
    assert [k for k, _ in bm25.fill_reads(plan, False)] == ["alpha", "beta"]  # ties: by name
    assert bm25.fill_reads(bm25.Plan(["gamma"], [], {}, {}), False) == []
    many = bm25.Plan(["gamma"], [f"k{i:02}" for i in range(60)], {}, {})
    assert sum(n for _, n in bm25.fill_reads(many, False)) <= bm25.FILL_ROWS
    assert sum(n for _, n in bm25.fill_reads(many, True)) <= bm25.FILL_ROWS


def test_planner_without_term_keys_reads_nothing() -> None:
    plan, spent = run_planner("dep*", {})
    assert (plan.full, plan.probe, spent) == ([], [], 0)


def _old_document(text: str, tool_text: str = "", context: str = "") -> bm25.Document:
    """The rows of a document built the straightforward way (no cache), as a reference."""
    own = list(units(text))
    tool = list(units(tool_text)) if tool_text else []
    ctx = list(units(context)) if context else []
    if not own and not tool:  # no words of its own: never a hit (DESIGN §5.1)
        return bm25.Document(rows=[], length=0.0)
    tf: dict[str, float] = defaultdict(float)
    cf: dict[str, float] = defaultdict(float)
    raw: dict[str, float] = defaultdict(float)
    for k in keys(own):
        tf[k] += 1.0
    for k in keys(tool):
        tf[k] += bm25.W_TOOL
    for k in keys(ctx):
        cf[k] += 1.0
    for u in own:
        if not u.cjk:
            raw[u.raw] += 1.0
    for u in tool:
        if not u.cjk:
            raw[u.raw] += bm25.W_TOOL
    rows = [(bm25.KIND_TERM, k, tf.get(k, 0.0), cf.get(k, 0.0)) for k in {**tf, **cf}]
    rows += [(bm25.KIND_RAW, k, v, 0.0) for k, v in raw.items()]
    return bm25.Document(rows=rows, length=float(len(own) + len(tool) + bm25.W_CTX * len(ctx)))


text_st = st.lists(
    st.sampled_from(
        ["Deploying", "deployed", "it's", "Dave's", "咖啡", "東京", "ệ", "x", " ", "."]
    ),
    max_size=12,
).map(" ".join) | st.text(max_size=40)


@settings(max_examples=200, deadline=None)
@given(text=text_st, tool=text_st, ctx=text_st)
def test_cached_document_rows_equal_the_reference(text: str, tool: str, ctx: str) -> None:
    for _ in range(2):  # the second time from the cache
        assert bm25.document(text, tool, ctx) == _old_document(text, tool, ctx)


def test_ranking_in_steps_equals_one_rank() -> None:
    rng = random.Random(3)
    vocab = [f"t{i}" for i in range(30)]
    rows: list[bm25.Row] = []
    total = 0.0
    for doc in range(1, 200):
        d = bm25.document(" ".join(rng.choices(vocab, k=8)), "", " ".join(rng.choices(vocab, k=4)))
        total += d.length
        rows += [(k, key, doc, doc % 7, tf, c, d.length) for k, key, tf, c in d.rows]
    lengths = {s: 1.0 + s for s in range(7)}
    q = parse_query("t1 t2 t3 t4 t5")
    keep = {"t1", "t2"}
    first = [r for r in rows if r[0] == bm25.KIND_TERM and r[1] in keep]
    rest = [r for r in rows if r[0] == bm25.KIND_TERM and r[1] not in keep]
    docs = {5, 9, 40, 41, 100, 150}
    probed = [r2 for r2 in rest if r2[2] in docs]
    r = bm25.Ranking(q, 199, total, {0, 1, 2, 3}, lengths)
    r.add(first)
    before = r.rank(20)
    r.add(probed)
    dfs = {k: 50.0 for k in ("t3", "t4", "t5")}
    once = bm25.rank(q, first + probed, 199, total, {0, 1, 2, 3}, lengths, 20, dfs, docs)
    assert r.rank(20, dfs, docs) == once
    assert {d for _, d, _ in once} <= docs
    assert before == bm25.rank(q, first, 199, total, {0, 1, 2, 3}, lengths, 20)


ASCII_PIECES = [
    "it",
    "'",
    "s",
    "'s",
    "S",
    "t",
    "re",
    "don't",
    "it's's",
    "A'S",
    "x'y",
    "'ll",
    "7",
    "-",
    "Deploying",
    "a_b",
    "q'",
    "'m",
    "''",
    "ve",
]
ascii_st = st.lists(st.sampled_from([*ASCII_PIECES, " ", "\t", "z" * 70]), max_size=16).map(
    "".join
) | st.text(alphabet=st.characters(max_codepoint=127), max_size=60)


@settings(max_examples=400, deadline=None)
@given(text=ascii_st)
def test_ascii_fast_path_equals_units(text: str) -> None:
    from mindstore.lexical.tokens import ascii_words

    assert ascii_words(text) == [u.raw for u in units(text)]
    assert bm25.document(text, text, text) == _old_document(text, text, text)
