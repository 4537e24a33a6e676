"""The example agents, run for real: official SDK client, real HTTP, real SQLite, real processes.

Each example runs as a subprocess three times against one SQLite file and a scripted
OpenAI- (resp. Anthropic-) compatible server on 127.0.0.1:

1. session ``monday``, two turns: the model saves a fact to ``memory`` (``set_context``), then
   indexes a runbook in ``knowledge`` and searches it (``search_context``) in one step;
2. a new process, session ``tuesday`` of the same namespace: its fresh prompt shows the memory
   written by process 1 and ``search_context`` finds the runbook indexed by process 1;
3. a new process, session ``monday`` again: the same frozen prompt as in process 1 (persisted
   with ``with_cached_prompt``) and the whole earlier conversation is sent.

The server records every request, so the test checks the system prompt never changed within a
session (although memory was written mid-turn), tool results went back paired with their calls,
and afterwards the store holds every call paired with its result.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mindstore import SQLiteStore
from mindstore.formats import to_anthropic, to_openai_chat
from mindstore.messages import is_tool_part
from mindstore.tokens import estimate_string_tokens

ROOT = Path(__file__).resolve().parents[2]
FACT = "User drinks green tea."
RUNBOOK = "To restart the API run make restart, then check /health."


class OpenAIFlavor:
    name = "openai"
    path = "/v1/chat/completions"
    example = ROOT / "examples" / "openai_agent.py"

    @staticmethod
    def env(url: str) -> dict[str, str]:
        return {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "test-key"}

    @staticmethod
    def call_id(n: int) -> str:
        return f"call_{n}"

    @staticmethod
    def reply(
        text: str | None = None, calls: tuple[tuple[str, str, dict[str, Any]], ...] = ()
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        if calls:
            message["tool_calls"] = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for cid, name, args in calls
            ]
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 1700000000,
            "model": "scripted",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                    "logprobs": None,
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    @staticmethod
    def system(body: dict[str, Any]) -> str:
        first = body["messages"][0]
        assert first["role"] == "system"
        assert all(m["role"] != "system" for m in body["messages"][1:])
        return str(first["content"])

    @staticmethod
    def tool_results(body: dict[str, Any]) -> dict[str, str]:
        messages = body["messages"]
        results: dict[str, str] = {}
        for i, m in enumerate(messages):
            if m["role"] == "tool":
                # paired: the closest preceding non-tool message is the assistant that called it
                j = i - 1
                while messages[j]["role"] == "tool":
                    j -= 1
                assert m["tool_call_id"] in [c["id"] for c in messages[j].get("tool_calls", [])]
                results[m["tool_call_id"]] = m["content"]
        return results

    @staticmethod
    def tool_names(body: dict[str, Any]) -> list[str]:
        return [t["function"]["name"] for t in body["tools"]]

    @staticmethod
    def user_texts(body: dict[str, Any]) -> list[str]:
        return [m["content"] for m in body["messages"] if m["role"] == "user"]


class AnthropicFlavor:
    name = "anthropic"
    path = "/v1/messages"
    example = ROOT / "examples" / "anthropic_agent.py"

    @staticmethod
    def env(url: str) -> dict[str, str]:
        return {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "test-key"}

    @staticmethod
    def call_id(n: int) -> str:
        return f"toolu_{n}"

    @staticmethod
    def reply(
        text: str | None = None, calls: tuple[tuple[str, str, dict[str, Any]], ...] = ()
    ) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if text:
            content.append({"type": "text", "text": text})
        content += [
            {"type": "tool_use", "id": cid, "name": name, "input": args}
            for cid, name, args in calls
        ]
        return {
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": "scripted",
            "content": content,
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }

    @staticmethod
    def system(body: dict[str, Any]) -> str:
        (block,) = body["system"]
        assert block["cache_control"] == {"type": "ephemeral"}  # the frozen prefix is cached
        return str(block["text"])

    @staticmethod
    def tool_results(body: dict[str, Any]) -> dict[str, str]:
        messages = body["messages"]
        results: dict[str, str] = {}
        for i, m in enumerate(messages):
            blocks = [b for b in m["content"] if b["type"] == "tool_result"]
            if blocks:
                uses = [b["id"] for b in messages[i - 1]["content"] if b["type"] == "tool_use"]
                assert m["role"] == "user" and [b["tool_use_id"] for b in blocks] == uses
                results.update({b["tool_use_id"]: b["content"] for b in blocks})
        return results

    @staticmethod
    def tool_names(body: dict[str, Any]) -> list[str]:
        return [t["name"] for t in body["tools"]]

    @staticmethod
    def user_texts(body: dict[str, Any]) -> list[str]:
        return [
            b["text"]
            for m in body["messages"]
            if m["role"] == "user"
            for b in m["content"]
            if b["type"] == "text"
        ]


def run_example(flavor: Any, url: str, db: Path, session: str, *turns: str) -> str:
    env = {
        k: v
        for k, v in os.environ.items()
        if k.upper() not in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
        and not k.upper().startswith(("OPENAI_", "ANTHROPIC_"))
    }
    env.update(flavor.env(url))
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env["MINDSTORE_EXAMPLE_MODEL"] = "scripted"
    proc = subprocess.run(
        [
            sys.executable,
            "-W",
            "error",
            str(flavor.example),
            "--db",
            str(db),
            "--session",
            session,
            *turns,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 0, f"example failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def load_example(flavor: Any) -> Any:
    spec = importlib.util.spec_from_file_location(f"example_{flavor.name}", flavor.example)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("flavor", [OpenAIFlavor, AnthropicFlavor], ids=lambda f: f.name)
def test_agent_loop_across_process_starts(
    flavor: Any, scripted_server: Any, tmp_path: Path
) -> None:
    server = scripted_server(flavor.path)
    db = tmp_path / "agent.db"
    c = flavor.call_id
    server.script(
        # process 1, turn 1: save a fact, then answer
        flavor.reply(
            "Saving that.",
            ((c(1), "set_context", {"label": "memory", "content": FACT, "action": "append"}),),
        ),
        flavor.reply("Noted: green tea."),
        # process 1, turn 2: index a runbook and search it in one step, then answer
        flavor.reply(
            None,
            (
                (
                    c(2),
                    "set_context",
                    {
                        "label": "knowledge",
                        "content": RUNBOOK,
                        "metadata": {"title": "Deploy runbook"},
                    },
                ),
                (c(3), "search_context", {"label": "knowledge", "query": "restart API"}),
            ),
        ),
        flavor.reply("Indexed the runbook."),
    )
    out1 = run_example(
        flavor, server.url, db, "monday", "Hi! I drink green tea.", "Note the deploy runbook."
    )
    assert "Noted: green tea." in out1 and "Indexed the runbook." in out1
    assert len(server.requests) == 4 and not server.replies

    # process 2: a new conversation in the same namespace
    server.script(
        flavor.reply(None, ((c(4), "search_context", {"label": "knowledge", "query": "restart"}),)),
        flavor.reply("Run make restart. And you drink green tea."),
    )
    out2 = run_example(flavor, server.url, db, "tuesday", "How do I restart the API?")
    assert "Run make restart" in out2

    # process 3: back to the first conversation
    server.script(flavor.reply("You're welcome."))
    run_example(flavor, server.url, db, "monday", "Thanks!")
    assert not server.errors and not server.replies
    r = server.requests
    assert len(r) == 7

    # Tools were offered on every request.
    assert all({"set_context", "search_context"} <= set(flavor.tool_names(b)) for b in r)

    # The prompt stayed frozen within each turn and across the session, although memory and
    # knowledge were written mid-turn; a new process reuses the persisted frozen prompt.
    monday = flavor.system(r[0])
    assert [flavor.system(b) for b in (r[1], r[2], r[3], r[6])] == [monday] * 4
    assert FACT not in monday and "0 entries indexed." in monday
    # A new conversation renders afresh: the memory written by process 1 is in its prompt.
    tuesday = flavor.system(r[4])
    assert flavor.system(r[5]) == tuesday
    assert FACT in tuesday and "1 entry indexed." in tuesday and "deploy-runbook" in tuesday

    # Tool results went back paired with their calls, with the tools' real outputs.
    assert flavor.tool_results(r[1]) == {
        c(1): f"Written to memory. Usage: 1% ({estimate_string_tokens(FACT)}/500 tokens)"
    }
    results = flavor.tool_results(r[3])
    assert results[c(2)] == 'Indexed "deploy-runbook" in knowledge.'
    assert "make restart" in results[c(3)]
    assert "make restart" in flavor.tool_results(r[5])[c(4)]  # found across a process start

    # Process 3 sent the whole earlier conversation of that session.
    assert flavor.user_texts(r[6]) == [
        "Hi! I drink green tea.",
        "Note the deploy runbook.",
        "Thanks!",
    ]
    assert set(flavor.tool_results(r[6])) == {c(1), c(2), c(3)}

    asyncio.run(check_store(flavor, db))


async def check_store(flavor: Any, db: Path) -> None:
    example = load_example(flavor)
    async with SQLiteStore(db) as store:
        monday = example.build_session(store, "monday", "default")
        block = await monday.get_context_block("memory")
        assert block is not None and block.content == FACT
        history = await monday.get_history()
        assert [m["role"] for m in history] == [
            "user",
            "assistant",
            "tool",
            "assistant",  # turn 1
            "user",
            "assistant",
            "tool",
            "assistant",  # turn 2
            "user",
            "assistant",  # process 3
        ]
        calls: dict[str, dict[str, Any]] = {}
        results: dict[str, dict[str, Any]] = {}
        for message in history:
            for part in message["parts"]:
                if not is_tool_part(part):
                    continue
                if message["role"] == "assistant":
                    assert part["state"] == "input-available"
                    calls[part["toolCallId"]] = part
                else:
                    assert message["role"] == "tool" and part["state"] == "output-available"
                    assert part["toolCallId"] in calls, "result stored before its call"
                    results[part["toolCallId"]] = part
        assert set(calls) == set(results) == {flavor.call_id(n) for n in (1, 2, 3)}
        for cid, result in results.items():
            assert result["type"] == calls[cid]["type"] and result["input"] == calls[cid]["input"]
        # and the stored history converts back with every call paired
        chat = to_openai_chat(history)
        assert sum(len(m.get("tool_calls", [])) for m in chat) == 3
        assert sum(m["role"] == "tool" for m in chat) == 3
        _, anthropic_messages = to_anthropic(history)
        uses = [b for m in anthropic_messages for b in m["content"] if b["type"] == "tool_use"]
        assert len(uses) == 3
