"""Evicting large media from a message into markers, and putting it back. Pure: no I/O.

Long conversations collect inline media — screenshots returned by tools, ``data:`` URL
attachments — that the model no longer needs once they are old, yet every read of history
loads them again. :func:`plan_eviction` rewrites one message so that the large values leave it:

* a ``file`` part whose ``url`` is a ``data:`` URL of at least ``min_bytes`` UTF-8 bytes becomes
  a ``text`` part holding a short marker, ``[evicted image/png "shot.png", 1398104 bytes]``;
* a string of at least ``min_bytes`` anywhere inside a tool part's ``output`` is replaced in
  place by such a marker (the output keeps its shape, so a tool's own replay still works).

* in the input item that the OpenAI Agents SDK adapter keeps in ``metadata["openaiItem"]``
  (:mod:`mindstore.integrations.openai_items`), the ``image_url`` / ``file_data`` of an
  ``input_image`` / ``input_file`` block of its ``content`` or list ``output`` — replaced in
  place; :func:`~mindstore.integrations.openai_items.items_of` then sends that block as an
  ``input_text`` block holding the marker (see :func:`evicted_item_blocks`).

Text and reasoning parts are never touched (they are the conversation; the row-size limit
already bounds them). Because markers are ordinary text, every converter, UI, token estimate and
the search index handle an evicted message as it is, and a model reads the marker.

What was taken out is recorded in the message itself, under
``metadata["mindstore"]["evicted"]`` (next to the row-size limit's ``truncated`` record)::

    {"store": "<blob store URL>", "created": "metadata" | "mindstore" | None,
     "items": [{"path": ["parts", 2], "sha256": "…", "bytes": 1398104,
                "mediaType": "image/png", "part": {…the file part, url: null…}},
               {"path": ["parts", 3, "output", "images", 0], "sha256": "…", "bytes": 51200}]}

Each value is kept as the UTF-8 bytes of the exact string, named by their SHA-256
(content-addressed: one object per distinct value). :func:`hydrate_message` reverses every item
— the file part back in its place with its ``url``, each string back at its path — and removes
the record and any container it created, so the result is identical (same keys, same order,
same bytes of JSON) to the message before eviction. A message evicted twice (a later pass with
a smaller ``min_bytes``) holds one record with the items of both passes.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mindstore.messages import is_tool_part

__all__ = [
    "EVICTED_KEY",
    "MIN_EVICT_BYTES",
    "Eviction",
    "evicted_digests",
    "evicted_item_blocks",
    "evicted_items",
    "evicted_store_url",
    "hydrate_message",
    "is_evicted",
    "marker_text",
    "plan_eviction",
]

EVICTED_KEY = "evicted"
"""The key under ``metadata["mindstore"]`` holding an evicted message's record."""

MIN_EVICT_BYTES = 256
"""The smallest ``min_bytes`` accepted: a marker must be much smaller than what it replaces."""

_MAX_DEPTH = 32  # how deep inside a tool output strings are looked for
_ITEM_KEY = "openaiItem"  # = mindstore.integrations.openai_items.ITEM_KEY (no import: pure)
_ITEM_BLOCK_FIELDS = {"input_image": "image_url", "input_file": "file_data"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Eviction:
    """What :func:`plan_eviction` made of one message: the rewritten message and the values to
    store (SHA-256 hex → UTF-8 bytes) *before* the rewritten message replaces the stored one."""

    message: dict[str, Any]
    blobs: dict[str, bytes] = field(default_factory=dict)
    items: int = 0
    bytes_removed: int = 0


def marker_text(nbytes: int, media_type: str | None = None, filename: str | None = None) -> str:
    """The text a model reads in place of an evicted value."""
    what = media_type or "data"
    if filename:
        what += f' "{filename}"'
    return f"[evicted {what}, {nbytes} bytes]"


def _utf8(value: str) -> bytes:
    return value.encode("utf-8")


def _data_url_media_type(url: str) -> str | None:
    head = url[5 : url.find(",", 5, 300)] if url.startswith("data:") else ""
    media = head.split(";", 1)[0].strip()
    return media or None


def _meta_record(message: Mapping[str, Any]) -> dict[str, Any] | None:
    meta = message.get("metadata")
    own = meta.get("mindstore") if isinstance(meta, dict) else None
    record = own.get(EVICTED_KEY) if isinstance(own, dict) else None
    return record if isinstance(record, dict) else None


def is_evicted(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` holds markers of evicted values."""
    record = _meta_record(message)
    return record is not None and bool(record.get("items"))


def evicted_items(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The eviction record's items of ``message`` (``[]`` when nothing was evicted)."""
    record = _meta_record(message)
    items = record.get("items") if record is not None else None
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def evicted_store_url(message: Mapping[str, Any]) -> str | None:
    """The blob store URL recorded when ``message`` was evicted, if any."""
    record = _meta_record(message)
    url = record.get("store") if record is not None else None
    return url if isinstance(url, str) and url else None


def evicted_digests(message: Mapping[str, Any]) -> list[str]:
    """SHA-256 names of the objects ``message``'s markers point to."""
    return [str(i["sha256"]) for i in evicted_items(message) if isinstance(i.get("sha256"), str)]


class _Plan:
    def __init__(self, min_bytes: int) -> None:
        self.min_bytes = min_bytes
        self.blobs: dict[str, bytes] = {}
        self.items: list[dict[str, Any]] = []
        self.removed = 0

    def take(self, value: str) -> tuple[str, int]:
        data = _utf8(value)
        digest = hashlib.sha256(data).hexdigest()
        self.blobs[digest] = data
        self.removed += len(data)
        return digest, len(data)

    def walk(self, value: Any, path: list[str | int], depth: int) -> Any:
        """``value`` with its large strings replaced by markers (the same object when none)."""
        if isinstance(value, str):
            # len() is a lower bound of the UTF-8 size: most strings are rejected without encoding
            if len(value) * 4 < self.min_bytes or len(_utf8(value)) < self.min_bytes:
                return value
            media = _data_url_media_type(value)
            digest, n = self.take(value)
            item: dict[str, Any] = {"path": list(path), "sha256": digest, "bytes": n}
            if media:
                item["mediaType"] = media
            self.items.append(item)
            return marker_text(n, media)
        if depth >= _MAX_DEPTH:
            return value
        if isinstance(value, list):
            out = [self.walk(v, [*path, i], depth + 1) for i, v in enumerate(value)]
            return out if any(a is not b for a, b in zip(out, value, strict=True)) else value
        if isinstance(value, dict):
            changed = {k: self.walk(v, [*path, k], depth + 1) for k, v in value.items()}
            if any(changed[k] is not v for k, v in value.items()):
                return changed
        return value


def _large_data_url(part: Mapping[str, Any], min_bytes: int) -> str | None:
    url = part.get("url")
    if not isinstance(url, str) or not url.startswith("data:") or len(url) * 4 < min_bytes:
        return None
    return url if len(_utf8(url)) >= min_bytes else None


def plan_eviction(message: Mapping[str, Any], *, min_bytes: int, store_url: str) -> Eviction | None:
    """The message with its large media replaced by markers (see the module docstring), or
    ``None`` when it holds nothing of at least ``min_bytes``. ``message`` is not modified.

    Args:
        message: a stored message.
        min_bytes: the UTF-8 size from which a value is evicted (at least
            :data:`MIN_EVICT_BYTES`).
        store_url: the blob store's URL, recorded so a reader without its own configuration
            can find the objects.
    """
    if min_bytes < MIN_EVICT_BYTES:
        raise ValueError(f"min_bytes must be at least {MIN_EVICT_BYTES}, got {min_bytes}")
    parts = message.get("parts")
    if not isinstance(parts, list):
        return None
    plan = _Plan(min_bytes)
    new_parts: list[Any] = list(parts)
    for i, part in enumerate(parts):
        if not isinstance(part, dict):
            continue
        if part.get("type") == "file":
            url = _large_data_url(part, min_bytes)
            if url is None:
                continue
            media = part.get("mediaType")
            media = media if isinstance(media, str) and media else _data_url_media_type(url)
            filename = part.get("filename")
            digest, n = plan.take(url)
            kept = {k: (None if k == "url" else v) for k, v in part.items()}
            item: dict[str, Any] = {"path": ["parts", i], "sha256": digest, "bytes": n}
            if media:
                item["mediaType"] = media
            item["part"] = kept
            plan.items.append(item)
            text = marker_text(n, media, filename if isinstance(filename, str) else None)
            new_parts[i] = {"type": "text", "text": text}
        elif is_tool_part(part) and "output" in part:
            output = plan.walk(part["output"], ["parts", i, "output"], 0)
            if output is not part["output"]:
                new_parts[i] = {**part, "output": output}
    kept_item = _evict_kept_item(message, plan)
    if not plan.items:
        return None
    out = {k: v for k, v in message.items()}
    out["parts"] = new_parts
    out["metadata"] = _with_record(message, plan.items, store_url)
    if kept_item is not None:
        out["metadata"][_ITEM_KEY] = kept_item
    return Eviction(
        message=out, blobs=plan.blobs, items=len(plan.items), bytes_removed=plan.removed
    )


def _item_blocks(item: Mapping[str, Any]) -> list[tuple[str, int, str]]:
    """``(key, index, field)`` of the image/file blocks of a kept input item: its ``content``
    (message items) or a list ``output`` (function and custom tool outputs)."""
    found = []
    for key in ("content", "output"):
        blocks = item.get(key)
        if not isinstance(blocks, list):
            continue
        for j, block in enumerate(blocks):
            if isinstance(block, dict):
                name = _ITEM_BLOCK_FIELDS.get(str(block.get("type")))
                if name is not None and isinstance(block.get(name), str):
                    found.append((key, j, name))
    return found


def _evict_kept_item(message: Mapping[str, Any], plan: _Plan) -> dict[str, Any] | None:
    """The Agents SDK adapter's kept item with its large image/file data replaced by markers
    (``None`` when there is no kept item or nothing of that size in it)."""
    meta = message.get("metadata")
    item = meta.get(_ITEM_KEY) if isinstance(meta, dict) else None
    if not isinstance(item, dict):
        return None
    out: dict[str, Any] | None = None
    for key, j, name in _item_blocks(item):
        value = item[key][j][name]
        if len(value) * 4 < plan.min_bytes or len(_utf8(value)) < plan.min_bytes:
            continue
        if out is None:
            out = copy.deepcopy(item)
        media = _data_url_media_type(value)
        digest, n = plan.take(value)
        record: dict[str, Any] = {
            "path": ["metadata", _ITEM_KEY, key, j, name],
            "sha256": digest,
            "bytes": n,
        }
        if media:
            record["mediaType"] = media
        plan.items.append(record)
        filename = item[key][j].get("filename")
        out[key][j][name] = marker_text(n, media, filename if isinstance(filename, str) else None)
    return out


def evicted_item_blocks(message: Mapping[str, Any]) -> list[tuple[str, int]]:
    """``(key, index)`` of the blocks of ``message``'s kept Agents SDK item whose data was
    evicted (their field holds the marker text)."""
    return [
        (p[2], p[3])
        for i in evicted_items(message)
        if isinstance(p := i.get("path"), list) and len(p) == 5 and p[:2] == ["metadata", _ITEM_KEY]
    ]


def _with_record(
    message: Mapping[str, Any], items: list[dict[str, Any]], store_url: str
) -> dict[str, Any]:
    meta = message.get("metadata")
    created: str | None = None
    if not isinstance(meta, dict):
        created, meta = "metadata", {}
    meta = dict(meta)
    own = meta.get("mindstore")
    if not isinstance(own, dict):
        created = created or "mindstore"
        own = {}
    own = dict(own)
    record = own.get(EVICTED_KEY)
    if isinstance(record, dict):  # evicted before: keep what the first pass created
        record = {**record, "items": [*record.get("items", []), *items], "store": store_url}
    else:
        record = {"store": store_url, "created": created, "items": items}
    own[EVICTED_KEY] = record
    meta["mindstore"] = own
    return meta


def _set_at(root: Any, path: list[Any], value: Any) -> bool:
    node = root
    for step in path[:-1]:
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            return False
    last = path[-1]
    if isinstance(node, list) and isinstance(last, int) and 0 <= last < len(node):
        node[last] = value
        return True
    if isinstance(node, dict) and isinstance(last, str) and last in node:
        node[last] = value
        return True
    return False


def hydrate_message(message: Mapping[str, Any], fetch: Callable[[str], bytes]) -> dict[str, Any]:
    """``message`` with every evicted value put back (a copy; the message itself when it holds
    no markers). ``fetch(sha256)`` returns an object's bytes (and raises when it cannot).

    Raises:
        ValueError: an object's bytes are not valid UTF-8 (not what was evicted).
    """
    record = _meta_record(message)
    if record is None:
        return dict(message)
    out = copy.deepcopy(dict(message))
    for item in reversed(evicted_items(message)):
        path = item.get("path")
        digest = item.get("sha256")
        if not isinstance(path, list) or not path or not isinstance(digest, str):
            continue
        value = fetch(digest).decode("utf-8")
        if isinstance(item.get("part"), dict) and len(path) == 2:
            part = copy.deepcopy(item["part"])
            part["url"] = value
            _set_at(out, path, part)
        else:
            _set_at(out, path, value)
    meta = out["metadata"]
    own = meta["mindstore"]
    del own[EVICTED_KEY]
    created = record.get("created")
    # Remove only the containers eviction made, and only while they hold nothing else.
    if created in ("metadata", "mindstore") and not own:
        del meta["mindstore"]
    if created == "metadata" and not meta:
        del out["metadata"]
    return out
