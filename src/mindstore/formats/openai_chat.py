"""OpenAI Chat Completions: ``messages`` for ``client.chat.completions.create`` and back. Pure.

Mapping (see :mod:`mindstore.formats._plan` for pairing, pending calls and overlays):

* system turns → ``{"role": "system"}``; ``system=`` prepends the frozen prompt;
* user/tool text and files → ``{"role": "user"}`` with a string (one text part) or content
  parts: images (``image/*``, any URL) → ``image_url``; WAV/MP3 data URLs → ``input_audio``;
  ``text/*`` data URLs → their decoded text; other data URLs → ``file`` with ``file_data``;
  anything else → a ``[file: ...]`` text reference;
* assistant text → ``content`` (a string, or text parts when there are several), calls →
  ``tool_calls`` (arguments as JSON), results → one ``{"role": "tool"}`` message per call right
  after; errors are sent as their error text. Reasoning has no place in the Chat Completions
  request and is left out; assistant files become text references.
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

__all__ = ["from_openai_chat", "to_openai_chat"]

_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


def _user_content(part: dict[str, Any]) -> dict[str, Any]:
    if part["type"] == "text":
        return {"type": "text", "text": part.get("text", "")}
    url = str(part.get("url") or "")
    media_type = str(part.get("mediaType") or "")
    data = parse_data_url(url)
    if media_type.startswith("image/") and url:
        return {"type": "image_url", "image_url": {"url": url}}
    if data is not None:
        data_type = media_type or data[0]
        if data_type in _AUDIO_FORMATS:
            return {
                "type": "input_audio",
                "input_audio": {"data": data[1], "format": _AUDIO_FORMATS[data_type]},
            }
        if data_type.startswith("text/"):
            text = decode_text_data(data[1])
            if text is not None:
                return {"type": "text", "text": text}
        filename = part.get("filename")
        return {
            "type": "file",
            "file": {
                "file_data": url,
                "filename": filename if isinstance(filename, str) and filename else "file",
            },
        }
    return {"type": "text", "text": file_reference(part)}


def _assistant_message(turn: AssistantTurn) -> dict[str, Any] | None:
    texts: list[str] = []
    tool_calls: list[dict[str, Any]] = []
    for item in turn.items:
        if isinstance(item, Call):
            tool_calls.append(
                {
                    "id": item.id,
                    "type": "function",
                    "function": {"name": item.name, "arguments": input_as_json(item.input)},
                }
            )
        elif item["type"] == "text":
            texts.append(str(item.get("text", "")))
        elif item["type"] == "file":
            texts.append(file_reference(item))
    if not texts and not tool_calls:
        return None
    content: Any
    if not texts:
        content = None
    elif len(texts) == 1:
        content = texts[0]
    else:
        content = [{"type": "text", "text": t} for t in texts]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def to_openai_chat(
    messages: Iterable[Mapping[str, Any]],
    *,
    pending: str = "drop",
    system: str | None = None,
) -> list[dict[str, Any]]:
    """Convert a history into Chat Completions ``messages``.

    Args:
        messages: A root-to-leaf history, e.g. ``await session.get_history()``.
        pending: What to do with tool calls that have no result: ``"drop"`` leaves them out,
            ``"stub"`` sends them with a stub error result. Never sent orphaned.
        system: Optional system prompt (e.g. the frozen prompt) placed first.

    Returns:
        A list of ``ChatCompletionMessageParam`` dicts.

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
            if len(parts) == 1 and parts[0]["type"] == "text":
                out.append({"role": "user", "content": parts[0]["text"]})
            else:
                out.append({"role": "user", "content": parts})
        elif isinstance(turn, AssistantTurn):
            message = _assistant_message(turn)
            if message is not None:
                out.append(message)
        elif isinstance(turn, ResultsTurn):
            out.extend(
                {"role": "tool", "tool_call_id": r.id, "content": r.text} for r in turn.results
            )
    return out


def from_openai_chat(
    response: Any,
    *,
    choice: int = 0,
    id: str | None = None,
    dynamic: bool = False,
) -> Message:
    """Turn a Chat Completions reply into an assistant message.

    Args:
        response: A ``ChatCompletion`` (SDK object or dict), one of its choices, or an assistant
            message dict (``{"role": "assistant", "content": ..., "tool_calls": [...]}``).
        choice: Which choice to read from a ``ChatCompletion``.
        id: The message id; generated when omitted.
        dynamic: Emit ``dynamic-tool`` parts instead of ``tool-<name>`` parts.

    Returns:
        A validated assistant message: ``reasoning_content`` (sent by some compatible servers)
        as a reasoning part, the text, a refusal as text, and each tool call as a part in state
        ``input-available`` (arguments parsed from JSON; kept as the raw string when they are
        not valid JSON). Metadata carries the model, response id, finish reason and usage.

    Raises:
        InvalidMessageError: the reply has no message to read, or it is not an assistant
            reply (a user, system, developer or tool message: use
            :func:`~mindstore.formats.from_openai_chat_messages` for whole conversations).
    """
    obj = as_dict(response, "response")
    meta: dict[str, Any] = {}
    if "choices" in obj:
        choices = obj.get("choices") or []
        if not isinstance(choices, list) or len(choices) <= choice:
            raise InvalidMessageError(f"response has no choice {choice}")
        picked = as_dict(choices[choice], "choice")
        usage = sub(obj, "usage")
        meta = {
            "model": obj.get("model"),
            "response_id": obj.get("id"),
            "finish_reason": picked.get("finish_reason"),
            "input_tokens": usage.get("prompt_tokens"),
            "output_tokens": usage.get("completion_tokens"),
        }
        msg = as_dict(picked.get("message"), "choice.message")
    elif "message" in obj and isinstance(obj["message"], Mapping):
        meta = {"finish_reason": obj.get("finish_reason")}
        msg = dict(obj["message"])
    else:
        msg = obj
    role = msg.get("role", "assistant")
    if role != "assistant":
        raise InvalidMessageError(
            f"from_openai_chat reads an assistant reply, got a message with role {role!r:.40}; "
            "convert a whole conversation with from_openai_chat_messages"
        )

    parts: list[dict[str, Any]] = []
    for key in ("reasoning_content", "reasoning"):
        reasoning = msg.get(key)
        if isinstance(reasoning, str) and reasoning:
            parts.append({"type": "reasoning", "text": reasoning})
            break
    content = msg.get("content")
    if isinstance(content, str) and content:
        parts.append({"type": "text", "text": content})
    elif isinstance(content, list):
        for c in content:
            if isinstance(c, dict) and c.get("type") == "text":
                parts.append({"type": "text", "text": str(c.get("text", ""))})
            elif isinstance(c, dict) and c.get("type") == "refusal":
                parts.append({"type": "text", "text": str(c.get("refusal", ""))})
    refusal = msg.get("refusal")
    if isinstance(refusal, str) and refusal:
        parts.append({"type": "text", "text": refusal})
    for call in msg.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        call_id = str(call.get("id") or new_message_id())
        if call.get("type") == "custom" and isinstance(call.get("custom"), dict):
            custom = sub(call, "custom")
            parts.append(
                tool_call_part(
                    call_id, str(custom.get("name")), custom.get("input"), dynamic=dynamic
                )
            )
            continue
        function = sub(call, "function")
        parts.append(
            tool_call_part(
                call_id,
                str(function.get("name")),
                parse_arguments(function.get("arguments")),
                dynamic=dynamic,
            )
        )
    legacy = msg.get("function_call")
    if isinstance(legacy, dict) and legacy.get("name"):
        parts.append(
            tool_call_part(
                new_message_id(),
                str(legacy["name"]),
                parse_arguments(legacy.get("arguments")),
                dynamic=dynamic,
            )
        )
    return finish_message(parts, message_id=id, **meta)
