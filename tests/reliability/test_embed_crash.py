"""SIGKILL during ``embed_pending`` loses nothing; the next run completes the backlog
(DESIGN §5.2, issue 17). Every stored vector always matches its message's current text."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from backends import close_test_store, open_test_store
from embedders import HashEmbedder
from mindstore import Session
from mindstore.store._vectors import message_text
from mindstore.vectors import embedding_text, encode_vector

WORKER = Path(__file__).with_name("embed_crash_worker.py")
SRC = Path(__file__).resolve().parents[2] / "src"
MESSAGES = 120


def _kill_during_embedding(args: list[str], delay: float) -> bool:
    """Start the worker, SIGKILL it ``delay`` s after it is ready; True if it was killed."""
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(timeout=60)
        raise AssertionError(f"worker failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    assert json.loads(line) == {"ready": True}
    time.sleep(delay)
    killed = proc.poll() is None
    if killed:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    if proc.stdout:
        proc.stdout.close()
    if proc.stderr:
        proc.stderr.close()
    return killed


async def _check_vectors(store: Any, backend: str) -> None:
    """Each stored vector equals the embedding of its message's current text and parent."""
    emb = HashEmbedder()
    if backend == "sqlite":
        with store._tx(write=False) as conn:
            rows = conn.execute(
                "SELECT m.content, p.content, v.vector FROM message_vectors v "
                "JOIN messages m ON m.seq = v.seq LEFT JOIN messages p ON p.seq = m.parent_seq"
            ).fetchall()
    else:
        rows = await store._fetchall(
            "SELECT m.content, p.content, v.vector FROM message_vectors v "
            "JOIN messages m ON m.seq = v.seq LEFT JOIN messages p ON p.seq = m.parent_seq",
            (),
        )
    for content, parent, blob in rows:
        text = embedding_text(message_text(content), message_text(parent) or None)
        assert bytes(blob) == encode_vector(emb.embed([text])[0])


@pytest.mark.slow
async def test_sigkill_during_embed_pending_loses_nothing(backend: str, tmp_path: Path) -> None:
    store, token = await open_test_store(backend, tmp_path, embedder=HashEmbedder())
    try:
        s = Session.create(store, "s")
        for i in range(MESSAGES):
            await s.append_message(
                {"id": f"m{i}", "role": "user", "parts": [{"type": "text", "text": f"fact {i}"}]}
            )
        args = (
            ["sqlite", str(tmp_path / "mindstore-test.db")]
            if backend == "sqlite"
            else ["postgres", token[0], token[1]]
        )
        rng = random.Random(17)
        kills = 0
        previous = MESSAGES
        for _ in range(4):
            kills += _kill_during_embedding(args, rng.uniform(0.05, 0.4))
            pending = await store.pending_embeddings()  # type: ignore[attr-defined]
            assert pending <= previous
            previous = pending
            assert len(await store.all_messages(s._key)) == MESSAGES  # nothing lost
            await _check_vectors(store, backend)
        assert kills >= 1, "the worker finished before any kill: make it slower"
        assert await store.embed_pending() == previous  # type: ignore[attr-defined]
        assert await store.pending_embeddings() == 0  # type: ignore[attr-defined]
        await _check_vectors(store, backend)
        # "fact 42" is embedded in m42 (its text) and m43 (its parent's): both tie first
        hits = await s.search("fact 42", mode="semantic", limit=2)
        assert {h.message_id for h in hits} == {"m42", "m43"}
    finally:
        await close_test_store(store, token)
