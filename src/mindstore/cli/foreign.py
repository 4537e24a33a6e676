"""``mindstore import --format openai-chat|openai-responses|anthropic``: a conversation in a model
API's shape, read into one new session.

The file is either one JSON document — a list of messages/items, or the request object that
holds them (``{"messages": [...]}`` for Chat Completions, ``{"input": [...]}`` for Responses,
``{"system": ..., "messages": [...]}`` for Anthropic) — or JSON Lines with one message/item per
line. It is converted with the whole-history converters of :mod:`mindstore.formats` (roles
kept, tool results joined to their calls) into an :class:`~mindstore.formats.export.ExportData`
of one chain of messages, which the ordinary import path validates and writes: the whole file
is checked before the database is touched, and the first problem is reported as ``line N: …``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mindstore.errors import InvalidMessageError
from mindstore.formats import (
    from_anthropic_messages,
    from_openai_chat_messages,
    from_openai_responses_items,
)
from mindstore.formats.export import ExportData, ExportFormatError
from mindstore.messages import dumps
from mindstore.store.base import NewMessage
from mindstore.tokens import estimate_message_tokens

__all__ = ["FOREIGN_FORMATS", "foreign_session_id", "parse_foreign"]

FOREIGN_FORMATS = ("openai-chat", "openai-responses", "anthropic")
_LIST_KEY = {"openai-chat": "messages", "openai-responses": "input", "anthropic": "messages"}
_INDEX = re.compile(r"^(?:messages|items)\[(\d+)\]")


def _text(lines: Iterable[str | bytes]) -> str:
    """The whole file as text (lines of ``str``, or of UTF-8 ``bytes``)."""
    out: list[str] = []
    for lineno, raw in enumerate(lines, start=1):
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ExportFormatError(
                    f"line {lineno}: not UTF-8 text ({exc.reason} at byte {exc.start + 1})"
                ) from None
        out.append(raw)
    return "".join(out)


def _read(lines: Iterable[str | bytes], fmt: str) -> tuple[list[Any], list[int], Any]:
    """The entries, the line each starts on, and the Anthropic ``system`` (if any)."""
    text = _text(lines)
    if text.startswith("\ufeff"):
        text = text[1:]
    stripped = text.strip()
    if not stripped:
        raise ExportFormatError("line 1: empty file: no messages to import")
    system = None
    try:
        doc = json.loads(stripped)
    except json.JSONDecodeError:
        doc = None
    else:
        if isinstance(doc, dict) and isinstance(doc.get(_LIST_KEY[fmt]), list):
            system = doc.get("system") if fmt == "anthropic" else None
            doc = doc[_LIST_KEY[fmt]]
        if isinstance(doc, list):
            first = text.count("\n", 0, text.find("[")) + 1
            return doc, [first] * len(doc), system
        if not isinstance(doc, dict):
            raise ExportFormatError(
                f"line 1: expected a JSON array (or JSON Lines) of {fmt} messages, "
                f"got {type(doc).__name__}"
            )
    entries: list[Any] = []
    at: list[int] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            entries.append(json.loads(raw))
        except json.JSONDecodeError as exc:
            raise ExportFormatError(
                f"line {lineno}: not valid JSON ({exc.msg} at column {exc.colno})"
            ) from None
        at.append(lineno)
    return entries, at, system


def parse_foreign(lines: Iterable[str], fmt: str, *, namespace: str, session_id: str) -> ExportData:
    """Read and convert a whole file; nothing is written.

    Raises:
        ExportFormatError: ``line N: <what>`` (for a JSON array, the line the array starts on
            and the entry's index).
    """
    if fmt not in FOREIGN_FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FOREIGN_FORMATS)}")
    entries, at, system = _read(lines, fmt)
    try:
        if fmt == "openai-chat":
            messages = from_openai_chat_messages(entries)
        elif fmt == "openai-responses":
            messages = from_openai_responses_items(entries)
        else:
            if system is not None and not isinstance(system, str | list):
                raise InvalidMessageError("system must be a string or a list of text blocks")
            messages = from_anthropic_messages(entries, system=system)
    except InvalidMessageError as exc:
        what = str(exc)
        match = _INDEX.match(what)
        line = at[int(match.group(1))] if match and int(match.group(1)) < len(at) else 1
        raise ExportFormatError(f"line {line}: {what}") from None
    if not messages:
        raise ExportFormatError(f"line {at[0] if at else 1}: no messages to import")
    data = ExportData(namespace=namespace, session_id=session_id, session=None)
    parent: str | None = None
    for message in messages:
        data.messages.append(
            NewMessage(
                message=message,
                parent=parent,
                tokens=estimate_message_tokens([message]),
                content=dumps(message),
            )
        )
        parent = message["id"]
    return data


def foreign_session_id(file: str, session_id: str | None) -> str:
    """The session to import into: ``--session``, else the file's name without its suffix.

    Raises:
        ExportFormatError: reading standard input (``-``) without ``--session``.
    """
    if session_id is not None:
        return session_id
    if file == "-":
        raise ExportFormatError(
            "importing a conversation from standard input needs --session ID (there is no "
            "file name to name the session after)"
        )
    name = Path(file).name
    stem = name.split(".", 1)[0] if not name.startswith(".") else name
    return stem or name
