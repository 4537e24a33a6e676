"""Contract: old media moved out of the database (DESIGN §14, issue 32 item 4), on every backend.

``Session.evict_media`` moves ``file`` parts with ``data:`` URLs and large tool-output strings
of messages outside the tail to a content-addressed blob store, leaving markers; reads show the
markers, ``hydrate=True`` the original bytes; the search index and token counts follow; a
failure at any step changes nothing it should not. The 200 × 1 MB measurement is
``bench/bench_media.py``; this is its small version.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pytest

from backends import Reopen
from mindstore import MediaNotFoundError, MessageNotFoundError, Session, StoreError
from mindstore.formats import to_anthropic, to_openai_chat, to_openai_responses
from mindstore.manager import SessionManager
from mindstore.media import BlobStore
from mindstore.store.base import Store

KB = 1024


def screenshot(seed: int, size: int = 48 * KB) -> str:
    raw = random.Random(seed).randbytes(size)
    return "data:image/png;base64," + base64.b64encode(raw).decode()


def user_with_image(i: int, size: int = 48 * KB) -> dict[str, Any]:
    return {
        "id": f"u{i}",
        "role": "user",
        "parts": [
            {"type": "text", "text": f"look at screen {i}"},
            {
                "type": "file",
                "mediaType": "image/png",
                "filename": f"s{i}.png",
                "url": screenshot(i, size),
            },
        ],
    }


def tool_with_image(i: int, size: int = 48 * KB) -> dict[str, Any]:
    return {
        "id": f"a{i}",
        "role": "assistant",
        "metadata": {"model": "m"},
        "parts": [
            {"type": "text", "text": f"took screenshot {i}"},
            {
                "type": "tool-screenshot",
                "toolCallId": f"c{i}",
                "state": "output-available",
                "input": {"full": True},
                "output": {
                    "kind": "image",
                    "images": [{"data": screenshot(1000 + i, size)}],
                    "note": "small stays",
                },
            },
        ],
    }


def conversation(n: int, size: int = 48 * KB) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        out += [user_with_image(i, size), tool_with_image(i, size)]
    return out


def files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and ".db" not in p.name]


def dumps(history: list[dict[str, Any]]) -> str:
    return json.dumps(history, ensure_ascii=False)


async def stored_bytes(store: Store, s: Session) -> int:
    return sum(r.nbytes for r in await store.all_messages(s.key))


async def test_eviction_moves_media_out_and_hydrates_identically(
    store: Store, tmp_path: Path
) -> None:
    s = Session.create(store, "shots")
    msgs = conversation(10)
    for m in msgs:
        await s.append_message(m)
    original = dumps(await s.get_history())
    before = await stored_bytes(store, s)

    report = await s.evict_media(
        older_than_messages=4, min_bytes=16 * KB, blob_store=str(tmp_path / "blobs")
    )
    assert (report.messages, report.items, report.skipped) == (16, 16, 0)
    rows = await store.path(s.key, None)
    old_rows = sum(r.nbytes for r in rows[:-4])
    assert old_rows < 16 * KB, old_rows  # 16 messages of ~66 KB each, now < 1 KB each
    assert await stored_bytes(store, s) == old_rows + sum(r.nbytes for r in rows[-4:])
    assert report.bytes_moved == 16 * len(screenshot(0))
    assert before - await stored_bytes(store, s) > report.bytes_moved * 0.95

    history = await s.get_history()
    assert dumps(await s.get_history(hydrate=True)) == original  # byte-identical
    # the tail (last 4) is never touched; older ones hold markers only
    assert dumps(history[-4:]) == dumps(msgs[-4:])
    old_user, old_tool = history[0], history[1]
    assert old_user["parts"][1] == {
        "type": "text",
        "text": '[evicted image/png "s0.png", 65558 bytes]',
    }
    output = old_tool["parts"][1]["output"]
    assert output["images"][0]["data"] == "[evicted image/png, 65558 bytes]"
    assert output["note"] == "small stays" and old_tool["metadata"]["model"] == "m"
    assert "base64," not in dumps(history[:-4])
    # hydrated single reads and windows too
    assert await s.get_message("u0", hydrate=True) == msgs[0]
    recent = await s.get_recent_history(max_tokens=0, min_messages=6, hydrate=True)
    assert dumps(recent.messages) == dumps(msgs[-6:])
    # a second pass finds nothing more
    again = await s.evict_media(
        older_than_messages=4, min_bytes=16 * KB, blob_store=str(tmp_path / "blobs")
    )
    assert again.messages == 0


async def test_objects_are_content_addressed_and_checked(store: Store, tmp_path: Path) -> None:
    s = Session.create(store, "dup").with_blob_store(str(tmp_path / "b"))
    same = screenshot(7)
    for i in range(3):
        await s.append_message(
            {"id": f"m{i}", "role": "user", "parts": [{"type": "file", "url": same}]}
        )
    await s.append_message({"id": "tail", "role": "user", "parts": [{"type": "text", "text": "."}]})
    report = await s.evict_media(older_than_messages=1, min_bytes=1024)
    assert report.items == 3
    objects = files(tmp_path / "b")
    digest = hashlib.sha256(same.encode()).hexdigest()
    assert [p.name for p in objects] == [digest]
    assert objects[0].read_bytes() == same.encode()
    # a corrupt or missing object is a typed error, never wrong bytes
    objects[0].write_bytes(b"tampered")
    with pytest.raises(MediaNotFoundError):
        await s.get_history(hydrate=True)
    objects[0].unlink()
    with pytest.raises(MediaNotFoundError):
        await s.get_message("m0", hydrate=True)
    assert len(await s.get_history()) == 4  # unhydrated reads are unaffected


async def test_search_index_and_tokens_follow_the_rewrite(store: Store, tmp_path: Path) -> None:
    s = Session.create(store, "dump")
    dump = " ".join(["zebracorn log line"] * 4000)
    await s.append_message(
        {
            "id": "t1",
            "role": "assistant",
            "parts": [
                {"type": "text", "text": "here is the build log"},
                {
                    "type": "tool-read",
                    "toolCallId": "c",
                    "state": "output-available",
                    "input": {"path": "build.log"},
                    "output": dump,
                },
            ],
        }
    )
    await s.append_message({"id": "u2", "role": "user", "parts": [{"type": "text", "text": "ok"}]})
    assert [r.message_id for r in await s.search("zebracorn")] == ["t1"]
    tokens_before = (await store.get_message(s.key, "t1")).tokens  # type: ignore[union-attr]
    await s.evict_media(older_than_messages=1, min_bytes=4 * KB, blob_store=str(tmp_path))
    assert await s.search("zebracorn") == []  # the dump left the index with the row
    assert [r.message_id for r in await s.search("build log")][:1] == ["t1"]
    tokens_after = (await store.get_message(s.key, "t1")).tokens  # type: ignore[union-attr]
    assert tokens_after < tokens_before / 100
    restored = await s.get_message("t1", hydrate=True)
    assert restored is not None and restored["parts"][1]["output"] == dump


async def test_bad_arguments_change_nothing(store: Store, tmp_path: Path) -> None:
    s = Session.create(store, "bad")
    for m in conversation(3):
        await s.append_message(m)
    snapshot = dumps(await s.get_history())
    for kwargs in (
        {"older_than_messages": 0},
        {"older_than_messages": True},
        {"min_bytes": 10},
        {"min_bytes": "big"},
    ):
        with pytest.raises(ValueError):
            await s.evict_media(blob_store=str(tmp_path), **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="blob store"):
        await s.evict_media()  # none given, none configured
    with pytest.raises(TypeError):
        await s.evict_media(blob_store=42)  # type: ignore[arg-type]
    with pytest.raises(MessageNotFoundError):
        await s.evict_media(blob_store=str(tmp_path), leaf_id="nope")
    with pytest.raises(ValueError):
        s.with_media_eviction(min_bytes=1)
    assert dumps(await s.get_history()) == snapshot
    assert files(tmp_path) == []


class FailingBlobs(BlobStore):
    """A blob store that fails on the n-th object written."""

    def __init__(self, url: str, fail_at: int) -> None:
        super().__init__(url)
        self.fail_at = fail_at
        self.puts = 0

    def put_sync(self, data: bytes) -> str:
        self.puts += 1
        if self.puts == self.fail_at:
            raise StoreError("blob store down")
        return super().put_sync(data)


async def test_a_failing_blob_store_leaves_rows_whole(store: Store, tmp_path: Path) -> None:
    s = Session.create(store, "fail")
    msgs = conversation(4)
    for m in msgs:
        await s.append_message(m)
    original = dumps(await s.get_history())
    blobs = FailingBlobs(str(tmp_path / "b"), fail_at=3)
    with pytest.raises(StoreError):
        await s.evict_media(older_than_messages=2, min_bytes=KB, blob_store=blobs)
    history = await s.get_history()
    evicted = [m["id"] for m in history if "mindstore" in (m.get("metadata") or {})]
    assert evicted == ["u2", "a2"]  # the two done before the failure (walked from the leaf)
    assert dumps(await s.get_history(hydrate=True)) == original
    # the pass can simply be run again
    report = await s.evict_media(older_than_messages=2, min_bytes=KB, blob_store=blobs)
    assert report.messages == 4
    assert dumps(await s.get_history(hydrate=True)) == original


class RacingBlobs(BlobStore):
    """Another writer edits the message while its objects are being written."""

    def __init__(self, url: str, session: Session, loop: Any) -> None:
        super().__init__(url)
        self.session, self.loop, self.done = session, loop, False

    def put_sync(self, data: bytes) -> str:
        import asyncio

        if not self.done:
            self.done = True
            edit = {"id": "a0", "role": "user", "parts": [{"type": "text", "text": "edited"}]}
            asyncio.run_coroutine_threadsafe(self.session.update_message(edit), self.loop).result()
        return super().put_sync(data)


async def test_a_message_changed_meanwhile_is_skipped(store: Store, tmp_path: Path) -> None:
    import asyncio

    s = Session.create(store, "race")
    for m in conversation(2):
        await s.append_message(m)
    blobs = RacingBlobs(str(tmp_path), s, asyncio.get_running_loop())
    report = await s.evict_media(older_than_messages=2, blob_store=blobs, min_bytes=KB)
    assert report.skipped == 1 and report.messages == 1  # a0 was edited meanwhile; u0 done
    edited = await s.get_message("a0")
    assert edited == {"id": "a0", "role": "user", "parts": [{"type": "text", "text": "edited"}]}


async def test_automatic_eviction_after_appends(store: Store, tmp_path: Path) -> None:
    m = (
        SessionManager(store, namespace="ns")
        .with_blob_store(str(tmp_path / "media"))
        .with_media_eviction(older_than_messages=3, min_bytes=8 * KB)
    )
    s = m.session("auto")
    msgs = conversation(6)
    for i, msg in enumerate(msgs):
        await s.append_message(msg)
        stored = [r.message for r in await store.path(s.key, None)]
        tail = stored[-3:]
        assert dumps(tail) == dumps(msgs[max(0, i - 2) : i + 1])  # the tail is never touched
        assert all("base64," not in dumps([x]) for x in stored[:-3])
    await m.append_all("auto", conversation(9)[12:])  # a batch of six moves out at once
    stored = [r.message for r in await store.path(s.key, None)]
    assert len(stored) == 18 and all("base64," not in dumps([x]) for x in stored[:-3])
    assert dumps(await s.get_history(hydrate=True)) == dumps(msgs + conversation(9)[12:])


async def test_another_process_hydrates_from_the_recorded_store(
    store: Store, reopen: Reopen, tmp_path: Path
) -> None:
    s = Session.create(store, "shared")
    msgs = conversation(3)
    for msg in msgs:
        await s.append_message(msg)
    await s.evict_media(older_than_messages=1, min_bytes=KB, blob_store=str(tmp_path / "m"))
    reader = Session.create(await reopen(), "shared")  # no blob store configured
    assert dumps(await reader.get_history(hydrate=True)) == dumps(msgs)
    elsewhere = Session.create(await reopen(), "shared").with_blob_store(str(tmp_path / "empty"))
    with pytest.raises(MediaNotFoundError):
        await elsewhere.get_history(hydrate=True)  # the configured store wins, and lacks them


async def test_converters_send_markers_unless_hydrated(store: Store, tmp_path: Path) -> None:
    s = Session.create(store, "convert")
    msgs = conversation(2)
    for msg in msgs:
        await s.append_message(msg)
    await s.append_message({"id": "end", "role": "user", "parts": [{"type": "text", "text": "?"}]})
    await s.evict_media(older_than_messages=1, min_bytes=KB, blob_store=str(tmp_path))
    plain, full = await s.get_history(), await s.get_history(hydrate=True)
    payloads = [m["parts"][1]["url"][22:86] for m in msgs if m["role"] == "user"]
    payloads += [m["parts"][1]["output"]["images"][0]["data"][22:86] for m in msgs[1::2]]
    for convert in (to_openai_chat, to_openai_responses, to_anthropic):
        sent, sent_full = json.dumps(convert(plain)), json.dumps(convert(full))
        assert sent.count("[evicted image/png") == 4, convert.__name__
        assert not any(p in sent for p in payloads), convert.__name__
        assert all(p in sent_full for p in payloads), convert.__name__


async def test_second_pass_with_smaller_threshold_and_existing_records(
    store: Store, tmp_path: Path
) -> None:
    """Metadata already holding a row-size record keeps it; two passes stack; hydrate undoes
    both."""
    s = Session.create(store, "two")
    big = {
        "id": "b",
        "role": "user",
        "metadata": {"mindstore": {"note": 1}},
        "parts": [
            {"type": "file", "url": screenshot(1, 64 * KB)},
            {"type": "file", "url": screenshot(2, 4 * KB)},
        ],
    }
    await s.append_message(big)
    await s.append_message({"id": "t", "role": "user", "parts": [{"type": "text", "text": "."}]})
    first = await s.evict_media(older_than_messages=1, min_bytes=32 * KB, blob_store=str(tmp_path))
    second = await s.evict_media(older_than_messages=1, min_bytes=KB, blob_store=str(tmp_path))
    assert (first.items, second.items) == (1, 1)
    stored = await s.get_message("b")
    assert stored is not None and stored["metadata"]["mindstore"]["note"] == 1
    assert len(stored["metadata"]["mindstore"]["evicted"]["items"]) == 2
    assert await s.get_message("b", hydrate=True) == big
    assert dumps([await s.get_message("b", hydrate=True)]) == dumps([big])
