"""render.draw_tree: the one branch-tree drawing of the ``tree`` command and the demo."""

from __future__ import annotations

from rich.console import Console

from mindstore.cli.render import TreeNode, draw_tree


def _plain(roots: list[TreeNode], title: str, width: int = 80) -> str:
    console = Console(record=True, width=200, no_color=True, highlight=False)
    console.print(draw_tree(roots, title, width=width))
    return console.export_text()


def test_chains_are_flat_and_branch_points_number_their_children() -> None:
    a2 = TreeNode(id="a2", role="assistant", preview="first answer")
    a2b = TreeNode(id="a2b", role="assistant", preview="second answer", latest_leaf=True)
    u2 = TreeNode(id="u2", role="user", preview="question", children=[a2, a2b])
    u1 = TreeNode(id="u1", role="user", preview="hello", children=[u2])
    lines = _plain([u1], "session chat").splitlines()
    assert lines[0] == "session chat"
    # u1 → u2 is one chain: both at the same depth.
    assert lines[1].startswith("├── user u1 hello") and lines[2].startswith("└── user u2 question")
    assert "branch 1 of 2" in lines[3] and "assistant a2 first answer" in lines[4]
    assert "branch 2 of 2" in lines[5] and lines[6].rstrip().endswith("◀ latest")


def test_overlay_marks_and_width() -> None:
    start = TreeNode(id="m1", role="user", preview="x" * 50, compactions=[7], starts=[7])
    middle = TreeNode(id="m2", role="assistant", preview="covered", compactions=[7])
    end = TreeNode(id="m3", role="user", preview="last", compactions=[7], ends=[7])
    start.children, middle.children = [middle], [end]
    text = _plain([start], "t", width=10)
    assert "user m1 xxxxxxxxx…  ⟦ compaction #7 from here" in text
    assert "assistant m2 covered  ⟦compacted⟧" in text
    assert "user m3 last  ⟧ to here (compaction #7)" in text


def test_stored_text_cannot_drive_the_terminal() -> None:
    node = TreeNode(id="id\x1b[2J", role="user\x1b]0;t\x07", preview="hi \x1b[31mred")
    text = _plain([node], "session s\x1b[1m")
    assert "\x1b" not in text and "\x07" not in text
    assert "␛[2J" in text and "␛[31mred" in text and "session s␛[1m" in text
