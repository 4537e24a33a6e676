"""An OpenAI Agents SDK agent whose memory is mindstore: history, prompt and memory tools.

One mindstore session is the agent's whole state:

- the conversation (``MindstoreSession``: every item the SDK writes, searchable and compactable);
- its identity, memory and skills as context blocks rendered into a frozen system prompt
  (``memory_instructions``), so the provider's prefix cache stays warm;
- the tools to manage that memory (``memory_tools``: ``set_context``, ``load_context``,
  ``unload_context``) and ``session_search`` over every past conversation of the user.

``memory`` is namespace-wide: a fact written in Monday's conversation is in Tuesday's prompt.

Run it (the SDK reads ``OPENAI_API_KEY``; each positional argument is one user turn)::

    python examples/memory_agent.py --db agent.db --session monday "Hi! I drink green tea."
    python examples/memory_agent.py --db agent.db --session tuesday "How should I brew my tea?"
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from agents import Agent, Model, Runner

from mindstore import FileSkillProvider, SessionManager, SQLiteStore, StaticProvider
from mindstore.integrations.openai_agents import (
    MindstoreSession,
    memory_instructions,
    memory_tools,
)
from mindstore.store.base import Store

SKILLS = Path(__file__).resolve().parent / "skills"

SOUL = (
    "You are a helpful assistant with a persistent memory. Save durable facts about the user "
    "to the memory block with set_context; load a skill before answering from it; search past "
    "conversations with session_search before saying you do not know."
)


async def build_agent(
    store: Store,
    session_id: str,
    *,
    namespace: str = "default",
    model: str | Model | None = None,
    skills: Path = SKILLS,
) -> tuple[Agent[Any], MindstoreSession]:
    """The agent and the SDK session of one conversation (pass both to ``Runner.run``)."""
    conversation = MindstoreSession(session_id, store, namespace=namespace)
    # The SDK session's own mindstore session holds the blocks: one conversation, one state.
    memory = (
        conversation.session.with_context("soul", provider=StaticProvider(SOUL))
        .with_context(
            "memory",
            description="Important facts about the user",
            max_tokens=500,
            scope="namespace",
        )
        .with_context("skills", provider=FileSkillProvider(skills))
        .with_cached_prompt()
    )
    history = SessionManager(store, namespace=namespace)
    agent: Agent[Any] = Agent(
        name="Assistant",
        instructions=memory_instructions(memory),
        tools=await memory_tools(memory) + await memory_tools(history),
        model=model,
    )
    return agent, conversation


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="agent.db")
    parser.add_argument("--session", default="default")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--model", default=None)
    parser.add_argument("turns", nargs="+")
    args = parser.parse_args(argv)
    async with SQLiteStore(args.db) as store:
        agent, conversation = await build_agent(
            store, args.session, namespace=args.namespace, model=args.model
        )
        for turn in args.turns:
            result = await Runner.run(agent, turn, session=conversation)
            print(result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
