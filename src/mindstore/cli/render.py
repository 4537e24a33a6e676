"""Pure helpers for the ``mindstore`` command: one-line previews of messages, JSON-safe values,
the branch tree of a session and its drawing. No I/O here (rich objects are built, never
printed), so it is tested without a terminal or database.

The tree is built and drawn without recursion (conversations can be deeper than Python's
recursion limit); the drawing is the one the ``tree`` command and the demo both print.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rich.text import Text
from rich.tree import Tree

from mindstore.messages import is_tool_part, tool_name
from mindstore.store.base import Compaction, StoredMessage

__all__ = [
    "ROLE_STYLES",
    "TreeNode",
    "active_compactions",
    "build_tree",
    "covered_ids",
    "draw_tree",
    "flatten_tree",
    "message_preview",
    "plural",
    "role_text",
    "shorten",
    "to_jsonable",
    "visible",
]

ROLE_STYLES = {
    "user": "bold cyan",
    "assistant": "bold green",
    "system": "bold magenta",
    "tool": "yellow",
}

# C0 controls and DEL → their Unicode "control pictures" (ESC → ␛), one character each so
# widths are kept; C1 controls and the bidirectional overrides/isolates (which can make text
# read differently from what is stored) → a visible ``\xNN`` / ``\uNNNN`` escape.
_VISIBLE: dict[int, str] = {c: chr(0x2400 + c) for c in range(0x20)}
_VISIBLE[0x7F] = "\u2421"
_VISIBLE.update({c: f"\\x{c:02x}" for c in range(0x80, 0xA0)})
_VISIBLE.update(
    {c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F)}
)
_VISIBLE_KEEP_LINES = {c: v for c, v in _VISIBLE.items() if c not in (0x09, 0x0A)}


def visible(text: str, *, keep_lines: bool = False) -> str:
    """``text`` with every control character shown visibly instead of acted on by a terminal:
    ESC becomes ``␛`` (so ANSI/OSC sequences stored in a message cannot recolour, retitle or
    clear the screen), other C0 controls their control pictures, C1 controls and bidi
    overrides ``\\x9b``/``\\u202e``. ``keep_lines`` leaves newlines and tabs as they are
    (multi-line output such as a prompt). For human output only; ``--json`` stays exact."""
    return text.translate(_VISIBLE_KEEP_LINES if keep_lines else _VISIBLE)


def plural(n: int, noun: str) -> str:
    """``1 message``, ``2 messages``, ``0 compactions``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def shorten(text: str, width: int) -> str:
    """Collapse whitespace and cut ``text`` to ``width`` characters (with an ellipsis)."""
    flat = " ".join(text.split())
    if width <= 0 or len(flat) <= width:
        return flat
    return flat[: max(0, width - 1)] + "…"


def _compact_json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return repr(value)


def part_preview(part: Mapping[str, Any]) -> str:
    """A short human rendering of one part (text as is, tools as ``⚙ name(input) → output``)."""
    ptype = part.get("type")
    if ptype == "text":
        return str(part.get("text", ""))
    if ptype == "reasoning":
        return f"(thinking) {part.get('text', '')}"
    if isinstance(ptype, str) and is_tool_part(part):
        out = f"⚙ {tool_name(part)}({_compact_json(part.get('input', {}))})"
        if "output" in part:
            out += f" → {_compact_json(part['output'])}"
        elif part.get("errorText"):
            out += f" → error: {part['errorText']}"
        else:
            out += f" [{part.get('state', 'pending')}]"
        return out
    if ptype == "file":
        return f"[file {part.get('mediaType', '?')}]"
    return f"[{ptype}]"


def message_preview(message: Mapping[str, Any], width: int = 0) -> str:
    """One line summarising a message's parts; ``width`` > 0 cuts it to that many characters."""
    parts = message.get("parts") or []
    text = " ".join(part_preview(p) for p in parts if isinstance(p, Mapping))
    return shorten(text, width)


def to_jsonable(value: Any) -> Any:
    """Dataclasses → dicts, datetimes → ISO 8601 strings, recursively (for ``--json``)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value


def active_compactions(compactions: Sequence[Compaction]) -> list[Compaction]:
    """Overlays that still apply somewhere: neither reverted nor superseded."""
    return [c for c in compactions if not c.reverted and c.superseded_by is None]


def covered_ids(parents: Mapping[str, str | None], compaction: Compaction) -> list[str]:
    """Ids on the path ``from``..``to`` of an overlay (``to`` first), or [] if it is broken."""
    out: list[str] = []
    current: str | None = compaction.to_message_id
    while current is not None:
        out.append(current)
        if current == compaction.from_message_id:
            return out
        current = parents.get(current)
    return []


@dataclass(kw_only=True, slots=True)
class TreeNode:
    """One message in the drawn tree."""

    id: str
    role: str
    preview: str
    latest_leaf: bool = False
    compactions: list[int] = field(default_factory=list)
    """Active overlays covering this message."""
    starts: list[int] = field(default_factory=list)
    """Active overlays whose range starts here."""
    ends: list[int] = field(default_factory=list)
    """Active overlays whose range ends here."""
    children: list[TreeNode] = field(default_factory=list)

    def to_dict(self, parent_id: str | None) -> dict[str, Any]:
        """This node alone (children by id), so deep trees serialise without recursion."""
        return {
            "id": self.id,
            "parent_id": parent_id,
            "role": self.role,
            "text": self.preview,
            "latest_leaf": self.latest_leaf,
            "compacted_by": list(self.compactions),
            "children": [c.id for c in self.children],
        }


def flatten_tree(roots: Sequence[TreeNode]) -> list[dict[str, Any]]:
    """Every node as a flat dict, depth first (each parent before its children)."""
    out: list[dict[str, Any]] = []
    stack: list[tuple[TreeNode, str | None]] = [(r, None) for r in reversed(roots)]
    while stack:
        node, parent = stack.pop()
        out.append(node.to_dict(parent))
        stack.extend((c, node.id) for c in reversed(node.children))
    return out


def build_tree(
    rows: Sequence[StoredMessage],
    compactions: Sequence[Compaction],
    latest_leaf_id: str | None,
) -> list[TreeNode]:
    """Roots of the session's message tree (children oldest first, by seq), each node marked
    with the active overlays that cover it. ``rows`` must be in seq order (parents first)."""
    nodes: dict[str, TreeNode] = {}
    parents: dict[str, str | None] = {}
    roots: list[TreeNode] = []
    for row in rows:
        node = TreeNode(
            id=row.id,
            role=str(row.message.get("role", "?")),
            preview=message_preview(row.message),
            latest_leaf=row.id == latest_leaf_id,
        )
        nodes[row.id] = node
        parents[row.id] = row.parent_id
        parent = nodes.get(row.parent_id) if row.parent_id is not None else None
        if parent is None:
            roots.append(node)
        else:
            parent.children.append(node)
    for comp in active_compactions(compactions):
        ids = covered_ids(parents, comp)
        for mid in ids:
            nodes[mid].compactions.append(comp.id)
        if ids:
            nodes[comp.from_message_id].starts.append(comp.id)
            nodes[comp.to_message_id].ends.append(comp.id)
    return roots


def role_text(role: str) -> Text:
    """A role name in its colour."""
    return Text(role, style=ROLE_STYLES.get(role, ""))


def _tree_label(node: TreeNode, width: int) -> Text:
    label = Text.assemble(role_text(visible(node.role)), " ", (visible(node.id), "dim"), " ")
    label.append(visible(shorten(node.preview, width)), style="dim" if node.compactions else "")
    for cid in node.starts:
        label.append(f"  ⟦ compaction #{cid} from here", style="magenta")
    for cid in node.ends:
        label.append(f"  ⟧ to here (compaction #{cid})", style="magenta")
    if node.compactions and not node.starts and not node.ends:
        label.append("  ⟦compacted⟧", style="magenta dim")
    if node.latest_leaf:
        label.append("  ◀ latest", style="bold yellow")
    return label


def draw_tree(roots: Sequence[TreeNode], title: str, *, width: int) -> Tree:
    """The drawing of a message tree under ``title``: a chain is drawn flat; at a branch point
    each child's chain gets its own numbered sub-tree. Each message shows its role, id,
    ``width`` characters of text, the compaction overlays that start, end or cover it and the
    latest leaf. Stored text is shown with :func:`visible`."""
    top = Tree(Text(visible(title), style="bold"))
    stack: list[tuple[Tree, TreeNode]] = [(top, r) for r in reversed(roots)]
    while stack:
        parent, node = stack.pop()
        item = parent.add(_tree_label(node, width))
        if len(node.children) == 1:
            stack.append((parent, node.children[0]))
        elif node.children:
            subs = [
                item.add(Text(f"branch {i} of {len(node.children)}", style="bold blue"))
                for i in range(1, len(node.children) + 1)
            ]
            stack.extend(reversed(list(zip(subs, node.children, strict=True))))
    return top
