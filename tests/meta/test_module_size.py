"""House rules that keep the package readable: no module over 700 lines."""

from __future__ import annotations

from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "mindstore"
LIMIT = 700


def test_no_module_over_the_limit() -> None:
    too_long = {
        str(p.relative_to(SRC)): n
        for p in sorted(SRC.rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > LIMIT
    }
    assert not too_long, f"split these modules along a seam the design names: {too_long}"
