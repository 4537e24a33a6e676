"""Evicted media in an OpenAI Agents SDK session (issue 32 item 4), on both backends.

The adapter keeps each input item in ``metadata.openaiItem``; eviction moves the image/file data
of old items out too, ``get_items()`` then sends those blocks as ``input_text`` markers (never
an image URL that is not one), and the items read back from hydrated history are the originals.
"""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from mindstore.integrations.openai_agents import MindstoreSession
from mindstore.integrations.openai_items import items_of
from mindstore.store.base import Store


def image(seed: int) -> str:
    raw = random.Random(seed).randbytes(60_000)
    return "data:image/png;base64," + base64.b64encode(raw).decode()


def turn(i: int) -> list[dict[str, Any]]:
    return [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": f"what is on screen {i}?"},
                {"type": "input_image", "image_url": image(i), "detail": "auto"},
            ],
        },
        {
            "type": "function_call",
            "call_id": f"c{i}",
            "name": "screenshot",
            "arguments": "{}",
        },
        {
            "type": "function_call_output",
            "call_id": f"c{i}",
            "output": [{"type": "input_image", "image_url": image(100 + i)}],
        },
    ]


async def test_agents_items_send_markers_and_hydrate_exactly(store: Store, tmp_path: Path) -> None:
    sdk = MindstoreSession("agent", store)
    items = [item for i in range(3) for item in turn(i)]
    await sdk.add_items(items)

    report = await sdk.session.evict_media(
        older_than_messages=3, min_bytes=16 * 1024, blob_store=str(tmp_path / "media")
    )
    assert report.messages == 4  # the user turns and tool outputs of the first two rounds
    rows = await store.all_messages(sdk.session.key)
    assert sum(r.nbytes for r in rows[:6]) < 8 * 1024  # image data gone from parts and items
    assert all(r.nbytes > 80_000 for r in rows[6:] if r.message["role"] != "assistant")

    sent = await sdk.get_items()
    text = json.dumps(sent)
    assert "data:image/png" not in json.dumps(sent[:6])  # old rounds: markers only
    assert text.count("[evicted image/png") == 4
    first_user = sent[0]["content"]
    assert first_user[0] == {"type": "input_text", "text": "what is on screen 0?"}
    assert first_user[1]["type"] == "input_text"
    assert first_user[1]["text"].startswith("[evicted image/png, ")
    assert sent[2]["output"][0]["type"] == "input_text"
    assert sent[6:] == items[6:]  # the tail round is sent as it was given

    hydrated = items_of(await sdk.session.get_history(hydrate=True))
    assert hydrated == items
    assert json.dumps(hydrated) == json.dumps(items)
