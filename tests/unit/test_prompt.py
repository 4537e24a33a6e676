"""render_system_prompt: the exact DESIGN §4.3 format, character by character."""

from __future__ import annotations

from mindstore.prompt import SEPARATOR, ContextBlock, render_system_prompt

SEP = "═" * 46

EXPECTED = (
    f"{SEP}\n"
    "SOUL (Identity) [readonly]\n"
    f"{SEP}\n"
    "You are a helpful coding assistant who speaks concisely.\n"
    "\n"
    f"{SEP}\n"
    "MEMORY (Important facts) [45% — 495/1100 tokens] [writable]\n"
    f"{SEP}\n"
    "User prefers dark mode.\n"
    "\n"
    f"{SEP}\n"
    "KNOWLEDGE (Searchable knowledge base) [searchable]\n"
    f"{SEP}\n"
    "12 entries indexed.\n"
    "\n"
    f"{SEP}\n"
    "SKILLS [loadable]\n"
    f"{SEP}\n"
    "- api-ref: API Reference documentation"
)


def block(label: str, content: str, kind: str, **kw: object) -> ContextBlock:
    return ContextBlock(
        label=label,
        description=kw.get("description"),  # type: ignore[arg-type]
        content=content,
        tokens=kw.get("tokens", 0),  # type: ignore[arg-type]
        max_tokens=kw.get("max_tokens"),  # type: ignore[arg-type]
        kind=kind,  # type: ignore[arg-type]
    )


FOUR = [
    block(
        "soul",
        "You are a helpful coding assistant who speaks concisely.",
        "readonly",
        description="Identity",
    ),
    block(
        "memory",
        "User prefers dark mode.",
        "writable",
        description="Important facts",
        tokens=495,
        max_tokens=1100,
    ),
    block(
        "knowledge", "12 entries indexed.", "searchable", description="Searchable knowledge base"
    ),
    block("skills", "- api-ref: API Reference documentation", "loadable"),
]


def test_four_block_prompt_exact() -> None:
    out = render_system_prompt(FOUR)
    assert SEPARATOR == SEP and len(SEP) == 46 and set(SEP) == {"\u2550"}
    assert "\u2014" in out
    # character by character, so a diff points at the first wrong character
    for i, (got, want) in enumerate(zip(out, EXPECTED, strict=False)):
        assert got == want, f"char {i}: {got!r} != {want!r}"
    assert out == EXPECTED
    assert not out.endswith("\n")


def test_order_is_registration_order() -> None:
    out = render_system_prompt(list(reversed(FOUR)))
    assert out.index("SKILLS") < out.index("KNOWLEDGE") < out.index("MEMORY") < out.index("SOUL")


def test_empty_readonly_omitted_others_shown() -> None:
    blocks = [
        block("soul", "", "readonly"),
        block("blank", "  \n ", "readonly"),
        block("memory", "", "writable", max_tokens=100),
        block("kb", "", "searchable"),
        block("skills", "", "loadable"),
    ]
    out = render_system_prompt(blocks)
    assert "SOUL" not in out and "BLANK" not in out
    # as the reference: `${sep}\n${header}\n${sep}\n${content}` with empty content (14.7)
    assert out == (
        f"{SEP}\nMEMORY [0% — 0/100 tokens] [writable]\n{SEP}\n\n\n"
        f"{SEP}\nKB [searchable]\n{SEP}\n\n\n"
        f"{SEP}\nSKILLS [loadable]\n{SEP}\n"
    )
    single = render_system_prompt([block("memory", "", "writable")])
    assert single == f"{SEP}\nMEMORY [writable]\n{SEP}\n"
    assert render_system_prompt([]) == ""
    assert render_system_prompt([block("soul", "", "readonly")]) == ""


def test_percent_uses_round_and_trailing_whitespace_dropped() -> None:
    out = render_system_prompt([block("m", "x\n\n", "writable", tokens=2, max_tokens=3)])
    assert out == f"{SEP}\nM [67% — 2/3 tokens] [writable]\n{SEP}\nx"
    over = render_system_prompt([block("m", "x", "writable", tokens=1300, max_tokens=1100)])
    assert "[118% — 1300/1100 tokens]" in over


def test_percent_rounds_half_up_like_math_round() -> None:
    from mindstore.context.tooling import usage_text
    from mindstore.prompt import percent

    # 1/8 = 12.5 % → 13 (JavaScript Math.round), where Python's round() gives 12
    assert percent(1, 8) == 13 and usage_text(1, 8) == "13% (1/8 tokens)"
    out = render_system_prompt([block("m", "x", "writable", tokens=1, max_tokens=8)])
    assert "[13% — 1/8 tokens]" in out
    assert [percent(t, 200) for t in (1, 3, 5, 7)] == [1, 2, 3, 4]  # 0.5, 1.5, 2.5, 3.5
    assert percent(1, 3) == 33 and percent(2, 3) == 67 and percent(0, 5) == 0
    assert percent(1300, 1100) == 118


def test_content_with_inner_blank_lines_kept() -> None:
    out = render_system_prompt([block("notes", "a\n\nb", "writable", description="N")])
    assert out == f"{SEP}\nNOTES (N) [writable]\n{SEP}\na\n\nb"
