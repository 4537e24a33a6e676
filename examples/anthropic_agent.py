"""A small agent with persistent memory: mindstore + the official ``anthropic`` SDK.

Every user message, assistant reply, tool call and tool result is stored in a SQLite file, so
the conversation survives restarts; the agent manages its own memory with the generated tools
(``set_context`` writes the ``memory`` scratch-pad or indexes an entry in the ``knowledge``
base, ``search_context`` searches it). The system prompt is rendered once and frozen (persisted
with ``with_cached_prompt``), so the provider's prefix cache stays warm turn after turn.

Run it (the SDK reads ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL``)::

    python examples/anthropic_agent.py --db agent.db --session monday "Hi! I drink green tea."
    python examples/anthropic_agent.py --db agent.db --session tuesday "What do I drink?"

Each positional argument is one user turn. ``memory`` is namespace-wide (a user profile shared
by every conversation); ``knowledge`` is a full-text-searchable knowledge base, also shared.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from anthropic import AsyncAnthropic

from mindstore import Session, SQLiteStore, StaticProvider, StoreSearchProvider
from mindstore.formats import from_anthropic, to_anthropic
from mindstore.messages import is_tool_part, tool_name

SOUL = (
    "You are a helpful assistant with a persistent memory. Save durable facts about the user "
    "to the memory block with set_context, index longer notes in the knowledge base, and "
    "search it with search_context before saying you do not know."
)


def build_session(store: SQLiteStore, session_id: str, namespace: str) -> Session:
    """The agent's memory layout: identity, a budgeted scratch-pad and a knowledge base."""
    return (
        Session.create(store, session_id=session_id, namespace=namespace)
        .with_context("soul", provider=StaticProvider(SOUL))
        .with_context(
            "memory",
            description="Important facts about the user",
            max_tokens=500,
            scope="namespace",
        )
        .with_context(
            "knowledge",
            description="Searchable knowledge base",
            provider=StoreSearchProvider(store),
        )
        .with_cached_prompt()
    )


def reply_text(message: dict[str, Any]) -> str:
    return "".join(p["text"] for p in message["parts"] if p["type"] == "text")


async def run_turn(
    session: Session, client: AsyncAnthropic, model: str, text: str, *, max_steps: int = 8
) -> str:
    """One user turn: call the model, execute the tools it asks for, until it answers."""
    await session.append_message({"role": "user", "parts": [{"type": "text", "text": text}]})
    system = await session.freeze_system_prompt()  # identical for every request of the turn
    tools = await session.tools()
    for _ in range(max_steps):
        history = await session.get_history()
        system_text, messages = to_anthropic(history, system=system)
        response = await client.messages.create(
            model=model,
            max_tokens=1024,
            # Anthropic caches a prefix only up to an explicit breakpoint: mark the frozen system
            # prompt (tools and system are the cached prefix; they never change within a turn).
            system=[
                {"type": "text", "text": system_text or "", "cache_control": {"type": "ephemeral"}}
            ],
            messages=messages,  # type: ignore[arg-type]
            tools=tools.to_anthropic(),  # type: ignore[arg-type]
        )
        reply = from_anthropic(response)
        await session.append_message(reply)
        calls = [p for p in reply["parts"] if is_tool_part(p)]
        if not calls:
            return reply_text(reply)
        # Execute every call and store the results as one tool message, each result in a part
        # carrying the call's toolCallId, so the pair can never be separated.
        results = []
        for call in calls:
            output = await tools.execute(tool_name(call), call.get("input"))
            results.append({**call, "state": "output-available", "output": output})
        await session.append_message({"role": "tool", "parts": results})
    return "(stopped: too many tool steps)"


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="agent.db")
    parser.add_argument("--session", default="default")
    parser.add_argument("--namespace", default="default")
    parser.add_argument(
        "--model", default=os.environ.get("MINDSTORE_EXAMPLE_MODEL", "claude-sonnet-4-5")
    )
    parser.add_argument("messages", nargs="+", help="user turns, in order")
    args = parser.parse_args(argv)

    async with SQLiteStore(args.db) as store, AsyncAnthropic() as client:
        session = build_session(store, args.session, args.namespace)
        for text in args.messages:
            print(f"> {text}")
            print(await run_turn(session, client, args.model, text))


if __name__ == "__main__":
    asyncio.run(main())
