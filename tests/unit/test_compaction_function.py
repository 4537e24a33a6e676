"""create_compact_function: head/tail planning, tool-call alignment, the summary prompt."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mindstore.compaction.compact_function import (
    CompactContext,
    CompactResult,
    align_boundary_backward,
    align_boundary_forward,
    build_summary_prompt,
    create_compact_function,
    pending_call_index,
)
from mindstore.errors import CompactionError


def text(mid: str, role: str = "user", body: str | None = None) -> dict[str, Any]:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": body or f"text of {mid}"}]}


def sdk_call(mid: str, call: str, *, done: bool = True) -> dict[str, Any]:
    part: dict[str, Any] = {
        "type": "tool-get_status",
        "toolCallId": call,
        "state": "output-available" if done else "input-available",
        "input": {"env": "prod"},
    }
    if done:
        part["output"] = {"status": "green"}
    return {"id": mid, "role": "assistant", "parts": [part]}


def call_only(mid: str, call: str) -> dict[str, Any]:
    part = {"type": "tool-lookup", "toolCallId": call, "state": "input-available", "input": {}}
    return {"id": mid, "role": "assistant", "parts": [part]}


def tool_result(mid: str, call: str) -> dict[str, Any]:
    part = {"type": "tool-lookup", "toolCallId": call, "output": {"rows": [1, 2]}}
    return {"id": mid, "role": "tool", "parts": [part]}


class Recorder:
    def __init__(self, reply: str = "## Topic\nDeploys\n## Key Points\n- ok") -> None:
        self.prompts: list[str] = []
        self.reply = reply

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.reply


async def test_too_short_returns_none() -> None:
    rec = Recorder()
    fn = create_compact_function(summarize=rec)
    assert await fn([text(f"m{i}") for i in range(5)], None) is None
    assert rec.prompts == []


async def test_head_tail_and_middle() -> None:
    rec = Recorder()
    fn = create_compact_function(summarize=rec, protect_head=2, tail_token_budget=0)
    msgs = [text(f"m{i}") for i in range(8)]
    result = await fn(msgs, CompactContext())
    assert result == CompactResult(from_message_id="m2", to_message_id="m5", summary=rec.reply)
    prompt = rec.prompts[0]
    for heading in ("## Topic", "## Key Points", "## Current State", "## Open Items"):
        assert heading in prompt
    assert "text of m2" in prompt and "text of m5" in prompt
    assert "text of m1" not in prompt and "text of m6" not in prompt
    assert "about 100 tokens" in prompt  # 20 % of a tiny middle is below the floor


async def test_tail_budget_keeps_recent_messages() -> None:
    rec = Recorder()
    # every message is 4 + 4 tokens ("text of mX": 3 words * 1.3 -> 4) = 8; 24 keeps three
    fn = create_compact_function(summarize=rec, protect_head=1, tail_token_budget=24)
    result = await fn([text(f"m{i}") for i in range(10)], None)
    assert result is not None and (result.from_message_id, result.to_message_id) == ("m1", "m6")


async def test_target_is_twenty_percent_of_middle() -> None:
    rec = Recorder()
    fn = create_compact_function(summarize=rec, protect_head=1, tail_token_budget=0)
    big = "word " * 800  # 1040 tokens by the word rule
    msgs = [text("m0"), text("m1", body=big), text("m2", body=big), text("m3"), text("m4")]
    await fn(msgs, None)
    assert "about 418 tokens" in rec.prompts[0]  # 0.2 * (2 * (4 + 1040) + 7)


async def test_custom_and_context_token_counters() -> None:
    rec = Recorder()
    seen: list[Any] = []

    async def per_message(message: dict[str, Any]) -> int:
        return 100

    fn = create_compact_function(
        summarize=rec, protect_head=1, tail_token_budget=250, token_counter=per_message
    )
    result = await fn([text(f"m{i}") for i in range(8)], None)
    assert result is not None and result.to_message_id == "m5"  # tail m6, m7 = 200

    def session_counter(messages: list[dict[str, Any]], system: str) -> int:
        seen.append((len(messages), system))
        return 50

    fn = create_compact_function(summarize=rec, protect_head=1, tail_token_budget=120)
    result = await fn(
        [text(f"m{i}") for i in range(8)], CompactContext(token_counter=session_counter)
    )
    assert result is not None and result.to_message_id == "m5"
    assert seen and all(s == (1, "") for s in seen)


async def test_async_summarize_and_non_string_rejected() -> None:
    async def summarize(prompt: str) -> str:
        return "## Topic\nx"

    fn = create_compact_function(summarize=summarize, protect_head=1, tail_token_budget=0)
    assert (await fn([text(f"m{i}") for i in range(5)], None)) is not None

    fn = create_compact_function(summarize=lambda p: 42, protect_head=1, tail_token_budget=0)  # type: ignore[arg-type,return-value]
    with pytest.raises(CompactionError, match="must return a string"):
        await fn([text(f"m{i}") for i in range(5)], None)


def test_alignment_separate_result_messages() -> None:
    msgs = [text("m0"), call_only("m1", "c1"), tool_result("m2", "c1"), text("m3")]
    assert pending_call_index(msgs) is None
    assert align_boundary_forward(msgs, 2) == 3  # cut between call and result moves forward
    assert align_boundary_backward(msgs, 2) == 1  # or backward, keeping them together
    assert align_boundary_forward(msgs, 1) == 1


async def test_head_never_splits_call_from_result() -> None:
    rec = Recorder()
    fn = create_compact_function(summarize=rec, protect_head=2, tail_token_budget=0)
    msgs = [
        text("m0"),
        call_only("m1", "c1"),
        tool_result("m2", "c1"),
        text("m3", "assistant"),
        text("m4"),
        text("m5", "assistant"),
        text("m6"),
        text("m7"),
    ]
    result = await fn(msgs, None)
    assert result is not None and result.from_message_id == "m3"


async def test_tail_never_splits_call_from_result() -> None:
    rec = Recorder()
    fn = create_compact_function(summarize=rec, protect_head=1, tail_token_budget=0)
    msgs = [text(f"m{i}") for i in range(5)] + [call_only("m5", "c1"), tool_result("m6", "c1")]
    result = await fn(msgs, None)
    assert result is not None and result.to_message_id == "m4"  # m5 joins its result m6


async def test_pending_call_never_summarised() -> None:
    rec = Recorder()
    fn = create_compact_function(summarize=rec, protect_head=1, tail_token_budget=0)
    # AI SDK shape: m3 holds a call with no result and the turn is still going (no user message
    # after it); everything from it on stays
    msgs = [
        text("m0"),
        text("m1"),
        sdk_call("m2", "c0"),
        sdk_call("m3", "c1", done=False),
        text("m4", "assistant"),
        text("m5", "assistant"),
        text("m6", "assistant"),
    ]
    assert pending_call_index(msgs) == 3
    result = await fn(msgs, None)
    assert result is not None and result.to_message_id == "m2"
    # separate shape: a call whose result message has not arrived
    msgs = [text(f"m{i}") for i in range(4)] + [
        call_only("m4", "c9"),
        text("m5", "assistant"),
        text("m6", "assistant"),
    ]
    result = await fn(msgs, None)
    assert result is not None and result.to_message_id == "m3"
    # pending call right after the head: nothing to summarise
    msgs = [text("m0"), call_only("m1", "c9"), *(text(f"m{i}", "assistant") for i in range(2, 6))]
    assert await fn(msgs, None) is None
    # ... but once the user has spoken again the call is abandoned, not pending
    msgs = [text("m0"), call_only("m1", "c9"), *(text(f"m{i}") for i in range(2, 6))]
    assert pending_call_index(msgs) is None
    assert await fn(msgs, None) is not None


async def test_ai_sdk_complete_call_is_one_message() -> None:
    rec = Recorder()
    fn = create_compact_function(summarize=rec, protect_head=1, tail_token_budget=0)
    msgs = [text("m0"), sdk_call("m1", "c1"), text("m2"), text("m3"), text("m4")]
    result = await fn(msgs, None)
    assert result is not None and (result.from_message_id, result.to_message_id) == ("m1", "m2")
    prompt = rec.prompts[0]
    assert 'input: {"env":"prod"}' in prompt and 'output: {"status":"green"}' in prompt
    assert "get_status" in prompt


def test_prompt_tool_json_truncated_to_500_chars() -> None:
    big = {"rows": ["x" * 50 for _ in range(100)]}
    msg = {
        "id": "a",
        "role": "assistant",
        "parts": [
            {
                "type": "dynamic-tool",
                "toolName": "query",
                "toolCallId": "c",
                "state": "output-available",
                "input": {"sql": "select 1"},
                "output": big,
            }
        ],
    }
    prompt = build_summary_prompt([msg], target_tokens=100)
    line = next(ln for ln in prompt.splitlines() if "tool query" in ln)
    out = line.split("output: ", 1)[1]
    assert out.startswith(json.dumps(big, separators=(",", ":"))[:500])
    assert out.endswith(
        f"... [truncated {len(json.dumps(big, separators=(',', ':'))) - 500} chars]"
    )
    assert "object at 0x" not in prompt


def test_prompt_labels_tool_lines_once() -> None:
    """Regression: a result message (role "tool") read ``[tool tool set_context]``."""
    call = {
        "id": "a",
        "role": "assistant",
        "parts": [
            {"type": "tool-set_context", "toolCallId": "c", "state": "input-available",
             "input": {"label": "memory"}}
        ],
    }  # fmt: skip
    result = {
        "id": "t",
        "role": "tool",
        "parts": [
            {"type": "tool-set_context", "toolCallId": "c", "state": "output-available",
             "input": None, "output": "ok"}
        ],
    }  # fmt: skip
    lines = build_summary_prompt([call, result], target_tokens=100).splitlines()
    assert any(ln.startswith("[assistant tool set_context] input: ") for ln in lines)
    assert any(ln.startswith("[tool set_context] input: null output: ") for ln in lines)
    assert not any("tool tool" in ln for ln in lines)


async def test_previous_summary_of_this_path_is_updated_not_resummarised() -> None:
    rec = Recorder()
    fn = create_compact_function(summarize=rec, protect_head=3, tail_token_budget=0)
    summary = {
        "id": "compaction_4",
        "role": "assistant",
        "parts": [{"type": "text", "text": "## Topic\nOLD SUMMARY"}],
        "metadata": {"compaction": {"id": 4, "from": "m1", "to": "m7"}},
    }
    msgs = [text("m0"), summary, *(text(f"m{i}") for i in range(8, 15))]
    result = await fn(msgs, None)
    # the head stops before the old summary; the new range starts where the old one started
    assert result is not None
    assert (result.from_message_id, result.to_message_id) == ("m1", "m12")
    prompt = rec.prompts[0]
    assert "<previous_summary>\n## Topic\nOLD SUMMARY\n</previous_summary>" in prompt
    assert "text of m8" in prompt and "text of m13" not in prompt
    conversation = prompt.split("<conversation>")[1]
    assert "OLD SUMMARY" not in conversation  # overlay messages are not part of the middle


async def test_nothing_new_after_summary_returns_none() -> None:
    rec = Recorder()
    fn = create_compact_function(summarize=rec, protect_head=1, tail_token_budget=0)
    summary = {
        "id": "compaction_1",
        "role": "assistant",
        "parts": [{"type": "text", "text": "S"}],
        "metadata": {"compaction": {"id": 1, "from": "m1", "to": "m5"}},
    }
    assert await fn([text("m0"), summary, text("m6"), text("m7")], None) is None


def test_invalid_parameters() -> None:
    with pytest.raises(ValueError):
        create_compact_function(summarize=str, min_tail_messages=0)


async def test_an_abandoned_call_does_not_block_compaction_for_ever() -> None:
    # An early call that never got a result (the user interrupted and spoke again) must not stop
    # every later compaction; a call still waiting at the end of the path is never summarised.
    def text(mid: str, role: str) -> dict[str, Any]:
        return {"id": mid, "role": role, "parts": [{"type": "text", "text": "words " * 40}]}

    abandoned = {
        "id": "o1",
        "role": "assistant",
        "parts": [
            {"type": "tool-run", "toolCallId": "c9", "state": "input-available", "input": {}}
        ],
    }
    messages = [text("u0", "user"), abandoned] + [
        text(f"m{i}", "user" if i % 2 else "assistant") for i in range(30)
    ]
    fn = create_compact_function(
        summarize=lambda prompt: "## Topic\nwork\n## Key Points\nmany words",
        protect_head=1,
        tail_token_budget=10,
        min_tail_messages=1,
    )
    result = await fn(messages, None)
    assert result is not None and result.from_message_id == "o1"

    waiting = {**abandoned, "id": "o2", "parts": [{**abandoned["parts"][0], "toolCallId": "c10"}]}
    result = await fn([*messages, waiting], None)
    assert result is not None and result.to_message_id != "o2"


def test_results_and_blocks_construct_as_the_design_writes_them() -> None:
    """DESIGN writes ``CompactResult(from_message_id, to_message_id, summary)`` and
    ``ContextBlock(label, description, content, tokens, max_tokens, kind)``: positional
    arguments work (they were keyword-only), keywords too."""
    from mindstore.compaction.compact_function import CompactResult
    from mindstore.prompt import ContextBlock

    assert CompactResult("a", "b", "s") == CompactResult(
        from_message_id="a", to_message_id="b", summary="s"
    )
    block = ContextBlock("memory", "notes", "hi", 1, 10, "writable")
    assert (block.label, block.max_tokens, block.kind) == ("memory", 10, "writable")
