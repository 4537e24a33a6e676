"""Hostile YAML front matter (issue 13.9): alias bombs, huge descriptions, deep nesting.

Each payload is fed to the parser and to ``FileSkillProvider`` (listing, loading, writing).
The alias bomb runs in a child process with an address-space limit and a timeout, so a
regression fails the test (MemoryError / kill) instead of taking the machine down.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hostile_yaml import ALIAS_BOMB
from mindstore.context.frontmatter import (
    MAX_DEPTH,
    MAX_DESCRIPTION_CHARS,
    MAX_FRONT_MATTER_CHARS,
    one_line,
    parse_front_matter,
)
from mindstore.context.providers import FileSkillProvider


def test_the_alias_bomb_is_small() -> None:
    assert len(ALIAS_BOMB.encode()) < 420  # 9**9 "lol"s once expanded


def test_alias_bomb_is_refused_within_bounded_memory(tmp_path: Path) -> None:
    (tmp_path / "bomb.md").write_text(ALIAS_BOMB, "utf-8")
    (tmp_path / "ok.md").write_text("---\ndescription: fine\n---\nbody\n", "utf-8")
    script = textwrap.dedent(
        f"""
        import asyncio, resource
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # 1 GB
        from mindstore.context.providers import FileSkillProvider, parse_front_matter
        meta, body = parse_front_matter(open({str(tmp_path / "bomb.md")!r}).read())
        assert meta == {{}} and body == "boom", (meta, body)
        p = FileSkillProvider({str(tmp_path)!r})
        print(asyncio.run(p.get()))
        print(asyncio.run(p.load("bomb")))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == ["- bomb", "- ok: fine", "boom"]


@pytest.mark.parametrize(
    "yaml_text",
    [
        "a: &x 1\nb: *x",  # any alias
        "description: &d hello",  # an anchor alone
        "description: <<: *x",
    ],
)
def test_anchors_and_aliases_give_no_metadata(yaml_text: str) -> None:
    assert parse_front_matter(f"---\n{yaml_text}\n---\nbody") == ({}, "body")


@pytest.mark.parametrize(
    "nested",
    [
        "[" * 5000 + "]" * 5000,
        "{a: " * 3000 + "1" + "}" * 3000,
        "".join(f"{'  ' * i}k:\n" for i in range(2000)) + "  " * 2000 + "v",
    ],
)
def test_deep_nesting_gives_no_metadata_not_recursion_error(nested: str) -> None:
    text = f"---\nname: deep\ndescription: {nested}\n---\nbody"
    assert parse_front_matter(text) == ({}, "body")


def test_nesting_up_to_the_limit_is_fine() -> None:
    ok = "[" * (MAX_DEPTH - 2) + "1" + "]" * (MAX_DEPTH - 2)  # + the top-level map
    meta, _ = parse_front_matter(f"---\nx: {ok}\ndescription: d\n---\nbody")
    assert meta["description"] == "d"
    deep = "[" * MAX_DEPTH + "1" + "]" * MAX_DEPTH
    assert parse_front_matter(f"---\nx: {deep}\n---\nbody") == ({}, "body")


def test_oversized_front_matter_is_ignored_before_parsing() -> None:
    big = "description: " + "x" * MAX_FRONT_MATTER_CHARS
    assert parse_front_matter(f"---\n{big}\n---\nbody") == ({}, "body")
    fits = "description: " + "y" * (MAX_FRONT_MATTER_CHARS - 100)
    meta, _ = parse_front_matter(f"---\n{fits}\n---\nbody")
    assert len(meta["description"]) == MAX_FRONT_MATTER_CHARS - 100


def test_python_tags_are_refused() -> None:
    text = "---\ndescription: !!python/object/apply:os.system ['echo hi']\n---\nbody"
    assert parse_front_matter(text) == ({}, "body")


def test_descriptions_are_capped_and_one_line() -> None:
    assert one_line("a\n  b\tc") == "a b c"
    long = one_line("word " * 5000)
    assert long is not None and len(long) == MAX_DESCRIPTION_CHARS and long.endswith("…")
    assert one_line(["a", "list"]) is None and one_line({"a": 1}) is None
    assert one_line(None) is None and one_line("   ") is None and one_line(42) == "42"


async def test_file_skills_with_hostile_front_matter_still_list_and_load(tmp_path: Path) -> None:
    (tmp_path / "deep.md").write_text(
        "---\ndescription: " + "[" * 5000 + "]" * 5000 + "\n---\ndeep body\n", "utf-8"
    )
    fits = "z" * (MAX_FRONT_MATTER_CHARS - 200)
    (tmp_path / "long.md").write_text(f"---\ndescription: {fits}\n---\nlong body\n", "utf-8")
    (tmp_path / "good.md").write_text("---\ndescription: Good one\n---\ngood\n", "utf-8")
    p = FileSkillProvider(tmp_path)
    listing = (await p.get()).splitlines()
    assert listing[0] == "- deep"
    assert listing[1] == "- good: Good one"
    assert listing[2].startswith("- long: zzz") and len(listing[2]) == len("- long: ") + 1024
    assert await p.load("deep") == "deep body"
    # writing: a model-supplied bomb or giant description is not stored as a description
    await p.set("planted", ALIAS_BOMB)
    await p.set("giant", "body", description="d" * 100_000)
    written = (tmp_path / "planted.md").read_text("utf-8")
    assert "description" not in written.split("---")[1]
    meta, _ = parse_front_matter((tmp_path / "giant.md").read_text("utf-8"))
    assert len(meta["description"]) == MAX_DESCRIPTION_CHARS
    assert asyncio.iscoroutinefunction(p.get)
