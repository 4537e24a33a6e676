"""The mindstore export format: one session as JSON Lines, written and read. Pure: no I/O.

:func:`export_records` turns what a store holds for one session into the file's records and
:func:`export_lines` into its text; :func:`decode_lines` and :func:`parse_export` read a file
back into :class:`ExportData`, validated whole. Reading from and writing to a store is the
caller's part (``mindstore export`` / ``mindstore import`` do it in one transaction each).

Format (version 1), one JSON object per line, keys sorted, UTF-8:

1. a header ``{"kind": "mindstore-export", "version": 1, "namespace", "session_id", "session",
   "messages", "compactions", "blocks", "skills"}`` — ``session`` holds the registry fields that
   can be restored (name, parent, model, source, metadata, usage, end reason) and the counts
   let a truncated file be detected;
2. every message of every branch in insertion order: ``{"kind": "message", "parent_id",
   "tokens", "message"}`` (parents always come before their children);
3. every compaction overlay in creation order, reverted and superseded ones included:
   ``{"kind": "compaction", "ref", "from", "to", "summary", "superseded_by", "reverted"}``
   where ``ref`` numbers overlays 1.. within the file and ``superseded_by`` names a ``ref``
   (store-wide overlay ids are not portable between databases);
4. the stored context blocks the session sees: ``{"kind": "block", "scope": "session" |
   "namespace", "label", "content"}``;
5. loaded-skill state: ``{"kind": "skill", "label", "key", "loaded", "unloaded",
   "unloaded_after"}`` where ``unloaded_after`` is the id of the last message that existed
   when the skill was (last) unloaded;
6. the frozen system prompt, if one was persisted: ``{"kind": "prompt", "prompt"}``.

What is not carried: insertion timestamps and store-wide sequence numbers (an import gets new
ones, in the same order), and keyed entries of searchable/skill collections (they belong to a
block label, not to a session). Everything else round-trips: export → import into an empty store
→ export gives an identical file.

Parsing validates the whole file — JSON, structure, and every name, text and counter exactly as
the store will check it (the stores' own argument checks) — so the store is never the first to
object; the first problem is reported as ``line N: <what>`` (also for bytes that are not UTF-8,
through :func:`decode_lines`; a byte-order mark at the start is accepted).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from mindstore.errors import InvalidMessageError, MindstoreError
from mindstore.messages import validate_message
from mindstore.store._checks import check_entry_key, check_name, check_text, metadata_json
from mindstore.store.types import (
    Compaction,
    NewMessage,
    ScopeKey,
    SessionInfo,
    SessionKey,
    SkillState,
    StoredMessage,
)

__all__ = [
    "FORMAT",
    "VERSION",
    "ExportData",
    "ExportFormatError",
    "decode_lines",
    "export_lines",
    "export_records",
    "parse_export",
]

FORMAT = "mindstore-export"
VERSION = 1

_SESSION_FIELDS = (
    "name",
    "parent_session_id",
    "model",
    "source",
    "metadata",
    "input_tokens",
    "output_tokens",
    "estimated_cost",
    "end_reason",
)


class ExportFormatError(MindstoreError, ValueError):
    """A malformed export file: the message starts with ``line N:``. Nothing was imported."""


def _dumps(obj: Any) -> str:
    return json.dumps(
        obj, ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
    )


# ---- export ----------------------------------------------------------------------------------


def export_records(
    key: SessionKey,
    *,
    info: SessionInfo | None,
    rows: Sequence[StoredMessage],
    compactions: Sequence[Compaction],
    blocks: Sequence[tuple[ScopeKey, str]],
    skills: Sequence[SkillState],
    prompt: str | None,
) -> list[dict[str, Any]]:
    """Every record of the session's export, header first (see the module docstring).

    The arguments are what the store returns for the session — ``get_session``,
    ``all_messages``, ``get_compactions``, ``list_blocks``, ``get_skill_states``, ``get_prompt``
    — read in one snapshot, so every overlay and skill record names messages in the file.
    """
    refs = {c.id: i for i, c in enumerate(compactions, start=1)}
    skill_records = []
    for s in sorted(skills, key=lambda s: (s.label, s.key)):  # one order, whatever the store's
        skill_records.append(
            {
                "kind": "skill",
                "label": s.label,
                "key": s.key,
                "loaded": s.loaded,
                "unloaded_after": _last_at_or_before(rows, s.unloaded_before_seq)
                if s.unloaded_before_seq is not None
                else None,
                "unloaded": s.unloaded_before_seq is not None,
            }
        )
    block_records = [
        {
            "kind": "block",
            "scope": "session" if bk.session_id is not None else "namespace",
            "label": bk.label,
            "content": content,
        }
        for bk, content in sorted(blocks, key=lambda b: (b[0].session_id is None, b[0].label))
    ]
    header = {
        "kind": FORMAT,
        "version": VERSION,
        "namespace": key.namespace,
        "session_id": key.session_id,
        "session": {f: getattr(info, f) for f in _SESSION_FIELDS} if info is not None else None,
        "messages": len(rows),
        "compactions": len(compactions),
        "blocks": len(block_records),
        "skills": len(skill_records),
        "prompt": prompt is not None,
    }
    out: list[dict[str, Any]] = [header]
    out.extend(
        {"kind": "message", "parent_id": r.parent_id, "tokens": r.tokens, "message": r.message}
        for r in rows
    )
    out.extend(
        {
            "kind": "compaction",
            "ref": refs[c.id],
            "from": c.from_message_id,
            "to": c.to_message_id,
            "summary": c.summary,
            "superseded_by": refs.get(c.superseded_by) if c.superseded_by is not None else None,
            "reverted": c.reverted,
        }
        for c in compactions
    )
    out.extend(block_records)
    out.extend(skill_records)
    if prompt is not None:
        out.append({"kind": "prompt", "prompt": prompt})
    return out


def _last_at_or_before(rows: Sequence[StoredMessage], seq: int) -> str | None:
    last: str | None = None
    for r in rows:
        if r.seq > seq:
            break
        last = r.id
    return last


def export_lines(records: Iterable[dict[str, Any]]) -> Iterator[str]:
    """The JSON Lines text of ``records``, one line each with its trailing newline."""
    for rec in records:
        yield _dumps(rec) + "\n"


# ---- import: parse and validate everything first --------------------------------------------


@dataclass(kw_only=True, slots=True)
class ExportData:
    """A fully validated export file, ready to be written."""

    namespace: str
    session_id: str
    session: dict[str, Any] | None
    messages: list[NewMessage] = field(default_factory=list)
    compactions: list[dict[str, Any]] = field(default_factory=list)
    blocks: list[dict[str, Any]] = field(default_factory=list)
    skills: list[dict[str, Any]] = field(default_factory=list)
    prompt: str | None = None


MAX_INT = 2**63 - 1
"""Counters (tokens, usage) must fit a signed 64-bit column on every backend."""


def _fail(line: int, what: str) -> ExportFormatError:
    return ExportFormatError(f"line {line}: {what}")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _loads(text: str, line: int) -> Any:
    """One JSON line; every way it can fail becomes ``line N: …`` (never a raw exception)."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise _fail(line, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise _fail(line, "JSON nested too deeply to read") from None
    except ValueError as exc:  # NaN/Infinity, integers longer than Python's digit limit
        raise _fail(line, f"not valid JSON ({' '.join(str(exc).split())[:120]})") from None


def _checked(line: int, check: Callable[..., Any], *args: Any) -> Any:
    """A store argument check run at parse time, its error as ``line N: …``."""
    try:
        return check(*args)
    except (ValueError, TypeError) as exc:
        raise _fail(line, str(exc)) from None


def _count(value: Any, name: str, line: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_INT:
        raise _fail(line, f"{name!r} must be an integer from 0 to 2**63-1, got {value!r:.40}")
    return value


def _check_session(session: dict[str, Any], line: int) -> None:
    """The registry fields the import will write, checked as the store will check them."""
    for name in ("name", "model", "source", "end_reason", "parent_session_id"):
        value = session.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise _fail(line, f"session {name!r} must be a string or null")
        if name == "parent_session_id":
            _checked(line, check_name, value, "session 'parent_session_id'")
        else:
            _checked(line, check_text, value, f"session {name!r}")
    metadata = session.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise _fail(line, "session 'metadata' must be an object or null")
    _checked(line, metadata_json, metadata)
    for name in ("input_tokens", "output_tokens"):
        if session.get(name) is not None:
            _count(session[name], f"session {name}", line)
    cost = session.get("estimated_cost")
    if cost is not None and (
        isinstance(cost, bool)
        or not isinstance(cost, int | float)
        or not math.isfinite(cost)
        or cost < 0
        or cost > 1e300
    ):
        raise _fail(line, f"session 'estimated_cost' must be a non-negative number, got {cost!r}")


def _req(rec: dict[str, Any], name: str, types: type | tuple[type, ...], line: int) -> Any:
    if name not in rec:
        raise _fail(line, f"{rec.get('kind')} record has no {name!r}")
    value = rec[name]
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in _tuple(types)):
        raise _fail(line, f"{name!r} has the wrong type ({type(value).__name__})")
    return value


def _tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _name(rec: dict[str, Any], name: str, line: int) -> str:
    """A namespace, session id or label, checked as the store checks it."""
    return str(_checked(line, check_name, _req(rec, name, str, line), repr(name)))


def _nonempty_str(rec: dict[str, Any], name: str, line: int) -> str:
    value = _req(rec, name, str, line)
    if not value:
        raise _fail(line, f"{name!r} is empty")
    return str(value)


def decode_lines(
    binary: Iterable[bytes], *, progress: Callable[[int], None] | None = None
) -> Iterator[str]:
    """The lines of a binary stream as text: UTF-8, a byte-order mark at the very start
    skipped. ``progress(n)`` gets the bytes of each line.

    Raises:
        ExportFormatError: ``line N: not UTF-8 text …``.
    """
    for lineno, raw in enumerate(binary, start=1):
        if progress is not None:
            progress(len(raw))
        if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _fail(
                lineno, f"not UTF-8 text ({exc.reason} at byte {exc.start + 1} of the line)"
            ) from None


def parse_export(
    lines: Iterable[str], *, progress: Callable[[int], None] | None = None
) -> ExportData:
    """Parse and validate a whole export (an iterable of lines, e.g. an open file).

    ``progress(n)`` is called with the number of characters consumed per line.

    Raises:
        ExportFormatError: ``line N: <what>`` for the first malformed line (or a truncated file).
    """
    data: ExportData | None = None
    header: dict[str, Any] = {}
    seen: set[str] = set()
    parents: dict[str, str | None] = {}
    refs: dict[int, int] = {}  # ref -> line
    block_keys: set[tuple[str, str]] = set()
    skill_keys: set[tuple[str, str]] = set()
    lineno = 0
    order = ["message", "compaction", "block", "skill", "prompt"]
    stage = 0
    for lineno, raw in enumerate(lines, start=1):
        if progress is not None:
            progress(len(raw))
        text = (raw.removeprefix("\ufeff") if lineno == 1 else raw).strip()
        if not text:
            continue
        rec = _loads(text, lineno)
        if not isinstance(rec, dict):
            raise _fail(lineno, f"expected a JSON object, got {type(rec).__name__}")
        kind = rec.get("kind")
        if data is None:
            if kind != FORMAT:
                raise _fail(
                    lineno, f"not a mindstore export (the first record must have kind {FORMAT!r})"
                )
            if rec.get("version") != VERSION:
                raise _fail(
                    lineno,
                    f"unsupported export version {rec.get('version')!r} "
                    f"(this mindstore reads version {VERSION})",
                )
            session = rec.get("session")
            if session is not None and not isinstance(session, dict):
                raise _fail(lineno, "'session' must be an object or null")
            if session is not None:
                unknown = set(session) - set(_SESSION_FIELDS)
                if unknown:
                    raise _fail(lineno, f"unknown session field(s) {sorted(unknown)}")
                _check_session(session, lineno)
            for count in ("messages", "compactions", "blocks", "skills"):
                _count(rec.get(count), f"header {count}", lineno)
            if not isinstance(rec.get("prompt"), bool):
                raise _fail(lineno, "header 'prompt' must be true or false")
            header = rec
            data = ExportData(
                namespace=_name(rec, "namespace", lineno),
                session_id=_name(rec, "session_id", lineno),
                session=session,
            )
            continue
        if kind not in order:
            raise _fail(lineno, f"unknown record kind {kind!r}")
        idx = order.index(kind)
        if idx < stage:
            raise _fail(lineno, f"{kind} record after {order[stage]} records (file out of order)")
        stage = idx
        if kind == "message":
            _parse_message(rec, lineno, data, seen, parents)
        elif kind == "compaction":
            _parse_compaction(rec, lineno, data, seen, parents, refs)
        elif kind == "block":
            scope = _req(rec, "scope", str, lineno)
            if scope not in ("session", "namespace"):
                raise _fail(lineno, f"block scope must be 'session' or 'namespace', got {scope!r}")
            label = _name(rec, "label", lineno)
            _checked(lineno, check_text, _req(rec, "content", str, lineno), "block content")
            if (scope, label) in block_keys:
                raise _fail(lineno, f"duplicate block {label!r}")
            block_keys.add((scope, label))
            data.blocks.append(rec)
        elif kind == "skill":
            label = _name(rec, "label", lineno)
            key = _checked(lineno, check_entry_key, _req(rec, "key", str, lineno))
            _req(rec, "loaded", bool, lineno)
            _req(rec, "unloaded", bool, lineno)
            after = rec.get("unloaded_after")
            if after is not None and after not in seen:
                raise _fail(lineno, f"unloaded_after {after!r} is not a message in the file")
            if (label, key) in skill_keys:
                raise _fail(lineno, f"duplicate skill state {label!r}/{key!r}")
            skill_keys.add((label, key))
            data.skills.append(rec)
        else:
            if data.prompt is not None:
                raise _fail(lineno, "more than one prompt record")
            data.prompt = _checked(lineno, check_text, _req(rec, "prompt", str, lineno), "prompt")
    if data is None:
        raise _fail(max(lineno, 1), "empty file: no mindstore export header")
    for name, got in (
        ("messages", len(data.messages)),
        ("compactions", len(data.compactions)),
        ("blocks", len(data.blocks)),
        ("skills", len(data.skills)),
    ):
        if header[name] != got:
            raise _fail(
                lineno,
                f"the header declares {header[name]} {name} but the file has {got} (truncated?)",
            )
    if header["prompt"] != (data.prompt is not None):
        raise _fail(lineno, "the header's 'prompt' flag does not match the file (truncated?)")
    for c in data.compactions:
        sb = c["superseded_by"]
        if sb is not None and sb not in refs:
            raise _fail(refs[c["ref"]], f"superseded_by {sb} names no compaction in the file")
    return data


def _parse_message(
    rec: dict[str, Any],
    line: int,
    data: ExportData,
    seen: set[str],
    parents: dict[str, str | None],
) -> None:
    msg = _req(rec, "message", dict, line)
    try:
        checked = validate_message(msg, generate_id=False)
    except InvalidMessageError as exc:
        raise _fail(line, str(exc)) from None
    mid = checked["id"]
    if mid in seen:
        raise _fail(line, f"duplicate message id {mid!r}")
    if "parent_id" not in rec:
        raise _fail(line, "message record has no 'parent_id'")
    parent = rec["parent_id"]
    if parent is not None and (not isinstance(parent, str) or parent not in seen):
        raise _fail(line, f"parent_id {parent!r} is not an earlier message in the file")
    tokens = _count(_req(rec, "tokens", int, line), "tokens", line)
    seen.add(mid)
    parents[mid] = parent
    data.messages.append(NewMessage(message=checked, parent=parent, tokens=tokens))


def _parse_compaction(
    rec: dict[str, Any],
    line: int,
    data: ExportData,
    seen: set[str],
    parents: dict[str, str | None],
    refs: dict[int, int],
) -> None:
    ref = _req(rec, "ref", int, line)
    if ref != len(data.compactions) + 1:
        raise _fail(
            line, f"compaction ref {ref} out of sequence (expected {len(data.compactions) + 1})"
        )
    frm = _nonempty_str(rec, "from", line)
    to = _nonempty_str(rec, "to", line)
    for end in (frm, to):
        if end not in seen:
            raise _fail(line, f"compaction range names {end!r}, which is not a message in the file")
    current: str | None = to
    while current is not None and current != frm:
        current = parents.get(current)
    if current is None:
        raise _fail(line, f"compaction range {frm!r}..{to!r} is not on one path")
    summary = _checked(line, check_text, _req(rec, "summary", str, line), "summary")
    if not summary.strip():  # (as Session.add_compaction refuses it)
        raise _fail(line, "compaction summary is blank: it would replace its messages with nothing")
    sb = rec.get("superseded_by")
    if sb is not None and (not isinstance(sb, int) or isinstance(sb, bool) or sb <= ref):
        raise _fail(line, f"superseded_by must be a later compaction ref or null, got {sb!r}")
    _req(rec, "reverted", bool, line)
    refs[ref] = line
    data.compactions.append(rec)
