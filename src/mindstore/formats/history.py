"""Whole histories from model-API shapes back into UIMessages. Pure: no I/O.

``from_openai_chat_messages(list)``, ``from_openai_responses_items(list)`` and
``from_anthropic_messages(list, system=None)`` turn a conversation as an API takes it (for
example a log of requests) into mindstore messages, so ``to_X(from_X(history)) == history`` for
everything the ``to_X`` converters produce:

* roles are kept: ``system`` (and OpenAI's ``developer``) → system, ``user`` → user,
  ``assistant`` → assistant; a user turn never becomes an assistant turn;
* a tool result joins its call: the call's part (in the assistant message that made it) moves
  to ``output-available`` with the result as ``output`` (``output-error`` with ``errorText``
  for Anthropic ``is_error`` results); a result whose call never appeared earlier raises
  :class:`~mindstore.errors.InvalidMessageError` (it cannot be placed);
* user files become ``file`` parts (images, PDFs, audio, text documents; URLs and data URLs);
  reasoning with the provider's ids or signatures becomes ``reasoning`` parts carrying them in
  ``providerMetadata`` so they can be sent back;
* Responses API items of built-in tools that run on OpenAI's side (web/file search, code
  interpreter, image generation, MCP calls) become tool parts marked ``providerExecuted`` (the
  AI SDK's convention), which the ``to_*`` converters do not send again.

Anything not valid in the format (an unknown role, a message that is not an object) raises
:class:`~mindstore.errors.InvalidMessageError` naming its index; nothing is guessed.
"""

from __future__ import annotations

import base64
import json
import mimetypes
from collections.abc import Iterable, Mapping
from typing import Any

from mindstore.errors import InvalidMessageError
from mindstore.formats._reply import as_dict, parse_arguments, tool_call_part
from mindstore.messages import Message, new_message_id, validate_message

__all__ = [
    "PROVIDER_EXECUTED_ITEMS",
    "from_anthropic_messages",
    "from_openai_chat_messages",
    "from_openai_responses_items",
]

_AUDIO_TYPES = {"wav": "audio/wav", "mp3": "audio/mpeg"}

PROVIDER_EXECUTED_ITEMS: dict[str, str] = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "code_interpreter_call": "code_interpreter",
    "image_generation_call": "image_generation",
    "mcp_call": "mcp",
    "mcp_list_tools": "mcp_list_tools",
}
"""Responses item types run by OpenAI itself → the tool name of their ``providerExecuted`` part."""


def _guess_type(url: str, default: str) -> str:
    if url.startswith("data:"):
        head = url[5:].split(",", 1)[0].split(";", 1)[0]
        return head or default
    guessed, _ = mimetypes.guess_type(url.split("?", 1)[0])
    return guessed or default


def _file_part(url: str, media_type: str, filename: Any = None) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "file", "mediaType": media_type, "url": url}
    if isinstance(filename, str) and filename:
        part["filename"] = filename
    return part


def _text_of_content(content: Any, what: str) -> str:
    """A tool result's content as text (a string, or text blocks joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for block in content:
            if isinstance(block, Mapping) and isinstance(block.get("text"), str):
                texts.append(block["text"])
            else:
                return json.dumps(content, ensure_ascii=False)
        return "\n\n".join(texts)
    raise InvalidMessageError(f"{what} must be a string or a list of text blocks")


class _Builder:
    """Collects UIMessages and joins tool results to their calls."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.calls: dict[str, dict[str, Any]] = {}

    def add(self, role: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
        message = {"id": new_message_id(), "role": role, "parts": parts}
        self.messages.append(message)
        return message

    def assistant(self, *, fresh: bool) -> dict[str, Any]:
        if not fresh and self.messages and self.messages[-1]["role"] == "assistant":
            return self.messages[-1]
        return self.add("assistant", [])

    def call(self, message: dict[str, Any], part: dict[str, Any]) -> None:
        message["parts"].append(part)
        self.calls[part["toolCallId"]] = part

    def result(
        self, call_id: Any, where: str, *, output: Any = None, error: str | None = None
    ) -> dict[str, Any]:
        part = self.calls.get(call_id) if isinstance(call_id, str) else None
        if part is None:
            raise InvalidMessageError(
                f"{where} is the result of tool call {call_id!r:.80}, which no earlier assistant "
                "turn made; a result must follow its call"
            )
        if error is not None:
            part["state"] = "output-error"
            part["errorText"] = error
        else:
            part["state"] = "output-available"
            part["output"] = output
        return part

    def finish(self) -> list[Message]:
        return [validate_message(m) for m in self.messages if m["parts"]]


def _items(messages: Iterable[Any], what: str) -> list[dict[str, Any]]:
    if isinstance(messages, str | bytes | Mapping):
        raise InvalidMessageError(f"{what} must be a list, got {type(messages).__name__}")
    return [as_dict(m, f"{what}[{i}]") for i, m in enumerate(messages)]


def _role(message: Mapping[str, Any], where: str, allowed: tuple[str, ...]) -> str:
    role = message.get("role")
    if role not in allowed:
        raise InvalidMessageError(f"{where}.role must be one of {list(allowed)}, got {role!r:.40}")
    return str(role)


# ---------------------------------------------------------------- OpenAI Chat Completions


def _chat_user_part(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": str(block.get("text", ""))}
    if kind == "image_url":
        image = block.get("image_url")
        url = str(image.get("url", "")) if isinstance(image, Mapping) else ""
        return _file_part(url, _guess_type(url, "image/*"))
    if kind == "input_audio":
        audio = block.get("input_audio")
        audio = audio if isinstance(audio, Mapping) else {}
        media_type = _AUDIO_TYPES.get(str(audio.get("format")), "audio/wav")
        return _file_part(f"data:{media_type};base64,{audio.get('data', '')}", media_type)
    if kind == "file":
        file = block.get("file")
        file = file if isinstance(file, Mapping) else {}
        data = str(file.get("file_data") or "")
        if data and not data.startswith("data:"):
            data = f"data:application/octet-stream;base64,{data}"
        if not data and file.get("file_id"):
            data = f"openai-file:{file['file_id']}"
        return _file_part(data, _guess_type(data, "application/octet-stream"), file.get("filename"))
    raise InvalidMessageError(f"{where}.type {kind!r:.40} is not a user content part")


def _chat_texts(content: Any, where: str) -> list[str]:
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        raise InvalidMessageError(f"{where}.content must be a string or a list of parts")
    texts = []
    for i, block in enumerate(content):
        if isinstance(block, Mapping) and block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif isinstance(block, Mapping) and block.get("type") == "refusal":
            texts.append(str(block.get("refusal", "")))
        else:
            raise InvalidMessageError(f"{where}.content[{i}] must be a text part")
    return texts


def from_openai_chat_messages(messages: Iterable[Any], *, dynamic: bool = False) -> list[Message]:
    """Turn Chat Completions ``messages`` (a whole conversation) into UIMessages.

    Args:
        messages: ``ChatCompletionMessageParam`` dicts (or SDK objects), oldest first.
        dynamic: Emit ``dynamic-tool`` parts instead of ``tool-<name>`` parts.

    Returns:
        Validated messages with generated ids: ``system``/``developer`` → system, ``user`` →
        user (images, audio and files as ``file`` parts), ``assistant`` → assistant (text,
        refusals as text, ``tool_calls`` as tool parts); each ``tool`` message joins its call.

    Raises:
        InvalidMessageError: a message is malformed, has an unknown role (the legacy
            ``function`` role included), or answers a call no earlier message made.
    """
    out = _Builder()
    roles = ("system", "developer", "user", "assistant", "tool")
    for i, msg in enumerate(_items(messages, "messages")):
        where = f"messages[{i}]"
        role = _role(msg, where, roles)
        content = msg.get("content")
        if role in ("system", "developer"):
            text = "\n\n".join(_chat_texts(content, where))
            out.add("system", [{"type": "text", "text": text}])
        elif role == "user":
            if isinstance(content, str):
                out.add("user", [{"type": "text", "text": content}])
            elif isinstance(content, list):
                out.add(
                    "user",
                    [
                        _chat_user_part(
                            as_dict(b, f"{where}.content[{j}]"), f"{where}.content[{j}]"
                        )
                        for j, b in enumerate(content)
                    ],
                )
            else:
                raise InvalidMessageError(f"{where}.content must be a string or a list of parts")
        elif role == "assistant":
            message = out.add("assistant", [])
            message["parts"] += [{"type": "text", "text": t} for t in _chat_texts(content, where)]
            refusal = msg.get("refusal")
            if isinstance(refusal, str) and refusal:
                message["parts"].append({"type": "text", "text": refusal})
            for j, call in enumerate(msg.get("tool_calls") or []):
                call = as_dict(call, f"{where}.tool_calls[{j}]")
                function = (
                    call.get("function") if call.get("type", "function") == "function" else None
                )
                custom = call.get("custom") if call.get("type") == "custom" else None
                if isinstance(function, Mapping):
                    name, args = function.get("name"), parse_arguments(function.get("arguments"))
                elif isinstance(custom, Mapping):
                    name, args = custom.get("name"), custom.get("input")
                else:
                    raise InvalidMessageError(f"{where}.tool_calls[{j}] has no function")
                call_id = call.get("id")
                if not isinstance(call_id, str) or not call_id or not isinstance(name, str):
                    raise InvalidMessageError(f"{where}.tool_calls[{j}] needs an id and a name")
                out.call(message, tool_call_part(call_id, name, args, dynamic=dynamic))
        else:
            out.result(
                msg.get("tool_call_id"), where, output=_text_of_content(content, f"{where}.content")
            )
    return out.finish()


# ---------------------------------------------------------------- OpenAI Responses


def responses_content_part(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    kind = block.get("type")
    if kind in ("input_text", "output_text", "text"):
        return {"type": "text", "text": str(block.get("text", ""))}
    if kind == "refusal":
        return {"type": "text", "text": str(block.get("refusal", ""))}
    if kind == "input_image":
        url = str(block.get("image_url") or "")
        if not url and block.get("file_id"):
            url = f"openai-file:{block['file_id']}"
        return _file_part(url, _guess_type(url, "image/*"))
    if kind == "input_file":
        url = str(block.get("file_data") or block.get("file_url") or "")
        if url and not url.startswith(("data:", "http://", "https://")):
            url = f"data:application/octet-stream;base64,{url}"
        if not url and block.get("file_id"):
            url = f"openai-file:{block['file_id']}"
        media_type = _guess_type(url, "application/octet-stream")
        if media_type == "application/octet-stream" and isinstance(block.get("filename"), str):
            media_type = _guess_type(block["filename"], media_type)
        return _file_part(url, media_type, block.get("filename"))
    if kind == "input_audio":
        audio = block.get("input_audio")
        audio = audio if isinstance(audio, Mapping) else {}
        media_type = _AUDIO_TYPES.get(str(audio.get("format")), "audio/wav")
        return _file_part(f"data:{media_type};base64,{audio.get('data', '')}", media_type)
    raise InvalidMessageError(f"{where}.type {kind!r:.40} is not a message content part")


def _responses_content(item: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    content = item.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise InvalidMessageError(f"{where}.content must be a string or a list of parts")
    return [
        responses_content_part(as_dict(b, f"{where}.content[{j}]"), f"{where}.content[{j}]")
        for j, b in enumerate(content)
    ]


def reasoning_part(item: Mapping[str, Any]) -> dict[str, Any]:
    """A Responses ``reasoning`` item as a reasoning part that can be sent back."""
    texts = [
        str(s.get("text", ""))
        for s in item.get("summary") or item.get("content") or []
        if isinstance(s, Mapping)
    ]
    openai: dict[str, Any] = {"itemId": item.get("id")}
    if isinstance(item.get("encrypted_content"), str):
        openai["reasoningEncryptedContent"] = item["encrypted_content"]
    return {"type": "reasoning", "text": "\n\n".join(texts), "providerMetadata": {"openai": openai}}


def provider_executed_part(item: Mapping[str, Any]) -> dict[str, Any]:
    """A built-in (OpenAI-run) tool item as a finished ``providerExecuted`` tool part."""
    kind = str(item.get("type"))
    name = PROVIDER_EXECUTED_ITEMS.get(kind, kind.removesuffix("_call"))
    call_id = str(item.get("id") or new_message_id())
    details = {k: v for k, v in item.items() if k not in ("type", "id")}
    if kind == "mcp_call":
        tool_input: Any = {
            "server": item.get("server_label"),
            "name": item.get("name"),
            "arguments": parse_arguments(item.get("arguments")),
        }
    else:
        tool_input = details.get("action") or details.get("queries") or details.get("code") or {}
    part: dict[str, Any] = {
        "type": f"tool-{name}",
        "toolCallId": call_id,
        "state": "output-available",
        "input": tool_input,
        "output": details,
        "providerExecuted": True,
    }
    if isinstance(item.get("error"), str) and item["error"]:
        part["state"] = "output-error"
        part["errorText"] = item["error"]
        del part["output"]
    return part


def function_output_value(output: Any) -> Any:
    """A ``*_call_output`` item's ``output``: a string, or a list of content parts kept as-is."""
    if isinstance(output, list) and all(
        isinstance(o, Mapping) and o.get("type") in ("input_text", "output_text") for o in output
    ):
        return "\n\n".join(str(o.get("text", "")) for o in output)
    return output


def from_openai_responses_items(items: Iterable[Any], *, dynamic: bool = False) -> list[Message]:
    """Turn Responses API ``input`` items (a whole conversation) into UIMessages.

    Args:
        items: ``ResponseInputItemParam`` dicts (or SDK output items), oldest first.
        dynamic: Emit ``dynamic-tool`` parts instead of ``tool-<name>`` parts.

    Returns:
        Validated messages with generated ids. Message items keep their role
        (``developer`` → system); the assistant items of one turn (reasoning, assistant
        messages, ``function_call``, ``custom_tool_call``, built-in tool items) form one
        assistant message, split into steps like the AI SDK's; each ``function_call_output``
        (or ``custom_tool_call_output``) joins its call.

    Raises:
        InvalidMessageError: an item is malformed, has an unknown type, or is the output of a
            call no earlier item made.
    """
    out = _Builder()
    step_has_result = False
    for i, item in enumerate(_items(items, "items")):
        where = f"items[{i}]"
        kind = item.get("type")
        if kind == "message" or (kind is None and "role" in item):
            role = _role(item, where, ("system", "developer", "user", "assistant"))
            parts = _responses_content(item, where)
            if role == "assistant":
                message = out.assistant(fresh=False)
                message["parts"] += parts
            else:
                out.add("system" if role == "developer" else role, parts)
                if role == "system":
                    text = "\n\n".join(p["text"] for p in parts if p["type"] == "text")
                    out.messages[-1]["parts"] = [{"type": "text", "text": text}]
            continue
        if kind in ("function_call", "custom_tool_call"):
            message = out.assistant(fresh=False)
            if step_has_result:
                message["parts"].append({"type": "step-start"})
                step_has_result = False
            args = (
                parse_arguments(item.get("arguments"))
                if kind == "function_call"
                else item.get("input")
            )
            call_id, name = item.get("call_id"), item.get("name")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str):
                raise InvalidMessageError(f"{where} needs a call_id and a name")
            out.call(message, tool_call_part(call_id, name, args, dynamic=dynamic))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            out.result(item.get("call_id"), where, output=function_output_value(item.get("output")))
            step_has_result = True
        elif kind == "reasoning":
            message = out.assistant(fresh=False)
            message["parts"].append(reasoning_part(item))
        elif kind in PROVIDER_EXECUTED_ITEMS:
            out.assistant(fresh=False)["parts"].append(provider_executed_part(item))
        else:
            raise InvalidMessageError(
                f"{where}.type {kind!r:.40} cannot be imported as a history item; supported: "
                "messages, function_call(_output), custom_tool_call(_output), reasoning and "
                f"{', '.join(sorted(PROVIDER_EXECUTED_ITEMS))}"
            )
    return out.finish()


# ---------------------------------------------------------------- Anthropic Messages


def _anthropic_file(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    source = block.get("source")
    source = source if isinstance(source, Mapping) else {}
    kind = source.get("type")
    title = block.get("title")
    default = "image/*" if block.get("type") == "image" else "application/pdf"
    if kind == "base64":
        media_type = str(source.get("media_type") or default)
        return _file_part(f"data:{media_type};base64,{source.get('data', '')}", media_type, title)
    if kind == "url":
        url = str(source.get("url", ""))
        return _file_part(url, _guess_type(url, default), title)
    if kind == "text":
        data = base64.b64encode(str(source.get("data", "")).encode("utf-8")).decode("ascii")
        return _file_part(f"data:text/plain;base64,{data}", "text/plain", title)
    raise InvalidMessageError(f"{where}.source.type {kind!r:.40} is not supported")


def from_anthropic_messages(
    messages: Iterable[Any], system: str | list[Any] | None = None, *, dynamic: bool = False
) -> list[Message]:
    """Turn Anthropic ``messages`` (and the top-level ``system``) into UIMessages.

    Args:
        messages: ``MessageParam`` dicts (or SDK ``Message`` objects), oldest first.
        system: The request's ``system`` (a string or text blocks); becomes a first system
            message.
        dynamic: Emit ``dynamic-tool`` parts instead of ``tool-<name>`` parts.

    Returns:
        Validated messages with generated ids: user turns as user messages (images, PDFs and
        text documents as ``file`` parts), ``tool_result`` blocks joined to their ``tool_use``
        (``is_error`` → ``output-error``), assistant turns with text, ``thinking`` /
        ``redacted_thinking`` (kept sendable) and ``tool_use`` parts.

    Raises:
        InvalidMessageError: a message is malformed, has a role other than user/assistant,
            or carries a result for a call no earlier message made.
    """
    out = _Builder()
    if system is not None:
        text = "\n\n".join(_chat_texts(system, "system"))
        out.add("system", [{"type": "text", "text": text}])
    for i, msg in enumerate(_items(messages, "messages")):
        where = f"messages[{i}]"
        role = _role(msg, where, ("user", "assistant"))
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            raise InvalidMessageError(f"{where}.content must be a string or a list of blocks")
        message = out.add(role, [])
        for j, raw in enumerate(content):
            block = as_dict(raw, f"{where}.content[{j}]")
            bwhere = f"{where}.content[{j}]"
            kind = block.get("type")
            if kind == "text":
                message["parts"].append({"type": "text", "text": str(block.get("text", ""))})
            elif role == "user" and kind in ("image", "document"):
                message["parts"].append(_anthropic_file(block, bwhere))
            elif role == "user" and kind == "tool_result":
                text = _text_of_content(block.get("content"), f"{bwhere}.content")
                if block.get("is_error"):
                    out.result(block.get("tool_use_id"), bwhere, error=text)
                else:
                    out.result(block.get("tool_use_id"), bwhere, output=text)
            elif role == "assistant" and kind == "tool_use":
                call_id, name = block.get("id"), block.get("name")
                if not isinstance(call_id, str) or not call_id or not isinstance(name, str):
                    raise InvalidMessageError(f"{bwhere} needs an id and a name")
                tool_input = block.get("input") if block.get("input") is not None else {}
                out.call(message, tool_call_part(call_id, name, tool_input, dynamic=dynamic))
            elif role == "assistant" and kind == "thinking":
                message["parts"].append(
                    {
                        "type": "reasoning",
                        "text": str(block.get("thinking", "")),
                        "providerMetadata": {"anthropic": {"signature": block.get("signature")}},
                    }
                )
            elif role == "assistant" and kind == "redacted_thinking":
                message["parts"].append(
                    {
                        "type": "reasoning",
                        "text": "",
                        "providerMetadata": {"anthropic": {"redactedData": block.get("data")}},
                    }
                )
            else:
                raise InvalidMessageError(
                    f"{bwhere}.type {kind!r:.40} is not supported in a {role} turn"
                )
    return out.finish()
