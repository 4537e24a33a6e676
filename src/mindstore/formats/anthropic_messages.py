"""Anthropic Messages API: ``(system, messages)`` for ``client.messages.create`` and back. Pure.

Mapping (see :mod:`mindstore.formats._plan` for pairing, pending calls and overlays):

* every system turn (and ``system=``, first) is joined with a blank line into the top-level
  ``system`` string (``None`` when there is none); the API has no system role in ``messages``;
* user/tool text and files → a user turn: ``image/jpeg|png|gif|webp`` → ``image`` blocks
  (data URLs → ``base64`` sources, other URLs → ``url`` sources); PDFs → ``document`` blocks
  (base64 or url); ``text/*`` data URLs → ``document`` blocks with a ``text`` source; anything
  else → a ``[file: ...]`` text reference;
* assistant text → ``text`` blocks, calls → ``tool_use`` blocks (input always an object),
  results → ``tool_result`` blocks at the start of the next user turn (``is_error`` for
  ``output-error``/``output-denied`` and stubs);
* reasoning → ``thinking`` blocks when the part carries its signature
  (``providerMetadata.anthropic.signature``) or ``redacted_thinking`` when it carries
  ``providerMetadata.anthropic.redactedData``; reasoning without either is left out (the API
  rejects unsigned thinking). Assistant files become text references;
* blank text is left out (the API rejects empty text blocks), turns left empty are dropped, and
  consecutive turns of the same role are merged into one, so roles strictly alternate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mindstore.errors import InvalidMessageError
from mindstore.formats._plan import (
    AssistantTurn,
    Call,
    ResultsTurn,
    SystemTurn,
    UserTurn,
    decode_text_data,
    file_reference,
    input_as_dict,
    parse_data_url,
    plan_turns,
)
from mindstore.formats._reply import as_dict, finish_message, sub, tool_call_part
from mindstore.messages import Message, new_message_id

__all__ = ["from_anthropic", "to_anthropic"]

_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


def _text_block(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}] if text.strip() else []


def _file_blocks(part: Mapping[str, Any]) -> list[dict[str, Any]]:
    url = str(part.get("url") or "")
    media_type = str(part.get("mediaType") or "")
    data = parse_data_url(url)
    remote = url.startswith(("http://", "https://"))
    block: dict[str, Any] | None = None
    if media_type in _IMAGE_TYPES:
        if data is not None:
            source = {"type": "base64", "media_type": media_type, "data": data[1]}
            block = {"type": "image", "source": source}
        elif remote:
            block = {"type": "image", "source": {"type": "url", "url": url}}
    elif media_type == "application/pdf":
        if data is not None:
            source = {"type": "base64", "media_type": media_type, "data": data[1]}
            block = {"type": "document", "source": source}
        elif remote:
            block = {"type": "document", "source": {"type": "url", "url": url}}
    elif data is not None and (media_type or data[0]).startswith("text/"):
        text = decode_text_data(data[1])
        if text is not None:
            source = {"type": "text", "media_type": "text/plain", "data": text}
            block = {"type": "document", "source": source}
    if block is None:
        return [{"type": "text", "text": file_reference(part)}]
    filename = part.get("filename")
    if block["type"] == "document" and isinstance(filename, str) and filename:
        block["title"] = filename
    return [block]


def _reasoning_blocks(part: Mapping[str, Any]) -> list[dict[str, Any]]:
    meta = part.get("providerMetadata")
    anthropic = meta.get("anthropic") if isinstance(meta, dict) else None
    if not isinstance(anthropic, dict):
        return []
    signature = anthropic.get("signature")
    if isinstance(signature, str) and signature:
        return [{"type": "thinking", "thinking": str(part.get("text", "")), "signature": signature}]
    redacted = anthropic.get("redactedData")
    if isinstance(redacted, str) and redacted:
        return [{"type": "redacted_thinking", "data": redacted}]
    return []


def to_anthropic(
    messages: Iterable[Mapping[str, Any]],
    *,
    pending: str = "drop",
    system: str | None = None,
) -> tuple[str | None, list[dict[str, Any]]]:
    """Convert a history into Anthropic ``(system, messages)``.

    Args:
        messages: A root-to-leaf history, e.g. ``await session.get_history()``.
        pending: ``"drop"`` or ``"stub"`` for tool calls without a result (never orphaned).
        system: Optional system prompt (e.g. the frozen prompt) placed first in ``system``.

    Returns:
        ``(system, messages)``: the joined system text or ``None``, and a list of
        ``MessageParam`` dicts whose roles alternate and whose content is always a block list.

    Raises:
        InvalidMessageError: a message is not a dict or has an unknown role.
        ValueError: ``pending`` is not ``"drop"`` or ``"stub"``.
    """
    system_texts = [system] if system else []
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for turn in plan_turns(messages, pending):
        blocks: list[dict[str, Any]] = []
        if isinstance(turn, SystemTurn):
            system_texts.append(turn.text)
            continue
        if isinstance(turn, UserTurn):
            for part in turn.parts:
                if part["type"] == "text":
                    blocks += _text_block(str(part.get("text", "")))
                else:
                    blocks += _file_blocks(part)
            turns.append(("user", blocks))
        elif isinstance(turn, AssistantTurn):
            for item in turn.items:
                if isinstance(item, Call):
                    blocks.append(
                        {
                            "type": "tool_use",
                            "id": item.id,
                            "name": item.name,
                            "input": input_as_dict(item.input),
                        }
                    )
                elif item["type"] == "text":
                    blocks += _text_block(str(item.get("text", "")))
                elif item["type"] == "reasoning":
                    blocks += _reasoning_blocks(item)
                elif item["type"] == "file":
                    blocks += _text_block(file_reference(item))
            turns.append(("assistant", blocks))
        elif isinstance(turn, ResultsTurn):
            for r in turn.results:
                block: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": r.id,
                    "content": r.text,
                }
                if r.is_error:
                    block["is_error"] = True
                blocks.append(block)
            turns.append(("user", blocks))
    out: list[dict[str, Any]] = []
    for role, blocks in turns:
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return ("\n\n".join(system_texts) or None), out


def from_anthropic(
    message: Any,
    *,
    id: str | None = None,
    dynamic: bool = False,
) -> Message:
    """Turn an Anthropic reply into an assistant message.

    Args:
        message: A ``Message`` (SDK object or dict) or an assistant ``MessageParam`` dict.
        id: The message id; generated when omitted.
        dynamic: Emit ``dynamic-tool`` parts instead of ``tool-<name>`` parts.

    Returns:
        A validated assistant message: ``text`` blocks as text parts, ``thinking`` blocks as
        reasoning parts with ``providerMetadata.anthropic.signature``, ``redacted_thinking`` as
        empty reasoning parts with ``providerMetadata.anthropic.redactedData`` (so both can be
        sent back), ``tool_use`` blocks as tool parts in state ``input-available``. Server-side
        tool blocks are skipped. Metadata carries the model, message id, stop reason and usage.

    Raises:
        InvalidMessageError: ``message`` has no content to read, or it is not an assistant
            reply (a user turn or a ``tool_result``: use
            :func:`~mindstore.formats.from_anthropic_messages` for whole conversations).
    """
    obj = as_dict(message, "message")
    role = obj.get("role", "assistant")
    if role != "assistant":
        raise InvalidMessageError(
            f"from_anthropic reads an assistant reply, got a message with role {role!r:.40}; "
            "convert a whole conversation with from_anthropic_messages"
        )
    content = obj.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise InvalidMessageError("message.content must be a string or a list of blocks")
    parts: list[dict[str, Any]] = []
    for raw in content:
        block = as_dict(raw, "content block")
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "thinking":
            parts.append(
                {
                    "type": "reasoning",
                    "text": str(block.get("thinking", "")),
                    "providerMetadata": {"anthropic": {"signature": block.get("signature")}},
                }
            )
        elif kind == "redacted_thinking":
            parts.append(
                {
                    "type": "reasoning",
                    "text": "",
                    "providerMetadata": {"anthropic": {"redactedData": block.get("data")}},
                }
            )
        elif kind == "tool_result":
            raise InvalidMessageError(
                "from_anthropic reads an assistant reply, but it holds a tool_result block "
                "(results are user turns); convert a whole conversation with "
                "from_anthropic_messages"
            )
        elif kind == "tool_use":
            parts.append(
                tool_call_part(
                    str(block.get("id") or new_message_id()),
                    str(block.get("name")),
                    block.get("input") if block.get("input") is not None else {},
                    dynamic=dynamic,
                )
            )
    usage = sub(obj, "usage")
    return finish_message(
        parts,
        message_id=id,
        model=obj.get("model"),
        response_id=obj.get("id") if obj.get("type") == "message" else None,
        finish_reason=obj.get("stop_reason"),
        input_tokens=usage.get("input_tokens"),
        output_tokens=usage.get("output_tokens"),
    )
