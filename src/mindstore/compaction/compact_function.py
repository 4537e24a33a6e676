"""``create_compact_function``: the default compaction planner. Pure apart from the user's
``summarize`` callable.

Given the active path (overlays applied), the planner keeps a protected head and a recent tail
and asks ``summarize(prompt)`` for a summary of the middle. The result is a
:class:`CompactResult` naming the first and last *stored* message of the summarised range; the
session stores it as an overlay (nothing is deleted).

Boundaries never separate a tool call from its result. Two shapes are understood:

* AI SDK style — the call and its result are one tool part of one assistant message
  (``state: "output-available"``/``"output-error"``); a part in state ``input-streaming`` or
  ``input-available`` with no result anywhere later is a *pending* call.
* Separate result messages — a later message (``role: "tool"``, or any part carrying the same
  ``toolCallId``) answers an earlier call.

Every ``toolCallId`` spans from the first to the last message that mentions it; a cut inside a
span is moved (the head boundary forward, the tail boundary backward). Nothing from the first
pending call on is ever summarised. A call without a result that a later *user* message follows
is abandoned, not pending (see :func:`pending_call_index`), and may be summarised.

When a summary from an earlier round is visible, the head stops before it and the middle
starts with it: the prompt hands the old summary over as the one to update, and the new range
starts where the old one started (one growing summary per branch).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mindstore._async import maybe_await
from mindstore.compaction.overlays import is_compaction_message
from mindstore.errors import CompactionError
from mindstore.messages import is_tool_part, tool_name
from mindstore.tokens import estimate_message_tokens

__all__ = [
    "SUMMARY_SECTIONS",
    "CompactContext",
    "CompactResult",
    "align_boundary_backward",
    "align_boundary_forward",
    "build_summary_prompt",
    "create_compact_function",
    "pending_call_index",
    "tool_call_spans",
]

SUMMARY_SECTIONS = ("## Topic", "## Key Points", "## Current State", "## Open Items")
TOOL_JSON_CHARS = 500
_PENDING_STATES = frozenset({"input-streaming", "input-available", "approval-requested"})
_RESULT_STATES = frozenset({"output-available", "output-error", "output-denied"})


@dataclass(frozen=True, slots=True)
class CompactResult:
    """What a compaction function returns: the range to summarise and its summary."""

    from_message_id: str
    to_message_id: str
    summary: str


@dataclass(frozen=True, kw_only=True, slots=True)
class CompactContext:
    """The second argument of a compaction function.

    Attributes:
        token_counter: the session's counter ``counter(messages, system_prompt) -> int`` (sync or
            async) when one is configured (``compact_after(..., token_counter=...)`` or a
            session tokenizer), else ``None``.
        session_id: the session being compacted.
        namespace: its namespace.
        leaf_id: the leaf of the path being compacted.
    """

    token_counter: Callable[..., Any] | None = None
    session_id: str = "default"
    namespace: str = "default"
    leaf_id: str | None = None


# ---- tool call analysis ------------------------------------------------------------------------
def _is_result(part: Mapping[str, Any], role: Any) -> bool:
    if part.get("state") in _RESULT_STATES:
        return True
    if "output" in part or "errorText" in part or "result" in part:
        return True
    return bool(role == "tool")


def _call_ids(message: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """``(toolCallId, is_result)`` for every part of ``message`` that carries a call id."""
    out: list[tuple[str, bool]] = []
    role = message.get("role")
    for part in message.get("parts") or ():
        if not isinstance(part, Mapping):
            continue
        call_id = part.get("toolCallId")
        if isinstance(call_id, str) and call_id:
            out.append((call_id, _is_result(part, role)))
    return out


def tool_call_spans(messages: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, int, bool]]:
    """Map every ``toolCallId`` to ``(first_index, last_index, has_result)``."""
    spans: dict[str, tuple[int, int, bool]] = {}
    for i, message in enumerate(messages):
        for call_id, is_result in _call_ids(message):
            first, _, done = spans.get(call_id, (i, i, False))
            spans[call_id] = (first, i, done or is_result)
    return spans


def pending_call_index(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the first message holding a tool call that has no result *yet*, or None.

    A call without a result that a later user message follows was abandoned (the user spoke
    again; no result will ever answer it in its place). It is not pending: otherwise one
    interrupted call early in a conversation would block compaction of everything after it
    for ever, and the context would grow without bound.
    """
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    pending = [
        first
        for first, _, done in tool_call_spans(messages).values()
        if not done and first > last_user
    ]
    return min(pending) if pending else None


def _crossing(spans: Sequence[tuple[int, int, bool]], cut: int) -> bool:
    """Does a cut before index ``cut`` separate a call from its result?"""
    return any(first < cut <= last for first, last, _ in spans)


def align_boundary_forward(messages: Sequence[Mapping[str, Any]], cut: int) -> int:
    """The smallest cut ``>= cut`` (a cut ``c`` splits ``messages[:c]`` from ``messages[c:]``)
    that separates no tool call from its result."""
    spans = list(tool_call_spans(messages).values())
    while cut < len(messages) and _crossing(spans, cut):
        cut += 1
    return cut


def align_boundary_backward(messages: Sequence[Mapping[str, Any]], cut: int) -> int:
    """The largest cut ``<= cut`` that separates no tool call from its result."""
    spans = list(tool_call_spans(messages).values())
    while cut > 0 and _crossing(spans, cut):
        cut -= 1
    return cut


# ---- prompt -------------------------------------------------------------------------------------
def _clip(text: str, limit: int = TOOL_JSON_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [truncated {len(text) - limit} chars]"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def render_message(message: Mapping[str, Any]) -> str:
    """One message as plain lines for the summary prompt; tool data as JSON, clipped."""
    role = str(message.get("role", "?"))
    lines: list[str] = []
    for part in message.get("parts") or ():
        if not isinstance(part, Mapping):
            continue
        ptype = part.get("type")
        if ptype in ("text", "reasoning"):
            text = part.get("text")
            if isinstance(text, str) and text.strip():
                tag = role if ptype == "text" else f"{role} reasoning"
                lines.append(f"[{tag}] {text.strip()}")
        elif is_tool_part(part) or "toolCallId" in part:
            name = tool_name(part) if is_tool_part(part) else str(ptype)
            # A result message's role is already "tool": "[tool set_context]", not
            # "[tool tool set_context]"; a call in an assistant turn: "[assistant tool …]".
            bits = [f"[tool {name}]" if role == "tool" else f"[{role} tool {name}]"]
            if "input" in part:
                bits.append(f"input: {_clip(_json(part['input']))}")
            if "output" in part:
                bits.append(f"output: {_clip(_json(part['output']))}")
            if "errorText" in part:
                bits.append(f"error: {_clip(str(part['errorText']))}")
            lines.append(" ".join(bits))
    return "\n".join(lines)


def build_summary_prompt(
    middle: Sequence[Mapping[str, Any]],
    *,
    target_tokens: int,
    previous_summary: str | None = None,
) -> str:
    """The prompt sent to ``summarize``: instructions, the earlier summary (if any) and the
    conversation excerpt, each in its own tagged block so extractive summarisers can parse it."""
    sections = "\n".join(SUMMARY_SECTIONS)
    head = (
        "You are compacting the history of a conversation between a user and an AI assistant "
        "so the conversation can continue without the original messages.\n"
        "Write a summary in Markdown with exactly these sections, in this order:\n"
        f"{sections}\n"
        "Keep facts, decisions, names, numbers, file paths, tool results that still matter and "
        "anything the user asked for that is not done yet. Do not invent anything.\n"
        f"Target length: about {target_tokens} tokens.\n"
    )
    parts = [head]
    if previous_summary:
        parts.append(
            "An earlier summary covers the conversation before this excerpt. Update it: keep "
            "what still matters, add what is new, and return one combined summary.\n"
            f"<previous_summary>\n{previous_summary.strip()}\n</previous_summary>\n"
        )
    body = "\n".join(r for r in (render_message(m) for m in middle) if r)
    parts.append(f"<conversation>\n{body}\n</conversation>")
    return "\n".join(parts)


# ---- the planner --------------------------------------------------------------------------------
def create_compact_function(
    *,
    summarize: Callable[[str], str | Awaitable[str]],
    protect_head: int = 3,
    tail_token_budget: int = 20_000,
    min_tail_messages: int = 2,
    token_counter: Callable[[Mapping[str, Any]], int | Awaitable[int]] | None = None,
) -> Callable[[list[dict[str, Any]], Any], Awaitable[CompactResult | None]]:
    """Build a compaction function for :meth:`Session.on_compaction`.

    Args:
        summarize: ``summarize(prompt) -> str``, sync or async (your model call).
        protect_head: messages at the start that are never summarised.
        tail_token_budget: the recent tail kept verbatim, in tokens (the last message always,
            at least ``min_tail_messages``).
        min_tail_messages: minimum number of messages kept in the tail.
        token_counter: ``token_counter(message) -> int`` (sync or async) counting one message.
            Default: the session's counter from the context (``counter([message], "")``), else
            :func:`~mindstore.tokens.estimate_message_tokens`.

    Returns:
        ``async fn(messages, context) -> CompactResult | None``; ``None`` when there is nothing
        worth summarising.
    """
    if protect_head < 0 or min_tail_messages < 1 or tail_token_budget < 0:
        raise ValueError(
            "protect_head and tail_token_budget must be >= 0 and min_tail_messages >= 1"
        )

    async def count(message: Mapping[str, Any], context: Any) -> int:
        if token_counter is not None:
            return int(await maybe_await(token_counter(message)))
        ctx_counter = getattr(context, "token_counter", None)
        if ctx_counter is not None:
            return int(await maybe_await(ctx_counter([message], "")))
        return estimate_message_tokens([message])

    async def compact(messages: list[dict[str, Any]], context: Any = None) -> CompactResult | None:
        n = len(messages)
        if n <= protect_head + min_tail_messages:
            return None
        spans = list(tool_call_spans(messages).values())

        # 2. head: the first protect_head messages, never past an earlier summary.
        head = align_boundary_forward(messages, protect_head)
        first_overlay = next((i for i, m in enumerate(messages) if is_compaction_message(m)), None)
        if first_overlay is not None and first_overlay < head:
            head = first_overlay
            if _crossing(spans, head):
                return None  # a call before the old summary answered after it: leave it alone

        # 3. tail: walk back within the budget, keep calls with their results.
        tail = n - 1
        used = await count(messages[tail], context)
        while tail > head:
            kept = n - tail
            nxt = await count(messages[tail - 1], context)
            if kept < min_tail_messages or used + nxt <= tail_token_budget:
                tail -= 1
                used += nxt
            else:
                break
        tail = align_boundary_backward(messages, tail)
        pending = pending_call_index(messages)
        if pending is not None:
            tail = min(tail, pending)
        if tail <= head:
            return None
        middle = messages[head:tail]
        fresh = [m for m in middle if not is_compaction_message(m)]
        if not fresh:
            return None
        previous = [m for m in middle if is_compaction_message(m)]
        previous_summary = "\n\n".join(_summary_text(m) for m in previous) or None
        middle_tokens = 0
        for m in fresh:
            middle_tokens += await count(m, context)
        target = max(100, round(middle_tokens * 0.2))
        prompt = build_summary_prompt(
            fresh, target_tokens=target, previous_summary=previous_summary
        )
        summary = await maybe_await(summarize(prompt))
        if not isinstance(summary, str):  # an invalid summary, as a blank one (DESIGN: errors)
            raise CompactionError(
                f"summarize() must return a string, got {type(summary).__name__}; "
                "nothing was stored"
            )
        return CompactResult(
            from_message_id=_range_end(middle[0], "from"),
            to_message_id=_range_end(middle[-1], "to"),
            summary=summary,
        )

    return compact


def _summary_text(message: Mapping[str, Any]) -> str:
    texts = [
        p.get("text", "")
        for p in message.get("parts") or ()
        if isinstance(p, Mapping) and p.get("type") == "text"
    ]
    return "\n".join(t for t in texts if isinstance(t, str))


def _range_end(message: Mapping[str, Any], end: str) -> str:
    """The stored id at one end of ``message``: itself, or the end of the range it summarises."""
    if is_compaction_message(message):
        return str(message["metadata"]["compaction"][end])
    return str(message["id"])
