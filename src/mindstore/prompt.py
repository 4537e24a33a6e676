"""Rendering context blocks into the system prompt. Pure: no I/O.

The format is part of the contract (DESIGN §4.3) because it is what the model sees and what the
provider's prefix cache keys on. Each block renders as::

    ══════════════════════════════════════════════      (46 × U+2550)
    LABEL (description) [P% — T/M tokens] [kind]
    ══════════════════════════════════════════════
    content

* the header is ``label.upper()``, then `` (description)`` when there is one, then for blocks
  with ``max_tokens`` `` [P% — T/M tokens]`` with ``P`` = T / M × 100 rounded half up (as the
  reference's JavaScript ``Math.round``: 12.5 → 13; see :func:`percent`) and an em dash
  (U+2014), then one tag: ``[searchable]``, ``[loadable]``, ``[readonly]`` or ``[writable]``;
* blocks are joined by one blank line, in registration order;
* an empty read-only block is omitted (it tells the model nothing); empty writable, searchable
  and loadable blocks are shown as separator, header, separator and an empty content line —
  ``SEP\nHEADER\nSEP\n``, exactly as the reference renders ``${sep}\n${header}\n${sep}\n${""}``
  — so the model knows it can fill them. The prompt therefore ends with a newline only when
  its last block is such an empty block;
* trailing whitespace of a block's content is dropped (it would only break the layout); content
  counts as empty when it is blank.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "SEPARATOR",
    "BlockKind",
    "ContextBlock",
    "percent",
    "render_block",
    "render_system_prompt",
]

BlockKind = Literal["readonly", "writable", "searchable", "loadable"]
BLOCK_KINDS: tuple[BlockKind, ...] = ("readonly", "writable", "searchable", "loadable")

SEPARATOR = "\u2550" * 46


@dataclass(frozen=True, slots=True)
class ContextBlock:
    """A context block as it is right now.

    Attributes:
        label: the block's label (``"memory"``).
        description: shown in the header in parentheses, if any.
        content: the provider's current text (``""`` when it has none).
        tokens: tokens of ``content`` (the session's tokenizer or estimate).
        max_tokens: the block's budget, if any.
        kind: ``"readonly"``, ``"writable"``, ``"searchable"`` or ``"loadable"``.
    """

    label: str
    description: str | None
    content: str
    tokens: int
    max_tokens: int | None
    kind: BlockKind


def percent(tokens: int, max_tokens: int) -> int:
    """``tokens / max_tokens × 100`` rounded half up, like JavaScript's ``Math.round`` (Python's
    ``round`` rounds half to even: 1/8 would show 12 % where the reference shows 13 %)."""
    value = tokens / max_tokens * 100
    floor = math.floor(value)
    return int(floor + 1 if value - floor >= 0.5 else floor)


def render_header(block: ContextBlock) -> str:
    """The header line of one block (no separators)."""
    header = block.label.upper()
    if block.description:
        header += f" ({block.description})"
    if block.max_tokens:
        p = percent(block.tokens, block.max_tokens)
        header += f" [{p}% \u2014 {block.tokens}/{block.max_tokens} tokens]"
    return f"{header} [{block.kind}]"


def render_block(block: ContextBlock) -> str | None:
    """One block as text, or ``None`` when it is omitted (an empty read-only block)."""
    content = block.content.rstrip() if block.content else ""
    if not content.strip():
        if block.kind == "readonly":
            return None
        return f"{SEPARATOR}\n{render_header(block)}\n{SEPARATOR}\n"
    return f"{SEPARATOR}\n{render_header(block)}\n{SEPARATOR}\n{content}"


def render_system_prompt(blocks: Iterable[ContextBlock]) -> str:
    """Render blocks, in the order given, into the system prompt (DESIGN §4.3).

    Args:
        blocks: the blocks in registration order.

    Returns:
        The prompt; ``""`` when there is nothing to show.
    """
    rendered = (render_block(b) for b in blocks)
    return "\n\n".join(r for r in rendered if r is not None)
