"""Numbered schema migrations of :class:`~mindstore.store.sqlite.SQLiteStore`.

The schema version is ``PRAGMA user_version``: the number of the last migration applied. On open
every pending migration runs in ONE ``BEGIN IMMEDIATE`` transaction (so two processes opening a
fresh file at once cannot both migrate it, and a crash mid-way leaves the old version). A file
whose ``user_version`` is higher than :data:`LATEST_VERSION` was written by a newer mindstore and
is refused before anything is written to it.

A released migration is never edited; changes go in a new, higher-numbered migration.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Final

from mindstore.errors import SchemaVersionError
from mindstore.store.sqlite import lexical

__all__ = [
    "LATEST_VERSION",
    "MIGRATIONS",
    "REINDEX_AFTER",
    "check_not_newer",
    "migrate",
    "statements",
]


def statements(sql: str) -> list[str]:
    """Split a migration into statements; a trigger body's own semicolons stay inside it."""
    out: list[str] = []
    buf = ""
    for piece in sql.split(";"):
        buf += piece + ";"
        if sqlite3.complete_statement(buf):
            if buf.strip(" \n;"):
                out.append(buf.strip())
            buf = ""
    if buf.strip(" \n;"):
        out.append(buf.strip())
    return out


# Why: sessions get a small integer ``sid`` so the message table and its unique index carry an
# integer instead of two repeated strings (smaller file, faster lookups). The sessions row is
# also the registry row (SessionManager) and holds the maintained latest-leaf pointer
# (``leaf_seq``) so get_latest_leaf is one primary-key lookup at cold start, whatever the size of
# the session. ``seq`` is AUTOINCREMENT: store-wide monotonic and never reused, even after the
# newest message is deleted. Times are integer microseconds since the epoch (UTC): exact, no
# float rounding, sortable. There is deliberately no index on updated_us: every append touches
# it, and an index entry that moves on every append costs a page write per commit, while
# list_sessions sorts one namespace's sessions (cheap even for tens of thousands).
m001_message_tree: Final = """
CREATE TABLE sessions (
    sid INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    session_id TEXT NOT NULL,
    name TEXT,
    parent_session_id TEXT,
    model TEXT,
    source TEXT,
    metadata TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    estimated_cost REAL NOT NULL DEFAULT 0,
    end_reason TEXT,
    created_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL,
    leaf_seq INTEGER,
    message_count INTEGER NOT NULL DEFAULT 0,
    UNIQUE (namespace, session_id)
);

CREATE TABLE messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    sid INTEGER NOT NULL REFERENCES sessions (sid),
    id TEXT NOT NULL,
    parent_seq INTEGER REFERENCES messages (seq),
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    nbytes INTEGER NOT NULL,
    created_us INTEGER NOT NULL,
    UNIQUE (sid, id)
);
CREATE INDEX messages_by_parent ON messages (parent_seq);
-- Path walks (seq -> parent_seq, with the budget columns) read this small covering index
-- instead of the table b-tree, whose pages are full of message bodies.
CREATE INDEX messages_walk ON messages (seq, parent_seq, tokens, nbytes);
"""

# Why: search wants stemmed words/phrases AND prefixes matched as typed (``deploym*`` finds
# "deployment", which a porter-stemmed index cannot do). ``message_text`` (unicode61, unstemmed)
# stores the indexed text once and answers prefix queries; it needs no positions (prefix terms
# are single tokens) so it is ``detail=column``. ``message_stem`` (porter) is an external-content
# index over ``message_text`` — the text is not stored a second time — with full detail for
# phrases, BM25 and snippets. rowid of both = messages.seq.
m002_message_search: Final = """
CREATE VIRTUAL TABLE message_text USING fts5(
    text, tool_text, tokenize = 'unicode61', detail = column
);
CREATE VIRTUAL TABLE message_stem USING fts5(
    text, tool_text, tokenize = 'porter unicode61', content = 'message_text'
);
"""

# Why: compaction overlays, context blocks, the frozen prompt and loaded-skill state.
# Blocks and prompts are keyed by strings — (namespace, scope, label) with scope '' meaning
# "namespace-wide" (a session id is never empty, so '' cannot collide) — so writing a block does
# not create a registry row. Compactions reference the session's sid: they only exist for
# sessions that have messages.
m003_context_state: Final = """
CREATE TABLE compactions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    sid INTEGER NOT NULL REFERENCES sessions (sid),
    from_id TEXT NOT NULL,
    to_id TEXT NOT NULL,
    summary TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    superseded_by INTEGER,
    reverted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX compactions_by_session ON compactions (sid, id);

CREATE TABLE blocks (
    namespace TEXT NOT NULL,
    scope TEXT NOT NULL,
    label TEXT NOT NULL,
    content TEXT NOT NULL,
    updated_us INTEGER NOT NULL,
    PRIMARY KEY (namespace, scope, label)
);

CREATE TABLE prompts (
    namespace TEXT NOT NULL,
    session_id TEXT NOT NULL,
    prompt TEXT NOT NULL,
    updated_us INTEGER NOT NULL,
    PRIMARY KEY (namespace, session_id)
);

CREATE TABLE skill_states (
    namespace TEXT NOT NULL,
    session_id TEXT NOT NULL,
    label TEXT NOT NULL,
    skill_key TEXT NOT NULL,
    loaded INTEGER NOT NULL,
    unloaded_before_seq INTEGER,
    UNIQUE (namespace, session_id, label, skill_key)
);
"""

# Why: keyed documents for StoreSearchProvider / StoreSkillProvider with the same two-index
# search as messages (stemmed words and phrases, prefixes as typed). Both FTS tables use the
# entries table itself as external content, so the text is stored once.
m004_entries: Final = """
CREATE TABLE entries (
    id INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    scope TEXT NOT NULL,
    label TEXT NOT NULL,
    key TEXT NOT NULL,
    content TEXT NOT NULL,
    description TEXT,
    updated_us INTEGER NOT NULL,
    UNIQUE (namespace, scope, label, key)
);
CREATE INDEX entries_by_update ON entries (namespace, scope, label, updated_us);
CREATE VIRTUAL TABLE entry_text USING fts5(
    key, content, description, tokenize = 'unicode61', detail = column,
    content = 'entries', content_rowid = 'id'
);
CREATE VIRTUAL TABLE entry_stem USING fts5(
    key, content, description, tokenize = 'porter unicode61',
    content = 'entries', content_rowid = 'id'
);
"""

# Why: reading a path was a recursive walk, one index seek per message plus one more to fetch
# its body — twice the cost of a plain range select. Most sessions are never branched: their
# messages in seq order form one chain, and the path to any of them is just "the session's
# messages up to that seq". ``sessions.linear`` records that (kept in the same transaction as
# every append; cleared by the first append that does not extend the latest leaf; set again by
# clear; never set back by delete, which is only conservative). The walk index gets ``sid`` in
# front so it serves both the range read of a linear session and the walk of a branched one
# (with sid known, each step is still one seek) — one index replaced by one, so an append
# writes no more pages than before. Existing sessions are classified by the same rule: every
# message's parent is the previous message of its session.
m005_linear_paths: Final = """
ALTER TABLE sessions ADD COLUMN linear INTEGER NOT NULL DEFAULT 1;
UPDATE sessions SET linear = 0 WHERE sid IN (
    SELECT DISTINCT sid FROM (
        SELECT sid, parent_seq, lag(seq) OVER (PARTITION BY sid ORDER BY seq) AS prev
        FROM messages
    ) WHERE parent_seq IS NOT prev
);
DROP INDEX messages_walk;
CREATE INDEX messages_path ON messages (sid, seq, parent_seq, tokens, nbytes);
"""

# Why: SessionManager.list() (newest-updated first) must return its first page in
# ≤ 5 ms with 10,000 sessions in a namespace; without an index it sorts the whole
# namespace every call (~6 ms for 10,000 on the reference machine, and growing linearly). m001
# left this index out because every append moves the session's entry; measured since: one more
# WAL frame per commit (~22 instead of ~21) and no measurable change in the append rate
# (bench_core), while the page read becomes O(page size). The comment on m001 predates this.
m006_sessions_by_update: Final = """
CREATE INDEX sessions_by_update ON sessions (namespace, updated_us, session_id);
"""

# Why: the LangGraph store (mindstore.integrations.langgraph) keeps each item as a keyed entry:
# ``content`` is the text indexed for search, while the item's JSON value must round-trip
# exactly without being indexed (``data``), items report when they were created
# (``created_us``; NULL for older rows, read as ``updated_us``) and may expire (``expires_us``,
# NULL = never). Expired entries are left out of label listings and removed by a sweep; the
# partial index keeps that sweep from scanning entries that never expire.
m007_entry_records: Final = """
ALTER TABLE entries ADD COLUMN data TEXT;
ALTER TABLE entries ADD COLUMN created_us INTEGER;
ALTER TABLE entries ADD COLUMN expires_us INTEGER;
CREATE INDEX entries_by_expiry ON entries (expires_us) WHERE expires_us IS NOT NULL;
"""

# Why: compact_after needs the token size of the session's context after every append. The
# Session kept it in memory, so every new Session object (a server builds one per request) and
# every append after another writer re-read the whole history (82 ms at 10,000 messages). The
# estimate now lives in the sessions row, extended by each append in its own transaction:
# ``est_seq`` is the leaf it measures, ``est_tokens`` the overlaid path's tokens (NULL: unknown,
# recomputed once), ``est_gen`` counts the writes that cleared it (update, delete, clear,
# compactions), so a recomputed value is stored only if nothing changed meanwhile.
# ``compact_floor``/``compact_margin`` hold the automatic-compaction back-off (see
# CompactionMixin). Existing sessions start unknown: the first append recomputes once.
m008_token_estimates: Final = """
ALTER TABLE sessions ADD COLUMN est_seq INTEGER;
ALTER TABLE sessions ADD COLUMN est_tokens INTEGER;
ALTER TABLE sessions ADD COLUMN est_gen INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN compact_floor INTEGER;
ALTER TABLE sessions ADD COLUMN compact_margin INTEGER;
"""

# Why: natural-language questions, BM25 with per-namespace statistics,
# the same tokens on both backends, CJK, the parent's text as context. FTS5 cannot do any of
# that (its tokenizers differ from PostgreSQL's, its bm25() statistics span the whole file, it
# has no CJK segmentation), so the index is two plain tables fed by the Python tokenizer
# (mindstore.lexical): one row per (collection, kind, key, document) and the document counts
# and lengths per (collection, part); new documents wait in ``search_pending`` (one row each)
# and move to ``search_terms`` in batches, so an append writes a page or two instead of one per
# word. The FTS5 tables go; the rows are built in Python right
# after this migration, in the same transaction (REINDEX_AFTER), so an older file is re-indexed
# once, on its first open.
m009_lexical_index: Final = """
DROP TABLE message_stem;
DROP TABLE message_text;
DROP TABLE entry_stem;
DROP TABLE entry_text;
CREATE TABLE search_terms (
    coll TEXT NOT NULL,
    kind INTEGER NOT NULL,
    key TEXT NOT NULL,
    doc INTEGER NOT NULL,
    part INTEGER NOT NULL,
    tf REAL NOT NULL,
    ctx REAL NOT NULL,
    dl REAL NOT NULL,
    PRIMARY KEY (coll, kind, key, doc)
) WITHOUT ROWID;
CREATE INDEX search_terms_by_doc ON search_terms (coll, doc);
CREATE TABLE search_stats (
    coll TEXT NOT NULL,
    part INTEGER NOT NULL,
    docs INTEGER NOT NULL,
    length REAL NOT NULL,
    PRIMARY KEY (coll, part)
) WITHOUT ROWID;
CREATE TABLE search_pending (
    coll TEXT NOT NULL,
    doc INTEGER NOT NULL,
    part INTEGER NOT NULL,
    dl REAL NOT NULL,
    rows TEXT NOT NULL,
    PRIMARY KEY (coll, doc)
) WITHOUT ROWID;
"""

REINDEX_AFTER: Final = frozenset({"m009_lexical_index", "m011_english_stems"})
"""Opening a file older than one of these migrations rebuilds the lexical index in Python."""

# Why: semantic search. One vector row per message, keyed by seq, with
# the embedder's name and dimensions so vectors of another model are never compared (they are
# ignored until re-embedded). float16 BLOBs: half of float32, no measurable loss of ranking.
# Triggers keep vectors in step with edits and deletes without touching the append path (an
# append writes no vector and fires none of them), and bump a per-namespace generation that lets
# a search reuse its cached matrix until something in that namespace changed, in any process.
# ``vector`` NULL = the message has no text to embed (it is not pending any more).
m010_message_vectors: Final = """
CREATE TABLE message_vectors (
    seq INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    model TEXT NOT NULL,
    dims INTEGER NOT NULL,
    vector BLOB
);
CREATE INDEX message_vectors_by_namespace ON message_vectors (namespace, model, dims);
CREATE TABLE vector_generations (
    namespace TEXT PRIMARY KEY,
    generation INTEGER NOT NULL
);
CREATE TRIGGER message_vectors_inserted AFTER INSERT ON message_vectors BEGIN
    INSERT INTO vector_generations (namespace, generation) VALUES (new.namespace, 1)
    ON CONFLICT (namespace) DO UPDATE SET generation = generation + 1;
END;
CREATE TRIGGER message_vectors_deleted AFTER DELETE ON message_vectors BEGIN
    INSERT INTO vector_generations (namespace, generation) VALUES (old.namespace, 1)
    ON CONFLICT (namespace) DO UPDATE SET generation = generation + 1;
END;
CREATE TRIGGER messages_vector_on_edit AFTER UPDATE OF content ON messages BEGIN
    DELETE FROM message_vectors WHERE seq = new.seq
        OR seq IN (SELECT seq FROM messages WHERE parent_seq = new.seq);
END;
CREATE TRIGGER messages_vector_on_reparent AFTER UPDATE OF parent_seq ON messages BEGIN
    DELETE FROM message_vectors WHERE seq = new.seq;
END;
CREATE TRIGGER messages_vector_on_delete AFTER DELETE ON messages BEGIN
    DELETE FROM message_vectors WHERE seq = old.seq;
END;
"""

# Why: the original Porter stemmer made "deploi" of "deploying" and "deploy" of "deployment",
# so "deploy" missed "deployment" (DESIGN 5.1 promises it). Snowball's English stemmer (Porter2)
# stems them alike; every key changes, so the index is rebuilt (REINDEX_AFTER); recall in
# docs/benchmarks.md.
m011_english_stems: Final = ""  # no schema change: the rebuild is the migration

# Why: the change feed (issue 32). Every write records its events here in its own transaction,
# numbered per namespace: the next number is the namespace's highest plus one, read and
# inserted in one statement under the write lock SQLite's single writer already holds (so
# numbers follow commit order and a rollback returns them). Events are never deleted one by
# one — a deleted session's events are emptied instead — so a number is never handed out
# twice; delete_namespace removes the whole feed. Keyed by (namespace, seq): a reader resuming
# after ``seq`` is one range seek, and the next number one seek to the range's end. WITHOUT
# ROWID: the key is the only access path, and the rows are small.
m012_change_feed: Final = """
CREATE TABLE changes (
    namespace TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    session_id TEXT,
    data TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    PRIMARY KEY (namespace, seq)
) WITHOUT ROWID;
"""

MIGRATIONS: Final[list[tuple[int, str, str]]] = [
    (1, "m001_message_tree", m001_message_tree),
    (2, "m002_message_search", m002_message_search),
    (3, "m003_context_state", m003_context_state),
    (4, "m004_entries", m004_entries),
    (5, "m005_linear_paths", m005_linear_paths),
    (6, "m006_sessions_by_update", m006_sessions_by_update),
    (7, "m007_entry_records", m007_entry_records),
    (8, "m008_token_estimates", m008_token_estimates),
    (9, "m009_lexical_index", m009_lexical_index),
    (10, "m010_message_vectors", m010_message_vectors),
    (11, "m011_english_stems", m011_english_stems),
    (12, "m012_change_feed", m012_change_feed),
]

LATEST_VERSION: Final = MIGRATIONS[-1][0]


def check_not_newer(path: str, version: int) -> None:
    """Refuse a file written by a newer mindstore (before anything is written to it)."""
    if version > LATEST_VERSION:
        raise SchemaVersionError(
            f"{path!r} has schema version {version}, but this mindstore only "
            f"understands up to {LATEST_VERSION}: upgrade mindstore to open it"
        )


def migrate(
    conn: sqlite3.Connection, path: str, begin: Callable[[sqlite3.Connection], None]
) -> None:
    """Apply every pending migration in one write transaction (``begin`` opens it, waiting for
    another process's lock); a file written by an older release is re-indexed once, inside it."""
    begin(conn)
    try:
        # Another process may have migrated while we waited for the lock.
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > LATEST_VERSION:
            raise SchemaVersionError(
                f"{path!r} has schema version {version}, newer than {LATEST_VERSION}"
            )
        reindex = False
        for number, name, sql in MIGRATIONS:
            if number > version:
                for statement in statements(sql):
                    conn.execute(statement)
                reindex = reindex or name in REINDEX_AFTER
        if reindex and version > 0:
            lexical.rebuild(conn)  # an older file: build the lexical index once
        conn.execute(f"PRAGMA user_version={LATEST_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
