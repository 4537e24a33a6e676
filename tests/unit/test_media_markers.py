"""Eviction markers (pure) and the blob store: any message round-trips byte for byte through
``plan_eviction`` and ``hydrate_message``; the blob store is content-addressed, durable and
checked, on a local folder, fsspec's memory file system and S3 (moto server)."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindstore import MediaNotFoundError
from mindstore.media import BlobStore, hydrate_message, is_evicted, plan_eviction
from mindstore.media.markers import MIN_EVICT_BYTES, evicted_items
from mindstore.messages import validate_message

MIN = 300

small = st.text(max_size=20)
large = st.integers(MIN, 3 * MIN).map(lambda n: "é" * (n // 2) + "x" * n)
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), small, large)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from("abcd"), inner, max_size=4)
    ),
    max_leaves=12,
)
data_url = st.integers(0, 3 * MIN).map(lambda n: "data:image/png;base64," + "A" * n)
file_part = st.fixed_dictionaries(
    {"type": st.just("file"), "url": st.one_of(data_url, st.just("https://x/y.png"))},
    optional={"mediaType": st.just("image/png"), "filename": small},
)
tool_part = st.fixed_dictionaries(
    {
        "type": st.just("tool-shot"),
        "toolCallId": st.just("c1"),
        "state": st.just("output-available"),
        "input": json_value,
        "output": json_value,
    }
)
text_part = st.builds(lambda t: {"type": "text", "text": t}, st.one_of(small, large))
metadata = st.one_of(
    st.none(),
    st.just({}),
    st.just({"mindstore": {"truncated": []}}),
    st.just({"user": "u", "mindstore": {}}),
)


@st.composite
def messages(draw: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {"id": "m1", "role": draw(st.sampled_from(["user", "assistant"]))}
    meta = draw(metadata)
    if meta is not None:
        msg["metadata"] = meta
    msg["parts"] = draw(st.lists(st.one_of(file_part, tool_part, text_part), max_size=5))
    return msg


def strings_in(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from strings_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings_in(v)


@settings(max_examples=300, deadline=None)
@given(messages())
def test_any_message_round_trips_byte_for_byte(message: dict[str, Any]) -> None:
    original = json.dumps(message, ensure_ascii=False)
    plan = plan_eviction(message, min_bytes=MIN, store_url="memory://x")
    assert json.dumps(message, ensure_ascii=False) == original  # input not modified
    if plan is None:
        assert not is_evicted(message)
        return
    evicted = plan.message
    validate_message(evicted, generate_id=False)  # still a valid message
    for part in evicted["parts"]:
        if part["type"] == "file":
            assert len(part["url"].encode()) < MIN or not part["url"].startswith("data:")
        if part["type"].startswith("tool-"):
            assert all(len(s.encode()) < MIN for s in strings_in(part["output"]))
    assert plan.items == len(evicted_items(evicted))
    for digest, data in plan.blobs.items():
        assert hashlib.sha256(data).hexdigest() == digest
    restored = hydrate_message(evicted, plan.blobs.__getitem__)
    assert json.dumps(restored, ensure_ascii=False) == original
    # a second pass on the evicted message finds nothing new of that size
    assert plan_eviction(evicted, min_bytes=MIN, store_url="memory://x") is None


def test_text_parts_and_inputs_are_never_evicted() -> None:
    big = "y" * 5000
    msg = {
        "id": "m",
        "role": "assistant",
        "parts": [
            {"type": "text", "text": big},
            {"type": "reasoning", "text": big},
            {"type": "tool-x", "toolCallId": "c", "state": "input-available", "input": big},
        ],
    }
    assert plan_eviction(msg, min_bytes=MIN_EVICT_BYTES, store_url="x") is None
    with pytest.raises(ValueError):
        plan_eviction(msg, min_bytes=MIN_EVICT_BYTES - 1, store_url="x")


def test_markers_name_the_media() -> None:
    url = "data:image/jpeg;base64," + "Q" * 1000
    msg = {
        "id": "m",
        "role": "user",
        "parts": [
            {"type": "file", "url": url, "filename": "a.jpg"},
            {
                "type": "tool-t",
                "toolCallId": "c",
                "state": "output-available",
                "input": {},
                "output": ["ok", "z" * 1000],
            },
        ],
    }
    plan = plan_eviction(msg, min_bytes=512, store_url="x")
    assert plan is not None
    assert plan.message["parts"][0] == {
        "type": "text",
        "text": f'[evicted image/jpeg "a.jpg", {len(url)} bytes]',
    }
    assert plan.message["parts"][1]["output"] == ["ok", "[evicted data, 1000 bytes]"]
    assert plan.bytes_removed == len(url) + 1000


# ---- the blob store ----------------------------------------------------------------------------


def check_blob_store(blobs: BlobStore) -> None:
    data = b"screenshot bytes " * 100
    digest = blobs.put_sync(data)
    assert digest == hashlib.sha256(data).hexdigest()
    assert blobs.put_sync(data) == digest  # idempotent
    assert blobs.get_sync(digest) == data and blobs.exists_sync(digest)
    missing = hashlib.sha256(b"nothing").hexdigest()
    with pytest.raises(MediaNotFoundError):
        blobs.get_sync(missing)
    for bad in ("../../etc/passwd", "ABC", digest.upper(), ""):
        with pytest.raises(MediaNotFoundError):
            blobs.get_sync(bad)


def test_local_blob_store_is_atomic_and_checked(tmp_path: Path) -> None:
    blobs = BlobStore(str(tmp_path / "media"))
    check_blob_store(blobs)
    files = [p for p in (tmp_path / "media").rglob("*") if p.is_file()]
    assert len(files) == 1 and not files[0].name.startswith(".tmp")
    assert files[0].parent.name == files[0].name[:2] and files[0].parent.parent.name == "sha256"
    files[0].write_bytes(b"flipped")
    with pytest.raises(MediaNotFoundError, match="corrupt"):
        blobs.get_sync(files[0].name)
    with pytest.raises(ValueError):
        BlobStore("")


def test_memory_blob_store() -> None:
    check_blob_store(BlobStore(f"memory://blobs-{uuid.uuid4().hex[:8]}"))


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    pytest.importorskip("s3fs")
    server_mod = pytest.importorskip("moto.server")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


async def test_s3_blob_store_and_eviction(s3_endpoint: str, tmp_path: Path) -> None:
    """Objects on S3 through an endpoint_url (what R2 and MinIO take), end to end."""
    import s3fs

    from mindstore import Session
    from mindstore.store.sqlite import SQLiteStore

    options = {"endpoint_url": s3_endpoint, "key": "x", "secret": "x"}
    bucket = f"media-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem(**options, skip_instance_cache=True).mkdir(bucket)
    blobs = BlobStore(f"s3://{bucket}/evicted", storage_options=options)
    check_blob_store(blobs)

    async with SQLiteStore(tmp_path / "s3.db") as store:
        s = Session.create(store, "s3").with_blob_store(
            f"s3://{bucket}/evicted", storage_options=options
        )
        url = "data:image/png;base64," + "B" * 50_000
        shot = {"id": "u1", "role": "user", "parts": [{"type": "file", "url": url}]}
        await s.append_message(shot)
        await s.append_message(
            {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "."}]}
        )
        report = await s.evict_media(older_than_messages=1)
        assert report.items == 1
        assert await s.get_message("u1", hydrate=True) == shot
        stored = await s.get_message("u1")
        assert stored is not None and stored["parts"][0]["type"] == "text"
