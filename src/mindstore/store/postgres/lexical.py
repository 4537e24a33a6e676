"""The lexical index of :class:`~mindstore.store.postgres.PostgresStore` (DESIGN §5.1).

The same two tables as the SQLite backend (``search_terms``: one row per (collection, kind,
key, document) with term frequencies and the document's length; ``search_stats``: document
count and total length per (collection, part)), fed by the same Python tokenizer and ranked by
the same code (:mod:`mindstore.lexical`), so both backends return the same results with the
same scores. Keys are ``COLLATE "C"`` so a ``prefix*`` is a byte range of the primary key.
Statistics are kept per (namespace, session): an append updates its own session's row, which
the append transaction has locked anyway, so concurrent appenders never wait on a shared
counter. Functions here run inside the caller's transaction.

Index rows are read with one primary-key probe per key (or per (key, document) pair), spelled
as lateral joins so no planner estimate can turn them into a scan of the collection. The
primary key carries every other column as INCLUDE payload, so reads and document-frequency
counts are index-only scans where the visibility map is set (autovacuum); rows of a freshly
loaded table still cost a heap visit each until then. A third table, ``search_docs``, holds
each document's term rows (kind 0) again as one row of arrays keyed by document, for looking
many keys up in a few documents (:func:`_term_rows`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from mindstore.lexical import bm25
from mindstore.lexical.collections import entry_collection, message_collection
from mindstore.lexical.sessions import WIDE_SESSIONS
from mindstore.search import ParsedQuery

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    Conn = AsyncConnection[Any]
else:
    Conn = Any

__all__ = [
    "CONTEXT_CHARS",
    "DOC_ARRAYS",
    "STAMP",
    "Candidates",
    "add_rows",
    "candidates",
    "clear_session",
    "index_entry",
    "message_rows",
    "rebuild",
    "reindex_messages",
    "unindex",
]

CONTEXT_CHARS: Final = 4_000
"""Characters of the parent's text indexed as a message's context (as on SQLite)."""

Rows = tuple[
    list[str], list[int], list[str], list[int], list[int], list[float], list[float], list[float]
]


def message_rows() -> Rows:
    """Empty column arrays for :func:`add_rows`."""
    return ([], [], [], [], [], [], [], [])


def collect(rows: Rows, coll: str, doc: int, part: int, d: bm25.Document) -> None:
    """Append a document's rows to the column arrays."""
    colls, kinds, keys, docs, parts, tfs, ctxs, dls = rows
    for kind, key, tf, ctx in d.rows:
        colls.append(coll)
        kinds.append(kind)
        keys.append(key)
        docs.append(doc)
        parts.append(part)
        tfs.append(tf)
        ctxs.append(ctx)
        dls.append(d.length)


def message_document(text: str, tool: str, parent_text: str | None) -> bm25.Document:
    return bm25.document(text, tool, (parent_text or "")[:CONTEXT_CHARS])


# A document's search_docs arrays from its term rows (kind 0) grouped by document: the
# array_aggs share one order (by key, unique within a document), so their elements line up.
DOC_ARRAYS: Final = (
    'array_agg(key ORDER BY key COLLATE "C"), array_agg(tf ORDER BY key COLLATE "C"),'
    ' array_agg(ctx ORDER BY key COLLATE "C")'
)
# the term rows, and each document's term keys as one search_docs row
_INSERT_ROWS = (
    "WITH u AS MATERIALIZED (SELECT * FROM unnest(%s::text[], %s::smallint[], %s::text[],"
    " %s::bigint[], %s::bigint[], %s::real[], %s::real[], %s::real[])"
    " AS u(coll, kind, key, doc, part, tf, ctx, dl)), "
    "t AS (INSERT INTO search_terms (coll, kind, key, doc, part, tf, ctx, dl) SELECT * FROM u) "
    "INSERT INTO search_docs (coll, doc, part, dl, keys, tfs, ctxs) SELECT coll, doc, min(part),"
    f" min(dl), {DOC_ARRAYS} FROM u WHERE kind = 0 GROUP BY coll, doc"
)
# one row per (coll, part): the first row of each document carries its length
_ADD_STATS = (
    "INSERT INTO search_stats AS s (coll, part, docs, length) "
    "SELECT coll, part, count(*), sum(dl) FROM (SELECT DISTINCT coll, part, doc, dl FROM "
    "unnest(%s::text[], %s::bigint[], %s::bigint[], %s::real[]) AS u(coll, part, doc, dl)) d "
    "GROUP BY coll, part "
    "ON CONFLICT (coll, part) DO UPDATE SET docs = s.docs + excluded.docs, "
    "length = s.length + excluded.length"
)


async def add_rows(conn: Conn, rows: Rows) -> None:
    """Insert collected rows and add their documents to the statistics."""
    if not rows[0]:
        return
    await conn.execute(_INSERT_ROWS, rows)
    await conn.execute(_ADD_STATS, (rows[0], rows[4], rows[3], rows[7]))


async def unindex(conn: Conn, coll: str, docs: Sequence[int]) -> None:
    """Remove documents from collection ``coll`` (rows and statistics)."""
    if not docs:
        return
    # search_docs has one row per indexed document (every document with rows has term rows),
    # so its deleted rows are the statistics' deltas
    await conn.execute(
        "WITH t AS (DELETE FROM search_terms WHERE coll = %(coll)s AND doc = ANY(%(docs)s)), "
        "gone AS (DELETE FROM search_docs WHERE coll = %(coll)s AND doc = ANY(%(docs)s) "
        "RETURNING part, dl), per AS (SELECT part, count(*) AS n, sum(dl) AS len FROM gone "
        "GROUP BY part) "
        "UPDATE search_stats s SET docs = s.docs - per.n, length = s.length - per.len "
        "FROM per WHERE s.coll = %(coll)s AND s.part = per.part",
        {"coll": coll, "docs": list(docs)},
    )
    await conn.execute("DELETE FROM search_stats WHERE coll = %s AND docs <= 0", (coll,))


async def reindex_messages(conn: Conn, namespace: str, seqs: Sequence[int]) -> None:
    """Index ``seqs`` again from their stored text and their (current) parents' text."""
    if not seqs:
        return
    coll = message_collection(namespace)
    await unindex(conn, coll, seqs)
    cur = await conn.execute(
        "SELECT x.seq, m.sid, x.text, x.tool_text, p.text FROM message_search x "
        "JOIN messages m ON m.seq = x.seq LEFT JOIN message_search p ON p.seq = m.parent_seq "
        "WHERE x.seq = ANY(%s)",
        (list(seqs),),
    )
    rows = message_rows()
    for seq, sid, text, tool, parent_text in await cur.fetchall():
        collect(rows, coll, seq, sid, message_document(text, tool, parent_text))
    await add_rows(conn, rows)


async def children_of(conn: Conn, seqs: Sequence[int]) -> list[int]:
    cur = await conn.execute(
        "SELECT seq FROM messages WHERE parent_seq = ANY(%s) AND NOT (seq = ANY(%s))",
        (list(seqs), list(seqs)),
    )
    return [r[0] for r in await cur.fetchall()]


async def clear_session(conn: Conn, namespace: str, sid: int) -> None:
    coll = message_collection(namespace)
    docs = "doc IN (SELECT seq FROM messages WHERE sid = %(sid)s)"
    await conn.execute(
        f"WITH t AS (DELETE FROM search_terms WHERE coll = %(coll)s AND {docs}), "
        f"d AS (DELETE FROM search_docs WHERE coll = %(coll)s AND {docs}) "
        "DELETE FROM search_stats WHERE coll = %(coll)s AND part = %(sid)s",
        {"coll": coll, "sid": sid},
    )


async def index_entry(
    conn: Conn,
    k: tuple[str, str, str],
    doc: int,
    key: str,
    content: str,
    description: str | None,
) -> None:
    coll = entry_collection(*k)
    rows = message_rows()
    collect(rows, coll, doc, 0, bm25.document(f"{key}\n{content}", description or ""))
    await add_rows(conn, rows)


class Stamp(NamedTuple):
    """What a checked search's first statement read: its snapshot (:data:`SNAPSHOT`) and the
    :data:`STAMP` digest of the statistics rows (:func:`stamp_digest`); the parameters of
    :data:`CHECK_STAMP`."""

    snapshot: str
    digest: str


class Candidates(NamedTuple):
    """Ranked ``(score, doc, part)``, the :class:`Stamp` of the first statement (a checked
    search's; else None), and whether the collection has more than :data:`STAMP_PARTS`
    sessions."""

    ranked: list[tuple[float, int, int]]
    stamp: Stamp | None
    wide: bool = False


async def candidates(
    conn: Conn,
    coll: str,
    query: ParsedQuery,
    sids: set[int] | None,
    *,
    sessions: bool,
    limit: int,
    checked: bool = False,
    wide: bool = False,
) -> Candidates:
    """As :func:`mindstore.store.sqlite.lexical.candidates`, with the statistics' stamp when
    ``checked`` (a search outside a snapshot: see :mod:`._search`); ``wide`` reads a wide
    collection's statistics (:data:`STAMP_PARTS`; never checked).

    One statement reads the statistics, the planner's first counts (its first request depends
    on the query only) and the rows of the keys it will read in full if that request settles
    them (resolved, rarest first, within ROW_BUDGET rows: :func:`bm25.planner`'s ``rare``): a
    query of rare words costs one round trip here, where it cost four."""
    assert not (checked and wide)
    steps = bm25.planner(query, limit)
    try:
        request: bm25.Count | None = next(steps)
    except StopIteration as done:
        plan: bm25.Plan = done.value  # no term keys (prefixes only)
        request = None
    first = await _first_read(conn, coll, request, checked, wide)
    stamp, n_docs, stats = first.stamp, first.docs, first.sessions
    is_wide = stats.count > STAMP_PARTS
    if n_docs == 0:
        return Candidates([], stamp, wide=is_wide)
    total = stats.total
    counts, prefetched = first.counts, first.rows
    if request is not None:
        try:
            while True:
                request = steps.send(counts)
                counts = await _count(conn, coll, *request)
        except StopIteration as done:
            plan = done.value
    full, probe = plan.full, plan.probe
    ranking = bm25.Ranking(query, n_docs, total, sids, stats if sessions else None)
    # The first statement brought the rows of the first round's rare keys (never a sampled
    # anchor: its count reached the cap); the other keys read in full are read now.
    for k in full:
        if k in prefetched:
            ranking.add_term(k, prefetched[k])
    rest = [k for k in full if k not in prefetched]
    rows: list[Any] = await _term_rows(conn, coll, rest, recent=plan.sample)
    for p in query.prefixes:
        cur = await conn.execute(
            "SELECT kind, key, doc, part, tf, ctx, dl FROM search_terms "
            "WHERE coll = %s AND kind = 1 AND key >= %s AND key < %s",
            (coll, p, p + "\U0010ffff"),
            binary=True,
        )
        rows += await cur.fetchall()
    # without phrases every candidate is a hit: only the best `limit` need sorting
    top = None if query.phrases else limit
    ranking.add(rows)
    if plan.sample is not None and ranking.too_few(full, limit):
        # the recent sample holds too few (of the searched sessions'): read in full
        ranking.add(await _term_rows(conn, coll, full))
        plan = replace(plan, sample=None)
    if not probe:
        await _read_lengths(conn, coll, ranking)
        ranked = ranking.rank(top, ranking.probe_dfs(plan, set()) if plan.sample else None)
        return Candidates(ranked, stamp, wide=is_wide)
    await _read_lengths(conn, coll, ranking)
    docs = ranking.probe_candidates(full)
    filled: list[str] = []
    if top is not None and not bm25.required_keys(query):
        for key, n in bm25.fill_reads(plan, sids is not None):  # too few: add recent hits
            if len(docs) >= top:
                break
            filled.append(key)
            recent = await _term_rows(conn, coll, [key], recent=n)
            docs |= {r[2] for r in recent if sids is None or r[3] in sids}
        if len(docs) < top:  # still too few (quiet sessions of a busy namespace): exact
            ranking.add(await _term_rows(conn, coll, probe))
            await _read_lengths(conn, coll, ranking)
            return Candidates(ranking.rank(top), stamp, wide=is_wide)
    ranking.add(await _term_rows(conn, coll, probe, docs))
    await _read_lengths(conn, coll, ranking)
    ranked = ranking.rank(top, ranking.probe_dfs(plan, docs, filled), docs)
    return Candidates(ranked, stamp, wide=is_wide)


async def _read_lengths(conn: Conn, coll: str, ranking: bm25.Ranking) -> None:
    """The lengths of the sessions the ranking's postings are in that it does not hold yet
    (a wide collection's; a narrow one's first statement read every session's)."""
    missing = ranking.missing()
    if missing and ranking.lengths is not None:
        cur = await conn.execute(_LENGTHS_SQL, {"coll": coll, "parts": missing}, binary=True)
        ranking.lengths.lengths.update(await cur.fetchall())


# min(document frequency, cap) of key k: an index-only count that stops at the cap
_COUNT_K = (
    "(SELECT count(*) FROM (SELECT 1 FROM search_terms "
    "WHERE coll = %(coll)s AND kind = 0 AND key = k LIMIT %(cap)s) x)"
)
_COUNTS = f"SELECT k, {_COUNT_K} FROM unnest(%(keys)s::text[]) AS k"
# A fingerprint of the collection's statistics rows as they are (each row's version: every
# index write of the collection, insert or delete, updates or deletes one of them, and a new
# row version has a new xmin): equal at two moments iff nothing of the collection was
# written in between. See :func:`mindstore.store.postgres._search.search`.
STAMP = (
    "(SELECT md5(coalesce(string_agg(part::text || ':' || xmin::text, ',' ORDER BY part), ''))"
    " FROM search_stats WHERE coll = %(coll)s)"
)
STAMP_PARTS = WIDE_SESSIONS
"""Sessions (statistics rows) up to which a namespace is *narrow*
(:data:`mindstore.lexical.sessions.WIDE_SESSIONS`): its searches read every session's
statistics row and, outside a transaction, are checked with the :data:`STAMP`. A *wide*
namespace's searches read the statistics summed on the server and the lengths of the sessions
their postings are in only, in a repeatable-read snapshot (no stamp: it reads a row per
session too)."""
# The first statement's rows are tagged: 0 a session's statistics (narrow), 5 the sums
# (wide: sessions holding documents, documents, weighted length), 1 counts, 2 key rows,
# 3 the snapshot (narrow, checked), 4 the length of a key row's session (wide).
# A session's row carries its version (xmin) so that a checked search computes the STAMP of
# the rows it read in Python (:func:`stamp_digest`) rather than aggregating them again on the
# server (0.1 ms of a rare word's 2 ms search); every row of the collection, as the STAMP.
_STATS_ROWS = (
    "SELECT 0, xmin::text, part, docs, NULL::real, NULL::real, length FROM search_stats "
    "WHERE coll = %(coll)s"
)
_SUMS_ROW = (
    "SELECT 5, NULL::text, count(*), sum(docs)::bigint, NULL::real, NULL::real, sum(length) "
    "FROM search_stats WHERE coll = %(coll)s AND docs > 0"
)
# The snapshot a statement reads by (in autocommit each statement takes its own, and
# pg_current_snapshot() is the statement's): two statements with equal snapshots see the same
# transactions committed (one that ends changes the snapshot's xmax or its list of running
# ones), so the same rows. A checked search's first statement returns its snapshot and the
# statistics rows with their versions, whose STAMP Python computes (a :class:`Stamp`); a
# later statement computes the STAMP only when its snapshot differs (CHECK_STAMP): on a quiet
# database a search never aggregates the statistics rows on the server.
SNAPSHOT = "pg_current_snapshot()::text"
CHECK_STAMP = f"(CASE WHEN {SNAPSHOT} = %(snapshot)s THEN %(digest)s ELSE {STAMP} END)"
_SNAPSHOT_ROW = f"SELECT 3, {SNAPSHOT}, NULL, NULL, NULL, NULL, NULL"
_COUNTED = (
    f"WITH c AS (SELECT k, {_COUNT_K} AS n FROM unnest(%(keys)s::text[]) AS k), "
    # the keys settled by this count, rarest first, while their rows total ROW_BUDGET
    'r AS (SELECT k FROM (SELECT k, n, sum(n) OVER (ORDER BY n, k COLLATE "C" '
    "ROWS UNBOUNDED PRECEDING) AS used FROM c WHERE n < %(cap)s) u WHERE used <= %(budget)s), "
    "p AS (SELECT r.k, t.doc, t.part, t.tf, t.ctx, t.dl FROM r, LATERAL "
    "(SELECT doc, part, tf, ctx, dl FROM search_terms "
    "WHERE coll = %(coll)s AND kind = 0 AND key = r.k) t) "
    "{} UNION ALL SELECT 1, k, NULL, n, NULL, NULL, NULL FROM c "
    "UNION ALL SELECT 2, k, doc, part, tf, ctx, dl FROM p"
)
# (narrow, checked) → statement; a query with no term keys (prefixes only) reads statistics
_FIRST = {
    (True, False): _COUNTED.format(_STATS_ROWS),
    (True, True): f"{_COUNTED.format(_STATS_ROWS)} UNION ALL {_SNAPSHOT_ROW}",
    (False, False): f"{_COUNTED.format(_SUMS_ROW)} UNION ALL SELECT 4, NULL, part, NULL, "
    "NULL, NULL, length FROM search_stats WHERE coll = %(coll)s AND part IN (SELECT part FROM p)",
}
_STATS = {
    (True, False): _STATS_ROWS,
    (True, True): f"{_STATS_ROWS} UNION ALL {_SNAPSHOT_ROW}",
    (False, False): _SUMS_ROW,
}
_LENGTHS_SQL = (
    "SELECT part, length FROM search_stats WHERE coll = %(coll)s AND part = ANY(%(parts)s)"
)


KeyRows = list[tuple[int, int, float, float, float]]


def stamp_digest(versions: list[tuple[int, str]]) -> str:
    """The :data:`STAMP` of statistics rows given as ``(part, xmin)``: the same digest of the
    same text (tested against the server's)."""
    versions.sort()
    text = ",".join(f"{p}:{x}" for p, x in versions)
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


class FirstRead(NamedTuple):
    """What :func:`_first_read` returns: the statistics, as :class:`bm25.Sessions` (every
    session's length when narrow), the counts, the prefetched key rows and the stamp."""

    docs: int
    sessions: bm25.Sessions
    counts: dict[str, int]
    rows: dict[str, KeyRows]
    stamp: Stamp | None


async def _first_read(
    conn: Conn, coll: str, request: bm25.Count | None, checked: bool, wide: bool
) -> FirstRead:
    """The collection's statistics; ``min(document frequency, cap)`` of the requested keys;
    the ``(doc, part, tf, ctx, dl)`` rows of the keys that count settles within the row
    budget; when ``checked``, the statistics' :data:`STAMP`; in one statement. ``wide``
    reads the statistics summed, and the lengths of the key rows' sessions only."""
    params: dict[str, Any] = {"coll": coll}
    variant = (not wide, checked and not wide)
    if request is None:
        cur = await conn.execute(_STATS[variant], params, binary=True)
    else:
        keys, cap = request
        params.update(cap=cap, keys=keys, budget=bm25.ROW_BUDGET)
        cur = await conn.execute(_FIRST[variant], params, binary=True)
    docs, parts, total = 0, 0, 0.0
    counts: dict[str, int] = {}
    rows: dict[str, KeyRows] = {}
    lengths: dict[int, float] = {}
    snapshot = None
    versions: list[tuple[int, str]] = []
    for tag, key, a, b, tf, ctx, dl in await cur.fetchall():
        if tag == 2:
            rows.setdefault(key, []).append((a, b, tf, ctx, dl))
        elif tag == 1:
            counts[key] = b
        elif tag == 0:
            versions.append((a, key))
            if b > 0:
                lengths[a] = dl
                docs += b
                parts += 1
                total += dl
        elif tag == 4:
            lengths[a] = dl
        elif tag == 5:
            parts, docs, total = a, b or 0, dl or 0.0
        else:
            snapshot = key
    stamp = None if snapshot is None else Stamp(snapshot, stamp_digest(versions))
    for k, n in counts.items():  # a settled key with no rows
        if n == 0:
            rows.setdefault(k, [])
    return FirstRead(docs, bm25.Sessions(parts, total, lengths), counts, rows, stamp)


async def _count(conn: Conn, coll: str, keys: list[str], cap: int) -> dict[str, int]:
    """``min(document frequency, cap)`` of each key."""
    cur = await conn.execute(_COUNTS, {"coll": coll, "cap": cap, "keys": keys}, binary=True)
    return {r[0]: r[1] for r in await cur.fetchall()}


async def _term_rows(
    conn: Conn,
    coll: str,
    keys: Sequence[str],
    docs: set[int] | None = None,
    *,
    recent: int | None = None,
) -> list[Any]:
    """The index rows of ``keys`` (kind 0), of ``docs`` only when given, of each key's
    ``recent`` most recent documents only when given: one index probe per key, or per (key,
    document) pair. Binary results: a quarter to a third less time per row than text (5,000
    rows: 8.9 → 5.6 ms). Spelled as lateral joins on the primary key so the plan cannot
    degrade: with ``key = ANY(…)`` / ``doc = ANY(…)`` filters the planner scanned the
    whole collection while its statistics were missing (a new store before autovacuum's
    ANALYZE), or every row of a common key to keep the few probed documents (``OFFSET 0``
    keeps the pair lookup from being flattened into such a join).

    From :data:`BY_DOC_KEYS` keys on, the documents' ``search_docs`` rows are read instead
    (one row a document, filtered to the keys on the server): one probe per (key, document)
    pair touched a page of the large term index each, so the cost grew with keys × documents
    and with what of that index was out of cache."""
    if not keys:
        return []
    if recent is not None:  # each key's most recent documents (every key is common)
        cur = await conn.execute(_RECENT_SQL, (list(keys), coll, recent), binary=True)
    elif docs is None:
        cur = await conn.execute(_KEYS_SQL, (list(keys), coll), binary=True)
    elif len(keys) >= BY_DOC_KEYS:
        cur = await conn.execute(_DOCS_SQL, (sorted(docs), coll, list(keys)), binary=True)
    else:
        cur = await conn.execute(_PAIRS_SQL, (list(keys), sorted(docs), coll), binary=True)
    return list(await cur.fetchall())


_KEYS_SQL = (
    "SELECT t.kind, t.key, t.doc, t.part, t.tf, t.ctx, t.dl FROM unnest(%s::text[]) k, "
    "LATERAL (SELECT kind, key, doc, part, tf, ctx, dl FROM search_terms "
    "WHERE coll = %s AND kind = 0 AND key = k) t"
)
_RECENT_SQL = (  # each key's most recent documents (every key is common)
    "SELECT t.kind, t.key, t.doc, t.part, t.tf, t.ctx, t.dl FROM unnest(%s::text[]) k, "
    "LATERAL (SELECT kind, key, doc, part, tf, ctx, dl FROM search_terms "
    "WHERE coll = %s AND kind = 0 AND key = k ORDER BY doc DESC LIMIT %s) t"
)
BY_DOC_KEYS: Final = 3
"""Keys from which :func:`_term_rows` reads documents' rows from ``search_docs`` rather than
probing the term index per (key, document) pair. Measured on 100,000 messages (bench_postgres
corpus), warm: 1-2 keys × 100 documents 1.0-1.4 ms by pairs, 1.8-1.9 ms by documents; 3 keys
1.9 / 1.9; 8 keys 3.5 / 2.2 ms (1,000 documents: 33 / 16 ms). A document's row costs about 16 µs
whatever the keys, a pair 3.5 µs; with the index out of cache the pairs were 5-30 times
slower, the document rows about as fast (97 MB against 808 MB)."""

# each document's row, then its elements of the wanted keys (tfs/ctxs line up with keys)
_DOCS_SQL = (
    "SELECT 0::smallint, u.k, s.doc, s.part, s.tfs[u.i], s.ctxs[u.i], s.dl "
    "FROM unnest(%s::bigint[]) d, LATERAL (SELECT doc, part, dl, keys, tfs, ctxs "
    "FROM search_docs WHERE coll = %s AND doc = d) s, "
    "LATERAL unnest(s.keys) WITH ORDINALITY AS u(k, i) WHERE u.k = ANY(%s::text[])"
)
_PAIRS_SQL = (
    "SELECT t.kind, t.key, t.doc, t.part, t.tf, t.ctx, t.dl FROM unnest(%s::text[]) k, "
    "unnest(%s::bigint[]) d, LATERAL (SELECT kind, key, doc, part, tf, ctx, dl "
    "FROM search_terms WHERE coll = %s AND kind = 0 AND key = k AND doc = d OFFSET 0) t"
)


async def rebuild(conn: Conn, progress: Callable[[int, int], None] | None = None) -> int:
    """Rebuild the whole index from the stored messages and entries (inside the caller's
    transaction). ``progress(done, total)`` is called as documents are indexed."""
    for table in ("search_terms", "search_docs", "search_stats"):
        await conn.execute(f"DELETE FROM {table}")
    cur = await conn.execute(
        "SELECT (SELECT count(*) FROM message_search) + (SELECT count(*) FROM entries)"
    )
    row = await cur.fetchone()
    total = int(row[0]) if row is not None else 0
    done = 0
    last = -1
    while True:
        cur = await conn.execute(
            "SELECT x.seq, m.sid, x.namespace, x.text, x.tool_text, p.text "
            "FROM message_search x JOIN messages m ON m.seq = x.seq "
            "LEFT JOIN message_search p ON p.seq = m.parent_seq "
            "WHERE x.seq > %s ORDER BY x.seq LIMIT 2000",
            (last,),
        )
        batch = await cur.fetchall()
        if not batch:
            break
        rows = message_rows()
        for seq, sid, namespace, text, tool, parent_text in batch:
            collect(
                rows,
                message_collection(namespace),
                seq,
                sid,
                message_document(text, tool, parent_text),
            )
        await add_rows(conn, rows)
        last = batch[-1][0]
        done += len(batch)
        if progress is not None:
            progress(done, total)
    cur = await conn.execute(
        "SELECT id, namespace, scope, label, key, content, description FROM entries"
    )
    for doc, ns, scope, label, key, content, description in await cur.fetchall():
        await index_entry(conn, (ns, scope, label), doc, key, content, description)
        done += 1
    if progress is not None:
        progress(done, total)
    return done
