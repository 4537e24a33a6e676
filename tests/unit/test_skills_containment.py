"""FileSkillProvider containment with real symbolic links (issue 13.10), and skills stored the
way the Cloudflare Agents SDK stores them in a bucket (issue 14.7)."""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindstore.context.providers import FileSkillProvider
from mindstore.errors import InvalidKeyError


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """``root`` holds skills; ``outside`` holds a secret and a folder a link points at."""
    root = tmp_path / "skills"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "good.md").write_text("---\ndescription: Good\n---\ngood body\n", "utf-8")
    (outside / "secret.md").write_text("---\ndescription: Secret\n---\nTOP SECRET\n", "utf-8")
    (outside / "folder").mkdir()
    (outside / "folder" / "inner.md").write_text("OUTSIDE INNER", "utf-8")
    os.symlink(outside / "folder", root / "link_out")  # directory link leading out
    os.symlink(outside / "secret.md", root / "secret.md")  # file link leading out
    os.symlink(outside / "secret.md", root / "bare")  # bare-object form too
    (root / "shared").mkdir()
    (root / "shared" / "inside.md").write_text("inside body", "utf-8")
    os.symlink(root / "shared" / "inside.md", root / "alias.md")  # link staying inside
    return root, outside


async def test_reads_never_leave_the_root(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    p = FileSkillProvider(root)
    assert await p.load("secret") is None
    assert await p.load("bare") is None
    assert await p.load("link_out/inner") is None
    assert await p.read_entry("secret") is None
    listing = await p.get()
    assert "SECRET" not in listing and "secret" not in listing and "inner" not in listing
    assert listing.splitlines() == ["- alias", "- good: Good", "- shared/inside"]
    # links that stay inside the root work
    assert await p.load("alias") == "inside body"
    assert await p.load("good") == "good body"


async def test_writes_never_leave_the_root(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    p = FileSkillProvider(root)
    with pytest.raises(InvalidKeyError, match="outside the skills root"):
        await p.set("link_out/planted", "pwned")
    assert not (outside / "folder" / "planted.md").exists()
    with pytest.raises(InvalidKeyError, match="symbolic link"):
        await p.set("secret", "pwned")
    assert "TOP SECRET" in (outside / "secret.md").read_text("utf-8")
    assert (root / "secret.md").is_symlink()
    # the model's set_context goes through the same provider
    from mindstore.session import Session
    from mindstore.store.sqlite import SQLiteStore

    async with SQLiteStore(root.parent / "m.db") as store:
        s = Session.create(store, "s").with_context("skills", provider=p)
        tools = await s.tools()
        out = await tools.execute(
            "set_context", {"label": "skills", "content": "pwned", "metadata": {"title": "secret"}}
        )
        assert out.startswith("Error: ") and "symbolic link" in out
        loaded = await tools.execute("load_context", {"label": "skills", "key": "secret"})
        assert loaded == "Not found: secret"
    assert "TOP SECRET" in (outside / "secret.md").read_text("utf-8")
    # ordinary writes, nested ones included, still work; no temporary files are left over
    await p.set("fresh/nested", "new body", description="New")
    assert await p.load("fresh/nested") == "new body"
    assert sorted(f.name for f in (root / "fresh").iterdir()) == ["nested.md"]


async def test_root_that_is_itself_a_link_is_resolved(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    via = root.parent / "via"
    os.symlink(root, via)
    p = FileSkillProvider(via)
    assert await p.load("good") == "good body"
    assert await p.load("secret") is None
    await p.set("written", "x")
    assert (root / "written.md").exists()


async def test_link_swapped_in_between_check_and_use(layout: tuple[Path, Path]) -> None:
    """A racer keeps swapping ``race.md`` between a real file and a link leading out; no read
    ever returns the outside file and no write ever lands outside."""
    root, outside = layout
    p = FileSkillProvider(root)
    target = root / "race.md"
    target.write_text("inside", "utf-8")
    stop = threading.Event()

    def swap() -> None:
        tmp_link = root / ".swap-link"
        tmp_file = root / ".swap-file"
        while not stop.is_set():
            try:
                os.symlink(outside / "secret.md", tmp_link)
                os.replace(tmp_link, target)
                tmp_file.write_text("inside", "utf-8")
                os.replace(tmp_file, target)
            except OSError:
                pass

    racer = threading.Thread(target=swap)
    racer.start()
    try:
        reads = [await p.load("race") for _ in range(300)]
        for _ in range(100):
            with contextlib.suppress(InvalidKeyError):
                await p.set("race", "written by set")
    finally:
        stop.set()
        racer.join()
    assert set(reads) <= {"inside", "written by set", None}
    assert "TOP SECRET" in (outside / "secret.md").read_text("utf-8")
    assert "written by set" not in (outside / "secret.md").read_text("utf-8")


async def test_fifo_does_not_hang(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    root.mkdir()
    os.mkfifo(root / "pipe.md")
    p = FileSkillProvider(root)
    assert await p.load("pipe") is None
    assert await p.get() == ""


# ---- the reference's bucket layout: bare objects, description in object metadata ----------


async def test_bare_objects_on_local_and_memory(tmp_path: Path) -> None:
    import fsspec

    root = tmp_path / "bucket"
    root.mkdir()
    (root / "code-review").write_text("Review code carefully.", "utf-8")
    (root / "debugging").write_text("---\ndescription: Debug things\n---\nUse a debugger.", "utf-8")
    (root / "notes.txt").write_text("not a skill", "utf-8")
    local = FileSkillProvider(root)
    assert await local.get() == "- code-review\n- debugging: Debug things"
    assert await local.load("code-review") == "Review code carefully."
    assert await local.load("debugging") == "Use a debugger."

    fs = fsspec.filesystem("memory")
    base = f"/bucket-{uuid.uuid4().hex}"
    fs.pipe_file(f"{base}/skills/code-review", b"Review code carefully.")
    fs.pipe_file(f"{base}/skills/debugging", b"Use a debugger.")
    fs.pipe_file(f"{base}/skills/debugging.md", b"---\ndescription: md wins\n---\nMD body")
    try:
        mem = FileSkillProvider(
            f"memory://{base}", prefix="skills/", keys=["code-review", "debugging"]
        )
        assert await mem.get() == "- code-review\n- debugging: md wins"
        assert await mem.load("code-review") == "Review code carefully."
        assert await mem.load("debugging") == "MD body"
    finally:
        fs.rm(base, recursive=True)


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


async def test_reference_bucket_layout_on_s3(s3_endpoint: str) -> None:
    """Objects written as the reference's R2SkillProvider writes them: key = prefix + name, no
    suffix, the document as the body, ``description`` as custom (user) metadata."""
    import boto3

    options = {"endpoint_url": s3_endpoint, "key": "x", "secret": "x"}
    bucket = f"skills-{uuid.uuid4().hex[:12]}"
    client = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        aws_access_key_id="x",
        aws_secret_access_key="x",
        region_name="us-east-1",
    )
    client.create_bucket(Bucket=bucket)
    client.put_object(
        Bucket=bucket,
        Key="skills/code-review",
        Body=b"Review code carefully.",
        Metadata={"description": "How to review code"},
    )
    client.put_object(Bucket=bucket, Key="skills/debugging", Body=b"Use a debugger.")
    client.put_object(Bucket=bucket, Key="other/x", Body=b"outside the prefix")
    p = FileSkillProvider(f"s3://{bucket}", prefix="skills/", storage_options=options)
    assert await p.get() == "- code-review: How to review code\n- debugging"
    assert await p.load("code-review") == "Review code carefully."
    assert await p.read_entry("code-review") == ("Review code carefully.", "How to review code")
    assert await p.load("x") is None
