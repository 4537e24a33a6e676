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
or tool text always ranks above one that matches through its context alone. ``k1``/``b`` and
the weights were chosen on the LoCoMo development half (docs/benchmarks.md).
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from mindstore.lexical.tokens import keys, phrase_keys, units
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
    "contains_phrase",
    "document",
    "passes_phrases",
    "plan",
    "probe_candidates",
    "rank",
    "required_keys",
    "term_keys",
]

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
    """The index rows of a message (see the module docstring)."""
    own = list(units(text))
    tool = list(units(tool_text)) if tool_text else []
    ctx = list(units(context)) if context else []
    tf: dict[str, float] = defaultdict(float)
    cf: dict[str, float] = defaultdict(float)
    raw: dict[str, float] = defaultdict(float)
    for k in keys(own):
        tf[k] += 1.0
    for k in keys(tool):
        tf[k] += W_TOOL
    for k in keys(ctx):
        cf[k] += 1.0
    for u in own:
        if not u.cjk:
            raw[u.raw] += 1.0
    for u in tool:
        if not u.cjk:
            raw[u.raw] += W_TOOL
    rows = [(KIND_TERM, k, tf.get(k, 0.0), cf.get(k, 0.0)) for k in {**tf, **cf}]
    rows += [(KIND_RAW, k, v, 0.0) for k, v in raw.items()]
    length = len(own) + len(tool) + W_CTX * len(ctx)
    return Document(rows=rows, length=float(length))


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
    session_lengths: Mapping[int, float] | None = None,
    top: int | None = None,
    dfs: Mapping[str, int] | None = None,
    docs: set[int] | None = None,
) -> list[tuple[float, int, int]]:
    """Score every candidate: ``rows`` are all index rows of the namespace for the query's
    term keys (kind 0) and its prefixes (kind 1, every raw word starting with one); ``sids``
    limits the candidates (not the statistics) to those sessions. Returns
    ``(score, doc, sid)`` best first, ties by recency (higher doc first) — the best ``top``
    only, when given. Phrases are only checked for their keys here: callers confirm adjacency
    with :func:`contains_phrase`.

    ``session_lengths`` (sid → weighted length of the session's documents, for every session
    of the namespace) adds the session score: BM25 of the query against each session as one
    document (own and tool text), times :data:`W_SESSION` — a turn in a conversation that is
    about the question ranks above the same words in an unrelated one.

    ``dfs`` gives the document frequency of keys whose rows were read for some documents only
    (see :func:`plan`); ``docs`` then limits the candidates to those documents."""
    if n_docs <= 0:
        return []
    k1, b, wctx = K1, B, W_CTX
    norm0 = k1 * (1.0 - b)
    norm1 = k1 * b / max(total_length / n_docs, 1e-9)
    k1p = k1 + 1.0
    term_rows: list[Row] = []
    raw_rows: list[Row] = []
    for r in rows:
        (raw_rows if r[0] else term_rows).append(r)
    # one "term" per key and per prefix: (tf, ctx) by doc
    terms: dict[str, dict[int, tuple[float, float]]] = defaultdict(dict)
    sid_of: dict[int, int] = {}
    dl_of: dict[int, float] = {}
    for _, key, doc, sid, tf, ctx, dl in term_rows:
        terms[key][doc] = (tf, ctx)
        sid_of[doc] = sid
        dl_of[doc] = dl
    for p in query.prefixes:
        per: dict[int, tuple[float, float]] = {}
        for _, key, doc, sid, tf, _ctx, dl in raw_rows:
            if key.startswith(p):
                old = per.get(doc)
                per[doc] = (tf + old[0], 0.0) if old is not None else (tf, 0.0)
                sid_of[doc] = sid
                dl_of[doc] = dl
        terms["\x00" + p] = per  # a prefix's name cannot clash with a key
    required = required_keys(query)
    if query.match == "all":
        required += ["\x00" + p for p in query.prefixes]
    scored = [*term_keys(query), *("\x00" + p for p in query.prefixes)]
    scores: dict[int, float] = {}
    own: set[int] = set()
    partial = dfs or {}
    for name in scored:
        postings = terms.get(name)
        if not postings:
            continue
        df = max(len(postings), partial.get(name, 0))
        idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
        get = scores.get
        for d, (tf, ctx) in postings.items():
            f = tf + wctx * ctx
            if f > 0:
                scores[d] = get(d, 0.0) + idf * f * k1p / (f + norm0 + norm1 * dl_of[d])
                if tf > 0:
                    own.add(d)
    if required:
        for name in required:
            postings = terms.get(name, {})
            scores = {d: v for d, v in scores.items() if postings.get(d, (0.0,))[0] > 0}
    if sids is not None:
        scores = {d: v for d, v in scores.items() if sid_of[d] in sids}
    if docs is not None:
        scores = {d: v for d, v in scores.items() if d in docs}
    if session_lengths and len(session_lengths) > 1 and scores:
        boost = _session_scores(terms, scored, sid_of, session_lengths)
        scores = {d: v + W_SESSION * boost.get(sid_of[d], 0.0) for d, v in scores.items()}
    # A hit on the message's own words ranks above every hit on its context alone: own hits
    # are lifted by the best context-only score, so the order and the scores agree.
    lift = max((v for d, v in scores.items() if d not in own), default=0.0)
    if lift:
        scores = {d: v + lift if d in own else v for d, v in scores.items()}
    if top is not None and top < len(scores):
        best = heapq.nlargest(top, scores.items(), key=lambda kv: (kv[1], kv[0]))
    else:
        best = sorted(scores.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    return [(v, d, sid_of[d]) for d, v in best]


ROW_BUDGET: Final = 5_000
"""Index rows a search reads in full; beyond it the most common words are only looked up for
the messages the rarer words found (:func:`plan`)."""

PROBED: Final = 100
"""Messages (best by the rarer words) the most common words re-rank when a query is pruned."""


def plan(query: ParsedQuery, dfs: Mapping[str, int]) -> tuple[list[str], list[str]]:
    """Split the query's term keys into those read in full and those looked up only for the
    candidates the others find. ``dfs``: each key's document frequency (counted up to a cap
    above :data:`ROW_BUDGET`). Exact BM25 while the keys' rows total at most ROW_BUDGET (every
    LoCoMo conversation, a question about a namespace of thousands of messages); beyond, a
    long question over a big namespace would read hundreds of thousands of rows for its most
    common words, so the rarest keys are read (at least one) and the rest only re-rank what
    they found. With required keys (phrases, ``match="all"``) the rarest required key bounds
    the candidates and everything else is looked up for them."""
    keys = term_keys(query)
    if sum(dfs.get(k, 0) for k in keys) <= ROW_BUDGET:
        return keys, []
    required = required_keys(query)
    if required:
        anchor = min(required, key=lambda k: (dfs.get(k, 0), k))
        return [anchor], [k for k in keys if k != anchor]
    full: list[str] = []
    used = 0
    for k in sorted(keys, key=lambda k: (dfs.get(k, 0), k)):
        if full and used + dfs.get(k, 0) > ROW_BUDGET:
            break
        full.append(k)
        used += dfs.get(k, 0)
    return full, [k for k in keys if k not in full]


def probe_candidates(
    query: ParsedQuery,
    full: Sequence[str],
    rows: list[Row],
    n_docs: int,
    total_length: float,
    sids: set[int] | None,
    session_lengths: Mapping[int, float] | None,
) -> set[int]:
    """The documents a pruned query (:func:`plan`) looks the other keys up for: with required
    keys, every document of the rarest one; otherwise the best :data:`PROBED` by the keys
    read in full."""
    if required_keys(query):
        return {r[2] for r in rows if r[0] == KIND_TERM and r[1] in full}
    first = replace(query, words=tuple(w for w in query.words if w in full))
    ranked = rank(first, rows, n_docs, total_length, sids, session_lengths, PROBED)
    return {d for _, d, _ in ranked}


def _session_scores(
    terms: Mapping[str, Mapping[int, tuple[float, float]]],
    names: Sequence[str],
    sid_of: Mapping[int, int],
    lengths: Mapping[int, float],
) -> dict[int, float]:
    n = len(lengths)
    avg = max(sum(lengths.values()) / n, 1e-9)
    out: dict[int, float] = defaultdict(float)
    k1, b = K1, B
    for name in names:
        per: dict[int, float] = defaultdict(float)
        for d, (tf, _) in terms.get(name, {}).items():
            if tf > 0:
                per[sid_of[d]] += tf
        if not per:
            continue
        df = len(per)
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        for sid, f in per.items():
            norm = 1.0 - b + b * lengths.get(sid, avg) / avg
            out[sid] += idf * f * (k1 + 1.0) / (f + k1 * norm)
    return out


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
