"""What every viewer page shows, as JSON-able dicts: one function per page, shared by the HTML
pages and the JSON API (``/api/...`` returns exactly these dicts), so the two never disagree.

Only the read methods of a store are used (the viewer holds a
:class:`~mindstore.viewer.readonly.ReadOnlyStore`). Strings from the store are returned as they
are; escaping is the templates' job (Jinja2 autoescape) and JSON encoding the API's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mindstore.cli.render import to_jsonable
from mindstore.context.session_context import DEFAULT_BLOCK_MAX_TOKENS
from mindstore.search import parse_query
from mindstore.store.types import SessionInfo, SessionKey
from mindstore.tokens import estimate_string_tokens

from .readonly import ReadOnlyStore
from .tree import DEFAULT_LIMIT, session_view

__all__ = [
    "NotFound",
    "blocks_data",
    "namespaces_data",
    "parse_prompt",
    "prompt_data",
    "search_data",
    "session_data",
    "sessions_data",
    "snippet_segments",
]

SESSIONS_PAGE = 50
FILTER_SCAN_PAGE = 500
SEARCH_LIMIT = 50


class NotFound(LookupError):
    """A session or message the request names is not in the store (HTTP 404)."""


def _info(info: SessionInfo) -> dict[str, Any]:
    out: dict[str, Any] = to_jsonable(info)
    return out


async def namespaces_data(store: ReadOnlyStore) -> dict[str, Any]:
    """Every namespace of the store and the store's row counts."""
    return {"namespaces": await store.list_namespaces(), "stats": await store.stats()}


async def sessions_data(
    store: ReadOnlyStore,
    namespace: str,
    *,
    before: str | None = None,
    limit: int = SESSIONS_PAGE,
    filter_text: str = "",
) -> dict[str, Any]:
    """One page of the namespace's sessions, newest-updated first.

    ``filter_text`` keeps sessions whose id or name contains it (case-insensitive); the store
    is then read in pages of :data:`FILTER_SCAN_PAGE` until ``limit`` sessions matched, so a
    filter costs a scan of the namespace's session rows in the worst case (no message is read).
    ``next_before`` is the cursor of the next page (None on the last one).
    """
    limit = max(1, min(500, limit))
    needle = filter_text.casefold().strip()
    found: list[SessionInfo] = []
    cursor = before
    more = False
    while True:
        page_size = limit + 1 if not needle else FILTER_SCAN_PAGE
        page = await store.list_sessions(namespace, limit=page_size, before=cursor)
        for info in page:
            if not needle or needle in info.id.casefold() or needle in (info.name or "").casefold():
                found.append(info)
        if len(found) > limit:
            more = True
            break
        if len(page) < page_size:
            break
        cursor = page[-1].id
    shown = found[:limit]
    return {
        "namespace": namespace,
        "filter": filter_text,
        "before": before,
        "limit": limit,
        "sessions": [_info(i) for i in shown],
        "next_before": shown[-1].id if more and shown else None,
    }


async def _session_info(store: ReadOnlyStore, key: SessionKey) -> SessionInfo:
    info = await store.get_session(key)
    if info is None:
        raise NotFound(f"no session {key.session_id!r} in namespace {key.namespace!r}")
    return info


async def session_data(
    store: ReadOnlyStore,
    namespace: str,
    session_id: str,
    *,
    leaf: str | None = None,
    focus: str | None = None,
    offset: int | None = None,
    limit: int = DEFAULT_LIMIT,
    raw: bool = False,
) -> dict[str, Any]:
    """The session's registry row and its windowed path (see :mod:`mindstore.viewer.tree`)."""
    key = SessionKey(namespace=namespace, session_id=session_id)
    info = await _session_info(store, key)
    rows = await store.all_messages(key)
    compactions = await store.get_compactions(key)
    latest = await store.latest_leaf(key)
    try:
        view = session_view(
            rows,
            compactions,
            latest.id if latest is not None else None,
            leaf=leaf,
            focus=focus,
            offset=offset,
            limit=limit,
            raw=raw,
        )
    except KeyError as exc:
        raise NotFound(str(exc.args[0])) from None
    return {"namespace": namespace, "session": _info(info), **view}


# ---- the frozen prompt and the blocks --------------------------------------------------------

SEPARATOR = "═" * 46
_HEADER = re.compile(
    r"^(?P<label>.+?)(?: \((?P<description>.*)\))?"
    r"(?: \[(?P<percent>\d+)% — (?P<tokens>\d+)/(?P<max>\d+) tokens\])?"
    r" \[(?P<kind>searchable|loadable|readonly|writable)\]$"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class PromptBlock:
    """One block as the frozen prompt shows it (header fields parsed back)."""

    header: str
    label: str
    description: str | None
    tokens: int | None
    max_tokens: int | None
    kind: str
    content: str


def parse_prompt(prompt: str) -> list[PromptBlock]:
    """The blocks of a prompt rendered by :func:`mindstore.prompt.render_system_prompt`.

    Text that is not in that format (a prompt written by other code) yields no blocks.
    """
    lines = prompt.split("\n")
    starts = [
        i
        for i in range(len(lines) - 2)
        if lines[i] == SEPARATOR and lines[i + 2] == SEPARATOR and _HEADER.match(lines[i + 1])
    ]
    out: list[PromptBlock] = []
    for n, i in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        body = lines[i + 3 : end]
        if n + 1 < len(starts) and body and body[-1] == "":
            body = body[:-1]  # the blank line joining two blocks
        m = _HEADER.match(lines[i + 1])
        assert m is not None
        out.append(
            PromptBlock(
                header=lines[i + 1],
                label=m["label"],
                description=m["description"],
                tokens=int(m["tokens"]) if m["tokens"] else None,
                max_tokens=int(m["max"]) if m["max"] else None,
                kind=m["kind"],
                content="\n".join(body),
            )
        )
    return out


async def prompt_data(store: ReadOnlyStore, namespace: str, session_id: str) -> dict[str, Any]:
    """The frozen system prompt stored for the session, exactly (None when none was frozen)."""
    key = SessionKey(namespace=namespace, session_id=session_id)
    info = await _session_info(store, key)
    prompt = await store.get_prompt(key)
    return {
        "namespace": namespace,
        "session": _info(info),
        "prompt": prompt,
        "tokens": estimate_string_tokens(prompt) if prompt is not None else 0,
        "characters": len(prompt) if prompt is not None else 0,
    }


async def blocks_data(store: ReadOnlyStore, namespace: str, session_id: str) -> dict[str, Any]:
    """The context blocks the session sees, with usage, and its loaded skills.

    Stored blocks (the session's and the namespace-wide ones) carry their current content and
    token estimate. Descriptions, budgets (``max_tokens``) and kinds are configured in code, not
    stored; they are read back from the headers of the frozen prompt when there is one, which
    also lists blocks whose content comes from providers (static text, searchable collections,
    skills). ``usage`` is ``tokens / max_tokens`` of the current content; a writable block
    without a configured budget shows the default cap it is held to
    (``DEFAULT_BLOCK_MAX_TOKENS``, ``default_cap`` true).
    """
    key = SessionKey(namespace=namespace, session_id=session_id)
    info = await _session_info(store, key)
    stored = await store.list_blocks(namespace, session_id)
    prompt = await store.get_prompt(key)
    in_prompt = {b.label: b for b in parse_prompt(prompt)} if prompt is not None else {}
    blocks: list[dict[str, Any]] = []
    seen: set[str] = set()
    # Session-scoped rows shadow namespace-wide ones of the same label.
    ordered = sorted(stored, key=lambda kv: (kv[0].label, kv[0].session_id is None))
    for scope_key, content in ordered:
        if scope_key.label in seen:
            continue
        seen.add(scope_key.label)
        p = in_prompt.get(scope_key.label.upper())
        tokens = estimate_string_tokens(content)
        blocks.append(
            _block(
                label=scope_key.label,
                scope="session" if scope_key.session_id is not None else "namespace",
                stored=True,
                content=content,
                tokens=tokens,
                p=p,
            )
        )
    stored_upper = {b["label"].upper() for b in blocks}
    for upper, p in in_prompt.items():
        if upper not in stored_upper:
            blocks.append(
                _block(
                    label=upper.lower(),
                    scope=None,
                    stored=False,
                    content=p.content,
                    tokens=estimate_string_tokens(p.content),
                    p=p,
                )
            )
    order = list(in_prompt)
    blocks.sort(
        key=lambda b: (
            order.index(b["label"].upper()) if b["label"].upper() in in_prompt else len(order),
            b["label"],
        )
    )
    skills = await store.get_skill_states(key)
    return {
        "namespace": namespace,
        "session": _info(info),
        "has_prompt": prompt is not None,
        "blocks": blocks,
        "skills": [
            {
                "label": s.label,
                "key": s.key,
                "loaded": s.loaded,
                "unloaded_before_seq": s.unloaded_before_seq,
            }
            for s in skills
        ],
    }


def _block(
    *,
    label: str,
    scope: str | None,
    stored: bool,
    content: str,
    tokens: int,
    p: PromptBlock | None,
) -> dict[str, Any]:
    max_tokens = p.max_tokens if p is not None else None
    kind = p.kind if p is not None else ("writable" if stored else None)
    # A writable block configured without max_tokens is still capped, but its prompt header
    # shows no budget: show that cap, marked as the default one. (Without a frozen prompt the
    # budget is unknown, not the default.)
    default_cap = p is not None and max_tokens is None and kind == "writable"
    if default_cap:
        max_tokens = DEFAULT_BLOCK_MAX_TOKENS
    return {
        "label": label,
        "scope": scope,
        "stored": stored,
        "kind": kind,
        "description": p.description if p is not None else None,
        "content": content,
        "tokens": tokens,
        "max_tokens": max_tokens,
        "default_cap": default_cap,
        "usage": round(tokens / max_tokens, 4) if max_tokens else None,
        "in_prompt": p is not None,
        "prompt_tokens": p.tokens if p is not None else None,
        "prompt_header": p.header if p is not None else None,
    }


# ---- search ----------------------------------------------------------------------------------

_MARK = re.compile(r"\[([^\[\]\n]{1,200})\]")


def snippet_segments(snippet: str) -> list[dict[str, Any]]:
    """A store snippet (matches wrapped in ``[`` ``]``) as ``{"text", "hit"}`` segments, so a
    page can highlight matches while escaping every character of the text."""
    out: list[dict[str, Any]] = []
    pos = 0
    for m in _MARK.finditer(snippet):
        if m.start() > pos:
            out.append({"text": snippet[pos : m.start()], "hit": False})
        out.append({"text": m[1], "hit": True})
        pos = m.end()
    if pos < len(snippet):
        out.append({"text": snippet[pos:], "hit": False})
    return out


async def search_data(
    store: ReadOnlyStore,
    namespace: str,
    query: str,
    *,
    session_ids: Sequence[str] | None = None,
    limit: int = SEARCH_LIMIT,
) -> dict[str, Any]:
    """Full-text search across the namespace's sessions (the store's query language)."""
    limit = max(1, min(200, limit))
    parsed = parse_query(query)
    hits = (
        []
        if parsed.empty
        else await store.search(namespace, parsed, session_ids=session_ids or None, limit=limit)
    )
    return {
        "namespace": namespace,
        "query": query,
        "sessions": list(session_ids or []),
        "results": [
            {
                **to_jsonable(h),
                "segments": snippet_segments(h.snippet),
            }
            for h in hits
        ],
    }
