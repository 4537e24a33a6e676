"""Context providers: where the text of a context block comes from.

Providers are duck-typed. Any object with a ``get()`` method is a provider; which other methods
it has decides the kind of block it backs:

=============================  ==============================================  ============
protocol                       methods                                         block kind
=============================  ==============================================  ============
:class:`ContextProvider`       ``get() -> str | None``                         readonly
:class:`WritableContextProvider`  + ``set(content)``                           writable
:class:`SearchProvider`        ``get()``, ``search(query)``, opt. ``set(k, c)``  searchable
:class:`SkillProvider`         ``get()``, ``load(key)``, opt. ``set(k, c, d)``   loadable
=============================  ==============================================  ============

Detection order is ``load`` → loadable, ``search`` → searchable, ``set`` → writable, else
readonly. Every method may be sync or async; mindstore awaits what is awaitable. A provider may
also define ``init(label)``, called once per session before first use.

Built-in providers that live in the store (the writable block, :class:`StoreSearchProvider`,
:class:`StoreSkillProvider`) need to know which namespace, session and label they serve. They
are *configurations*: a session calls :meth:`StoreBackedProvider.bind` to get its own bound copy,
so one instance can be shared by every session a ``SessionManager`` hands out without any session
seeing another's data. Keys are composite (:class:`~mindstore.store.base.ScopeKey`), never
concatenated strings.

:class:`FileSkillProvider` reads skills from a local folder or any fsspec URL (``s3://…`` for
S3, Cloudflare R2 or MinIO via ``endpoint_url``). A key can never escape the root: ``load``
returns ``None`` and ``set`` raises :class:`~mindstore.errors.InvalidKeyError` for anything that
is not a plain relative name.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from mindstore._async import maybe_await
from mindstore.context.files import FileSkillProvider
from mindstore.context.frontmatter import (
    one_line,
    parse_front_matter,
    skill_listing,
)
from mindstore.context.keys import check_key, require_key
from mindstore.errors import InvalidKeyError, TokenBudgetError
from mindstore.prompt import BlockKind
from mindstore.search import parse_query
from mindstore.store.base import Entry, ScopeKey, Store
from mindstore.tokens import estimate_string_tokens

__all__ = [
    "DEFAULT_ENTRY_MAX_TOKENS",
    "ContextProvider",
    "FileSkillProvider",
    "SearchProvider",
    "SkillProvider",
    "StaticProvider",
    "StoreBackedProvider",
    "StoreBlockProvider",
    "StoreSearchProvider",
    "StoreSkillProvider",
    "WritableContextProvider",
    "as_provider",
    "check_key",
    "maybe_await",
    "parse_front_matter",
    "provider_kind",
]

_Scope = str  # "session" | "namespace"

DEFAULT_ENTRY_MAX_TOKENS = 100_000
"""Cap of one keyed entry (estimated tokens) in ``StoreSearchProvider``/``StoreSkillProvider``
by default, and of an entry written through ``set_context`` to a keyed block configured without
``max_tokens`` (with it, ``max_tokens`` applies to each entry)."""


def _check_entry_size(content: str, limit: int | None, key: str) -> None:
    """Raise TokenBudgetError when ``content`` is over ``limit`` estimated tokens."""
    if limit is None:
        return
    # the estimate is at least chars/4: a huge text is refused without counting its words
    tokens = -(-len(content) // 4) if len(content) > 4 * limit else estimate_string_tokens(content)
    if tokens > limit:
        raise TokenBudgetError(
            f"entry {key!r} is about {tokens} tokens, over this provider's limit of {limit} "
            "(max_entry_tokens); nothing was written. Split it into several entries, or "
            "raise max_entry_tokens"
        )


def _check_max_entry_tokens(value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"max_entry_tokens must be a positive integer or None, got {value!r}")
    return value


# ---- protocols -------------------------------------------------------------------------------
@runtime_checkable
class ContextProvider(Protocol):
    """A read-only block: ``get()`` returns its text (``None`` = empty). Sync or async."""

    def get(self) -> str | Awaitable[str | None] | None: ...


@runtime_checkable
class WritableContextProvider(Protocol):
    """A writable block: ``get()`` and ``set(content)``. Sync or async."""

    def get(self) -> str | Awaitable[str | None] | None: ...

    def set(self, content: str) -> Any: ...


@runtime_checkable
class SearchProvider(Protocol):
    """A searchable block: ``get()`` is a summary, ``search(query)`` the ranked hits as text
    (``None`` = no results). Optional ``set(key, content)`` upserts an entry."""

    def get(self) -> str | Awaitable[str | None] | None: ...

    def search(self, query: str) -> str | Awaitable[str | None] | None: ...


@runtime_checkable
class SkillProvider(Protocol):
    """A loadable block: ``get()`` lists ``- key: description`` lines, ``load(key)`` returns a
    document (``None`` = not found). Optional ``set(key, content, description=None)``."""

    def get(self) -> str | Awaitable[str | None] | None: ...

    def load(self, key: str) -> str | Awaitable[str | None] | None: ...


def _has(provider: Any, name: str) -> bool:
    return callable(getattr(provider, name, None))


def provider_kind(provider: Any) -> BlockKind:
    """The kind of block ``provider`` backs, by the methods it has (``None`` = store-backed
    writable block).

    Raises:
        TypeError: the object has no ``get()`` method.
    """
    if provider is None:
        return "writable"
    if not _has(provider, "get"):
        raise TypeError(
            f"{type(provider).__name__} is not a context provider: it needs a get() method "
            "(see mindstore.ContextProvider)"
        )
    if _has(provider, "load"):
        return "loadable"
    if _has(provider, "search"):
        return "searchable"
    if _has(provider, "set"):
        return "writable"
    return "readonly"


_PROVIDER_METHODS = ("get", "set", "search", "load", "init")


class _MappingProvider:
    """A provider given as a plain mapping of callables (``{"get": fn, "set": fn2}``), the
    object-literal style of the reference SDK; each callable becomes the method of that name."""

    def __init__(self, methods: Mapping[str, Callable[..., Any]]) -> None:
        for name, fn in methods.items():
            setattr(self, name, fn)
        self._names = tuple(methods)

    def __repr__(self) -> str:
        return f"<provider from a mapping: {', '.join(self._names)}>"


def as_provider(provider: Any) -> Any:
    """``provider`` itself, or — for a mapping of callables such as ``{"get": fn}`` — an object
    with those methods.

    Raises:
        TypeError: a mapping with a non-callable value, an unknown method name, or no ``get``;
            the message says what to pass.
    """
    if not isinstance(provider, Mapping):
        return provider
    allowed = ", ".join(_PROVIDER_METHODS)
    unknown = [k for k in provider if k not in _PROVIDER_METHODS]
    if unknown:
        raise TypeError(
            f"a provider given as a dict may only have the methods {allowed}; got "
            f"{', '.join(map(repr, unknown))}. Pass e.g. {{'get': lambda: 'text'}}, or an "
            "object with those methods"
        )
    not_callable = [k for k, v in provider.items() if not callable(v)]
    if not_callable:
        raise TypeError(
            f"a provider given as a dict needs functions as values; {', '.join(not_callable)} "
            "is not callable. Pass e.g. {'get': lambda: 'text', 'set': store_text}"
        )
    if "get" not in provider:
        raise TypeError(
            "a provider given as a dict needs a 'get' function returning the block's text, "
            "e.g. {'get': lambda: 'text'}"
        )
    return _MappingProvider(provider)


def has_set(provider: Any) -> bool:
    """Whether the provider accepts writes."""
    return provider is None or _has(provider, "set")


# ---- static --------------------------------------------------------------------------------
class StaticProvider:
    """A read-only block with fixed text (identity, instructions).

    Example:
        ``session.with_context("soul", provider=StaticProvider("You are terse."))``
    """

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"StaticProvider text must be a string, got {type(text).__name__}")
        self.text = text

    def get(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"StaticProvider({self.text[:40]!r})"


def _require_entry_key(key: Any) -> str:
    if not isinstance(key, str) or not key.strip() or len(key) > 256 or "\x00" in key:
        raise InvalidKeyError(
            f"invalid entry key {key!r}: keys are non-empty strings of at most 256 characters"
        )
    return key


# ---- store-backed providers ----------------------------------------------------------------
class StoreBackedProvider:
    """Base of the built-in providers that keep their data in a :class:`Store`.

    An instance is a configuration; :meth:`bind` returns a copy bound to one (namespace,
    session, label), leaving the original untouched so it can be shared by many sessions.
    """

    _store: Store | None
    scope: _Scope
    _key: ScopeKey | None

    def bind(self, *, namespace: str, session_id: str | None, label: str) -> Any:
        """Return a copy serving ``label`` for ``(namespace, session_id)``. With
        ``scope="namespace"`` the session id is ignored (shared by every session)."""
        bound = copy.copy(self)
        bound._key = ScopeKey(
            namespace=namespace,
            session_id=session_id if self.scope == "session" else None,
            label=label,
        )
        return bound

    def _require_bound(self, store: Store | None = None) -> tuple[Store, ScopeKey]:
        s = store if store is not None else self._store
        if self._key is None or s is None:
            raise RuntimeError(
                f"{type(self).__name__} is not bound to a session: register it with "
                "Session.with_context(label, provider=...) or call .bind(namespace=..., "
                "session_id=..., label=...) first"
            )
        return s, self._key

    @property
    def scope_key(self) -> ScopeKey | None:
        """Where the data lives, once bound."""
        return self._key


def _check_scope(scope: str) -> _Scope:
    if scope not in ("session", "namespace"):
        raise ValueError(f"scope must be 'session' or 'namespace', got {scope!r}")
    return scope


class StoreBlockProvider(StoreBackedProvider):
    """The default writable block (``with_context(label)`` with no provider): its text is one
    row in the store, per session or shared by the namespace (``scope="namespace"``)."""

    def __init__(self, store: Store | None = None, *, scope: _Scope = "session") -> None:
        self._store = store
        self.scope = _check_scope(scope)
        self._key = None

    async def get(self) -> str | None:
        store, key = self._require_bound()
        return await store.get_block(key)

    async def set(self, content: str) -> None:
        store, key = self._require_bound()
        await store.set_block(key, content)

    async def update(self, fn: Callable[[str], str]) -> str:
        """Atomic read-modify-write (see :meth:`Store.update_block`)."""
        store, key = self._require_bound()
        return await store.update_block(key, fn)


class StoreSearchProvider(StoreBackedProvider):
    """A searchable block over keyed entries in the store (full-text search, BM25 / ts_rank).

    Scoped to (namespace, block label) by default — a knowledge base shared by every conversation
    of the namespace — or to the session with ``scope="session"``.

    Args:
        store: the store holding the entries (usually the session's).
        scope: ``"namespace"`` (default) or ``"session"``.
        limit: how many hits :meth:`search` returns.
        recent: how many recent keys :meth:`get` names.
        max_chars: hits longer than this are cut (with a note of how much was cut).
        max_entry_tokens: :meth:`set` refuses a longer entry with ``TokenBudgetError``
            (estimated tokens; ``None`` = no limit).
    """

    def __init__(
        self,
        store: Store,
        *,
        scope: _Scope = "namespace",
        limit: int = 10,
        recent: int = 5,
        max_chars: int = 2000,
        max_entry_tokens: int | None = DEFAULT_ENTRY_MAX_TOKENS,
    ) -> None:
        if limit <= 0 or recent < 0 or max_chars <= 0:
            raise ValueError("limit and max_chars must be positive and recent non-negative")
        self.max_entry_tokens = _check_max_entry_tokens(max_entry_tokens)
        self._store = store
        self.scope = _check_scope(scope)
        self.limit = limit
        self.recent = recent
        self.max_chars = max_chars
        self._key = None

    async def get(self) -> str:
        """``"N entries indexed."`` plus the most recently written keys."""
        store, key = self._require_bound()
        count = await store.count_entries(key)
        summary = f"{count} {'entry' if count == 1 else 'entries'} indexed."
        if count and self.recent:
            recent = await store.list_entries(key, limit=self.recent)
            summary += " Most recent: " + ", ".join(e.key for e in recent) + "."
        return summary

    async def search(self, query: str, *, match: str = "any") -> str | None:
        """Ranked entries as text, best first, or ``None`` when nothing matches. Any string is
        a valid query — a question or keywords (see :func:`mindstore.search.parse_query`);
        ``match="all"`` requires every word."""
        store, key = self._require_bound()
        parsed = parse_query(query if isinstance(query, str) else str(query), match)
        if parsed.empty:
            return None
        hits = await store.search_entries(key, parsed, limit=self.limit)
        if not hits:
            return None
        out = []
        for i, hit in enumerate(hits, 1):
            head = f"[{i}] {hit.key}"
            if hit.description:
                head += f" — {one_line(hit.description)}"
            content = hit.content
            if len(content) > self.max_chars:
                cut = len(content) - self.max_chars
                content = content[: self.max_chars] + f"... [truncated {cut} chars]"
            out.append(f"{head}\n{content}")
        return "\n\n".join(out)

    async def set(self, key: str, content: str, description: str | None = None) -> None:
        """Upsert the entry ``key``.

        Raises:
            InvalidKeyError: empty or over-long key.
            TokenBudgetError: ``content`` is over ``max_entry_tokens``; nothing changed.
        """
        store, scope_key = self._require_bound()
        entry_key = _require_entry_key(key)
        if not isinstance(content, str):
            raise TypeError("entry content must be a string")
        _check_entry_size(content, self.max_entry_tokens, entry_key)
        await store.put_entry(scope_key, entry_key, content, description=description)

    async def read_entry(self, key: str) -> tuple[str, str | None] | None:
        """``(content, description)`` of the entry ``key``, or ``None``."""
        store, scope_key = self._require_bound()
        entry = await store.get_entry(scope_key, _require_entry_key(key))
        return None if entry is None else (entry.content, entry.description)

    async def delete(self, key: str) -> bool:
        """Remove the entry ``key``; False if there was none."""
        store, scope_key = self._require_bound()
        return await store.delete_entry(scope_key, key)

    async def entries(self, *, limit: int | None = None) -> list[Entry]:
        """Entries, most recently updated first."""
        store, scope_key = self._require_bound()
        return await store.list_entries(scope_key, limit=limit)


class StoreSkillProvider(StoreBackedProvider):
    """A loadable block whose skills are documents in the store (no file system needed).

    Args:
        store: the store holding the skills.
        scope: ``"namespace"`` (default: shared by the namespace's sessions) or ``"session"``.
        max_entry_tokens: :meth:`set` refuses a longer skill with ``TokenBudgetError``
            (estimated tokens; ``None`` = no limit).
    """

    def __init__(
        self,
        store: Store,
        *,
        scope: _Scope = "namespace",
        max_entry_tokens: int | None = DEFAULT_ENTRY_MAX_TOKENS,
    ) -> None:
        self.max_entry_tokens = _check_max_entry_tokens(max_entry_tokens)
        self._store = store
        self.scope = _check_scope(scope)
        self._key = None

    async def get(self) -> str:
        """``- key: description`` lines, sorted by key."""
        store, key = self._require_bound()
        entries = await store.list_entries(key)
        return skill_listing([(e.key, e.description) for e in entries])

    async def load(self, key: str) -> str | None:
        """The skill's document, or ``None`` when there is none (or the key is invalid)."""
        if check_key(key) is not None:
            return None
        store, scope_key = self._require_bound()
        entry = await store.get_entry(scope_key, key)
        return entry.content if entry is not None else None

    async def set(self, key: str, content: str, description: str | None = None) -> None:
        """Create or replace the skill ``key``.

        Raises:
            InvalidKeyError: the key is not a safe relative name.
            TokenBudgetError: ``content`` is over ``max_entry_tokens``; nothing changed.
        """
        store, scope_key = self._require_bound()
        skill_key = require_key(key, "skill")
        if not isinstance(content, str):
            raise TypeError("skill content must be a string")
        _check_entry_size(content, self.max_entry_tokens, skill_key)
        meta, body = parse_front_matter(content)
        # capped: a description goes into every prompt that lists the skill
        description = one_line(meta.get("description") if description is None else description)
        await store.put_entry(scope_key, skill_key, body, description=description)

    async def delete(self, key: str) -> bool:
        store, scope_key = self._require_bound()
        return await store.delete_entry(scope_key, key)

    async def read_entry(self, key: str) -> tuple[str, str | None] | None:
        """``(document, description)`` of the skill ``key``, or ``None``."""
        if check_key(key) is not None:
            return None
        store, scope_key = self._require_bound()
        entry = await store.get_entry(scope_key, key)
        return None if entry is None else (entry.content, entry.description)
