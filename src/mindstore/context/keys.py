"""Keys of skills and files: safe relative names. Pure: no I/O.

A skill key names a document under a root (a folder, an fsspec URL, the store). Whatever the
backing, a key can never name something outside that root: ``..``, absolute paths,
backslashes, percent-encoding, URL schemes and drive letters, ``~`` and glob characters are
refused, in the key as typed and in its NFKC normalisation (so full-width look-alikes cannot
slip through). :class:`~mindstore.context.files.FileSkillProvider` and
:class:`~mindstore.context.providers.StoreSkillProvider` apply the same rule.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from mindstore.errors import InvalidKeyError

__all__ = ["MAX_KEY_LENGTH", "check_key", "require_key"]

_FORBIDDEN_CHARS = frozenset('\\%:*?[]{}"<>|~')
MAX_KEY_LENGTH = 200


def check_key(key: Any) -> str | None:
    """Why ``key`` is not a safe relative name, or ``None`` when it is.

    A safe key is a non-empty string of at most 200 characters made of ``/``-separated segments,
    none empty, ``.``, ``..`` or starting with a dot; no control characters, backslashes, ``%``
    (percent-encoding tricks), ``:`` (URL schemes, drive letters), ``~`` or glob characters; and
    the same holds for its NFKC normalisation (so full-width dots cannot sneak in).
    """
    if not isinstance(key, str):
        return f"keys are strings, got {type(key).__name__}"
    if not key:
        return "the key is empty"
    if len(key) > MAX_KEY_LENGTH:
        return f"the key is longer than {MAX_KEY_LENGTH} characters"
    for form in (key, unicodedata.normalize("NFKC", key)):
        for ch in form:
            if ord(ch) < 32 or ord(ch) == 127:
                return "the key contains a control character"
            if ch in _FORBIDDEN_CHARS:
                return f"the key contains {ch!r}"
        if form.startswith("/"):
            return "absolute paths are not keys"
        for segment in form.split("/"):
            if segment in ("", ".", ".."):
                return "the key has an empty, '.' or '..' path segment"
            if segment.startswith("."):
                return "key segments cannot start with '.'"
    return None


def require_key(key: Any, what: str) -> str:
    """``key`` when it is a safe relative name (see :func:`check_key`).

    Raises:
        InvalidKeyError: it is not; the message says why and what a key looks like.
    """
    reason = check_key(key)
    if reason is not None:
        raise InvalidKeyError(
            f"invalid {what} key {key!r}: {reason}. Use a relative name such as 'api-ref' or "
            "'guides/deploy'."
        )
    assert isinstance(key, str)
    return key
