"""Contract: full-text search over history (DESIGN §5), on every backend."""

from __future__ import annotations

from typing import Any

import pytest

from mindstore.manager import SessionManager
from mindstore.search import parse_query
from mindstore.session import Session
from mindstore.store.base import Store


def text_msg(mid: str, text: str, role: str = "user") -> dict[str, Any]:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": text}]}


def hit_ids(results: list[Any]) -> list[str]:
    return [r.message_id for r in results]


@pytest.fixture
async def corpus(store: Store) -> Session:
    s = Session.create(store, "search")
    for mid, text in [
        ("m1", "The deployment to production went smoothly yesterday."),
        ("m2", "We are deploying the new release now."),
        ("m3", "Deployed the hotfix; monitoring the dashboards."),
        ("m4", "Lunch is at noon in the big room."),
        ("m5", "The red car is parked next to the blue car."),
        ("m6", "A blue and red flag."),
    ]:
        await s.append_message(text_msg(mid, text))
    return s


async def test_all_mode_words_are_stemmed_and_anded(corpus: Session) -> None:
    assert set(hit_ids(await corpus.search("deploying", match="all"))) == {"m1", "m2", "m3"}
    assert set(hit_ids(await corpus.search("deployed", match="all"))) == {"m1", "m2", "m3"}
    assert hit_ids(await corpus.search("deployed hotfix", match="all")) == ["m3"]
    assert hit_ids(await corpus.search("hotfix deployed", match="all")) == ["m3"]
    assert await corpus.search("deployed lunch", match="all") == []


async def test_any_mode_ranks_messages_with_more_of_the_words_first(corpus: Session) -> None:
    # m3 holds both words; m1 and m2 one; m4 ("Lunch…") only through its context (m3)
    hits = hit_ids(await corpus.search("deployed hotfix"))
    assert hits[0] == "m3" and set(hits) == {"m1", "m2", "m3", "m4"} and hits[-1] == "m4"
    assert hit_ids(await corpus.search("deployed lunch"))[:2] == ["m4", "m3"]
    # a natural question: stop words ignored, the rest ORed
    assert hit_ids(await corpus.search("When was the hotfix deployed?"))[0] == "m3"


async def test_phrases_match_adjacent_words(corpus: Session) -> None:
    # match="all": a phrase is required, its words must stand together
    assert hit_ids(await corpus.search('"red car"', match="all")) == ["m5"]
    assert set(hit_ids(await corpus.search("red blue"))) == {"m5", "m6"}
    assert hit_ids(await corpus.search('"blue and red"', match="all")) == ["m6"]
    assert await corpus.search('"car red"', match="all") == []


async def test_in_any_mode_phrases_rank_and_never_filter(corpus: Session) -> None:
    """DESIGN §5.1: in ``any`` mode the messages holding the phrase come first, then what its
    words find; the scores stay best first."""
    hits = await corpus.search('"blue and red"')
    assert hit_ids(hits)[0] == "m6" and set(hit_ids(hits)) == {"m5", "m6"}
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # m5 holds both words, not the phrase: it follows the phrase holder although it scores
    # higher on the words alone
    loose = hit_ids(await corpus.search("blue red"))
    assert set(loose) == {"m5", "m6"}
    # nothing holds the phrase: the words still find their messages
    assert set(hit_ids(await corpus.search('"car red"'))) == {"m5", "m6"}
    assert hit_ids(await corpus.search('"red car"'))[0] == "m5"
    # a phrase and a word outside it: both count
    mixed = hit_ids(await corpus.search('"red car" hotfix'))
    assert mixed[0] == "m5" and "m3" in mixed


async def test_a_verbatim_question_with_quotes_finds_its_evidence(store: Store) -> None:
    """Reported speech in the user's words (issue 28): the quoted span is a phrase nobody
    said exactly; the question must still find the messages."""
    s = Session.create(store, "verbatim")
    await s.append_message(text_msg("v1", "Hey Mel, are you free tonight for the concert?"))
    await s.append_message(text_msg("v2", "Sure! I am free after six.", "assistant"))
    await s.append_message(text_msg("v3", "The quarterly report is due on Monday."))
    hits = hit_ids(await s.search('What did she say after "Hey, are you free tonight?"'))
    # (v3 is found through its parent v2, "free", as context: it comes last)
    assert hits[:2] == ["v1", "v2"]
    # exactly quoted: the holder first, the rest after it
    assert hit_ids(await s.search('"free tonight" report'))[0] == "v1"
    assert set(hit_ids(await s.search('"free tonight" report'))) >= {"v1", "v3"}
    assert hit_ids(await s.search('"free tonight"', match="all")) == ["v1"]


async def test_context_search_phrases_rank_in_any_mode(store: Store) -> None:
    from mindstore.context.providers import StoreSearchProvider
    from mindstore.store.base import ScopeKey

    s = Session.create(store, "s", namespace="n").with_context(
        "knowledge", provider=StoreSearchProvider(store)
    )
    p = await s.get_context_provider("knowledge")
    await p.set("rollback", "To roll back, redeploy the previous tag.")
    await p.set("tags", "Every release gets a tag named after its date.")
    key = ScopeKey(namespace="n", session_id=None, label="knowledge")
    hits = await store.search_entries(key, parse_query('"previous release" tag'))
    assert {h.key for h in hits} == {"rollback", "tags"}
    hits = await store.search_entries(key, parse_query('"previous tag" release'))
    assert [h.key for h in hits] == ["rollback", "tags"]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert await store.search_entries(key, parse_query('"previous release"', match="all")) == []


async def test_prefixes_match_as_typed(corpus: Session) -> None:
    assert set(hit_ids(await corpus.search("deploy*"))) == {"m1", "m2", "m3"}
    assert hit_ids(await corpus.search("deploym*")) == ["m1"]
    assert hit_ids(await corpus.search("deployi*")) == ["m2"]
    # prefix and words combine (AND in all mode; in any mode, both count)
    assert hit_ids(await corpus.search("deploy* hotfix", match="all")) == ["m3"]
    assert hit_ids(await corpus.search("Deploy* production", match="all")) == ["m1"]
    assert hit_ids(await corpus.search("deploy* hotfix"))[0] == "m3"


async def test_result_fields(corpus: Session) -> None:
    [r] = await corpus.search("hotfix", match="all")
    assert r.session_id == "search"
    assert r.message_id == "m3"
    assert r.role == "user"
    assert r.text == "Deployed the hotfix; monitoring the dashboards."
    assert "hotfix" in r.snippet
    assert r.created_at.utcoffset() is not None
    assert isinstance(r.score, float)


async def test_ranking_best_first_ties_by_recency(store: Store) -> None:
    s = Session.create(store, "rank")
    await s.append_message(text_msg("weak", "kubernetes " + "filler words here " * 30))
    await s.append_message(text_msg("strong", "kubernetes kubernetes kubernetes cluster"))
    await s.append_message(text_msg("other", "nothing relevant"))
    results = await s.search("kubernetes")
    # "other" matches only through its context (its parent "strong"): always last
    assert hit_ids(results) == ["strong", "weak", "other"]
    assert results[0].score >= results[1].score >= results[2].score
    # identical texts: the most recent first
    t = Session.create(store, "ties")
    for i in range(3):
        await t.append_message(text_msg(f"t{i}", "identical wording here"))
    assert hit_ids(await t.search("identical")) == ["t2", "t1", "t0"]
    assert hit_ids(await t.search("identical", limit=2)) == ["t2", "t1"]


async def test_tool_text_is_indexed_at_lower_weight(store: Store) -> None:
    s = Session.create(store, "tools")
    await s.append_message(
        {
            "id": "tool",
            "role": "assistant",
            "parts": [
                {
                    "type": "tool-get_weather",
                    "toolCallId": "c1",
                    "state": "output-available",
                    "input": {"city": "Reykjavik"},
                    "output": {"forecast": "snow"},
                }
            ],
        }
    )
    await s.append_message(text_msg("text", "What is the weather in Reykjavik with snow?"))
    assert set(hit_ids(await s.search("reykjavik"))) == {"tool", "text"}
    assert hit_ids(await s.search("reykjavik snow")) == ["text", "tool"]
    assert hit_ids(await s.search("get_weather", match="all")) == ["tool"]


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '""',
        "*",
        "**",
        "deploy**",
        "NEAR(",
        "NEAR(deploy, release)",
        "-",
        "-deploy",
        ":",
        "text:deploy",
        "(",
        ")",
        "((deploy",
        "deploy)",
        "AND",
        "OR NOT",
        "'; DROP TABLE messages; --",
        "1 OR 1=1",
        "^deploy",
        "deploy + release",
        '"unterminated phrase',
        "{col}: x",
        "\x00",
        "日本語*",
        "",
        "   ",
    ],
)
async def test_hostile_queries_never_raise(corpus: Session, query: str) -> None:
    results = await corpus.search(query)
    assert isinstance(results, list)


async def test_hostile_query_still_searches_its_words(corpus: Session) -> None:
    assert hit_ids(await corpus.search('((hotfix)) "', match="all")) == ["m3"]
    assert hit_ids(await corpus.search("hotfix*)", match="all")) == ["m3"]
    assert hit_ids(await corpus.search("-hotfix", match="all")) == ["m3"]
    assert hit_ids(await corpus.search("text:hotfix", match="all")) == []  # "text" is a word
    assert hit_ids(await corpus.search("text:hotfix"))[0] == "m3"


async def test_empty_query_returns_nothing(corpus: Session) -> None:
    assert await corpus.search("") == []
    assert await corpus.search("!!! ???") == []
    assert await corpus.search("deploy", limit=0) == []


async def test_a_bad_limit_is_a_clear_error(corpus: Session) -> None:
    """A negative limit is an error, not an empty list; a limit that is not an integer says
    so (it raised Python's own comparison error)."""
    for call in (corpus.search, SessionManager(corpus.store, namespace=corpus.namespace).search):
        with pytest.raises(ValueError, match="limit must be 0 or more"):
            await call("deploy", limit=-1)
        for bad in ("5", None, 2.5, True):
            with pytest.raises(TypeError, match="limit must be an integer"):
                await call("deploy", limit=bad)  # type: ignore[arg-type]


async def test_no_ghosts_after_update_and_delete(store: Store) -> None:
    s = Session.create(store, "ghosts")
    await s.append_message(text_msg("a", "original zebra text"))
    await s.append_message(text_msg("b", "another zebra"))
    await s.update_message(text_msg("a", "replacement giraffe text"))
    assert hit_ids(await s.search("zebra")) == ["b"]  # b's context is a's new text
    assert hit_ids(await s.search("original")) == []
    assert hit_ids(await s.search("giraffe")) == ["a", "b"]  # b through its context
    assert hit_ids(await s.search("zeb*")) == ["b"]
    await s.delete_messages(["b"])
    assert await s.search("zebra") == []
    assert await s.search("zeb*") == []
    await s.clear_messages()
    assert await s.search("giraffe") == []
    assert await s.search("gir*") == []


async def test_store_search_across_sessions_of_a_namespace(store: Store) -> None:
    a = Session.create(store, "a", namespace="ns")
    b = Session.create(store, "b", namespace="ns")
    c = Session.create(store, "c", namespace="elsewhere")
    for s in (a, b, c):
        await s.append_message(text_msg("m", f"shared topic from {s.session_id}"))
    q = parse_query("shared topic")
    results = await store.search("ns", q)
    assert sorted(r.session_id for r in results) == ["a", "b"]
    only_b = await store.search("ns", q, session_ids=["b"])
    assert [r.session_id for r in only_b] == ["b"]
    assert await store.search("ns", q, session_ids=[]) == []
    assert await store.search("nobody", q) == []


async def test_the_snippet_of_a_long_message_shows_its_hit(store: Store) -> None:
    """A long message (a tool output, a pasted log) that matches only near its end shows the
    matching passage, not its first words."""
    s = Session.create(store, "long")
    log = "line of ordinary build output. " * 1_000 + "ERROR: the needle was not found."
    await s.append_message(text_msg("log", log))
    [hit] = await s.search("needle")
    assert hit.message_id == "log" and hit.snippet.startswith("…")
    assert "the [needle] was not found." in hit.snippet


async def test_snippets_are_the_same_on_every_backend(store: Store) -> None:
    """A 16-word window from a little before the best hits, matches in brackets, … where the
    text is cut — made by the same code for both backends."""
    s = Session.create(store, "snippets")
    long = (
        "We met on Monday to plan the week and everyone had coffee before the call. "
        "The deployment of the billing service failed at noon because a migration locked "
        "the accounts table for nine minutes, and nobody noticed until the dashboards went red."
    )
    await s.append_message(text_msg("m1", long))
    await s.append_message(
        {
            "id": "m2",
            "role": "assistant",
            "parts": [
                {
                    "type": "tool-call",
                    "toolCallId": "c1",
                    "toolName": "shell",
                    "state": "output-available",
                    "input": {"cmd": "kubectl rollout undo deployment/billing"},
                    "output": "rolled back",
                }
            ],
        }
    )
    [hit] = await s.search("migration", match="all")
    assert hit.snippet == (
        "…because a [migration] locked the accounts table for nine minutes, and nobody noticed"
        " until the dashboards…"
    )
    [hit] = await s.search('"billing service"', match="all")
    assert hit.snippet == (
        "…of the [billing] [service] failed at noon because a migration locked the accounts"
        " table for nine…"
    )
    hits = await s.search("rollout", match="all")
    assert [h.message_id for h in hits] == ["m2"] and "[rollout]" in hits[0].snippet
    [hit] = await s.search("coffee", match="all")
    assert hit.snippet == (
        "…everyone had [coffee] before the call. The deployment of the billing service failed"
        " at noon because…"
    )


async def test_a_message_without_words_of_its_own_is_never_a_hit(store: Store) -> None:
    """DESIGN §5.1: the parent's text is context, not a reason on its own. A reply that is only
    a memory tool's call (not indexed) or has no text is never returned for its parent's words."""
    s = Session.create(store, "quiet")
    await s.append_message(text_msg("p1", "The deployment is scheduled for Friday."))
    await s.append_message(
        {
            "id": "c1",
            "role": "assistant",
            "parts": [
                {
                    "type": "tool-session_search",
                    "toolCallId": "t1",
                    "state": "output-available",
                    "input": {"query": "deployment"},
                    "output": "[user] The deployment is scheduled for Friday.",
                }
            ],
        }
    )
    await s.append_message(
        {"id": "c2", "role": "assistant", "parts": [{"type": "text", "text": ""}]}
    )
    await s.append_message(text_msg("c3", "Noted, Friday it is.", "assistant"))
    assert hit_ids(await s.search("deployment")) == ["p1"]
    assert set(hit_ids(await s.search("friday"))) == {"p1", "c3"}


async def test_stems_join_a_word_and_its_derived_forms(corpus: Session) -> None:
    """DESIGN §5.1: an English Snowball-class stemmer — "deploy" finds "deployment" (the
    original Porter stemmer made "deploi" of "deploying" and "deploy" of "deployment")."""
    assert set(hit_ids(await corpus.search("deploy", match="all"))) == {"m1", "m2", "m3"}
    assert set(hit_ids(await corpus.search("deployment", match="all"))) == {"m1", "m2", "m3"}
    assert set(hit_ids(await corpus.search("deploys", match="all"))) == {"m1", "m2", "m3"}
