"""Pure rules of the LangGraph store adapter: keys, namespace matching, filters, indexed text.

No I/O and no LangGraph import, so they are unit-tested alone.

**Keys.** A LangGraph item lives at ``(namespace tuple, key)`` and becomes a keyed entry in the
mindstore namespace the adapter was given, collection label = :data:`LABEL_PREFIX` + the
tuple as a compact JSON array (``langgraph:["users","u1"]``). JSON is injective (quotes and
backslashes inside a label are escaped), so two different tuples never share a label — no
joined string such as ``"users.u1"`` that ``("users.u1",)`` could also produce. The encoding is
also prefix-friendly: the entries of every namespace under ``("users",)`` are exactly the labels
that start with ``langgraph:["users"`` followed by ``]`` or ``,`` — one index range, no
``LIKE`` escaping.

**Filters** follow LangGraph's documented semantics (and its in-memory store's behaviour): a
top-level key of the value equals the filter value (dicts compared recursively, lists
element-wise), or the filter value is a dict of operators ``$eq``, ``$ne``, ``$gt``, ``$gte``,
``$lt``, ``$lte`` (the ordering ones compare numbers).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

LABEL_PREFIX: Final = "langgraph:"
MAX_LABEL: Final = 256  # the store's limit on a collection label


def encode_namespace(namespace: Sequence[str]) -> str:
    """The entry-collection label of a LangGraph namespace tuple.

    Raises:
        ValueError: the encoded namespace is longer than a label may be (256 characters).
    """
    label = LABEL_PREFIX + json.dumps(list(namespace), ensure_ascii=False, separators=(",", ":"))
    if len(label) > MAX_LABEL:
        raise ValueError(
            f"namespace {tuple(namespace)!r} is too long for mindstore: its encoded form has "
            f"{len(label)} characters, at most {MAX_LABEL} are allowed; use shorter labels"
        )
    return label


def label_prefix(prefix: Sequence[str]) -> str:
    """The literal label prefix shared by every namespace that starts with ``prefix``."""
    if not prefix:
        return LABEL_PREFIX + "["
    return encode_namespace(prefix)[:-1]  # drop the closing "]": a "," or "]" follows


def decode_label(label: str) -> tuple[str, ...] | None:
    """The namespace tuple of a label, or None for a label that is not the adapter's."""
    if not label.startswith(LABEL_PREFIX):
        return None
    try:
        parts = json.loads(label[len(LABEL_PREFIX) :])
    except ValueError:
        return None
    if not isinstance(parts, list) or not all(isinstance(p, str) for p in parts):
        return None
    return tuple(parts)


def in_prefix(namespace: Sequence[str], prefix: Sequence[str]) -> bool:
    return tuple(namespace[: len(prefix)]) == tuple(prefix)


def path_matches(namespace: Sequence[str], path: Sequence[str], match_type: str) -> bool:
    """LangGraph's MatchCondition: ``path`` (``"*"`` = any label) at the start (``prefix``) or
    the end (``suffix``) of ``namespace``."""
    if len(namespace) < len(path):
        return False
    if match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"unsupported match type {match_type!r}: use 'prefix' or 'suffix'")
    return all(p == "*" or n == p for n, p in pairs)


def select_namespaces(
    namespaces: Iterable[tuple[str, ...]],
    conditions: Iterable[tuple[str, Sequence[str]]],
    *,
    max_depth: int | None,
    limit: int,
    offset: int,
) -> list[tuple[str, ...]]:
    """Namespaces matching every ``(match_type, path)`` condition, cut to ``max_depth`` labels
    (duplicates merged), sorted, then paged."""
    conds = list(conditions)
    kept = [ns for ns in namespaces if all(path_matches(ns, p, t) for t, p in conds)]
    if max_depth is not None:
        kept = [ns[:max_depth] for ns in kept]
    return sorted(set(kept))[offset : offset + limit]


def literal_prefix(conditions: Iterable[tuple[str, Sequence[str]]]) -> tuple[str, ...]:
    """The longest wildcard-free start of the prefix conditions (what the store can narrow by)."""
    best: tuple[str, ...] = ()
    for match_type, path in conditions:
        if match_type != "prefix":
            continue
        head: list[str] = []
        for label in path:
            if label == "*":
                break
            head.append(label)
        if len(head) > len(best):
            best = tuple(head)
    return best


def matches_filter(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether an item's value passes a LangGraph search filter.

    Raises:
        ValueError: an unknown ``$`` operator.
    """
    if not filter:
        return True
    return all(_compare(field_at(value, k), f) for k, f in filter.items())


_MISSING: Final = object()


def field_at(value: Mapping[str, Any], key: str) -> Any:
    """The field a filter key names: ``"user.access-level"`` is ``value["user"]["access-level"]``
    (dots go down through nested objects, as LangGraph's ``SqliteStore`` reads them with
    ``json_extract(value, '$.user.access-level')``); a key with no such path falls back to a
    top-level field of that literal name (``InMemoryStore``'s reading). None when neither."""
    if "." in key:
        node: Any = value
        for part in key.split("."):
            node = node.get(part, _MISSING) if isinstance(node, Mapping) else _MISSING
            if node is _MISSING:
                break
        else:
            return node
    return value.get(key)


def _compare(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in wanted):
            return all(_operator(actual, op, v) for op, v in wanted.items())
        if not isinstance(actual, Mapping):
            return False
        return all(_compare(actual.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(wanted)
            and all(_compare(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return bool(actual == wanted)


_ORDERING: Final = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def _operator(actual: Any, op: str, wanted: Any) -> bool:
    if op == "$eq":
        return bool(actual == wanted)
    if op == "$ne":
        return bool(actual != wanted)
    if op in _ORDERING:
        # Numbers compare as numbers; a missing or non-numeric field simply does not match
        # (LangGraph's in-memory store raises there; a filter should not crash a search).
        if not _is_number(actual) or not _is_number(wanted):
            return False
        return bool(_ORDERING[op](float(actual), float(wanted)))
    raise ValueError(f"unsupported filter operator {op!r}: use $eq, $ne, $gt, $gte, $lt or $lte")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def text_leaves(value: Any) -> list[str]:
    """The strings inside a JSON value, depth first (keys are structure, not content)."""
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, Mapping):
            stack.extend(reversed(list(v.values())))
        elif isinstance(v, list | tuple):
            stack.extend(reversed(v))
    return out
