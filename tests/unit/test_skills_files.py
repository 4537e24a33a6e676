"""FileSkillProvider over a local folder, fsspec's memory filesystem and S3 (moto server)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mindstore.context.providers import FileSkillProvider, check_key, parse_front_matter
from mindstore.errors import InvalidKeyError

API_REF = """---
name: api-ref
description: API Reference documentation
---

# API

GET /status returns the deployment status.
"""

DEPLOY = """---
name: deploy
description: |
  How to deploy
  to production
---
Run `make deploy`.
"""

PLAIN = "No front matter here.\n"

TRAVERSAL = [
    "../x",
    "/etc/passwd",
    "a\\b",
    "%2e%2e/x",
    "%2E%2E%2Fx",
    "..",
    ".",
    "",
    "a/../../b",
    "a//b",
    "a/",
    "x\x00y",
    "~/x",
    "c:/windows",
    "s3://other-bucket/x",
    "\uff0e\uff0e/x",  # full-width dots normalise to ".."
    "*",
    ".hidden",
    "a" * 201,
]


def populate(write: Any) -> None:
    write("api-ref.md", API_REF)
    write("deploy/SKILL.md", DEPLOY)
    write("deploy/references/extra.md", "belongs to deploy")
    write("plain.md", PLAIN)
    write("guides/intro.md", "---\ndescription: Intro guide\n---\nWelcome.")
    write("notes.txt", "not a skill")
    write(".git/config.md", "hidden")


@pytest.fixture
def local_root(tmp_path: Path) -> Path:
    root = tmp_path / "skills"

    def write(rel: str, text: str) -> None:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")

    populate(write)
    (tmp_path / "secret.md").write_text("TOP SECRET", encoding="utf-8")
    return root


@pytest.fixture
def memory_root() -> Iterator[str]:
    import fsspec

    fs = fsspec.filesystem("memory")
    root = f"memory://skills-{uuid.uuid4().hex}"
    base = root[len("memory://") :]
    populate(lambda rel, text: fs.pipe_file(f"/{base}/{rel}", text.encode()))
    fs.pipe_file(f"/{base}-outside/secret.md", b"TOP SECRET")
    try:
        yield root
    finally:
        fs.rm(f"/{base}", recursive=True)
        fs.rm(f"/{base}-outside", recursive=True)


EXPECTED_LISTING = (
    "- api-ref: API Reference documentation\n"
    "- deploy: How to deploy to production\n"
    "- guides/intro: Intro guide\n"
    "- plain"
)


async def check_provider(p: FileSkillProvider) -> None:
    assert await p.get() == EXPECTED_LISTING
    assert await p.load("api-ref") == "# API\n\nGET /status returns the deployment status."
    assert await p.load("deploy") == "Run `make deploy`."
    assert await p.load("plain") == "No front matter here."
    assert await p.load("guides/intro") == "Welcome."
    assert await p.load("missing") is None
    assert await p.load("notes") is None
    for key in TRAVERSAL:
        assert await p.load(key) is None, key
    assert await p.load("../secret") is None
    assert await p.load("../skills-outside/secret") is None

    await p.set("new-skill", "Body text.", description="A new skill")
    assert await p.load("new-skill") == "Body text."
    assert "- new-skill: A new skill" in (await p.get()).splitlines()
    await p.set("deploy", "Updated deploy.", description="Deploy v2")
    assert await p.load("deploy") == "Updated deploy."  # kept in its folder form
    assert "- deploy: Deploy v2" in (await p.get()).splitlines()
    for key in TRAVERSAL:
        with pytest.raises(InvalidKeyError):
            await p.set(key, "pwned")


async def test_local_folder(local_root: Path) -> None:
    p = FileSkillProvider(local_root)
    await check_provider(p)
    assert (local_root / "new-skill.md").read_text(encoding="utf-8").startswith("---\n")
    assert not (local_root.parent / "pwned").exists()
    assert (local_root.parent / "secret.md").read_text(encoding="utf-8") == "TOP SECRET"
    # nested key creates its folder
    await p.set("guides/new", "Nested.")
    assert await p.load("guides/new") == "Nested."


async def test_memory_filesystem(memory_root: str) -> None:
    await check_provider(FileSkillProvider(memory_root))


async def test_prefix_and_allow_list(local_root: Path) -> None:
    p = FileSkillProvider(local_root.parent, prefix="skills/")
    assert await p.get() == EXPECTED_LISTING
    only = FileSkillProvider(local_root, keys=["api-ref", "plain"])
    assert await only.get() == "- api-ref: API Reference documentation\n- plain"
    assert await only.load("deploy") is None
    assert await only.load("plain") == "No front matter here."
    with pytest.raises(InvalidKeyError):
        await only.set("other", "x")
    with pytest.raises(InvalidKeyError):
        FileSkillProvider(local_root, prefix="../up")


async def test_missing_root_lists_nothing(tmp_path: Path) -> None:
    p = FileSkillProvider(tmp_path / "nope")
    assert await p.get() == ""
    assert await p.load("x") is None


def test_check_key() -> None:
    for key in TRAVERSAL:
        assert check_key(key) is not None, key
    for key in ["api-ref", "guides/deploy", "a_b.c", "Ünïcode", "v1.2"]:
        assert check_key(key) is None, key
    assert check_key(None) is not None


def test_front_matter() -> None:
    assert parse_front_matter(API_REF)[0]["description"] == "API Reference documentation"
    assert parse_front_matter("---\n: [bad yaml\n---\nbody") == ({}, "body")
    assert parse_front_matter("\ufeff---\r\nname: x\r\n---\r\nbody\r\n") == ({"name": "x"}, "body")
    assert parse_front_matter("no front\n") == ({}, "no front")
    assert parse_front_matter("---\n---\nbody") == ({}, "body")


# ---- S3 through moto in server mode on 127.0.0.1 --------------------------------------------
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


async def test_s3_with_endpoint_url(s3_endpoint: str) -> None:
    import s3fs

    options = {"endpoint_url": s3_endpoint, "key": "x", "secret": "x"}
    bucket = f"skills-{uuid.uuid4().hex[:12]}"
    fs = s3fs.S3FileSystem(**options, skip_instance_cache=True)
    fs.mkdir(bucket)
    populate(lambda rel, text: fs.pipe_file(f"{bucket}/agent/{rel}", text.encode()))
    fs.pipe_file(f"{bucket}/secret.md", b"TOP SECRET")
    p = FileSkillProvider(f"s3://{bucket}", prefix="agent", storage_options=options)
    await check_provider(p)
    raw = fs.cat_file(f"{bucket}/agent/new-skill.md").decode()
    assert raw.startswith("---\nname: new-skill\ndescription: A new skill\n---\n")
    assert fs.cat_file(f"{bucket}/secret.md") == b"TOP SECRET"
