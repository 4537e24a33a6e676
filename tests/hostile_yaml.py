"""Hostile YAML front-matter payloads shared by unit and contract tests (issue 13.9)."""

from __future__ import annotations

LOLS = ",".join(['"lol"'] * 9)
ALIAS_BOMB = (
    "---\nname: bomb\n"
    f"a: &a [{LOLS}]\n"
    + "".join(
        f"{n}: &{n} [{','.join(['*' + p] * 9)}]\n"
        for p, n in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "description: *i\n---\nboom\n"
)
"""382 bytes that expand to 9**9 strings: the "billion laughs"."""
