"""PostgreSQL schema migrations applied to an existing, populated schema (written by an older
version): m005 (the message_search table) must carry every message over, and m006 (the lexical
index) must index every one of them once, on open — history, search by word, phrase and prefix,
updates and deletes afterwards."""

from __future__ import annotations

import json
import re

import pytest

from backends import drop_schema, new_schema_name, postgres_url_or_skip, search_docs_mismatch
from backends import tool_message as _msg
from mindstore.search import index_text, parse_query
from mindstore.session import Session

pytestmark = pytest.mark.postgres


async def _make_v4(url: str, schema: str, sessions: dict[str, list[dict[str, object]]]) -> None:
    """A schema at version 4, filled with rows the way version 4 wrote them."""
    import psycopg

    from mindstore.store.postgres.migrations import MIGRATIONS, SCHEMA_TABLE_SQL

    def tsvector_sql(main: str, secondary: str, config: str = "mindstore_porter") -> str:
        return (  # what version 4 stored (its search module is gone)
            f"setweight(to_tsvector('{config}', {main}), 'A')"
            f" || setweight(to_tsvector('{config}', {secondary}), 'C')"
        )

    def index_tokens(text: str, tool: str) -> tuple[str, str]:
        return tuple(" ".join(re.findall(r"[^\W_]+", t.lower())) for t in (text, tool))  # type: ignore[return-value]

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        await conn.execute(f'SET search_path TO "{schema}"')
        await conn.execute(SCHEMA_TABLE_SQL)
        for number, _name, statements in MIGRATIONS:
            if number <= 4:
                for statement in statements:
                    await conn.execute(statement)
        await conn.execute("INSERT INTO mindstore_schema (version) VALUES (4)")
        for session_id, messages in sessions.items():
            cur = await conn.execute(
                "INSERT INTO sessions (namespace, session_id) VALUES ('default', %s) RETURNING sid",
                (session_id,),
            )
            row = await cur.fetchone()
            assert row is not None
            sid, parent = row[0], None
            for m in messages:
                text, tool = index_text(m)
                itext, itool = index_tokens(text, tool)
                content = json.dumps(m, separators=(",", ":"))
                cur = await conn.execute(
                    "INSERT INTO messages (sid, id, parent_seq, role, content, tokens, nbytes,"
                    " text, tool_text, tsv, tsv_prefix) VALUES (%(sid)s, %(id)s, %(parent)s,"
                    " 'assistant', %(content)s, 5, %(n)s, %(text)s, %(tool)s, "
                    + tsvector_sql("%(itext)s", "%(itool)s")
                    + ", "
                    + tsvector_sql("%(itext)s", "%(itool)s", "simple")
                    + ") RETURNING seq",
                    {
                        "sid": sid,
                        "id": m["id"],
                        "parent": parent,
                        "content": content,
                        "n": len(content),
                        "text": text,
                        "tool": tool,
                        "itext": itext,
                        "itool": itool,
                    },
                )
                seq_row = await cur.fetchone()
                assert seq_row is not None
                parent = seq_row[0]
            await conn.execute(
                "UPDATE sessions SET leaf_seq = %s, message_count = %s WHERE sid = %s",
                (parent, len(messages), sid),
            )


def _sample() -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Two sessions' messages: words, a tool call, diacritics."""
    a = [
        _msg("a1", "The deployment to kubernetes failed"),
        _msg("a2", "rolled back the release", tool="kubectl rollout undo"),
        _msg("a3", "Café crème for the team"),
    ]
    return a, [_msg("b1", "deployment went fine here"), _msg("b2", "nothing to see")]


async def test_v4_schema_migrates_with_every_message_searchable() -> None:
    from mindstore.store.postgres import PostgresStore
    from mindstore.store.postgres.migrations import LATEST_VERSION

    url = postgres_url_or_skip()
    schema = new_schema_name()
    a, b = _sample()
    try:
        await _make_v4(url, schema, {"a": a, "b": b})
        store = await PostgresStore.open(url, schema=schema, min_size=1, max_size=2)
        try:
            assert (await store.stats())["schema_version"] == LATEST_VERSION
            sa = Session.create(store, "a")
            sb = Session.create(store, "b")
            assert await sa.get_history() == a
            assert await sb.get_history() == b

            async def ids(query: str, **kw: object) -> list[str]:
                hits = await store.search("default", parse_query(query, "all"), **kw)  # type: ignore[arg-type]
                return [h.message_id for h in hits]

            assert sorted(await ids("deployment")) == ["a1", "b1"]
            assert await ids('"deployment to kubernetes"') == ["a1"]
            assert sorted(await ids("deploy*")) == ["a1", "b1"]
            assert await ids("rollout") == ["a2"]  # tool text
            assert await ids("cafe") == ["a3"]
            assert await ids("deployment", session_ids=["b"]) == ["b1"]
            hit = (await store.search("default", parse_query("kubernetes"), limit=1))[0]
            assert (hit.session_id, hit.snippet) == ("a", "The deployment to [kubernetes] failed")

            # writes after the migration keep the index exact
            await sa.update_message(_msg("a1", "The migration to kubernetes failed"))
            assert await ids("deployment") == ["b1"]
            assert await ids("migration") == ["a1"]
            assert await sb.delete_messages(["b1"]) == 1
            assert await ids("deployment") == []
            assert await ids("deploy*") == []
            await sb.append_message(_msg("b3", "a new deployment"))
            assert await ids("deployment") == ["b3"]
            assert await ids("deploy*") == ["b3"]
        finally:
            await store.aclose()
    finally:
        await drop_schema(url, schema)


async def test_v9_lexical_rows_keep_their_unique_key_which_becomes_covering() -> None:
    """m010 swaps the lexical primary key for a covering one on a populated schema: the rows
    stay, the key stays unique and now carries every other column (index-only reads)."""
    import psycopg

    from mindstore.store.postgres import PostgresStore
    from mindstore.store.postgres.migrations import LATEST_VERSION

    url = postgres_url_or_skip()
    schema = new_schema_name()
    a = [_msg("a1", "The deployment to kubernetes failed"), _msg("a2", "deployment again")]
    try:
        await _make_v4(url, schema, {"a": a})
        store = await PostgresStore.open(url, schema=schema, min_size=1, max_size=1)
        await store.aclose()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f'SET search_path TO "{schema}"')
            # back to version 9: the primary key m008 made, as a database written then has it
            # (and no search_docs, m011's)
            await conn.execute(
                "ALTER TABLE search_terms DROP CONSTRAINT search_terms_pkey,"
                " ADD PRIMARY KEY (coll, kind, key, doc)"
            )
            await conn.execute("DROP TABLE search_docs")
            await conn.execute("DROP TABLE changes, change_counters")  # m012
            await conn.execute("UPDATE mindstore_schema SET version = 9")
            cur = await conn.execute("SELECT count(*) FROM search_terms")
            before = await cur.fetchone()
        store = await PostgresStore.open(url, schema=schema, min_size=1, max_size=1)
        try:
            assert (await store.stats())["schema_version"] == LATEST_VERSION
            hits = await store.search("default", parse_query("deployment"))
            assert sorted(h.message_id for h in hits) == ["a1", "a2"]
        finally:
            await store.aclose()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f'SET search_path TO "{schema}"')
            cur = await conn.execute("SELECT count(*) FROM search_terms")
            assert await cur.fetchone() == before
            cur = await conn.execute(
                "SELECT i.indnkeyatts, i.indnatts FROM pg_index i JOIN pg_class c"
                " ON c.oid = i.indexrelid WHERE c.relname = 'search_terms_pkey'"
                " AND i.indisprimary AND c.relnamespace = %s::regnamespace",
                (schema,),
            )
            assert await cur.fetchall() == [(4, 8)]
            cur = await conn.execute(
                "SELECT count(*) FROM pg_indexes WHERE schemaname = %s"
                " AND tablename = 'search_terms'",
                (schema,),
            )
            assert await cur.fetchone() == (2,)  # the key and (coll, doc): nothing doubled
            with pytest.raises(psycopg.errors.UniqueViolation):
                await conn.execute("INSERT INTO search_terms SELECT * FROM search_terms LIMIT 1")
    finally:
        await drop_schema(url, schema)


async def test_v10_term_rows_are_copied_into_search_docs() -> None:
    """m011 adds search_docs (each document's term rows as one row, for probing many keys in a
    few documents) and fills it from the term rows of a populated schema."""
    import psycopg

    from mindstore.store.postgres import PostgresStore

    url = postgres_url_or_skip()
    schema = new_schema_name()
    a, b = _sample()
    try:
        await _make_v4(url, schema, {"a": a, "b": b})
        store = await PostgresStore.open(url, schema=schema, min_size=1, max_size=1)
        await store.aclose()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f'SET search_path TO "{schema}"')
            await conn.execute("DROP TABLE search_docs")  # back to version 10
            await conn.execute("DROP TABLE changes, change_counters")  # (m012)
            await conn.execute("UPDATE mindstore_schema SET version = 10")
        store = await PostgresStore.open(url, schema=schema, min_size=1, max_size=1)
        await store.aclose()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f'SET search_path TO "{schema}"')
            cur = await conn.execute("SELECT count(*) FROM search_docs")
            assert await cur.fetchone() == (len(a) + len(b),)  # one row per message
            assert await search_docs_mismatch(conn) == []
    finally:
        await drop_schema(url, schema)
