"""MindstoreSession with the OpenAI Agents SDK itself, on both backends.

A scripted ``Model`` (no network) drives ``Runner.run`` over several turns with a tool call and
a handoff; the SDK's session behaviours (``get_items(limit)`` order, ``pop_item`` on empty,
``clear_session``, isolation of concurrent sessions) are checked as its own session tests do;
every input item type round-trips exactly and lands as UIMessages that search, the converters
and compaction understand.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import warnings
from collections.abc import AsyncIterator
from typing import Any

import openai.types.chat as oc
import pytest
from agents import (
    Agent,
    Model,
    ModelResponse,
    RunConfig,
    Runner,
    SQLiteSession,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.memory import Session as SDKSession
from agents.memory import SessionSettings
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from openai_agents_items import ALL_ITEMS

from backends import drop_schema, new_schema_name, postgres_url_or_skip
from mindstore import (
    InvalidMessageError,
    Session,
    UnserialisableValueError,
    create_compact_function,
)
from mindstore.formats import to_anthropic, to_openai_chat, to_openai_responses
from mindstore.integrations.openai_agents import MindstoreSession
from mindstore.integrations.openai_items import ITEM_KEY
from mindstore.store.base import Store

set_tracing_disabled(True)


def say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{abs(hash(text)) % 10**8}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def call(name: str, args: dict[str, Any], call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", call_id=call_id, name=name, arguments=json.dumps(args)
    )


class ScriptedModel(Model):
    """Replies from a script; records the input it was given on every call."""

    def __init__(self, script: list[list[Any]]) -> None:
        self.script = list(script)
        self.inputs: list[list[Any]] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kw: Any):  # type: ignore[no-untyped-def]
        self.inputs.append(list(input) if isinstance(input, list) else [input])
        return ModelResponse(output=self.script.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


@function_tool
def get_weather(city: str) -> str:
    """Weather of a city."""
    return f"18 C and sunny in {city}"


def test_implements_the_sdk_protocol(tmp_path: Any) -> None:
    from mindstore import SQLiteStore

    assert isinstance(MindstoreSession("s", SQLiteStore(tmp_path / "p.db")), SDKSession)


async def test_runner_over_several_turns_with_a_tool_and_a_handoff(store: Store) -> None:
    model = ScriptedModel(
        [
            [call("get_weather", {"city": "Paris"}, "call_w")],
            [say("It is 18 C and sunny in Paris.")],
            [call("transfer_to_french_agent", {}, "call_h")],
            [say("Il fait beau à Paris.")],
            [say("Merci, au revoir.")],
        ]
    )
    french = Agent(name="French agent", instructions="Réponds en français.", model=model)
    agent = Agent(
        name="Assistant", instructions="Be brief.", model=model, tools=[get_weather],
        handoffs=[french],
    )  # fmt: skip
    session = MindstoreSession("chat-1", store, namespace="user-7")
    first = await Runner.run(agent, "Weather in Paris?", session=session)
    assert first.final_output == "It is 18 C and sunny in Paris."
    second = await Runner.run(agent, "Now in French please", session=session)
    assert second.final_output == "Il fait beau à Paris."
    third = await Runner.run(second.last_agent, "Thanks", session=session)
    assert third.final_output == "Merci, au revoir."

    # Later turns saw the earlier ones, read back from the store.
    seen = model.inputs[2]
    assert seen[0] == {"content": "Weather in Paris?", "role": "user"}
    assert any(i.get("type") == "function_call_output" for i in seen)
    assert any(i.get("call_id") == "call_w" for i in model.inputs[4])

    items = await MindstoreSession("chat-1", store, namespace="user-7").get_items()
    kinds = [i.get("type", "message") for i in items]
    assert kinds.count("function_call") == 2 and kinds.count("function_call_output") == 2
    assert items[-1]["content"][0]["text"] == "Merci, au revoir."

    # The conversation is an ordinary mindstore session: history, search, converters.
    history = await Session.create(store, "chat-1", namespace="user-7").get_history()
    assert len(history) == len(items)
    assert history[0]["role"] == "user" and history[0]["parts"][0]["text"] == "Weather in Paris?"
    hits = await Session.create(store, "chat-1", namespace="user-7").search("sunny")
    assert hits
    chat = to_openai_chat(history)
    for m in chat:
        pytest.importorskip("pydantic").TypeAdapter(oc.ChatCompletionMessageParam).validate_python(
            m
        )
    calls = [c["id"] for m in chat for c in m.get("tool_calls", [])]
    results = [m["tool_call_id"] for m in chat if m["role"] == "tool"]
    assert calls == results == ["call_w", "call_h"]


async def test_every_item_type_round_trips_exactly(store: Store) -> None:
    session = MindstoreSession("all", store)
    await session.add_items(ALL_ITEMS[:9])
    for item in ALL_ITEMS[9:]:
        await session.add_items([item])
    assert await session.get_items() == ALL_ITEMS
    fresh = MindstoreSession("all", store)
    assert await fresh.get_items() == ALL_ITEMS
    assert await fresh.get_items(limit=3) == ALL_ITEMS[-3:]
    for bad in ("3", 1.5, True):  # (Python's own comparison error, or an internal name)
        with pytest.raises(TypeError, match="limit must be an integer or None"):
            await fresh.get_items(limit=bad)  # type: ignore[arg-type]

    history = await Session.create(store, "all").get_history()
    assert [m["metadata"][ITEM_KEY] for m in history] == ALL_ITEMS
    by_kind: dict[str, dict[str, Any]] = {}
    for m in history:
        by_kind.setdefault(m["metadata"][ITEM_KEY].get("type", "easy"), m)
    assert by_kind["function_call"]["parts"][0] == {
        "type": "tool-get_weather",
        "toolCallId": "call_1",
        "state": "input-available",
        "input": {"city": "Paris"},
    }
    output = by_kind["function_call_output"]
    assert output["role"] == "tool" and output["parts"][0]["type"] == "tool-get_weather"
    # An output added in a later batch (here: by another instance) is named after its call.
    handoff = next(m for m in history if m["metadata"][ITEM_KEY].get("call_id") == "call_h")
    later = MindstoreSession("all", store)
    await later.add_items([{"type": "function_call_output", "call_id": "call_h", "output": "x"}])
    last = (await Session.create(store, "all").get_latest_leaf()) or {}
    assert handoff["parts"][0]["type"] == last["parts"][0]["type"]
    assert last["parts"][0]["type"] == "tool-transfer_to_french_agent"
    assert (await later.pop_item()) == {
        "type": "function_call_output",
        "call_id": "call_h",
        "output": "x",
    }
    assert by_kind["reasoning"]["parts"][0]["type"] == "reasoning"
    assert by_kind["web_search_call"]["parts"][0]["providerExecuted"] is True
    assert by_kind["computer_call"]["parts"][0]["type"] == "tool-computer"
    assert by_kind["mcp_call"]["parts"][0]["type"] == "tool-mcp"
    roles = [m["role"] for m in history[:4]]
    assert roles == ["user", "system", "system", "assistant"]
    # Searchable, and every format converter pairs the calls with their results.
    assert await Session.create(store, "all").search("paris weather")
    chat = to_openai_chat(history)
    calls = [c["id"] for m in chat for c in m.get("tool_calls", [])]
    assert calls == [m["tool_call_id"] for m in chat if m["role"] == "tool"]
    assert {"call_1", "call_h", "call_c", "call_cu", "call_sh", "call_ap"} <= set(calls)
    to_anthropic(history)
    to_openai_responses(history)


async def test_get_items_limit_order_and_settings(store: Store) -> None:
    session = MindstoreSession("lim", store, session_settings=SessionSettings(limit=2))
    items = [{"role": "user", "content": f"m{i}"} for i in range(5)]
    await session.add_items(items)
    assert await session.get_items() == items[-2:]  # the settings' default limit
    assert await session.get_items(limit=3) == items[-3:]  # latest N, oldest first
    assert await session.get_items(limit=10) == items
    assert await session.get_items(limit=0) == []
    assert await session.get_items(limit=-1) == items
    unlimited = MindstoreSession("lim", store, session_settings={"limit": None})
    assert await unlimited.get_items() == items


def test_session_settings_are_normalised_like_the_sdks(tmp_path: Any) -> None:
    from mindstore import SQLiteStore

    store = SQLiteStore(tmp_path / "s.db")
    assert MindstoreSession("s", store).session_settings == SessionSettings()
    assert MindstoreSession("s", store, session_settings={"limit": 0}).session_settings == (
        SessionSettings(limit=0)
    )
    with pytest.raises(TypeError, match="limitt"):
        MindstoreSession("s", store, session_settings={"limitt": 1})


async def test_run_config_session_settings_override(store: Store) -> None:
    session = MindstoreSession("over", store, session_settings=SessionSettings(limit=100))
    await session.add_items([{"role": "user", "content": f"Turn {i}"} for i in range(10)])
    model = ScriptedModel([[say("Got it")]])
    await Runner.run(
        Agent(name="a", model=model),
        "New question",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=2)),
    )
    history = [i for i in model.inputs[-1] if i.get("content") != "New question"]
    assert [i["content"] for i in history] == ["Turn 8", "Turn 9"]


async def test_unicode_and_sql_like_content(store: Store) -> None:
    session = MindstoreSession("u", store)
    items = [
        {"role": "user", "content": "héllo 🌍 こんにちは"},
        {"role": "assistant", "content": "'; DROP TABLE messages; --"},
        {"role": "user", "content": '\x00-free but \n escaped " quotes'},
    ]
    await session.add_items(items)
    assert await session.get_items() == items
    assert await session.session.search("こんにちは")


async def test_pop_item_and_clear_session(store: Store) -> None:
    session = MindstoreSession("pop", store)
    assert await session.pop_item() is None
    assert await session.get_items(limit=3) == []
    assert await session.get_items() == []
    items = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    await session.add_items(items)
    assert await session.pop_item() == items[1]
    assert await session.get_items() == items[:1]
    assert await session.pop_item() == items[0]
    assert await session.pop_item() is None
    await session.add_items(items)
    other = MindstoreSession("keep", store)
    await other.add_items(items)
    await session.clear_session()
    assert await session.get_items() == []
    assert await other.get_items() == items
    await session.add_items(items[:1])  # usable after clearing
    assert await session.get_items() == items[:1]


@pytest.mark.parametrize(
    "bad",
    [42, {"content": "no role, no type"}, {"role": "wizard", "content": "x"},
     {"role": "user", "content": float("nan")}],
)  # fmt: skip
async def test_bad_items_are_refused_and_nothing_is_written(store: Store, bad: Any) -> None:
    session = MindstoreSession("bad", store)
    with pytest.raises(InvalidMessageError):
        await session.add_items([{"role": "user", "content": "fine"}, bad])
    assert await session.get_items() == []


async def test_a_cancelled_add_items_still_completes(store: Store) -> None:
    session = MindstoreSession("cancel", store)
    items = [{"role": "user", "content": f"c{i}"} for i in range(50)]
    task = asyncio.create_task(session.add_items(items))
    await asyncio.sleep(0)  # started: the write is under way
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await session.get_items() == items  # all of it, not a rolled-back half


async def test_concurrent_sessions_are_isolated(store: Store) -> None:
    sessions = [
        MindstoreSession(sid, store, namespace=ns) for sid in ("a", "b") for ns in ("n1", "n2")
    ]

    async def write(i: int, s: MindstoreSession) -> None:
        for j in range(10):
            await s.add_items([{"role": "user", "content": f"{i}-{j}"}])

    await asyncio.gather(*(write(i, s) for i, s in enumerate(sessions)))
    for i, s in enumerate(sessions):
        assert [x["content"] for x in await s.get_items()] == [f"{i}-{j}" for j in range(10)]


async def test_compaction_reads_back_as_a_summary_item(store: Store) -> None:
    session = MindstoreSession("long", store)
    session.session.on_compaction(
        create_compact_function(
            summarize=lambda prompt: "The user counted to six.", protect_head=1,
            tail_token_budget=0,
        )
    )  # fmt: skip
    await session.add_items(
        [{"role": "user" if i % 2 == 0 else "assistant", "content": f"n{i}"} for i in range(8)]
    )
    assert await session.session.compact() is not None
    items = await session.get_items()
    assert items[0] == {"role": "user", "content": "n0"}
    assert items[1]["role"] == "user"
    assert "The user counted to six." in items[1]["content"]
    assert len(items) < 8


async def test_same_speed_class_as_sqlite_session_api(store: Store) -> None:
    # The SDK's own session and ours answer the same calls the same way.
    ours = MindstoreSession("same", store)
    theirs = SQLiteSession("same")
    for s in (ours, theirs):
        await s.add_items(ALL_ITEMS[:5])
        await s.add_items(ALL_ITEMS[5:8])
    assert await ours.get_items() == await theirs.get_items()
    assert await ours.get_items(limit=4) == await theirs.get_items(limit=4)
    assert await ours.pop_item() == await theirs.pop_item()
    assert await ours.get_items() == await theirs.get_items()
    theirs.close()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_run_sync_with_a_sync_store(backend: str, tmp_path: Any) -> None:
    # Plain code: the store opened without asyncio (mindstore.sync), the agent run with
    # Runner.run_sync (on the thread's default loop); every session call runs on the store's
    # own loop thread, where its PostgreSQL pool lives.
    import mindstore.sync as msync

    if backend == "sqlite":
        store = msync.SQLiteStore(tmp_path / "sync.db")
        cleanup = None
    else:
        url = postgres_url_or_skip()
        schema = new_schema_name()
        store = msync.PostgresStore.open(url, schema=schema, min_size=1, max_size=2)
        cleanup = (url, schema)
    try:
        model = ScriptedModel([[say("one")], [say("two")]])
        agent = Agent(name="a", model=model)
        session = MindstoreSession("plain", store)
        assert Runner.run_sync(agent, "first", session=session).final_output == "one"
        assert Runner.run_sync(agent, "second", session=session).final_output == "two"
        assert [i.get("content") for i in model.inputs[1]][:1] == ["first"]
        texts = [m["parts"][0]["text"] for m in msync.Session.create(store, "plain").get_history()]
        assert texts == ["first", "one", "second", "two"]
    finally:
        store.close()
        # run_sync leaves the thread's default loop open on purpose (the SDK reuses it).
        policy = asyncio.get_event_loop_policy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            policy.get_event_loop().close()
        policy.set_event_loop(None)
        if cleanup is not None:
            asyncio.run(drop_schema(*cleanup))


def test_import_without_the_extra_names_it() -> None:
    code = (
        "import sys; sys.modules['agents'] = None\n"
        "try:\n"
        "    import mindstore.integrations.openai_agents\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.startswith("MissingDependencyError") and "mindstore[openai-agents]" in out


async def _pop_all(session: MindstoreSession) -> list[Any]:
    """Pop until empty, checking at each step that exactly the last item left."""
    popped: list[Any] = []
    while True:
        before = await session.get_items()
        item = await session.pop_item()
        after = await session.get_items()
        if item is None:
            assert before == after == []
            return popped
        assert item == before[-1]
        assert after == before[:-1]  # the others stay
        for limit in (1, 2, 3):  # a window that starts inside a shortened run reads the same
            assert await session.get_items(limit=limit) == (after[-limit:] if after else [])
        popped.append(item)


async def test_pop_item_of_a_multi_item_message_removes_only_that_item(store: Store) -> None:
    cs = MindstoreSession("multi", store)
    await cs.add_items([{"role": "user", "content": "hello"}])
    await Session.create(store, "multi").append_message(
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "text": "from mindstore"},
                {"type": "tool-x", "toolCallId": "t1", "state": "output-available",
                 "input": {"a": 1}, "output": "done"},
            ],
        }
    )  # fmt: skip
    items = await cs.get_items()
    assert len(items) == 4
    assert await cs.pop_item() == items[-1]
    assert await cs.get_items() == items[:-1]
    # The stored message lost just the result: search and the converters see the call.
    leaf = await cs.session.get_latest_leaf()
    assert leaf is not None
    assert leaf["parts"][1]["state"] == "input-available"
    assert "output" not in leaf["parts"][1]
    assert await cs.get_items(limit=2) == items[1:3]
    # A new turn after the pop reads after the shortened message.
    await cs.add_items([{"role": "user", "content": "next"}])
    assert await cs.get_items() == [*items[:-1], {"role": "user", "content": "next"}]
    assert await _pop_all(cs) == [{"role": "user", "content": "next"}, *items[-2::-1]]
    assert await cs.session.get_history() == []


async def test_pop_item_of_results_answering_an_earlier_message(store: Store) -> None:
    # An imported conversation: the calls in one message, their results in the next.
    session = Session.create(store, "imported")
    await session.append_message({"role": "user", "parts": [{"type": "text", "text": "q"}]})
    await session.append_message(
        {
            "role": "assistant",
            "parts": [
                {"type": "tool-x", "toolCallId": f"t{i}", "state": "input-available",
                 "input": {"a": i}}
                for i in (1, 2)
            ],
        }
    )  # fmt: skip
    await session.append_message(
        {
            "role": "tool",
            "parts": [
                {"type": "tool-x", "toolCallId": f"t{i}", "state": "output-available",
                 "input": None, "output": i}
                for i in (1, 2)
            ],
        }
    )  # fmt: skip
    cs = MindstoreSession("imported", store)
    items = await cs.get_items()
    assert [i.get("type", "message") for i in items] == [
        "message", "function_call", "function_call", "function_call_output",
        "function_call_output",
    ]  # fmt: skip
    assert await _pop_all(cs) == items[::-1]
    assert await session.get_history() == []


async def test_concurrent_pop_items_return_different_items(store: Store) -> None:
    cs = MindstoreSession("race", store)
    await Session.create(store, "race").append_message(
        {
            "role": "assistant",
            "parts": [{"type": "text", "text": f"part {i}"} for i in range(6)],
        }
    )
    items = await cs.get_items()
    assert len(items) == 6
    others = [MindstoreSession("race", store) for _ in range(3)]
    popped = await asyncio.gather(*(s.pop_item() for s in [cs, *others]))
    assert sorted(map(json.dumps, popped)) == sorted(map(json.dumps, items[-4:]))
    assert await cs.get_items() == items[:2]


@pytest.mark.parametrize(
    "bad",
    [{"role": "user", "content": object()},
     {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "x": {1, 2}},
     {"role": "user", "content": [{"type": "input_text", "text": b"bytes"}]},
     {"type": "function_call_output", "call_id": "c", "output": {(1, 2): "tuple key"}}],
)  # fmt: skip
async def test_unserialisable_items_raise_what_the_sdk_raises(
    store: Store, bad: Any, tmp_path: Any
) -> None:
    # The SDK's own session raises TypeError for such an item: so do we (and it is still an
    # InvalidMessageError); nothing of the batch is written.
    theirs = SQLiteSession("t", str(tmp_path / "sdk.db"))
    with pytest.raises(TypeError):
        await theirs.add_items([bad])
    ours = MindstoreSession("unserialisable", store)
    with pytest.raises(TypeError) as caught:
        await ours.add_items([{"role": "user", "content": "fine"}, bad])
    assert isinstance(caught.value, InvalidMessageError)
    assert isinstance(caught.value, UnserialisableValueError)
    assert await ours.get_items() == []
    assert await ours.session.get_history() == []
