"""Argument checks shared by every backend: run before any I/O, so a bad call changes nothing
and both backends refuse the same inputs with the same typed errors. Pure: no I/O."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final, TypeVar

from mindstore.errors import InvalidKeyError, InvalidMessageError, MessageNotFoundError
from mindstore.search import ParsedQuery
from mindstore.store.types import ScopeKey, SessionKey

__all__ = [
    "CREATE_FIELDS",
    "SESSION_FIELDS",
    "check_choice",
    "check_entry_key",
    "check_id",
    "check_int",
    "check_key",
    "check_name",
    "check_optional_text",
    "check_query",
    "check_scope",
    "check_session_fields",
    "check_text",
    "metadata_json",
    "not_found",
]

SESSION_FIELDS: Final = frozenset({"name", "end_reason", "model", "source", "metadata"})
"""The registry fields ``Store.update_session`` may set."""


def _encodable(value: str) -> bool:
    """False for text UTF-8 cannot encode (lone surrogates, e.g. from undecodable argv bytes):
    the drivers would raise a raw UnicodeEncodeError, and differently on each backend."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_name(value: Any, field: str) -> str:
    """A namespace, session id or label: a non-empty string of ≤ 256 characters, valid Unicode
    (no lone surrogates), no NUL.

    Raises:
        InvalidKeyError: (also a ValueError) the same on every backend, before any I/O.
    """
    if not isinstance(value, str) or not value or len(value) > 256 or "\x00" in value:
        raise InvalidKeyError(
            f"{field} must be a non-empty string of at most 256 characters without NUL, "
            f"got {value!r:.80}"
        )
    if not _encodable(value):
        raise InvalidKeyError(
            f"{field} {value!r:.80} is not valid Unicode (it contains a lone surrogate, e.g. "
            "from bytes that are not UTF-8); use valid text"
        )
    return value


def check_key(key: Any) -> SessionKey:
    if not isinstance(key, SessionKey):
        raise TypeError(f"expected a SessionKey, got {type(key).__name__}")
    check_name(key.namespace, "namespace")
    check_name(key.session_id, "session_id")
    return key


def check_scope(key: Any) -> tuple[str, str, str]:
    """``(namespace, scope, label)``; scope ``""`` stands for namespace-wide (a session id is
    never empty, so the composite key cannot collide)."""
    if not isinstance(key, ScopeKey):
        raise TypeError(f"expected a ScopeKey, got {type(key).__name__}")
    check_name(key.namespace, "namespace")
    if key.session_id is not None:
        check_name(key.session_id, "session_id")
    check_name(key.label, "label")
    return key.namespace, key.session_id or "", key.label


def check_id(value: Any, field: str = "message id") -> str:
    """A message id argument. Raises InvalidMessageError (also a ValueError)."""
    if not isinstance(value, str) or not value or len(value) > 256 or "\x00" in value:
        raise InvalidMessageError(
            f"{field} must be a non-empty string of at most 256 characters, got {value!r:.80}"
        )
    if not _encodable(value):
        raise InvalidMessageError(
            f"{field} {value!r:.80} is not valid Unicode (it contains a lone surrogate)"
        )
    return value


def check_entry_key(value: Any) -> str:
    """A keyed-entry or skill key. Raises InvalidKeyError (also a ValueError)."""
    if not isinstance(value, str) or not value or len(value) > 512 or "\x00" in value:
        raise InvalidKeyError(
            f"entry key must be a non-empty string of at most 512 characters, got {value!r:.80}"
        )
    if not _encodable(value):
        raise InvalidKeyError(
            f"entry key {value!r:.80} is not valid Unicode (it contains a lone surrogate)"
        )
    return value


def check_text(value: Any, field: str, error: type[ValueError] = ValueError) -> str:
    """Block, entry and prompt text: valid Unicode without NUL (PostgreSQL text cannot hold
    NUL, so neither backend accepts it — the same input must behave the same everywhere).
    ``error`` is the ValueError subclass raised for a bad value."""
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise error(f"{field} must not contain NUL characters")
    if not _encodable(value):
        raise error(f"{field} contains a lone surrogate; strings must be valid Unicode")
    return value


def check_expiry(value: Any) -> datetime | None:
    """An entry's expiry: None (never) or a timezone-aware datetime."""
    if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
        raise TypeError("expires_at must be None or a timezone-aware datetime")
    return value


def prefix_upper_bound(prefix: str) -> str | None:
    """The least string greater than every string that starts with ``prefix``, in code-point
    order (SQLite's BINARY collation over UTF-8, PostgreSQL's ``COLLATE "C"``): ``label >=
    prefix AND label < bound`` is then exactly "starts with ``prefix``" as an index range.
    None when there is no such bound (empty prefix, or one made only of U+10FFFF)."""
    chars = list(prefix)
    while chars:
        code = ord(chars.pop()) + 1
        if code == 0xD800:  # surrogates cannot be stored; the next storable code point
            code = 0xE000
        if code <= 0x10FFFF:
            return "".join(chars) + chr(code)
    return None


def check_int(value: Any, field: str = "limit") -> int:
    """An integer argument that fits the drivers' 64-bit integers (a larger one raised a raw
    OverflowError from sqlite3)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} must be an integer, got {type(value).__name__}")
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"{field} must fit in 64 bits, got {value}")
    return value


def check_query(query: Any) -> ParsedQuery:
    if not isinstance(query, ParsedQuery):
        raise TypeError(
            f"query must be a ParsedQuery (use mindstore.search.parse_query), "
            f"got {type(query).__name__}"
        )
    return query


def metadata_json(metadata: Any) -> str | None:
    """Registry metadata as JSON text (``None`` stays ``None``)."""
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a mapping, got {type(metadata).__name__}")
    try:
        text = json.dumps(dict(metadata), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"metadata must be JSON-serialisable: {e}") from e
    return check_text(text, "metadata")


def check_session_fields(
    fields: Mapping[str, Any], allowed: frozenset[str] = SESSION_FIELDS
) -> dict[str, Any]:
    """Validated registry column values: text fields checked, ``metadata`` as JSON text.

    Raises:
        TypeError: a field outside ``allowed`` (column names come from this allow-list only,
            so they can be put into SQL).
    """
    unknown = set(fields) - allowed
    if unknown:
        raise TypeError(
            f"update_session got unknown fields {sorted(unknown)}; allowed: {sorted(allowed)}"
        )
    values: dict[str, Any] = {}
    for field, value in fields.items():
        if field == "metadata":
            values[field] = metadata_json(value)
        else:
            if value is not None:
                # Names and labels of the registry: the library's typed error, like ids.
                check_text(value, field, InvalidKeyError)
            values[field] = value
    return values


CREATE_FIELDS: Final = SESSION_FIELDS - {"end_reason"} | {"parent_session_id"}
"""The registry fields ``Store.create_session`` takes."""


def not_found(key: SessionKey, message_id: str) -> MessageNotFoundError:
    return MessageNotFoundError(
        f"no message {message_id!r} in session {key.session_id!r} (namespace {key.namespace!r})"
    )


# ---- store options (constructors) ------------------------------------------------------------
def check_choice(value: Any, field: str, choices: tuple[str, ...]) -> str:
    """One of a fixed set of option values (``synchronous``, ``vector_index``)."""
    if not isinstance(value, str) or value not in choices:
        allowed = ", ".join(repr(c) for c in choices[:-1]) + f" or {choices[-1]!r}"
        raise ValueError(f"{field} must be {allowed}, got {value!r}")
    return value


_S = TypeVar("_S")


def check_store(store: _S, what: str) -> _S:
    """An async mindstore store for ``what`` (a class that awaits it): a store from
    :mod:`mindstore.sync` or something that is no store at all failed later with Python's
    own error (``object list can't be used in 'await' expression``), after writing.

    Raises:
        TypeError: with the store to use instead.
    """
    if type(store).__module__ == "mindstore.sync":
        raise TypeError(
            f"{what} needs an async mindstore store (mindstore.SQLiteStore(path), await "
            f"mindstore.PostgresStore.open(url), await mindstore.open_store(url)), got "
            f"mindstore.sync.{type(store).__name__}: use its async store (store.aio) or the "
            "mindstore.sync classes"
        )
    if not callable(getattr(store, "append", None)) or not callable(getattr(store, "path", None)):
        raise TypeError(
            f"{what} needs a mindstore store (mindstore.SQLiteStore(path), await "
            f"mindstore.PostgresStore.open(url)), got {type(store).__name__}"
        )
    return store


def check_optional_text(value: Any, field: str) -> None:
    """``value`` is None or a string a store can hold (TypeError / InvalidKeyError)."""
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{field} must be a string or None, got {type(value).__name__}")
    if value is not None:
        check_text(value, field, InvalidKeyError)
