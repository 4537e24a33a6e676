"""The lexical index of :class:`~mindstore.store.sqlite.SQLiteStore` (DESIGN §5.1).

Tables (migration ``m009_lexical_index``): ``search_terms`` holds one row per (collection,
kind, key, document) with the term frequencies and the document's length; ``search_stats`` the
document count and total length per (collection, part). Everything else — tokenising, what a
document's rows are, BM25, phrases, snippets — is :mod:`mindstore.lexical`, shared with the
PostgreSQL backend, so both rank identically. Functions here run inside the caller's
transaction on the caller's connection.

New documents wait in ``search_pending`` (one JSON row each: an append writes a page or two)
and move into ``search_terms`` every :data:`FLUSH_AT` documents, unpacked by SQLite itself
(``json_each``) in key order. Searches read both tables; a pending document's JSON is decoded
once per process (cached by its text).
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, Final, NamedTuple

from mindstore.lexical import bm25
from mindstore.lexical.collections import entry_collection, message_collection
from mindstore.lexical.sessions import WIDE_SESSIONS
from mindstore.search import ParsedQuery, index_text

__all__ = [
    "CONTEXT_CHARS",
    "candidates",
    "index_entry",
    "index_message",
    "rebuild",
    "unindex_entry",
    "unindex_messages",
]

CONTEXT_CHARS: Final = 4_000
"""Characters of the parent's text indexed as a message's context."""

_INSERT = (
    "INSERT INTO search_terms (coll, kind, key, doc, part, tf, ctx, dl) VALUES (?,?,?,?,?,?,?,?)"
)


FLUSH_AT: Final = 128
"""Pending documents that make the next write move them into ``search_terms``. Bigger batches
write each b-tree page for more rows (128 instead of 32: a third less CPU per document moved);
what bounded them was every search decoding the pending documents, which is now cached
(:func:`_parsed`: 127 pending documents cost a search ~1 ms instead of ~6)."""


def _add(conn: sqlite3.Connection, coll: str, doc: int, part: int, d: bm25.Document) -> None:
    """Index a document: its rows go to ``search_pending`` as one row (a write touches one or
    two pages, where ~50 rows spread over the ``search_terms`` b-tree touched ~50 — the
    append rate fell to a fifth); every FLUSH_AT documents they move to ``search_terms`` in one
    batch. Searches read both."""
    if not d.rows:
        return
    dl = d.length
    conn.execute(
        "INSERT INTO search_pending (coll, doc, part, dl, rows) VALUES (?, ?, ?, ?, ?)",
        (coll, doc, part, dl, json.dumps(d.rows, ensure_ascii=False, separators=(",", ":"))),
    )
    conn.execute(
        "INSERT INTO search_stats (coll, part, docs, length) VALUES (?, ?, 1, ?) "
        "ON CONFLICT (coll, part) DO UPDATE SET docs = docs + 1, length = length + excluded.length",
        (coll, part, dl),
    )


def flush(conn: sqlite3.Connection, *, force: bool = False) -> None:
    """Move pending documents into ``search_terms`` (when FLUSH_AT are pending, or ``force``)."""
    if not force:
        row = conn.execute(
            "SELECT 1 FROM search_pending LIMIT 1 OFFSET ?", (FLUSH_AT - 1,)
        ).fetchone()
        if row is None:
            return
    # unpacked by SQLite itself (json_each) in key order, so each b-tree page is written once:
    # a third of the cost of decoding the rows in Python and binding them one by one
    conn.execute(
        "INSERT INTO search_terms (coll, kind, key, doc, part, tf, ctx, dl) "
        "SELECT p.coll, json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'), p.doc, "
        "p.part, json_extract(j.value, '$[2]'), json_extract(j.value, '$[3]'), p.dl "
        "FROM search_pending p, json_each(p.rows) j ORDER BY 1, 2, 3, 4"
    )
    conn.execute("DELETE FROM search_pending")


def _pending_rows(
    conn: sqlite3.Connection, coll: str, keys: Sequence[str], prefixes: Sequence[str]
) -> list[tuple[int, str, int, int, float, float, float]]:
    """Rows of pending documents of ``coll`` for ``keys`` (kind 0) and ``prefixes`` (kind 1)."""
    out: list[tuple[int, str, int, int, float, float, float]] = []
    wanted = list(dict.fromkeys(keys))
    for doc, part, dl, rows in conn.execute(
        "SELECT doc, part, dl, rows FROM search_pending WHERE coll = ?", (coll,)
    ):
        terms, raws = _parsed(rows)
        for k in wanted:
            hit = terms.get(k)
            if hit is not None:
                out.append((0, k, doc, part, hit[0], hit[1], dl))
        if prefixes:
            for key, tf in raws:
                if any(key.startswith(p) for p in prefixes):
                    out.append((1, key, doc, part, tf, 0.0, dl))
    return out


@functools.lru_cache(maxsize=4_096)
def _parsed(rows: str) -> tuple[dict[str, tuple[float, float]], list[tuple[str, float]]]:
    """A pending document's rows (its JSON text) as term key -> (tf, ctx) and raw words.
    Cached by the text itself, so it cannot go stale: every search reads the pending
    documents, and decoding them each time made searches slower with every pending one."""
    terms: dict[str, tuple[float, float]] = {}
    raws: list[tuple[str, float]] = []
    for kind, key, tf, ctx in json.loads(rows):
        if kind == bm25.KIND_TERM:
            terms[key] = (tf, ctx)
        else:
            raws.append((key, tf))
    return terms, raws


def _parent_text(conn: sqlite3.Connection, parent_seq: int | None) -> str:
    if parent_seq is None:
        return ""
    row = conn.execute("SELECT content FROM messages WHERE seq = ?", (parent_seq,)).fetchone()
    if row is None:
        return ""
    return index_text(json.loads(row[0]))[0][:CONTEXT_CHARS]


def index_message(
    conn: sqlite3.Connection,
    namespace: str,
    sid: int,
    seq: int,
    message: Any,
    parent_seq: int | None,
    parent_text: str | None = None,
) -> str:
    """Index one message (own text, tool text, the parent's text as context). Returns the own
    text (callers pass it on as the next message's ``parent_text`` to spare a read)."""
    text, tool = index_text(message)
    ctx = _parent_text(conn, parent_seq) if parent_text is None else parent_text[:CONTEXT_CHARS]
    _add(conn, message_collection(namespace), seq, sid, bm25.document(text, tool, ctx))
    return text


def _remove(conn: sqlite3.Connection, coll: str, docs: Iterable[int]) -> None:
    for doc in docs:
        row = conn.execute(
            "DELETE FROM search_pending WHERE coll = ? AND doc = ? RETURNING part, dl",
            (coll, doc),
        ).fetchone()
        if row is None:
            row = conn.execute(
                "SELECT part, dl FROM search_terms WHERE coll = ? AND doc = ? LIMIT 1",
                (coll, doc),
            ).fetchone()
            if row is None:
                continue
            conn.execute("DELETE FROM search_terms WHERE coll = ? AND doc = ?", (coll, doc))
        conn.execute(
            "UPDATE search_stats SET docs = docs - 1, length = length - ? "
            "WHERE coll = ? AND part = ?",
            (row[1], coll, row[0]),
        )
        conn.execute(
            "DELETE FROM search_stats WHERE coll = ? AND part = ? AND docs <= 0", (coll, row[0])
        )


def unindex_messages(conn: sqlite3.Connection, namespace: str, seqs: Sequence[int]) -> None:
    _remove(conn, message_collection(namespace), seqs)


def reindex_messages(conn: sqlite3.Connection, namespace: str, seqs: Sequence[int]) -> None:
    """Index ``seqs`` again from their stored content and their (current) parents' text."""
    if not seqs:
        return
    unindex_messages(conn, namespace, seqs)
    rows = conn.execute(
        "SELECT m.seq, m.sid, m.content, m.parent_seq FROM messages m "
        "WHERE m.seq IN (SELECT value FROM json_each(?))",
        (json.dumps(list(seqs)),),
    ).fetchall()
    for seq, sid, content, parent_seq in rows:
        index_message(conn, namespace, sid, seq, json.loads(content), parent_seq)


def children_of(conn: sqlite3.Connection, seqs: Sequence[int]) -> list[int]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT seq FROM messages WHERE parent_seq IN (SELECT value FROM json_each(?))",
            (json.dumps(list(seqs)),),
        )
    ]


def clear_session(conn: sqlite3.Connection, namespace: str, sid: int) -> None:
    coll = message_collection(namespace)
    for table in ("search_terms", "search_pending"):
        conn.execute(
            f"DELETE FROM {table} WHERE coll = ? "
            "AND doc IN (SELECT seq FROM messages WHERE sid = ?)",
            (coll, sid),
        )
    conn.execute("DELETE FROM search_stats WHERE coll = ? AND part = ?", (coll, sid))


def index_entry(
    conn: sqlite3.Connection,
    namespace: str,
    scope: str,
    label: str,
    doc: int,
    key: str,
    content: str,
    description: str | None,
) -> None:
    """Index a keyed entry: key and content as its text, the description at tool weight."""
    coll = entry_collection(namespace, scope, label)
    _add(conn, coll, doc, 0, bm25.document(f"{key}\n{content}", description or ""))


def unindex_entry(
    conn: sqlite3.Connection, namespace: str, scope: str, label: str, doc: int
) -> None:
    _remove(conn, entry_collection(namespace, scope, label), [doc])


def candidates(
    conn: sqlite3.Connection,
    coll: str,
    query: ParsedQuery,
    sids: set[int] | None,
    *,
    sessions: bool,
    limit: int,
) -> list[tuple[float, int, int]]:
    """Every hit of ``query`` in collection ``coll`` ranked by BM25, best first (phrases not yet
    confirmed); ``sessions`` adds the session score (message collections)."""
    stats = _statistics(conn, coll)
    n_docs, total = stats.docs, stats.total
    if n_docs == 0:
        return []
    keys = bm25.term_keys(query)
    pending = _pending_rows(conn, coll, keys, query.prefixes)
    in_pending: dict[str, int] = {}
    for r in pending:
        if r[0] == 0:
            in_pending[r[1]] = in_pending.get(r[1], 0) + 1
    steps = bm25.planner(query, limit)
    try:
        request = next(steps)
        while True:
            request = steps.send(_count(conn, coll, *request, in_pending))
    except StopIteration as done:
        plan: bm25.Plan = done.value
    full, probe = plan.full, plan.probe
    wanted = set(full)
    rows: list[Any] = [r for r in pending if r[0] == 1 or r[1] in wanted]
    for p in query.prefixes:
        rows += conn.execute(
            "SELECT kind, key, doc, part, tf, ctx, dl FROM search_terms "
            "WHERE coll = ? AND kind = 1 AND key >= ? AND key < ?",
            (coll, p, p + "\U0010ffff"),
        ).fetchall()
    lengths = stats.sessions if sessions else None
    # without phrases every candidate is a hit: only the best `limit` need sorting
    top = None if query.phrases else limit
    ranking = bm25.Ranking(query, n_docs, total, sids, lengths)
    for key in full:
        ranking.add_term(key, _key_rows(conn, coll, key, plan.sample))
    ranking.add(rows)
    if plan.sample is not None and ranking.too_few(full, limit):
        # the recent sample holds too few (of the searched sessions'): read in full
        for key in full:
            ranking.add_term(key, _key_rows(conn, coll, key, None))
        plan = replace(plan, sample=None)
    if not probe:
        _read_lengths(conn, coll, ranking)
        return ranking.rank(top, ranking.probe_dfs(plan, set()) if plan.sample else None)
    _read_lengths(conn, coll, ranking)
    docs = ranking.probe_candidates(full)
    probed = set(probe)
    filled: list[str] = []
    if top is not None and not bm25.required_keys(query):
        for key, n in bm25.fill_reads(plan, sids is not None):  # too few: add recent hits
            if len(docs) >= top:
                break
            filled.append(key)
            recent = [(r[0], r[1]) for r in _key_rows(conn, coll, key, n)]
            recent += [(r[2], r[3]) for r in pending if r[0] == 0 and r[1] == key]
            docs |= {d for d, sid in recent if sids is None or sid in sids}
        if len(docs) < top:  # still too few (quiet sessions of a busy namespace): exact
            ranking.add(_term_rows(conn, coll, probe))
            ranking.add(r for r in pending if r[0] == 0 and r[1] in probed)
            _read_lengths(conn, coll, ranking)
            return ranking.rank(top)
    ranking.add(_term_rows(conn, coll, probe, docs))
    ranking.add(r for r in pending if r[0] == 0 and r[1] in probed and r[2] in docs)
    _read_lengths(conn, coll, ranking)
    return ranking.rank(top, ranking.probe_dfs(plan, docs, filled), docs)


WIDE_PARTS: Final = WIDE_SESSIONS
"""Sessions up to which a search reads every session's statistics row; a wider namespace's
are summed by SQLite and only the lengths it needs read (:func:`_read_lengths`)."""


class _Statistics(NamedTuple):
    docs: int
    total: float
    sessions: bm25.Sessions


def _statistics(conn: sqlite3.Connection, coll: str) -> _Statistics:
    """The collection's document count and weighted length, and its sessions' statistics:
    every session's length in a narrow collection; the sums only in a wide one. (Lengths are
    sums of halves: their totals are exact in any order.)"""
    rows = conn.execute(
        "SELECT part, docs, length FROM search_stats WHERE coll = ? AND docs > 0 LIMIT ?",
        (coll, WIDE_PARTS + 1),
    ).fetchall()
    if len(rows) <= WIDE_PARTS:
        total = sum(r[2] for r in rows)
        lengths = {r[0]: r[2] for r in rows}
        docs = sum(r[1] for r in rows)
        return _Statistics(docs, total, bm25.Sessions(len(rows), total, lengths))
    n, docs, total = conn.execute(
        "SELECT count(*), sum(docs), sum(length) FROM search_stats WHERE coll = ? AND docs > 0",
        (coll,),
    ).fetchone()
    return _Statistics(docs, total, bm25.Sessions(n, total, {}))


def _read_lengths(conn: sqlite3.Connection, coll: str, ranking: bm25.Ranking) -> None:
    """The lengths of the sessions the ranking's postings are in that it does not hold yet."""
    missing = ranking.missing()
    if missing and ranking.lengths is not None:
        ranking.lengths.lengths.update(
            conn.execute(
                "SELECT part, length FROM search_stats WHERE coll = ? "
                "AND part IN (SELECT value FROM json_each(?))",
                (coll, json.dumps(missing)),
            ).fetchall()
        )


def _count(
    conn: sqlite3.Connection, coll: str, keys: list[str], cap: int, in_pending: dict[str, int]
) -> dict[str, int]:
    """``min(document frequency, cap)`` of each key (indexed and pending documents)."""
    counts: dict[str, int] = dict(
        conn.execute(
            "SELECT value, (SELECT count(*) FROM (SELECT 1 FROM search_terms "
            "WHERE coll = ? AND kind = 0 AND key = j.value LIMIT ?)) FROM json_each(?) j",
            (coll, cap, json.dumps(keys, ensure_ascii=False)),
        ).fetchall()
    )
    return {k: min(counts.get(k, 0) + in_pending.get(k, 0), cap) for k in keys}


_KEY_ROWS = (
    "SELECT doc, part, tf, ctx, dl FROM search_terms WHERE coll = ? AND kind = 0 AND key = ?"
)
_RECENT_KEY_ROWS = _KEY_ROWS + " ORDER BY doc DESC LIMIT ?"


def _key_rows(
    conn: sqlite3.Connection, coll: str, key: str, recent: int | None
) -> list[tuple[int, int, float, float, float]]:
    """The indexed ``(doc, part, tf, ctx, dl)`` of term ``key``; of its ``recent`` most recent
    documents only when given. (Five columns, not the seven of :func:`_term_rows`: a quarter
    less time per row, and a search reads up to ROW_BUDGET of them.)"""
    if recent is None:
        return conn.execute(_KEY_ROWS, (coll, key)).fetchall()
    return conn.execute(_RECENT_KEY_ROWS, (coll, key, recent)).fetchall()


def _term_rows(
    conn: sqlite3.Connection, coll: str, keys: Sequence[str], docs: set[int] | None = None
) -> list[Any]:
    """The index rows of ``keys`` (kind 0), of ``docs`` only when given."""
    if not keys:
        return []
    sql = (
        "SELECT kind, key, doc, part, tf, ctx, dl FROM search_terms "
        "WHERE coll = ? AND kind = 0 AND key IN (SELECT value FROM json_each(?))"
    )
    params: list[Any] = [coll, json.dumps(list(keys), ensure_ascii=False)]
    if docs is not None:
        sql += " AND doc IN (SELECT value FROM json_each(?))"
        params.append(json.dumps(sorted(docs)))
    return conn.execute(sql, params).fetchall()


def rebuild(conn: sqlite3.Connection, progress: Callable[[int, int], None] | None = None) -> int:
    """Rebuild the whole index from the stored messages and entries (inside the caller's
    transaction). ``progress(done, total)`` is called as documents are indexed."""
    conn.execute("DELETE FROM search_terms")
    conn.execute("DELETE FROM search_pending")
    conn.execute("DELETE FROM search_stats")
    total = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    total += conn.execute("SELECT count(*) FROM entries").fetchone()[0]
    done = 0
    last: tuple[int, str] | None = None  # (seq, own text) of the previous message
    for seq, sid, namespace, content, parent_seq in conn.execute(
        "SELECT m.seq, m.sid, s.namespace, m.content, m.parent_seq FROM messages m "
        "JOIN sessions s ON s.sid = m.sid ORDER BY m.seq"
    ):
        parent_text = last[1] if last is not None and last[0] == parent_seq else None
        text = index_message(
            conn, namespace, sid, seq, json.loads(content), parent_seq, parent_text
        )
        last = (seq, text)
        done += 1
        if progress is not None and done % 500 == 0:
            progress(done, total)
    for doc, namespace, scope, label, key, content, description in conn.execute(
        "SELECT id, namespace, scope, label, key, content, description FROM entries"
    ):
        index_entry(conn, namespace, scope, label, doc, key, content, description)
        done += 1
        if progress is not None and done % 500 == 0:
            progress(done, total)
    if progress is not None:  # every document counted: what follows is the index write
        progress(done, total)
    flush(conn, force=True)
    if progress is not None:
        progress(done, total)
    return done
