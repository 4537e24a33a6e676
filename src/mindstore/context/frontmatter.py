"""YAML front matter of skill documents, parsed with hard bounds. Pure: no I/O.

Skill files and skills written by a model are untrusted input, and YAML is a rich language: a
few hundred bytes of anchors and aliases expand to billions of nodes ("billion laughs"), and
deeply nested collections exhaust Python's recursion limit. Front matter only needs a flat map
with a ``name`` and a ``description``, so :func:`parse_front_matter` is deliberately strict:

* the front-matter block is at most :data:`MAX_FRONT_MATTER_CHARS` characters (checked before
  the YAML parser sees it);
* anchors and aliases are refused (no expansion can happen);
* collections nest at most :data:`MAX_DEPTH` levels (checked while composing, before Python
  recursion gets deep);
* only the safe YAML types are built (``yaml.SafeLoader``: no Python objects).

Any violation, and any YAML error, yields "no metadata" (``{}``) — never an exception: one
hostile file must not stop a skills folder from listing or a prompt from rendering. The body is
returned either way. Descriptions are shown on one line and cut to
:data:`MAX_DESCRIPTION_CHARS` characters (the Agent Skills limit) by :func:`one_line`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import yaml

__all__ = [
    "MAX_DEPTH",
    "MAX_DESCRIPTION_CHARS",
    "MAX_FRONT_MATTER_CHARS",
    "one_line",
    "parse_front_matter",
    "render_document",
    "skill_listing",
]

MAX_FRONT_MATTER_CHARS = 16_384
"""Longer front matter is ignored (no metadata); a skill's metadata is a few lines."""
MAX_DEPTH = 16
"""Deepest collection nesting accepted in front matter."""
MAX_DESCRIPTION_CHARS = 1024
"""Descriptions are cut to this many characters (the Agent Skills specification's limit): every
description goes into every system prompt that lists the skill."""

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)^---[ \t]*(?:\n|\Z)", re.DOTALL | re.MULTILINE)


class _Refused(Exception):
    """The front matter uses a feature refused here (aliases, anchors, deep nesting)."""


class _BoundedLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses anchors and aliases and bounds nesting depth."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise _Refused("YAML aliases are not accepted in front matter")
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if getattr(event, "anchor", None) is not None:
            raise _Refused("YAML anchors are not accepted in front matter")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(f"front matter nests deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _load(text: str) -> Any:
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def parse_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Split ``---``-delimited YAML front matter from a Markdown document.

    Returns ``(metadata, body)``; the body has surrounding blank lines removed. Invalid,
    oversized or refused YAML (see the module docstring) yields empty metadata; the block is
    still removed from the body.
    """
    text = text.lstrip("\ufeff").replace("\r\n", "\n")
    m = _FRONT_MATTER.match(text)
    if m is None:
        return {}, text.strip("\n")
    body = text[m.end() :].strip("\n")
    block = m.group(1)
    if len(block) > MAX_FRONT_MATTER_CHARS:
        return {}, body
    try:
        data = _load(block)
    except (yaml.YAMLError, _Refused, RecursionError, ValueError, TypeError, OverflowError):
        data = None
    return (data if isinstance(data, dict) else {}), body


def one_line(value: Any, limit: int = MAX_DESCRIPTION_CHARS) -> str | None:
    """``value`` as one line (whitespace runs become one space), cut to ``limit`` characters
    with ``…``; ``None`` when empty. Only strings and numbers are descriptions: a YAML list or
    map in a description field is ignored."""
    if value is None or isinstance(value, bool):
        return None
    if not isinstance(value, str | int | float):
        return None
    raw = value if isinstance(value, str) else str(value)
    if len(raw) > 8 * limit:  # never split a huge string just to cut it afterwards
        raw = raw[: 8 * limit]
    text = " ".join(raw.split())
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text or None


def render_document(key: str, body: str, description: str | None) -> str:
    """A skill document: front matter with ``name`` (and ``description``), then the body."""
    meta: dict[str, Any] = {"name": key}
    if description:
        meta["description"] = description
    front = yaml.safe_dump(meta, allow_unicode=True, sort_keys=False, width=10_000)
    return f"---\n{front}---\n\n{body.strip(chr(10))}\n"


def skill_listing(items: Sequence[tuple[str, str | None]]) -> str:
    """The ``get()`` text of a skill block: ``- key: description`` (or ``- key``) lines, sorted."""
    lines = []
    for key, description in sorted(items):
        desc = one_line(description)
        lines.append(f"- {key}: {desc}" if desc else f"- {key}")
    return "\n".join(lines)
