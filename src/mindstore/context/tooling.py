"""Pure helpers for the generated memory tools (DESIGN §4.6): keys, schemas, descriptions.

Tool descriptions are stable for a given block configuration (they never include usage numbers
or content), so they do not churn the provider's prompt cache; the one exception the design asks
for is ``unload_context``, which lists what is currently loaded.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from mindstore.prompt import BlockKind, percent

__all__ = [
    "BlockInfo",
    "entry_key",
    "load_context_tool_spec",
    "search_context_tool_spec",
    "set_context_tool_spec",
    "slug",
    "unload_context_tool_spec",
    "usage_text",
]

_NON_SLUG = re.compile(r"[^a-z0-9]+")
SLUG_LENGTH = 60

BlockInfo = tuple[str, BlockKind, str | None, int | None]
"""(label, kind, description, max_tokens) of a block, as the tool builders need it."""


def slug(text: str) -> str:
    """Lower-case, runs of characters other than ``[a-z0-9]`` become ``-``, outer dashes
    dropped, first 60 characters (``"Deploy: Prod!"`` → ``"deploy-prod"``)."""
    return _NON_SLUG.sub("-", text.lower()).strip("-")[:SLUG_LENGTH].strip("-")


def entry_key(title: str | None, content: str) -> str:
    """The stable key of a keyed entry: ``slug(title)``, or without a usable title
    ``slug(content)-<hash>`` (the hash is of the full content, so distinct texts never collide
    on a shared opening)."""
    if title:
        key = slug(title)
        if key:
            return key
    digest = hashlib.sha256(content.encode("utf-8")).hexdigest()[:8]
    base = slug(content)
    return f"{base}-{digest}" if base else f"entry-{digest}"


def usage_text(tokens: int, max_tokens: int | None) -> str:
    """``45% (495/1100 tokens)`` or ``120 tokens``."""
    if max_tokens:
        return f"{percent(tokens, max_tokens)}% ({tokens}/{max_tokens} tokens)"
    return f"{tokens} tokens"


def _describe(label: str, kind: str, description: str | None, extra: str = "") -> str:
    line = f"- {label} ({kind}{extra})"
    return f"{line}: {description}" if description else line


def set_context_tool_spec(blocks: Sequence[BlockInfo]) -> tuple[str, dict[str, Any]]:
    """Description and JSON schema of ``set_context`` for the settable blocks."""
    lines = []
    keyed = False
    writable = False
    for label, kind, description, max_tokens in blocks:
        if kind == "writable":
            writable = True
            extra = f", max {max_tokens} tokens" if max_tokens else ""
        else:
            keyed = True
            extra = "; keyed: give metadata.title"
        lines.append(_describe(label, kind, description, extra))
    text = (
        "Write to your persistent context memory. It survives this conversation; the system "
        "prompt shows the new content from the next session (or prompt refresh) on.\nBlocks:\n"
        + "\n".join(lines)
    )
    if writable:
        text += (
            '\nFor writable blocks, action "replace" (default) overwrites the block and "append" '
            "adds a new line; a write that would exceed the block's max tokens is refused."
        )
    if keyed:
        text += (
            "\nFor searchable and loadable blocks, content is stored as an entry keyed by "
            'metadata.title: action "replace" (default) overwrites the entry with that title '
            'and "append" adds a new line to it; metadata.description is a one-line summary.'
        )
    properties: dict[str, Any] = {
        "label": {
            "type": "string",
            "enum": [b[0] for b in blocks],
            "description": "The block to write.",
        },
        "content": {"type": "string", "description": "The text to write."},
    }
    properties["action"] = {
        "type": "string",
        "enum": ["replace", "append"],
        "description": "replace (default) or append (to the block, or to the entry with the "
        "same title).",
    }
    if keyed:
        properties["metadata"] = {
            "type": "object",
            "properties": {
                "title": {"type": "string", "description": "Entry title (its key)."},
                "description": {"type": "string", "description": "One-line summary."},
            },
            "description": "Searchable and loadable blocks: the entry's title and description.",
        }
    schema = {"type": "object", "properties": properties, "required": ["label", "content"]}
    return text, schema


def load_context_tool_spec(blocks: Sequence[BlockInfo]) -> tuple[str, dict[str, Any]]:
    """Description and JSON schema of ``load_context``."""
    lines = [_describe(label, kind, desc) for label, kind, desc, _ in blocks]
    text = (
        "Load a document from a skill block into the conversation. The block's listing in the "
        "system prompt names the available keys. A loaded document stays in the conversation "
        "until you unload it with unload_context.\nBlocks:\n" + "\n".join(lines)
    )
    return text, _label_key_schema([b[0] for b in blocks], "The key of the document to load.")


def unload_context_tool_spec(
    blocks: Sequence[BlockInfo], loaded: Sequence[tuple[str, str]]
) -> tuple[str, dict[str, Any]]:
    """Description (listing what is loaded) and JSON schema of ``unload_context``."""
    now = ", ".join(f"{key} (from {label})" for label, key in loaded) if loaded else "none"
    text = (
        "Unload a skill document you loaded earlier, to reclaim context space. The document "
        "is replaced by a short placeholder in the conversation; you can load it again later."
        f"\nCurrently loaded: {now}."
    )
    return text, _label_key_schema([b[0] for b in blocks], "The key of the document to unload.")


def search_context_tool_spec(blocks: Sequence[BlockInfo]) -> tuple[str, dict[str, Any]]:
    """Description and JSON schema of ``search_context``."""
    lines = [_describe(label, kind, desc) for label, kind, desc, _ in blocks]
    text = (
        "Search a searchable block of your context memory; returns the best-matching entries. "
        "Pass a question or keywords (entries matching more and rarer words come first); "
        'entries holding a "quoted phrase" come first, word* matches word beginnings.\nBlocks:\n'
        + "\n".join(lines)
    )
    schema = {
        "type": "object",
        "properties": {
            "label": {
                "type": "string",
                "enum": [b[0] for b in blocks],
                "description": "The block to search.",
            },
            "query": {"type": "string", "description": "A question or keywords."},
        },
        "required": ["label", "query"],
    }
    return text, schema


def _label_key_schema(labels: list[str], key_description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": labels, "description": "The skill block."},
            "key": {"type": "string", "description": key_description},
        },
        "required": ["label", "key"],
    }
