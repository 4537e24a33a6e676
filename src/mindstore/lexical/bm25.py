"""What a document puts in the index, and Okapi BM25 over what a query reads back. Pure.

A message is one document with three fields: its own text, its tool activity (weight
:data:`W_TOOL`) and its parent's text as conversational context (weight :data:`W_CTX`). The
index holds, per document:

* one row per *key* (:func:`mindstore.lexical.tokens.keys`) with ``tf`` (occurrences in the own
  text plus ``W_TOOL`` × occurrences in the tool text) and ``ctx`` (occurrences in the context);
* one row per *raw word* of the own and tool text (unstemmed, for ``prefix*``);
* its weighted length ``dl``, repeated in every row so scoring reads nothing else.

BM25 (Robertson/Spärck Jones IDF as in Lucene, always positive) with the field weights folded
into the term frequency, BM25F style: ``f = tf + W_CTX·ctx``,
``score = Σ idf · f·(k1+1) / (f + k1·(1 − b + b·dl/avgdl))``, plus :data:`W_SESSION` × the same
BM25 of the query against the message's whole session (a turn of a conversation about the
question ranks above the same words elsewhere). Document count, average length and document
frequencies come from the searched namespace only. A message holding a query word in its own
or tool text always ranks above one that matches through its context alone, and with a query
of up to :data:`COVERAGE_WORDS` words, one holding every word in its own text above one holding
fewer (only "every word" is a tier: graded coverage, more words above fewer, cost recall on
natural questions; docs/benchmarks.md). ``k1``/``b`` and
the weights were chosen on the LoCoMo development half (docs/benchmarks.md).

Cost decisions (measured with bench/bench_core.py and bench_postgres.py):

* A search reads rows, it does not scan: :func:`planner` keeps BM25 exact while the query's
  rows total at most :data:`ROW_BUDGET`, and beyond that reads only the rarer keys in full and
  looks the common ones up for the best :data:`PROBED` documents. Counting document
  frequencies is bounded as well (a share of the budget per key, then geometric rounds within
  :data:`COUNT_BUDGET`): counting every key up to the budget cost a 60-word question as much
  as the rest of its search on SQLite, and most of it on PostgreSQL.
* When no key of a query is rare (each in more than ROW_BUDGET documents), even its rarest
  key is read for its :data:`SAMPLE_ROWS` most recent documents only, and the best of those
  are probed for the others: reading a word held by most of a 100,000-message namespace took
  160 ms on SQLite, more than the rest of a search. Such a query ranks recent messages.
* Both bounds serve a search for a few best hits only: a ``limit`` over PROBED plans exact (a
  crash check counting the messages holding a word got the 2,000-message sample), and a pruned
  ``any`` query whose rarer words found fewer documents than its limit adds the most recent
  holders of its rarest common words (:func:`fill_reads`) instead of returning short (read
  in full when even those are too few: a quiet session of a busy namespace); and a
  sample holding fewer than the limit (of the searched sessions' documents, when limited to
  sessions) is replaced by the anchor read in full.
* A pruned query's common keys get their IDF from their share of the probed documents (their
  exact count would mean reading all their rows). Against exact BM25 this agrees better with
  the exact top 20 than the former IDF of a count capped at the budget, which made the most
  common words weigh like moderately rare ones in big namespaces.
* :class:`Ranking` builds a search's postings once and scores only the candidates still
  allowed (sessions, probed documents); scoring is kept in Python rather than SQL so both
  backends compute bit-identical scores (their SQL would sum in different orders).
* A document's rows come from cached per-text counts: a message's own text is its child's
  context, so a conversation is tokenised once; ASCII text skips building units.
"""

from __future__ import annotations

import functools
import heapq
import math
from collections import defaultdict
from collections.abc import Collection, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from mindstore.lexical.sessions import Sessions, session_scores
from mindstore.lexical.tokens import ascii_words, keys, phrase_keys, stem, units
from mindstore.search import ParsedQuery

__all__ = [
    "K1",
    "KIND_RAW",
    "KIND_TERM",
    "W_CTX",
    "W_SESSION",
    "W_TOOL",
    "B",
    "Document",
    "Plan",
    "Ranking",
    "Sessions",
    "contains_phrase",
    "document",
    "fill_reads",
    "passes_phrases",
    "planner",
    "probe_candidates",
    "rank",
    "required_keys",
    "term_keys",
]

COVERAGE_WORDS: Final = 5
"""Queries of up to this many words rank own-text hits by how many of the words they hold
first, then by score; longer ones (natural questions) by score alone."""
K1: Final = 1.2
B: Final = 0.75
W_SESSION: Final = 0.5
W_TOOL: Final = 0.5
W_CTX: Final = 0.5
KIND_TERM: Final = 0
KIND_RAW: Final = 1

Row = tuple[int, str, int, int, float, float, float]
"""An index row as stores read it back: (kind, key, doc, sid, tf, ctx, dl)."""


@dataclass(frozen=True, slots=True)
class Document:
    """The index rows of one document: ``rows`` are (kind, key, tf, ctx); ``length`` is dl."""

    rows: list[tuple[int, str, float, float]]
    length: float


def document(text: str, tool_text: str = "", context: str = "") -> Document:
    """The index rows of a message (see the module docstring). A message with no words of its
    own (none in its text or tool text: e.g. only a memory tool's call) gets no rows: its
    parent's words alone never make it a hit (DESIGN §5.1)."""
    own_keys, own_raw, own_n = _fields(text)
    tool_keys, tool_raw, tool_n = _fields(tool_text) if tool_text else _EMPTY
    if not own_n and not tool_n:
        return Document(rows=[], length=0.0)
    ctx_keys, _, ctx_n = _fields(context) if context else _EMPTY
    tf: dict[str, float] = {}
    for k, n in own_keys.items():
        tf[k] = float(n)
    for k, n in tool_keys.items():
        tf[k] = tf.get(k, 0.0) + W_TOOL * n
    raw: dict[str, float] = {}
    for k, n in own_raw.items():
        raw[k] = float(n)
    for k, n in tool_raw.items():
        raw[k] = raw.get(k, 0.0) + W_TOOL * n
    rows = [(KIND_TERM, k, tf.get(k, 0.0), float(ctx_keys.get(k, 0))) for k in {**tf, **ctx_keys}]
    rows += [(KIND_RAW, k, v, 0.0) for k, v in raw.items()]
    length = own_n + tool_n + W_CTX * ctx_n
    return Document(rows=rows, length=float(length))


_Fields = tuple[dict[str, int], dict[str, int], int]
_EMPTY: Final[_Fields] = ({}, {}, 0)


@functools.lru_cache(maxsize=256)
def _fields(text: str) -> _Fields:
    """A text's key counts, raw-word counts (not CJK) and unit count. Cached: a message's own
    text comes back as the next message's context (its parent's text), so a conversation
    is tokenised once, not twice. (The caller must not change the returned dicts.)"""
    key_counts: dict[str, int] = {}
    raw_counts: dict[str, int] = {}
    if text.isascii():
        words = ascii_words(text)
        for w in words:
            raw_counts[w] = raw_counts.get(w, 0) + 1
        for w in words:
            t = stem(w)
            key_counts[t] = key_counts.get(t, 0) + 1
        return key_counts, raw_counts, len(words)
    seq = list(units(text))
    for k in keys(seq):
        key_counts[k] = key_counts.get(k, 0) + 1
    for u in seq:
        if not u.cjk:
            raw_counts[u.raw] = raw_counts.get(u.raw, 0) + 1
    return key_counts, raw_counts, len(seq)


def required_keys(query: ParsedQuery) -> list[str]:
    """Term keys every hit must hold in its own or tool text: the phrases' keys, and with
    ``match="all"`` every word."""

    out: list[str] = []
    for p in query.phrases:
        out += phrase_keys(p)
    if query.match == "all":
        out += query.words
    return list(dict.fromkeys(out))


def term_keys(query: ParsedQuery) -> list[str]:
    """Every term key a query reads (words and the phrases' keys)."""
    return list(dict.fromkeys([*query.words, *required_keys(query)]))


def rank(
    query: ParsedQuery,
    rows: Iterable[Row],
    n_docs: int,
    total_length: float,
    sids: set[int] | None = None,
    session_lengths: Mapping[int, float] | Sessions | None = None,
    top: int | None = None,
    dfs: Mapping[str, float] | None = None,
    docs: set[int] | None = None,
) -> list[tuple[float, int, int]]:
    """Score every candidate: ``rows`` are all index rows of the namespace for the query's
    term keys (kind 0) and its prefixes (kind 1, every raw word starting with one); ``sids``
    limits the candidates (not the statistics) to those sessions. Returns
    ``(score, doc, sid)`` best first, ties by recency (higher doc first) — the best ``top``
    only, when given. Phrases are only checked for their keys here: callers confirm adjacency
    with :func:`contains_phrase`.

    ``session_lengths`` (sid → weighted length of the session's documents, for every session
    of the namespace; or their :class:`Sessions` statistics) adds the session score: BM25 of
    the query against each session as one document (own and tool text), times
    :data:`W_SESSION` — a turn in a conversation that is about the question ranks above the
    same words in an unrelated one.

    ``dfs`` gives the document frequency of keys whose rows were read for some documents only
    (see :func:`planner`); ``docs`` then limits the candidates to those documents."""
    r = Ranking(query, n_docs, total_length, sids, session_lengths)
    r.add(rows)
    return r.rank(top, dfs, docs)


class Ranking:
    """The postings a search has read so far, scored on demand: :func:`rank` in steps, so a
    pruned search (:func:`planner`) builds its postings once — the rows read in full, then the
    common keys' rows of the probed documents — instead of once per pass."""

    __slots__ = (
        "_avg",
        "_dl",
        "_per_session",
        "_sid",
        "_terms",
        "lengths",
        "n_docs",
        "query",
        "sids",
    )

    def __init__(
        self,
        query: ParsedQuery,
        n_docs: int,
        total_length: float,
        sids: set[int] | None = None,
        session_lengths: Mapping[int, float] | Sessions | None = None,
    ) -> None:
        self.query = query
        self.n_docs = n_docs
        self.sids = sids
        self.lengths = (
            Sessions.of(session_lengths)
            if session_lengths is not None and not isinstance(session_lengths, Sessions)
            else session_lengths
        )
        self._avg = max(total_length / n_docs, 1e-9) if n_docs > 0 else 1.0
        # one "term" per key and per prefix ("\x00" + prefix: cannot clash with a key):
        # doc -> (tf, ctx)
        self._terms: dict[str, dict[int, tuple[float, float]]] = defaultdict(dict)
        self._sid: dict[int, int] = {}
        self._dl: dict[int, float] = {}
        # term -> sid -> summed own tf: the session score's input, kept between the ranks of a
        # pruned search (its rare keys' postings are the bulk, and do not change)
        self._per_session: dict[str, dict[int, float]] = {}

    def add(self, rows: Iterable[Row]) -> None:
        """Add index rows (each (kind, key, doc) at most once over all calls)."""
        terms, sid_of, dl_of = self._terms, self._sid, self._dl
        raw_rows: list[Row] = []
        touched: set[str] = set()
        last: str | None = None
        per: dict[int, tuple[float, float]] = {}
        for r in rows:
            if r[0]:
                raw_rows.append(r)
                continue
            _, key, doc, sid, tf, ctx, dl = r
            if key != last:  # stores read a key's rows together
                per = terms[key]
                touched.add(key)
                last = key
            per[doc] = (tf, ctx)
            sid_of[doc] = sid
            dl_of[doc] = dl
        for key in touched:
            self._per_session.pop(key, None)
        if not raw_rows:
            return
        for p in self.query.prefixes:
            self._per_session.pop("\x00" + p, None)
            per = terms["\x00" + p]
            for _, key, doc, sid, tf, _ctx, dl in raw_rows:
                if key.startswith(p):
                    old = per.get(doc)
                    per[doc] = (tf + old[0], 0.0) if old is not None else (tf, 0.0)
                    sid_of[doc] = sid
                    dl_of[doc] = dl

    def add_term(self, key: str, rows: Iterable[tuple[int, int, float, float, float]]) -> None:
        """Add the index rows ``(doc, sid, tf, ctx, dl)`` of term ``key`` (as :meth:`add`)."""
        per, sid_of, dl_of = self._terms[key], self._sid, self._dl
        self._per_session.pop(key, None)
        for doc, sid, tf, ctx, dl in rows:
            per[doc] = (tf, ctx)
            sid_of[doc] = sid
            dl_of[doc] = dl

    def too_few(self, keys: Iterable[str], limit: int) -> bool:
        """Whether the documents read for ``keys`` are fewer than ``limit``, counting only the
        searched sessions' when limited to sessions: a recent sample of a common word
        (:data:`SAMPLE_ROWS`) may hold none of a quiet session's."""
        docs = {d for k in keys for d in self._terms.get(k, ())}
        if self.sids is not None:
            sids, sid_of = self.sids, self._sid
            return sum(1 for d in docs if sid_of[d] in sids) < limit
        return len(docs) < limit

    def documents(self, key: str) -> set[int]:
        """The documents read for a term key."""
        return set(self._terms.get(key, ()))

    def missing(self) -> list[int]:
        """The sessions of the documents read so far whose length the session score needs and
        :attr:`lengths` does not hold yet (the store reads them before ranking)."""
        lengths = self.lengths
        if lengths is None or lengths.count <= 1 or len(lengths.lengths) >= lengths.count:
            return []  # (every session's length is known)
        known = lengths.lengths
        return sorted({sid for sid in self._sid.values() if sid not in known})

    def rank(
        self,
        top: int | None = None,
        dfs: Mapping[str, float] | None = None,
        docs: set[int] | None = None,
        query: ParsedQuery | None = None,
    ) -> list[tuple[float, int, int]]:
        """As :func:`rank` over the rows added so far; ``query`` (default: the search's) may
        be a narrower query over the same rows."""
        if self.n_docs <= 0:
            return []
        query = self.query if query is None else query
        n_docs = self.n_docs
        k1, b, wctx = K1, B, W_CTX
        norm0 = k1 * (1.0 - b)
        norm1 = k1 * b / self._avg
        k1p = k1 + 1.0
        terms, sid_of, dl_of = self._terms, self._sid, self._dl
        required = required_keys(query)
        if query.match == "all":
            required += ["\x00" + p for p in query.prefixes]
        scored = [*term_keys(query), *("\x00" + p for p in query.prefixes)]
        scores: dict[int, float] = {}
        own: set[int] = set()
        # with a short query: document -> how many of its words the document's own text holds
        every = len(scored) if len(scored) <= COVERAGE_WORDS else 0
        held: defaultdict[int, int] = defaultdict(int)
        partial = dfs or {}
        # Candidates outside `sids`/`docs` are never scored (each document's sum is still
        # taken in the same order, so the scores are those of scoring everything and
        # filtering after).
        allowed: set[int] | None = docs
        if self.sids is not None:
            sids = self.sids
            in_sids = {d for d, sid in sid_of.items() if sid in sids}
            allowed = in_sids if allowed is None else allowed & in_sids
        for name in scored:
            postings = terms.get(name)
            if not postings:
                continue
            df = max(len(postings), partial.get(name, 0))
            idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
            get = scores.get
            items = (
                postings.items()
                if allowed is None
                else [(d, postings[d]) for d in allowed if d in postings]
                if len(allowed) < len(postings)
                else [(d, v) for d, v in postings.items() if d in allowed]
            )
            for d, (tf, ctx) in items:
                f = tf + wctx * ctx
                if f > 0:
                    scores[d] = get(d, 0.0) + idf * f * k1p / (f + norm0 + norm1 * dl_of[d])
                    if tf > 0:
                        own.add(d)
                        if every:
                            held[d] += 1
        if required:
            for name in required:
                postings = terms.get(name, {})
                scores = {d: v for d, v in scores.items() if postings.get(d, (0.0,))[0] > 0}
        lengths = self.lengths
        if lengths is not None and lengths.count > 1 and scores:
            boost = session_scores(self._session_tf, scored, lengths, K1, B)
            weighted = {sid: W_SESSION * v for sid, v in boost.items()}.get
            scores = {d: v + weighted(sid_of[d], 0.0) for d, v in scores.items()}
        # Tiers, each lifted above the best score below it so the order and the scores agree:
        # a hit on the message's own words ranks above every hit on its context alone, and
        # with a short query, an own hit holding every word of it above one holding fewer
        # (DESIGN 5.1: the message holding every word comes first).
        tiers: dict[int, list[int]] = defaultdict(list)
        for d in scores:
            tiers[(2 if every and held.get(d) == every else 1) if d in own else 0].append(d)
        lift = 0.0
        for tier in sorted(tiers):
            docs_in = tiers[tier]
            if lift:
                for d in docs_in:
                    scores[d] += lift
            lift = max(lift, max(scores[d] for d in docs_in))
        # best first by (score, doc): the pairs compare as the sort key would
        ordered = zip(scores.values(), scores.keys(), strict=True)
        if top is not None and top < len(scores):
            best = heapq.nlargest(top, ordered)
        else:
            best = sorted(ordered, reverse=True)
        return [(v, d, sid_of[d]) for v, d in best]

    def _session_tf(self, name: str) -> dict[int, float]:
        """Each session's summed own term frequency of term ``name`` (cached)."""
        per = self._per_session.get(name)
        if per is None:
            sid_of = self._sid
            acc: dict[int, float] = defaultdict(float)
            for d, (tf, _) in self._terms.get(name, {}).items():
                if tf > 0:
                    acc[sid_of[d]] += tf
            per = self._per_session[name] = acc
        return per

    def probe_candidates(self, full: Sequence[str]) -> set[int]:
        """As :func:`probe_candidates` over the rows added so far (those of ``full``)."""
        query = self.query
        if required_keys(query):
            out: set[int] = set()
            for k in full:
                out |= self.documents(k)
            return out
        first = replace(query, words=tuple(w for w in query.words if w in full))
        return {d for _, d, _ in self.rank(PROBED, query=first)}

    def probe_dfs(
        self, plan: Plan, docs: set[int], filled: Collection[str] = ()
    ) -> dict[str, float]:
        """Document frequencies of a pruned query's probed keys, for their IDF: the exact
        count when it was taken, else the key's share among the probed documents scaled to
        the namespace (a word in most of them is in most of the namespace), at least the
        lower bound counted. A ``filled`` key (:func:`fill_reads`) is in every document it
        added, so its share says nothing: its counted bound."""
        out: dict[str, float] = {}
        n = len(docs)
        for k in plan.probe:
            if k in plan.dfs:
                out[k] = plan.dfs[k]
                continue
            if k in filled:
                out[k] = float(plan.lower.get(k, 0))
                continue
            hits = len(self._terms.get(k, ())) if n else 0
            est = min(hits * self.n_docs / n, float(self.n_docs)) if n else 0.0
            out[k] = max(float(plan.lower.get(k, 0)), est)
        if plan.sample is not None:
            # A sampled anchor is in every probed document, so its share says nothing; it is
            # the rarest key as far as counted, but only a lower bound is known: take it as
            # common as the rarest other key (the counted bound when it is the only key).
            rarest_other = min(out.values(), default=0.0)
            for k in plan.full:
                if k not in plan.dfs:
                    seen = float(len(self._terms.get(k, ())))
                    out[k] = max(float(plan.lower.get(k, 0)), rarest_other, seen)
        return out


ROW_BUDGET: Final = 5_000
"""Index rows a search reads in full; beyond it the most common words are only looked up for
the messages the rarer words found (:func:`planner`)."""

COUNT_BUDGET: Final = 4 * ROW_BUDGET
"""Index rows a search may step through to count document frequencies for its plan (more is
only spent when every key is common: then :data:`ANCHOR_KEYS` of them are counted up to
ROW_BUDGET to find the rarest)."""

ANCHOR_KEYS: Final = 8

SHORT_QUERY: Final = 4
"""Keys up to which a query's keys are counted up to the budget in one go."""

PRUNED_BUDGET: Final = 5_000
"""Rows of the rarer keys a pruned search reads in full (measured on the bench_core corpus:
2,500 made a 60-word query 30 % faster but its top 20 agreed 10 % less with exact BM25)."""

PROBED: Final = 100
"""Messages (best by the rarer words) the most common words re-rank when a query is pruned."""

SAMPLE_ROWS: Final = 2_000
"""Rows a search reads of its anchor word when no word of it is rare (each in more than
ROW_BUDGET documents): the anchor's most recent documents, not all of them (measured on
bench/semantic.py's 100,000-message namespace: reading a word in 94,620 messages took 160 ms
in full; a query of only such words is ranked among the recent messages that hold the rarest
of them)."""


@dataclass(frozen=True, slots=True)
class Plan:
    """Which term keys a search reads in full (``full``) and which it looks up only for the
    candidates the others find (``probe``); ``dfs`` holds the document frequencies that were
    counted exactly, ``lower`` a lower bound for the others."""

    full: list[str]
    probe: list[str]
    dfs: dict[str, int]
    lower: dict[str, int]
    sample: int | None = None
    """When set, only the ``sample`` most recent documents of each ``full`` key are read (every
    key is common: see :data:`SAMPLE_ROWS`)."""


Count = tuple[list[str], int]
"""A counting request of :func:`planner`: for each key, ``min(document frequency, cap)``."""


def planner(query: ParsedQuery, limit: int) -> Generator[Count, Mapping[str, int], Plan]:
    """Plan a search (a generator: it yields ``(keys, cap)`` counting requests, the store sends
    back ``{key: min(df, cap)}``, and it returns the :class:`Plan`; so both backends count
    alike, one synchronously, one over the network).

    Exact BM25 while the keys' rows total at most ROW_BUDGET (every LoCoMo conversation, a
    question about a namespace of thousands of messages): then every key is read in full.
    Beyond, a long question over a big namespace would read hundreds of thousands of rows for
    its most common words, so the rarer keys are read in full (at least one) and the rest only
    re-rank the best PROBED documents they found; with required keys (phrases,
    ``match="all"``) the rarest required key bounds the candidates and everything else is
    looked up for them.

    Counting is bounded too (counting a common word's rows costs as much as reading them):
    every key is first counted up to an equal share of the budget (a query of at most
    :data:`SHORT_QUERY` keys: up to the budget); the keys over their share are counted again
    with a cap four times higher (at most what is left of the budget, and within
    :data:`COUNT_BUDGET` rows in all), until none is left or none can fit. Keys resolve in
    rising order of frequency, so the rarest are known first; the plan is exact exactly when
    every key resolves and the total fits. Only a pruned query with no key that fits counts
    :data:`ANCHOR_KEYS` of them up to the budget to find the rarest.

    A ``limit`` over PROBED is exact: pruning and sampling bound the candidates, so
    they only serve searches for a few best hits; asking for more asks for every match."""
    keys = term_keys(query)
    if not keys or limit > PROBED:
        return Plan(keys, [], {}, {})
    # a short query counts to the budget at once (one statement; the rounds would only
    # recount its common words)
    cap = ROW_BUDGET + 1 if len(keys) <= SHORT_QUERY else ROW_BUDGET // len(keys) + 1
    exact: dict[str, int] = {}
    lower: dict[str, int] = {}
    unknown = keys
    rare: dict[str, int] = {}
    used = 0
    spent = 0
    fits = True
    while unknown:
        counts = yield unknown, cap
        spent += sum(min(counts.get(k, 0), cap) for k in unknown)
        resolved = sorted((counts.get(k, 0), k) for k in unknown if counts.get(k, 0) < cap)
        for n, k in resolved:
            exact[k] = n
            if fits and used + n <= ROW_BUDGET:
                rare[k] = n
                used += n
            else:
                fits = False
        unknown = [k for k in unknown if k not in exact]
        for k in unknown:
            lower[k] = cap
        if not unknown:
            break
        left = ROW_BUDGET - used
        nxt = min(cap * 4, left + 1, (COUNT_BUDGET - spent) // len(unknown))
        if not fits or left < cap or nxt <= cap:
            fits = False  # the keys left have at least `cap` rows: they do not fit
            break
        cap = nxt
    if fits:
        return Plan(keys, [], exact, {})  # everything fits: exact
    required = required_keys(query)
    if required:
        cands = [k for k in required if k in rare]
        if not cands:
            cands = [k for k in required if k in exact]
            pending = [k for k in required if k not in exact][:ANCHOR_KEYS]
            full_counts = yield from _count_fully(pending, lower)
            for k in pending:
                n = full_counts.get(k, 0)
                if n <= ROW_BUDGET:
                    exact[k] = n
                    lower.pop(k, None)
                    cands.append(k)
                else:
                    lower[k] = n
            if not cands:
                cands = list(required)
        anchor = min(cands, key=lambda k: (exact.get(k, lower.get(k, 0)), k))
        return Plan(
            [anchor], [k for k in keys if k != anchor], exact, lower, _sample(anchor, lower)
        )
    full: list[str] = []
    used = 0
    for n, k in sorted((n, k) for k, n in rare.items()):
        if full and used + n > PRUNED_BUDGET:
            break
        full.append(k)
        used += n
    if not full:  # every key is common: read the rarest (of the first few)
        sample = keys[:ANCHOR_KEYS]
        full_counts = yield from _count_fully(sample, lower)
        anchor = min(sample, key=lambda k: (full_counts.get(k, 0), k))
        full = [anchor]
        for k in sample:
            n = full_counts.get(k, 0)
            if n <= ROW_BUDGET:
                exact[k] = n
                lower.pop(k, None)
            else:
                lower[k] = max(lower.get(k, 0), n)
        return Plan(full, [k for k in keys if k != anchor], exact, lower, _sample(anchor, lower))
    return Plan(full, [k for k in keys if k not in full], exact, lower)


FILL_ROWS: Final = 2_000
"""Index rows a pruned search may read to fill its limit (:func:`fill_reads`)."""


def fill_reads(plan: Plan, sessions: bool) -> list[tuple[str, int]]:
    """When a pruned ``any`` query's rarer words found fewer documents than the search asks
    for (a rare word in 3 messages next to common ones: the other hits hold the common
    words), the probed keys whose most recent documents join the candidates, one key at a
    time until there are enough: ``(key, rows to read)``, rarest first as far as counted,
    within :data:`FILL_ROWS`. One key is usually enough; a key known only to pass a long
    query's small share of the budget may hold fewer documents than asked for.

    A namespace-wide search reads :data:`PROBED` rows a key; one limited to ``sessions``
    reads a quarter of FILL_ROWS a key and keeps the documents of those sessions (the
    namespace's most recent holders of a word may all be elsewhere)."""
    per = FILL_ROWS // 4 if sessions else PROBED
    keys = sorted(plan.probe, key=lambda k: (plan.dfs.get(k, plan.lower.get(k, 0)), k))
    return [(k, per) for k in keys[: max(1, FILL_ROWS // per)]]


def _sample(anchor: str, lower: Mapping[str, int]) -> int | None:
    """SAMPLE_ROWS when the anchor is known to have more than ROW_BUDGET rows, else None."""
    return SAMPLE_ROWS if lower.get(anchor, 0) > ROW_BUDGET else None


def _count_fully(
    wanted: list[str], lower: Mapping[str, int]
) -> Generator[Count, Mapping[str, int], dict[str, int]]:
    """``min(df, ROW_BUDGET + 1)`` of ``wanted``, counting only those not known yet."""
    out = {k: lower[k] for k in wanted if lower.get(k, 0) > ROW_BUDGET}
    todo = [k for k in wanted if k not in out]
    if todo:
        counts = yield todo, ROW_BUDGET + 1
        out.update((k, counts.get(k, 0)) for k in todo)
    return out


def probe_candidates(
    query: ParsedQuery,
    full: Sequence[str],
    rows: list[Row],
    n_docs: int,
    total_length: float,
    sids: set[int] | None,
    session_lengths: Mapping[int, float] | Sessions | None,
) -> set[int]:
    """The documents a pruned query (:func:`planner`) looks the other keys up for: with required
    keys, every document of the rarest one; otherwise the best :data:`PROBED` by the keys
    read in full."""
    r = Ranking(query, n_docs, total_length, sids, session_lengths)
    r.add(rows)
    return r.probe_candidates(full)


def contains_phrase(phrase: Sequence[str], texts: Sequence[str]) -> bool:
    """Whether one of ``texts`` holds the phrase's terms adjacent (in one text)."""
    n = len(phrase)
    for text in texts:
        terms = [u.term for u in units(text)]
        first = phrase[0]
        for i in range(len(terms) - n + 1):
            if terms[i] == first and tuple(terms[i : i + n]) == tuple(phrase):
                return True
    return False


def passes_phrases(query: ParsedQuery, fields: Sequence[str]) -> bool:
    """Whether a candidate's own/tool ``fields`` hold every phrase of ``query`` (each within
    one field)."""
    return all(contains_phrase(p, fields) for p in query.phrases)
