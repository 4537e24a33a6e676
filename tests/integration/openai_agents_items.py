"""One input item of every kind the OpenAI Agents SDK puts in a session (all valid
``ResponseInputItemParam`` values), for the round-trip tests and the benchmark."""

from __future__ import annotations

import base64
from typing import Any

PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG" + b"\x00" * 6000).decode()

ALL_ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "system", "content": "Be brief."},
    {"role": "developer", "content": "Answer in French.", "type": "message"},
    {"role": "assistant", "content": "Bonjour."},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "Look at this"},
            {"type": "input_image", "image_url": PNG, "detail": "high"},
            {
                "type": "input_file",
                "file_data": "data:application/pdf;base64,JVBERi0=",
                "filename": "a.pdf",
            },
            {"type": "input_file", "file_id": "file-123"},
        ],
    },
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "Il fait beau.", "annotations": []},
            {"type": "refusal", "refusal": "I can't do that part."},
        ],
    },
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Thinking about the weather"}],
        "encrypted_content": "gAAAA",
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "18 C, sunny"},
    {
        "type": "function_call",
        "call_id": "call_h",
        "name": "transfer_to_french_agent",
        "arguments": "{}",
    },
    {
        "type": "function_call_output",
        "call_id": "call_h",
        "output": [{"type": "input_text", "text": '{"assistant": "French Agent"}'}],
    },
    {"type": "custom_tool_call", "call_id": "call_c", "name": "grammar", "input": "x = 1"},
    {"type": "custom_tool_call_output", "call_id": "call_c", "output": "ok"},
    {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "paris weather"},
    },
    {
        "type": "file_search_call",
        "id": "fs_1",
        "status": "completed",
        "queries": ["weather report"],
        "results": [{"file_id": "f1", "filename": "r.txt", "score": 0.5, "text": "sunny"}],
    },
    {
        "type": "computer_call",
        "id": "cu_1",
        "call_id": "call_cu",
        "status": "completed",
        "pending_safety_checks": [],
        "action": {"type": "click", "button": "left", "x": 10, "y": 20},
    },
    {
        "type": "computer_call_output",
        "call_id": "call_cu",
        "output": {"type": "computer_screenshot", "image_url": PNG},
    },
    {
        "type": "local_shell_call",
        "id": "ls_1",
        "call_id": "call_ls",
        "status": "completed",
        "action": {"type": "exec", "command": ["ls"], "env": {}},
    },
    {"type": "local_shell_call_output", "id": "call_ls", "output": "a.txt"},
    {
        "type": "shell_call",
        "call_id": "call_sh",
        "action": {"commands": ["pwd"]},
    },
    {
        "type": "shell_call_output",
        "call_id": "call_sh",
        "output": [{"outcome": {"type": "exit", "exit_code": 0}, "stdout": "/tmp", "stderr": ""}],
    },
    {
        "type": "apply_patch_call",
        "call_id": "call_ap",
        "status": "completed",
        "operation": {"type": "create_file", "path": "a.txt", "diff": "+hi"},
    },
    {"type": "apply_patch_call_output", "call_id": "call_ap", "status": "completed"},
    {
        "type": "code_interpreter_call",
        "id": "ci_1",
        "status": "completed",
        "container_id": "cntr_1",
        "code": "print(1)",
        "outputs": [{"type": "logs", "logs": "1"}],
    },
    {
        "type": "image_generation_call",
        "id": "ig_1",
        "status": "completed",
        "result": base64.b64encode(b"\x89PNG" + b"\x01" * 9000).decode(),
    },
    {
        "type": "mcp_list_tools",
        "id": "ml_1",
        "server_label": "docs",
        "tools": [{"name": "lookup", "input_schema": {"type": "object"}}],
    },
    {
        "type": "mcp_approval_request",
        "id": "mr_1",
        "server_label": "docs",
        "name": "lookup",
        "arguments": '{"q": "x"}',
    },
    {"type": "mcp_approval_response", "approval_request_id": "mr_1", "approve": True},
    {
        "type": "mcp_call",
        "id": "mc_1",
        "server_label": "docs",
        "name": "lookup",
        "arguments": '{"q": "x"}',
        "output": "found it",
    },
    {"type": "item_reference", "id": "msg_0"},
    {"type": "compaction", "encrypted_content": "opaque"},
]
