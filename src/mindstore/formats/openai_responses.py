"""OpenAI Responses API: ``input`` items for ``client.responses.create`` and back. Pure.

Mapping (see :mod:`mindstore.formats._plan` for pairing, pending calls and overlays):

* system turns → ``{"role": "system"}`` messages; ``system=`` prepends the frozen prompt (or
  pass it as ``instructions`` yourself);
* user/tool text and files → ``{"role": "user"}`` with ``input_text`` / ``input_image``
  (``image/*``) / ``input_file`` (``file_data`` for data URLs, ``file_url`` otherwise);
  ``text/*`` data URLs → their decoded text;
* assistant text → one ``{"role": "assistant", "content": text}`` item per text part, calls →
  ``function_call`` items, results → ``function_call_output`` items right after the step;
* reasoning → a ``reasoning`` item only when the part carries the item id the API gave it
  (``providerMetadata.openai.itemId``, with ``reasoningEncryptedContent`` when present) and
  something of the same step follows it (the API rejects a reasoning item without its following
  item); other reasoning is left out. Assistant files become text references.
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
    input_as_json,
    parse_data_url,
    plan_turns,
)
from mindstore.formats._reply import as_dict, finish_message, parse_arguments, sub, tool_call_part
from mindstore.messages import Message, new_message_id

__all__ = ["from_openai_responses", "to_openai_responses"]

# Items that only ever appear in a request (never in a model's output), besides ``*_output``.
_INPUT_ONLY = frozenset({"item_reference", "mcp_approval_response"})


def _user_content(part: dict[str, Any]) -> dict[str, Any]:
    if part["type"] == "text":
        return {"type": "input_text", "text": part.get("text", "")}
    url = str(part.get("url") or "")
    media_type = str(part.get("mediaType") or "")
    if media_type.startswith("image/") and url:
        return {"type": "input_image", "image_url": url, "detail": "auto"}
    data = parse_data_url(url)
    filename = part.get("filename")
    if data is not None:
        if (media_type or data[0]).startswith("text/"):
            text = decode_text_data(data[1])
            if text is not None:
                return {"type": "input_text", "text": text}
        item: dict[str, Any] = {"type": "input_file", "file_data": url}
        item["filename"] = filename if isinstance(filename, str) and filename else "file"
        return item
    if url.startswith(("http://", "https://")):
        return {"type": "input_file", "file_url": url}
    return {"type": "input_text", "text": file_reference(part)}


def _reasoning_item(part: Mapping[str, Any]) -> dict[str, Any] | None:
    meta = part.get("providerMetadata")
    openai = meta.get("openai") if isinstance(meta, dict) else None
    item_id = openai.get("itemId") if isinstance(openai, dict) else None
    if not isinstance(item_id, str) or not item_id:
        return None
    text = str(part.get("text", ""))
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": text}] if text else [],
    }
    encrypted = openai.get("reasoningEncryptedContent") if isinstance(openai, dict) else None
    if isinstance(encrypted, str):
        item["encrypted_content"] = encrypted
    return item


def _assistant_items(turn: AssistantTurn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for entry in turn.items:
        if isinstance(entry, Call):
            items.append(
                {
                    "type": "function_call",
                    "call_id": entry.id,
                    "name": entry.name,
                    "arguments": input_as_json(entry.input),
                }
            )
        elif entry["type"] == "text":
            items.append({"role": "assistant", "content": str(entry.get("text", ""))})
        elif entry["type"] == "file":
            items.append({"role": "assistant", "content": file_reference(entry)})
        elif entry["type"] == "reasoning":
            reasoning = _reasoning_item(entry)
            if reasoning is not None:
                items.append(reasoning)
    while items and items[-1].get("type") == "reasoning":
        items.pop()
    return items


def to_openai_responses(
    messages: Iterable[Mapping[str, Any]],
    *,
    pending: str = "drop",
    system: str | None = None,
) -> list[dict[str, Any]]:
    """Convert a history into Responses API ``input`` items.

    Args:
        messages: A root-to-leaf history, e.g. ``await session.get_history()``.
        pending: ``"drop"`` or ``"stub"`` for tool calls without a result (never orphaned).
        system: Optional system prompt placed first as a system message.

    Returns:
        A list of ``ResponseInputItemParam`` dicts.

    Raises:
        InvalidMessageError: a message is not a dict or has an unknown role.
        ValueError: ``pending`` is not ``"drop"`` or ``"stub"``.
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for turn in plan_turns(messages, pending):
        if isinstance(turn, SystemTurn):
            out.append({"role": "system", "content": turn.text})
        elif isinstance(turn, UserTurn):
            parts = [_user_content(p) for p in turn.parts]
            if len(parts) == 1 and parts[0]["type"] == "input_text":
                out.append({"role": "user", "content": parts[0]["text"]})
            else:
                out.append({"role": "user", "content": parts})
        elif isinstance(turn, AssistantTurn):
            out.extend(_assistant_items(turn))
        elif isinstance(turn, ResultsTurn):
            out.extend(
                {"type": "function_call_output", "call_id": r.id, "output": r.text}
                for r in turn.results
            )
    return out


def _message_texts(item: Mapping[str, Any]) -> list[str]:
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    texts: list[str] = []
    for c in content if isinstance(content, list) else []:
        if not isinstance(c, dict):
            continue
        if c.get("type") in ("output_text", "input_text", "text"):
            texts.append(str(c.get("text", "")))
        elif c.get("type") == "refusal":
            texts.append(str(c.get("refusal", "")))
    return texts


def from_openai_responses(
    response: Any,
    *,
    id: str | None = None,
    dynamic: bool = False,
) -> Message:
    """Turn a Responses API reply into an assistant message.

    Args:
        response: A ``Response`` (SDK object or dict), or a list of its output items.
        id: The message id; generated when omitted.
        dynamic: Emit ``dynamic-tool`` parts instead of ``tool-<name>`` parts.

    Returns:
        A validated assistant message: ``message`` items as text parts (refusals as text),
        ``reasoning`` items as reasoning parts carrying ``providerMetadata.openai.itemId`` (and
        ``reasoningEncryptedContent``) so they can be sent back, ``function_call`` items as
        tool parts in state ``input-available``. Other item types (built-in tools) are skipped.
        Metadata carries the model, response id, status and usage.

    Raises:
        InvalidMessageError: ``response`` is neither a response nor a list of items, or an
            item is not part of an assistant reply (a user/system/developer message or a
            ``*_output`` item: use :func:`~mindstore.formats.from_openai_responses_items` for
            whole conversations).
    """
    meta: dict[str, Any] = {}
    if isinstance(response, list):
        items = [as_dict(i, "output item") for i in response]
    else:
        obj = as_dict(response, "response")
        items = [as_dict(i, "output item") for i in obj.get("output") or []]
        usage = sub(obj, "usage")
        meta = {
            "model": obj.get("model"),
            "response_id": obj.get("id"),
            "finish_reason": obj.get("status"),
            "input_tokens": usage.get("input_tokens"),
            "output_tokens": usage.get("output_tokens"),
        }
    parts: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        kind = item.get("type")
        role = item.get("role")
        if (role is not None and role != "assistant") or (
            isinstance(kind, str) and (kind.endswith("_output") or kind in _INPUT_ONLY)
        ):
            what = f"role {role!r:.40}" if role is not None and role != "assistant" else kind
            raise InvalidMessageError(
                f"from_openai_responses reads an assistant reply, but item {index} is {what}; "
                "convert a whole conversation with from_openai_responses_items"
            )
        if kind == "message" or (kind is None and "role" in item):
            parts.extend({"type": "text", "text": t} for t in _message_texts(item))
        elif kind == "reasoning":
            texts = [
                str(s.get("text", ""))
                for s in item.get("summary") or item.get("content") or []
                if isinstance(s, dict)
            ]
            openai: dict[str, Any] = {"itemId": item.get("id")}
            if isinstance(item.get("encrypted_content"), str):
                openai["reasoningEncryptedContent"] = item["encrypted_content"]
            parts.append(
                {
                    "type": "reasoning",
                    "text": "\n\n".join(texts),
                    "providerMetadata": {"openai": openai},
                }
            )
        elif kind == "function_call":
            parts.append(
                tool_call_part(
                    str(item.get("call_id") or new_message_id()),
                    str(item.get("name")),
                    parse_arguments(item.get("arguments")),
                    dynamic=dynamic,
                )
            )
    return finish_message(parts, message_id=id, **meta)
