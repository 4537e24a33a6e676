"""The viewer's picture of one session: the selected root→leaf path, windowed. Pure: no I/O.

Input is what the store returns for a session — every message (``all_messages``, in ``seq``
order, parents first), every compaction overlay and the latest leaf — and the reader's choice of
leaf, window and mode. Output is plain JSON-able data that both the HTML pages and ``/api/``
serve, so the pages never compute anything the API does not show.

Design:

* **A path, not the whole tree.** A conversation is read along one root→leaf path (the one the
  model saw). At every message whose parent has several children the reader gets the sibling
  branches, each linked by the *latest leaf under it* (the leaf a user would continue from).
  Branch points of the whole tree are listed separately (capped), with the ones on the selected
  path marked.
* **Windowed.** The path (after overlays) is cut into ``limit`` items from ``offset``; a window
  is all the page ever renders, so a 10,000-message session costs one linear pass over the rows
  plus the rendering of ``limit`` items. A compaction summary lists at most
  :data:`COVERED_PREVIEW` of the messages it covers; the rest are reached in the raw view.
* **Overlays as the model sees them.** In the default mode the overlays that apply to this path
  (the same resolution as ``Session.get_history``: :func:`resolve_overlays`) replace their
  ranges by summary items; ``raw=True`` shows every stored message, each marked with the overlays
  that would cover it. Superseded and reverted overlays are listed with their status and marked
  on the messages where they start and end.
* **Tokens.** Each message carries the store's estimate (``StoredMessage.tokens``), a summary the
  estimate of its virtual message; ``running_tokens`` adds up the items on the path as shown (so
  in the default mode it is what the model is sent, in the raw mode what is stored).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mindstore.compaction.overlays import compaction_message, resolve_overlays
from mindstore.store.types import Compaction, StoredMessage
from mindstore.tokens import estimate_message_tokens

__all__ = [
    "BRANCH_POINTS_SHOWN",
    "COVERED_PREVIEW",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "TreeIndex",
    "compaction_status",
    "path_status",
    "session_view",
]

DEFAULT_LIMIT = 100
MAX_LIMIT = 500
COVERED_PREVIEW = 50
BRANCH_POINTS_SHOWN = 100


def compaction_status(c: Compaction) -> str:
    """``reverted``, ``superseded`` or ``active``."""
    if c.reverted:
        return "reverted"
    if c.superseded_by is not None:
        return "superseded"
    return "active"


def path_status(c: Compaction, *, on_path: bool, applied: bool) -> str:
    """The status of an overlay as seen from one path: ``reverted`` and ``superseded`` as
    stored; an active overlay is ``active`` only where it applies — ``other branch`` when its
    range is not on the path, ``not applied`` when a newer overlay of the path covers it."""
    status = compaction_status(c)
    if status != "active":
        return status
    if not on_path:
        return "other branch"
    return "active" if applied else "not applied"


@dataclass(slots=True)
class TreeIndex:
    """Parent/children links and the latest leaf under every node, from rows in seq order."""

    rows: dict[str, StoredMessage]
    children: dict[str, list[str]]
    roots: list[str]
    latest_under: dict[str, str]

    @classmethod
    def build(cls, rows: Sequence[StoredMessage]) -> TreeIndex:
        by_id: dict[str, StoredMessage] = {}
        children: dict[str, list[str]] = {}
        roots: list[str] = []
        for row in rows:
            by_id[row.id] = row
            if row.parent_id is not None and row.parent_id in by_id:
                children.setdefault(row.parent_id, []).append(row.id)
            else:
                roots.append(row.id)
        latest: dict[str, str] = {}
        # Children come after their parents in seq order, so walking backwards settles every
        # child before its parent: the latest leaf under a node is the newest (highest seq) of
        # its children's latest leaves. A node passes its own up to its parent as it is settled.
        best: dict[str, tuple[int, str]] = {}  # parent id -> (seq, id) of the newest leaf so far
        for row in reversed(rows):
            mine = best.pop(row.id, None)
            leaf = (row.seq, row.id) if mine is None else mine
            latest[row.id] = leaf[1]
            parent = row.parent_id
            if parent is not None and parent in by_id:
                seen = best.get(parent)
                if seen is None or leaf[0] > seen[0]:
                    best[parent] = leaf
        return cls(rows=by_id, children=children, roots=roots, latest_under=latest)

    def path(self, leaf: str) -> list[str]:
        out: list[str] = []
        current: str | None = leaf
        while current is not None and current in self.rows:
            out.append(current)
            current = self.rows[current].parent_id
        out.reverse()
        return out

    def siblings(self, message_id: str) -> list[str]:
        parent = self.rows[message_id].parent_id
        if parent is None or parent not in self.rows:
            return list(self.roots)
        return self.children.get(parent, [])


def _message_item(
    row: StoredMessage,
    index: int,
    tree: TreeIndex,
    marks: Mapping[str, list[dict[str, Any]]],
    covered_by: Mapping[str, list[int]],
) -> dict[str, Any]:
    sibs = tree.siblings(row.id)
    branches = (
        [
            {"id": s, "leaf": tree.latest_under[s], "number": n, "current": s == row.id}
            for n, s in enumerate(sibs, start=1)
        ]
        if len(sibs) > 1
        else []
    )
    return {
        "kind": "message",
        "index": index,
        "id": row.id,
        "parent_id": row.parent_id,
        "role": str(row.message.get("role", "")),
        "created_at": row.created_at.isoformat(),
        "seq": row.seq,
        "tokens": row.tokens,
        "bytes": row.nbytes,
        "message": row.message,
        "branches": branches,
        "children": len(tree.children.get(row.id, ())),
        "overlay_marks": marks.get(row.id, []),
        "covered_by": covered_by.get(row.id, []),
    }


def session_view(
    rows: Sequence[StoredMessage],
    compactions: Sequence[Compaction],
    latest_leaf_id: str | None,
    *,
    leaf: str | None = None,
    focus: str | None = None,
    offset: int | None = None,
    limit: int = DEFAULT_LIMIT,
    raw: bool = False,
) -> dict[str, Any]:
    """Everything the session page shows, as JSON-able data (see the module docstring).

    ``leaf`` picks the path (default: ``focus``'s latest leaf, else the session's latest leaf);
    ``offset`` the first item of the window (default: the window holding ``focus``, else the
    last window); ``limit`` is clamped to 1..:data:`MAX_LIMIT`.

    Raises:
        KeyError: ``leaf`` or ``focus`` is not a message of the session.
    """
    tree = TreeIndex.build(rows)
    limit = max(1, min(MAX_LIMIT, limit))
    for name, value in (("leaf", leaf), ("focus", focus)):
        if value is not None and value not in tree.rows:
            raise KeyError(f"no message {value!r} in this session ({name})")
    if leaf is None:
        leaf = tree.latest_under[focus] if focus is not None else latest_leaf_id
    path_ids = tree.path(leaf) if leaf is not None else []
    if focus is not None and focus not in set(path_ids):
        raise KeyError(f"message {focus!r} is not on the path to {leaf!r}")

    # Overlay marks: where every overlay of this path (any status) starts and ends, and what
    # it covers. An overlay whose range is not on the path (another branch's, sharing only its
    # first messages) is not marked here: it does not cover this branch.
    applied = resolve_overlays(path_ids, compactions)
    applied_ids = {a[0].id for a in applied}
    path_set = set(path_ids)
    marks: dict[str, list[dict[str, Any]]] = {}
    for c in compactions:
        if c.from_message_id not in path_set or c.to_message_id not in path_set:
            continue
        status = path_status(c, on_path=True, applied=c.id in applied_ids)
        for edge, mid in (("from", c.from_message_id), ("to", c.to_message_id)):
            marks.setdefault(mid, []).append({"compaction": c.id, "status": status, "edge": edge})
    covered_by: dict[str, list[int]] = {}
    for c, first, last in applied:
        for mid in path_ids[first : last + 1]:
            covered_by.setdefault(mid, []).append(c.id)

    # Items as shown: raw messages, or messages with applied ranges folded into summaries.
    items: list[dict[str, Any]] = []
    running = 0
    focus_item: int | None = None
    cursor = 0
    spans: list[tuple[Compaction | None, int, int]] = [] if raw else list(applied)
    for span, first, last in [*spans, (None, len(path_ids), len(path_ids))]:
        for i in range(cursor, first):
            row = tree.rows[path_ids[i]]
            running += row.tokens
            if path_ids[i] == focus:
                focus_item = len(items)
            items.append({"running_tokens": running, "path_index": i})
        if span is None:
            break
        tokens = estimate_message_tokens([compaction_message(span)])
        running += tokens
        if focus is not None and focus in path_ids[first : last + 1]:
            focus_item = len(items)
        items.append(
            {
                "running_tokens": running,
                "path_index": first,
                "compaction": span,
                "last": last,
                "tokens": tokens,
            }
        )
        cursor = last + 1

    total = len(items)
    if offset is None:
        offset = (
            max(0, focus_item - 2) if focus_item is not None else max(0, total - limit)
        )  # the latest window by default: a long conversation is read from its end
    offset = max(0, min(offset, max(0, total - 1)))
    window: list[dict[str, Any]] = []
    for pos in range(offset, min(total, offset + limit)):
        item = items[pos]
        comp: Compaction | None = item.get("compaction")
        if comp is None:
            row = tree.rows[path_ids[item["path_index"]]]
            shown = _message_item(row, item["path_index"], tree, marks, covered_by)
        else:
            first, last = item["path_index"], item["last"]
            covered_ids = path_ids[first : last + 1]
            shown = {
                "kind": "compaction",
                "index": first,
                "compaction": _compaction_json(comp),
                "tokens": item["tokens"],
                "covered_count": len(covered_ids),
                "covered_tokens": sum(tree.rows[m].tokens for m in covered_ids),
                "covered": [
                    _message_item(tree.rows[m], first + k, tree, marks, covered_by)
                    for k, m in enumerate(covered_ids[:COVERED_PREVIEW])
                ],
                "open": focus is not None and focus in covered_ids,
            }
        shown["running_tokens"] = item["running_tokens"]
        shown["position"] = pos
        window.append(shown)

    branch_points = [mid for mid in tree.rows if len(tree.children.get(mid, ())) > 1]
    return {
        "leaf": leaf,
        "latest_leaf": latest_leaf_id,
        "is_latest": leaf == latest_leaf_id,
        "leaf_has_children": leaf is not None and bool(tree.children.get(leaf)),
        "continue_to": tree.latest_under.get(leaf) if leaf is not None else None,
        "raw": raw,
        "focus": focus,
        "path_length": len(path_ids),
        "path_tokens": sum(tree.rows[m].tokens for m in path_ids),
        "context_tokens": items[-1]["running_tokens"] if items else 0,
        "message_count": len(tree.rows),
        "total_items": total,
        "offset": offset,
        "limit": limit,
        "items": window,
        "compactions": [
            {
                **_compaction_json(c),
                "applied": c.id in applied_ids,
                "on_path": on_path,
                "status_here": path_status(c, on_path=on_path, applied=c.id in applied_ids),
            }
            for c in compactions
            for on_path in [c.to_message_id in path_set and c.from_message_id in path_set]
        ],
        "branch_point_count": len(branch_points),
        "branch_points": [
            {
                "id": mid,
                "role": str(tree.rows[mid].message.get("role", "")),
                "on_path": mid in path_set,
                "children": [
                    {
                        "id": k,
                        "leaf": tree.latest_under[k],
                        "on_path": k in path_set,
                        "descendants_leaf_is_latest": tree.latest_under[k] == latest_leaf_id,
                    }
                    for k in tree.children[mid]
                ],
            }
            for mid in branch_points[:BRANCH_POINTS_SHOWN]
        ],
    }


def _compaction_json(c: Compaction) -> dict[str, Any]:
    return {
        "id": c.id,
        "from": c.from_message_id,
        "to": c.to_message_id,
        "summary": c.summary,
        "created_at": c.created_at.isoformat(),
        "status": compaction_status(c),
        "superseded_by": c.superseded_by,
        "reverted": c.reverted,
    }
